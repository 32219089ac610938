"""evals.time_paraphrase: each known time phrase of a turn is said another way that names
the same period, deterministically, and nothing but turn texts changes."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from convo_fixtures import SMALL_QA, one_session_locomo

from tiermem.evals import time_paraphrase
from tiermem.evals.time_paraphrase import paraphrase, paraphrase_file


@pytest.mark.parametrize(("text", "allowed"), [
    # a weekday: bare, abbreviated, or "this past"
    ("I went there last Friday.", {"I went there on Friday.", "I went there last Fri.",
                                   "I went there this past Friday."}),
    # the weekend is not "last week" + "end"
    ("We hiked last weekend", {"We hiked over the weekend", "We hiked this past weekend"}),
    # a phrase that opens its sentence keeps the capital
    ("Last month we moved.", {"A month ago we moved.", "A month back we moved."}),
    ("two weeks ago I started", {"two weeks back I started", "2 weeks ago I started",
                                 "a couple of weeks ago I started"}),
    # a sentence about the future keeps its weekday: "on Friday" there would be the coming one
    ("Last Friday was great, and I'll go again.", {"Last Friday was great, and I'll go again."}),
    ("Nothing about time here.", {"Nothing about time here."}),
])
def test_paraphrase_names_the_same_period(text: str, allowed: set[str]) -> None:
    assert paraphrase(text, seed=0, key="D1:1") in allowed
    seen = {paraphrase(text, seed=s, key="D1:1") for s in range(40)}
    assert seen == allowed  # every alternative is reachable, nothing else is


def test_paraphrase_is_deterministic_and_counts() -> None:
    counts: Counter[str] = Counter()
    text = "Last week I ran, last year I swam, and last Monday I rested."
    once = paraphrase(text, seed=3, key="D2:7", counts=counts)
    assert once == paraphrase(text, seed=3, key="D2:7")
    assert counts == Counter({"last week": 1, "last year": 1, "last <weekday>": 1})
    assert "last week" not in once.lower() and "last year" not in once.lower()


def test_only_turn_texts_change(tmp_path: Path) -> None:
    turns = [("Ana", "I adopted a whippet last week."), ("Ben", "I made two bowls last Saturday!")]
    data = json.loads(one_session_locomo(tmp_path / "in.json", turns, SMALL_QA).read_text())
    out, counts = paraphrase_file(data, seed=0)
    assert sum(counts.values()) == 2
    assert [t["text"] for t in out[0]["conversation"]["session_1"]] != [t for _, t in turns]
    # everything else is as it was
    for sample_in, sample_out in zip(data, out, strict=True):
        assert sample_in["qa"] == sample_out["qa"]
        for turn_in, turn_out in zip(sample_in["conversation"]["session_1"], sample_out["conversation"]["session_1"],
                                     strict=True):
            assert {k: v for k, v in turn_in.items() if k != "text"} == {k: v for k, v in turn_out.items() if k != "text"}
    assert data[0]["conversation"]["session_1"][0]["text"] == "I adopted a whippet last week."  # input untouched


def test_main_writes_the_file_and_refuses_to_overwrite_its_input(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    src = one_session_locomo(tmp_path / "in.json", [("Ana", "We met last month."), ("Ben", "Right!")], SMALL_QA)
    out = tmp_path / "out.json"
    assert time_paraphrase.main(["--data", str(src), "--out", str(out)]) == 0
    assert "1 phrases said another way" in capsys.readouterr().out
    assert "last month" not in json.loads(out.read_text())[0]["conversation"]["session_1"][0]["text"]
    with pytest.raises(SystemExit) as e:
        time_paraphrase.main(["--data", str(src), "--out", str(src)])
    assert e.value.code == 2


@pytest.mark.parametrize(("question", "allowed"), [
    ("When did Jo move to Ohio?", {"On what date did Jo move to Ohio?", "Around when did Jo move to Ohio?",
                                   "In which month did Jo move to Ohio?", "At what point did Jo move to Ohio?"}),
    ("When is the festival?", {"On what date is the festival?", "Around when is the festival?",
                               "In which month is the festival?", "At what point is the festival?"}),
    ("What did Jo say when she moved?", {"What did Jo say when she moved?"}),  # asks no time
])
def test_questions_that_ask_when_are_opened_another_way(question: str, allowed: set[str]) -> None:
    assert {time_paraphrase.paraphrase_question(question, seed=s, key="0:1") for s in range(40)} == allowed


def test_questions_only_when_asked(tmp_path: Path) -> None:
    qa = [{"question": "When did Ana adopt a whippet?", "answer": "May", "evidence": ["D1:1"], "category": 2}]
    data = json.loads(one_session_locomo(tmp_path / "in.json", [("Ana", "I adopted a whippet last week."),
                                                                ("Ben", "Nice!")], qa).read_text())
    turns_only, _ = paraphrase_file(data, seed=0)
    assert turns_only[0]["qa"] == data[0]["qa"]
    questions_only, counts = paraphrase_file(data, seed=0, turns=False, questions=True)
    assert questions_only[0]["conversation"] == data[0]["conversation"]
    assert not questions_only[0]["qa"][0]["question"].startswith("When")
    assert counts == Counter({"when <auxiliary> (question)": 1})

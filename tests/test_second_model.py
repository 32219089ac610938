"""evals.second_model: recall@k breaks ties by position, leave-one-out never chooses on the
held-out conversation, questions without evidence are skipped and counted, and `main`
prints and writes the table on a small LoCoMo-format file."""

from __future__ import annotations

import builtins
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from convo_fixtures import SMALL_QA, one_session_locomo

from tiermem.evals import second_model
from tiermem.evals.locomo import load_samples
from tiermem.evals.second_model import Scored, leave_one_out, recall_at, score_sample

TURNS = [("Ana", "I adopted a whippet from the shelter."), ("Ben", "I made two bowls at pottery."),
         ("Ana", "Nice! Is the wheel hard?"), ("Ben", "Only at first."), ("Ana", "My whippet runs fast."),
         ("Ben", "And a cup at pottery last week.")]
VOCAB = sorted({w for _, t in TURNS for w in re.findall(r"[a-z]+", t.lower())} | {"dog", "made", "kind"})


def bag(texts: list[str]) -> np.ndarray:
    """A deterministic stand-in for a sentence model: unit bag-of-words vectors."""
    out = np.zeros((len(texts), len(VOCAB)), dtype=np.float32)
    for i, t in enumerate(texts):
        for w in re.findall(r"[a-z]+", t.lower()):
            if w in VOCAB:
                out[i, VOCAB.index(w)] += 1.0
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms > 0, norms, 1.0)


def blank(texts: list[str]) -> np.ndarray:
    """A second model that knows nothing: every text the same vector."""
    return np.ones((len(texts), 4), dtype=np.float32) / 2.0


def _row(dense: list[float], second: list[float], evidence: list[int]) -> Scored:
    d = np.array(dense, dtype=np.float64)
    return Scored(d, np.zeros_like(d), np.array(second, dtype=np.float64), evidence, 1)


@pytest.mark.parametrize(("evidence", "k", "want"), [
    ([0], 1, 100.0),  # all scores equal: the earlier turn wins the tie
    ([2], 1, 0.0),  # ... so a later one is not in the top 1
    ([0, 2], 2, 50.0),  # half the evidence in the top k
    ([0, 1, 2], 3, 100.0),  # k as large as the conversation holds everything
])
def test_recall_at_ties_go_to_the_earlier_turn(evidence: list[int], k: int, want: float) -> None:
    assert recall_at([_row([0.0, 0.0, 0.0], [0.0, 0.0, 0.0], evidence)], (1.0, 0.0, 0.0), k) == want


def test_leave_one_out_chooses_without_the_held_out_conversation() -> None:
    # In "a" and "b" the second model misleads (any weight on it loses the evidence); in "c"
    # it alone finds the evidence, and "c" has more questions than the other two together,
    # so a choice that saw "c" would weigh the second model.
    misled = _row([1.0, 0.0, 0.0, 0.0, 0.0, 0.9], [-1.0, 0.0, 0.0, 0.0, 0.0, 1.0], [0])
    helped = _row([0.9, 0.0, 0.0, 0.0, 0.0, 1.0], [1.0, 0.0, 0.0, 0.0, 0.0, -1.0], [0])
    folds = {"a": [misled], "b": [misled], "c": [helped] * 5}
    by_held = {f["held_out"]: f for f in leave_one_out(folds, 1)}
    assert by_held["c"]["with_second_weights"][2] == 0.0
    assert by_held["c"]["with_second"] == by_held["c"]["base"] == 0.0
    # held out "a": trained on b + c, where c's five questions win, so the weight is used
    assert by_held["a"]["with_second_weights"][2] > 0.0
    assert by_held["a"]["with_second"] == 0.0 and by_held["a"]["base"] == 100.0


def test_score_sample_skips_adversarial_and_unresolvable_questions(tmp_path: Path) -> None:
    qa = [*SMALL_QA,
          {"question": "What did Ana paint?", "answer": "", "evidence": ["D1:3"], "category": 5},  # adversarial
          {"question": "Where is the shelter?", "answer": "x", "evidence": ["D9:9"], "category": 4},  # no such turn
          {"question": "Who is fast?", "answer": "x", "evidence": ["not-an-id"], "category": 4}]  # malformed
    (sample,) = load_samples(one_session_locomo(tmp_path / "s.json", TURNS, qa))
    rows, skipped = score_sample(sample, bag, bag, blank)
    assert skipped == 3
    assert [r.evidence for r in rows] == [[0], [1, 5]]
    # the bag model and BM25 both put the dog question's evidence first
    assert recall_at(rows[:1], (1.0, 0.0, 0.0), 1) == 100.0
    assert recall_at(rows[:1], (0.0, 1.0, 0.0), 1) == 100.0
    # a model that knows nothing scores every turn alike: its z-scores are all zero
    assert not rows[0].second.any()


def test_main_prints_and_writes_every_fold(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = one_session_locomo(tmp_path / "s.json", TURNS, SMALL_QA, sample_ids=("s-1", "s-2"))
    out = tmp_path / "r.json"
    assert second_model.main(["--data", str(data), "--ks", "1,3", "--json-out", str(out)],
                             embedders=(bag, bag, blank)) == 0
    printed = capsys.readouterr().out
    assert "| MiniLM | " in printed and "| **mean** | 3 |" in printed
    written: dict[str, Any] = json.loads(out.read_text())
    assert written["questions"] == 4 and written["skipped"] == 0
    assert [f["held_out"] for f in written["leave_one_out"]["1"]] == ["s-1", "s-2"]
    # a second model that knows nothing never changes a held-out figure
    assert all(f["with_second"] == f["base"] for fs in written["leave_one_out"].values() for f in fs)


@pytest.mark.parametrize("ks", ["0", "a,b", ""])  # a cut-off below 1; not numbers; none at all
def test_main_refuses_bad_cut_offs(tmp_path: Path, ks: str) -> None:
    data = one_session_locomo(tmp_path / "s.json", TURNS, SMALL_QA)
    with pytest.raises(SystemExit) as e:
        second_model.main(["--data", str(data), "--ks", ks], embedders=(bag, bag, blank))
    assert e.value.code == 2


def test_missing_package_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_wordllama(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "wordllama" or name.startswith("wordllama."):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_wordllama)
    with pytest.raises(SystemExit, match="pip install wordllama"):
        second_model.wordllama_embedder()

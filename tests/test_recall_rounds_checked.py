"""`recall_rounds` reads its file as `tiermem eval` does and reports only what it measured.
Before: it read the file leniently, so a file that is not a list of samples, or a session
dated before 1970, ended in a traceback (the second after the data dir was made and the
earlier turns written) where every other reader refuses with import's one-line error;
`--sample-questions 0` divided by zero after the samples were ingested; the table printed
"0.0" for a recall with no question to average; and leave-one-out over a single sample
reported "0.0 on the others". Real SQLite, tiny hand-made files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from locomo_mini import question, sample, write

from tiermem.evals.recall_rounds import loo_one_setting, loo_table, main, parse_variant, run, table
from tiermem.tiers.errors import DataFileError, ValidationError

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

BUDGET = 500
TEXTS = ["I adopted a grey cat named Pixel.", "Nice! How old is Pixel?", "She is two."]


def _pre_1970() -> list[dict[str, Any]]:
    s = sample("old", TEXTS, [question("What is the cat called?", "Pixel", ["D1:1"])])
    s["conversation"]["session_1_date_time"] = "1:56 pm on 8 May, 1969"
    return [s]


# (id, the file's JSON, words the error must hold)
BAD_FILES: list[tuple[str, Any, list[str]]] = [
    # an object, not a list: LocomoError's traceback
    ("not_a_list", {"sample_id": "s"}, ["is not a JSON list of LoCoMo samples"]),
    # created_at below 0: ValidationError's traceback at the first append, the data dir made
    ("dated_1969", _pre_1970(), ["sample 'old'", "'D1:1'", "created_at"]),
]


def _run(data: Path, root: Path, sample_questions: int | None = None) -> dict[str, Any]:
    return run(data, [BUDGET], [parse_variant("base:"), parse_variant("hop:hop=1.0")], data_root=root,
               sample_questions=sample_questions, baselines=False, hot=False)


@pytest.mark.parametrize(("raw", "words"), [c[1:] for c in BAD_FILES], ids=[c[0] for c in BAD_FILES])
def test_a_bad_file_is_refused_before_any_data_dir(tmp_path: Path, raw: Any, words: list[str]) -> None:
    data = tmp_path / "data.json"
    data.write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(DataFileError) as exc:
        _run(data, tmp_path / "root")
    assert str(data) in str(exc.value) and all(w in str(exc.value) for w in words)
    assert not (tmp_path / "root").exists()  # nothing written


@pytest.mark.parametrize(("raw", "words"), [c[1:] for c in BAD_FILES], ids=[c[0] for c in BAD_FILES])
def test_the_command_says_so_in_one_line(tmp_path: Path, raw: Any, words: list[str]) -> None:
    data = tmp_path / "data.json"
    data.write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        main(["--data", str(data), "--data-root", str(tmp_path / "root")])
    # a message, not a traceback: exit status 1, the message on stderr
    assert isinstance(exc.value.code, str) and exc.value.code.startswith("error: ")
    assert "\n" not in exc.value.code and all(w in exc.value.code for w in words)


@pytest.mark.parametrize("value", [
    "0",  # divided by zero after ingesting every sample
    "-1",  # took all questions but the last
    "two",  # not a number
])
def test_sample_questions_is_refused_at_parse_time(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    value: str) -> None:
    data = write(tmp_path / "data.json", [sample("s", TEXTS, [question("What?", "Pixel", ["D1:1"])])])
    with pytest.raises(SystemExit) as exc:
        main(["--data", str(data), "--data-root", str(tmp_path / "root"), "--sample-questions", value])
    assert exc.value.code == 2  # a usage error
    err = capsys.readouterr().err
    assert "--sample-questions" in err and "at least 1" in err
    assert not (tmp_path / "root").exists()


def test_run_refuses_zero_sample_questions(tmp_path: Path) -> None:
    data = write(tmp_path / "data.json", [sample("s", TEXTS, [question("What?", "Pixel", ["D1:1"])])])
    with pytest.raises(ValidationError) as exc:
        _run(data, tmp_path / "root", sample_questions=0)
    assert exc.value.field == "sample_questions" and "at least 1" in str(exc.value)
    assert not (tmp_path / "root").exists()


def test_one_sample_has_nothing_to_hold_out(tmp_path: Path) -> None:
    data = write(tmp_path / "data.json", [sample("s", TEXTS, [question("What is the cat called?", "Pixel",
                                                                         ["D1:1"])])])
    res = _run(data, tmp_path / "root")
    assert res["variants"]["base"]["budgets"][str(BUDGET)]["questions"] == 1  # scored
    assert res["leave_one_out"] == {str(BUDGET): {}}  # was: chosen on "the others", 0.0
    assert f"LOO {BUDGET}: nothing to hold out" in table(res)
    assert "on the others" not in table(res)
    loo = loo_one_setting(res)
    assert loo["folds"] == {} and "nothing to hold out" in loo_table(loo)


def test_a_recall_over_no_question_is_not_shown_as_zero(tmp_path: Path) -> None:
    # the only question's evidence is in no turn: no question to average
    data = write(tmp_path / "data.json", [sample("s", TEXTS, [question("When?", "May", ["D9:9"])])])
    res = _run(data, tmp_path / "root")
    got = res["variants"]["base"]["budgets"][str(BUDGET)]
    assert (got["questions"], got["evidence_recall"], res["missing_evidence_ids"]) == (0, None, 1)
    rows = [line.split() for line in table(res).splitlines()[1:] if line.startswith(("base", "hop"))]
    assert [r[2] for r in rows] == ["-", "-"]  # the recall column; was "0.0"

"""`python -m tiermem.evals.recall_rounds --loo --names` refuses a variant the result does
not hold as a usage error naming --names and the variants there are (exit 2), before any
run. Before, `--from-json x.json --loo --names nosuch` stopped with `KeyError: 'nosuch'`
inside loo_one_setting (and a run, after every sample was ingested). Every refused case
fails on the code before; known names still choose (passes before and after), spaces
around them now allowed (a KeyError before)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from locomo_mini import question, sample, write

from tiermem.evals import recall_rounds

pytestmark = pytest.mark.usefixtures("clean_env")

BUDGET = 500
CATS = {str(c): None for c in (1, 2, 3, 4, 5)}
FIGURES = {"evidence_recall": 0.5, "by_category": CATS}
FOLD = {"chosen": "base", "chosen_on_others": 0.5, "held_out": 1.0, "base_held_out": 1.0}
ROWS = [["a", 4, 1.0], ["b", 4, 0.0]]
SAVED: dict[str, Any] = {  # two variants, as a --json-out run with --variant base: --variant hop:... saves
    "budgets": [BUDGET], "samples": ["a", "b"],
    "variants": {n: {"budgets": {str(BUDGET): FIGURES}} for n in ("base", "hop")},
    "leave_one_out": {str(BUDGET): {"a": FOLD}},
    "records": {n: {str(BUDGET): ROWS} for n in ("base", "hop")},
}
KNOWN = "(the variants are 'base', 'hop')"

# (--names, the name refused)
UNKNOWN = [
    ("nosuch", "nosuch"),  # the report's case
    ("base,nosuch", "nosuch"),  # a known base, an unknown variant to choose
    ("nosuch,base", "nosuch"),  # an unknown base
    ("base, hop,Hop", "Hop"),  # names are case-sensitive
]


def _saved(tmp_path: Path) -> Path:
    path = tmp_path / "saved.json"
    path.write_text(json.dumps(SAVED), encoding="utf-8")
    return path


@pytest.mark.parametrize(("names", "refused"), UNKNOWN)
def test_an_unknown_name_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          names: str, refused: str) -> None:
    with pytest.raises(SystemExit) as exc:
        recall_rounds.main(["--from-json", str(_saved(tmp_path)), "--loo", "--names", names])
    assert exc.value.code == 2  # a usage error, not a traceback
    captured = capsys.readouterr()
    assert f"error: --names: no variant {refused!r} {KNOWN}" in captured.err, captured.err
    assert captured.out == ""  # no table printed before the refusal


def test_a_run_refuses_an_unknown_name_before_it_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the names a run makes are its --variant names: refused before anything is ingested
    data = write(tmp_path / "data.json", [sample("a", ["I adopted a cat.", "Nice!"],
                                                 [question("What pet?", "cat", ["D1:1"])])])
    with pytest.raises(SystemExit) as exc:
        recall_rounds.main(["--data", str(data), "--data-root", str(tmp_path / "root"), "--budgets", str(BUDGET),
                            "--variant", "base:", "--variant", "hop:hop=1.0", "--loo", "--names", "base,nosuch"])
    assert exc.value.code == 2
    assert f"error: --names: no variant 'nosuch' {KNOWN}" in capsys.readouterr().err
    assert not (tmp_path / "root").exists()  # nothing made


def test_the_module_prints_one_usage_line(tmp_path: Path) -> None:
    # the report's command as typed
    res = subprocess.run([sys.executable, "-m", "tiermem.evals.recall_rounds", "--from-json", str(_saved(tmp_path)),
                          "--loo", "--names", "nosuch"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.splitlines()[-1].endswith(f"error: --names: no variant 'nosuch' {KNOWN}"), res.stderr


@pytest.mark.parametrize("names", ["hop,base", " base , hop "])  # another base; spaces around the names
def test_known_names_choose_among_them(tmp_path: Path, capsys: pytest.CaptureFixture[str], names: str) -> None:
    assert recall_rounds.main(["--from-json", str(_saved(tmp_path)), "--loo", "--names", names]) == 0
    base = names.split(",")[0].strip()
    assert f"leave-one-out, one setting per fold (records; base {base})" in capsys.readouterr().out

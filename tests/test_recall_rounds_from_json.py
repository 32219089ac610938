"""`python -m tiermem.evals.recall_rounds --from-json PATH` reads the saved result while
its arguments are parsed: a file that is missing (the report's case), a directory, not
JSON or not one JSON object is a usage error naming the option (exit 2), not open()'s or
json's traceback. Every refused case fails on the code before; a saved result is still
printed (passes before and after)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tiermem.evals import recall_rounds

pytestmark = pytest.mark.usefixtures("clean_env")

# (what the file at {tmp}/saved.json holds -- None: no file; "DIR": a directory -- what the error says)
REFUSED = [
    (None, "does not exist"),  # the report's own case: open()'s traceback
    ("DIR", "is a directory"),
    ("{not json", "is not JSON"),  # a truncated save
    ("[1, 2]", "must hold the JSON object --json-out writes, got list"),
]


def _saved(tmp_path: Path, holds: str | None) -> Path:
    path = tmp_path / "saved.json"
    if holds == "DIR":
        path.mkdir()
    elif holds is not None:
        path.write_text(holds, encoding="utf-8")
    return path


@pytest.mark.parametrize(("holds", "words"), REFUSED)
def test_a_bad_saved_result_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             holds: str | None, words: str) -> None:
    path = _saved(tmp_path, holds)
    with pytest.raises(SystemExit) as exc:
        recall_rounds.main(["--from-json", str(path), "--data-root", str(tmp_path / "root")])
    assert exc.value.code == 2  # a usage error, not a traceback
    err = capsys.readouterr().err
    assert "argument --from-json:" in err and words in err and str(path) in err, err
    assert not (tmp_path / "root").exists()


def test_the_module_prints_one_usage_line(tmp_path: Path) -> None:
    # the report's command as typed
    res = subprocess.run([sys.executable, "-m", "tiermem.evals.recall_rounds", "--from-json",
                          str(tmp_path / "missing.json")], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert "argument --from-json:" in res.stderr and "does not exist" in res.stderr


def test_a_saved_result_is_printed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _saved(tmp_path, json.dumps({"variants": {}, "leave_one_out": {"2000": {}}}))
    assert recall_rounds.main(["--from-json", str(path)]) == 0
    assert "LOO 2000: nothing to hold out" in capsys.readouterr().out

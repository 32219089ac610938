"""`python -m tiermem.evals.second_model` and `python -m tiermem.evals.recall_misses` refuse
a data file they cannot use in one line naming the file (`error: x.json: ...`, exit 1, as
`tiermem eval`'s checked reader refuses one), before anything is made: no model loaded, no
--data-root. Before, each stopped with LocomoError's traceback (a file missing, not JSON,
not a list of samples, a sample of the wrong shape), and recall_misses, reading the file
leniently, stopped on a bad turn with ValidationError's traceback after its data dir was
made. Every row fails on the code before."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from locomo_mini import question, sample

from tiermem.evals import fusion_probe, query_paths, recall_misses, second_model

pytestmark = pytest.mark.usefixtures("clean_env")

TEXTS = ["I adopted a grey cat named Pixel.", "Nice! How old is Pixel?", "She is two."]
PROBES: dict[str, Callable[[Sequence[str] | None], int]] = {
    "second_model": second_model.main, "recall_misses": recall_misses.main,
    # the other two probes on recall_rounds' reader stopped with DataFileError's traceback
    "fusion_probe": fusion_probe.main, "query_paths": query_paths.main,
}
MODULES = {name: f"tiermem.evals.{name}" for name in PROBES}


def _qa_not_object() -> str:
    s = sample("s", TEXTS, [question("What?", "Pixel", ["D1:1"])])
    s["qa"] = ["not an object"]
    return json.dumps([s])


# (what {tmp}/data.json holds -- None: no file; "DIR": a directory; bytes as written -- words of the error)
BAD_FILES: list[tuple[str, str | bytes | None, str]] = [
    ("missing", None, "no such LoCoMo data file"),
    ("directory", "DIR", "is a directory"),
    ("not_json", "{truncated", "cannot be read as JSON"),
    ("not_utf8", b"\xff\xfe[]", "cannot be read as JSON"),  # a UTF-16 save
    ("an_object", '{"sample_id": "s"}', "is not a JSON list of LoCoMo samples"),
    ("a_number_in_the_list", "[1]", "sample #0 is not an object"),
    ("qa_item_not_object", _qa_not_object(), "qa item #1 must be an object"),
]


def _data(tmp_path: Path, holds: str | bytes | None) -> Path:
    path = tmp_path / "data.json"
    if holds == "DIR":
        path.mkdir()
    elif isinstance(holds, bytes):
        path.write_bytes(holds)
    elif holds is not None:
        path.write_text(holds, encoding="utf-8")
    return path


def _argv(probe: str, data: Path, tmp_path: Path) -> list[str]:
    # second_model makes no data dir; recall_misses' must not be made for a refused file
    return ["--data", str(data)] + (["--data-root", str(tmp_path / "root")] if probe != "second_model" else [])


@pytest.mark.parametrize("probe", sorted(PROBES))
@pytest.mark.parametrize(("holds", "words"), [c[1:] for c in BAD_FILES], ids=[c[0] for c in BAD_FILES])
def test_a_bad_data_file_is_one_line_naming_it(tmp_path: Path, probe: str, holds: str | bytes | None,
                                               words: str) -> None:
    data = _data(tmp_path, holds)
    with pytest.raises(SystemExit) as exc:
        PROBES[probe](_argv(probe, data, tmp_path))
    # a message (exit 1), not a traceback: the file named once, in front
    assert isinstance(exc.value.code, str), exc.value.code
    assert exc.value.code.startswith(f"error: {data}: ") and words in exc.value.code, exc.value.code
    assert "\n" not in exc.value.code and exc.value.code.count(str(data)) == 1
    assert not (tmp_path / "root").exists()  # nothing made


def test_recall_misses_checks_each_turn_before_its_data_dir(tmp_path: Path) -> None:
    # read leniently before: ValidationError's traceback at the first append, the data dir made
    s = sample("old", TEXTS, [question("What is the cat called?", "Pixel", ["D1:1"])])
    s["conversation"]["session_1_date_time"] = "1:56 pm on 8 May, 1969"
    data = _data(tmp_path, json.dumps([s]))
    with pytest.raises(SystemExit) as exc:
        recall_misses.main(_argv("recall_misses", data, tmp_path))
    assert isinstance(exc.value.code, str) and exc.value.code.startswith(f"error: {data}: ")
    assert all(w in exc.value.code for w in ("sample 'old'", "'D1:1'", "created_at")), exc.value.code
    assert not (tmp_path / "root").exists()


@pytest.mark.parametrize("probe", sorted(MODULES))
def test_the_module_prints_one_error_line(tmp_path: Path, probe: str) -> None:
    # the command as typed: exit 1, one line on stderr, no traceback
    data = tmp_path / "missing.json"
    res = subprocess.run([sys.executable, "-m", MODULES[probe], *_argv(probe, data, tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.strip() == f"error: {data}: no such LoCoMo data file"
    assert not (tmp_path / "root").exists()

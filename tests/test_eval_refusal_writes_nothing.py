"""`tiermem eval locomo / cost / session --data F --data-dir D` refuse a file they cannot
use before D is created or a store opened in it: bad input writes nothing. Before (a
review, 2026-12-05), the command opened its Memory in D first and the reader's checks ran
inside the run: the refusal was the right one line, but D had been created and left
holding a new database (tiermem.db, its schema and no message). The CLI in-process, real
SQLite, the hot tier off (with it on, the run started an embedded Redis in D as well)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import tm
from locomo_mini import question, sample

from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

GOOD = sample("s1", ["I moved to Lisbon.", "Nice.", "Yes, in May."], [question("Where?", "Lisbon", ["D1:1"])])
NO_TEXT = sample("s2", ["x", "y"], [question("What?", "hi", ["D1:1"])])
del NO_TEXT["conversation"]["session_1"][0]["text"]

# (id, the file's text, words the one-line refusal must hold)
BAD_FILES: list[tuple[str, str, str]] = [
    # a turn with no text, after a good sample: refused naming sample and turn
    ("bad_turn", json.dumps([GOOD, NO_TEXT]), "sample 's2', turn 'D1:1': text: missing"),
    # not JSON at all
    ("not_json", "[{", "as JSON"),
    # a sample that is not an object
    ("sample_not_object", json.dumps([GOOD, 7]), "sample #1 is not an object"),
]
# (id, the command's arguments after `eval`; every one with --data FILE --data-dir DIR added)
COMMANDS: list[tuple[str, tuple[str, ...]]] = [
    ("locomo", ("locomo", "--budget", "500")),
    ("cost", ("cost", "--budget", "500")),
    ("session", ("session", "--budget", "500")),
]
# (id, what the data dir is before the run: None absent, else the names of its files)
DIRS: list[tuple[str, tuple[str, ...] | None]] = [
    ("absent", None),  # it must not be created
    ("empty", ()),  # it must stay empty
    ("unrelated_file", ("notes.txt",)),  # a user's own file: nothing added beside it
]


def _tree(root: Path) -> list[str] | None:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else None


def _refused(tmp_path: Path, embedder: FastEmbedder, text: str, args: tuple[str, ...],
             before: tuple[str, ...] | None) -> tuple[Any, Path]:
    path = tmp_path / "locomo.json"
    path.write_text(text, encoding="utf-8")
    where = tmp_path / "eval"
    if before is not None:
        where.mkdir()
        for name in before:
            (where / name).write_text("mine\n", encoding="utf-8")
    r = tm(tmp_path, embedder, "", "eval", *args, "--data", str(path), "--data-dir", str(where), "--quiet",
           "--no-hot")
    return r, where


@pytest.mark.parametrize(("before"), [d[1] for d in DIRS], ids=[d[0] for d in DIRS])
@pytest.mark.parametrize("args", [c[1] for c in COMMANDS], ids=[c[0] for c in COMMANDS])
@pytest.mark.parametrize(("text", "words"), [b[1:] for b in BAD_FILES], ids=[b[0] for b in BAD_FILES])
def test_a_refused_file_leaves_the_data_dir_as_it_was(tmp_path: Path, embedder: FastEmbedder, text: str,
                                                      words: str, args: tuple[str, ...],
                                                      before: tuple[str, ...] | None) -> None:
    r, where = _refused(tmp_path, embedder, text, args, before)
    assert r.exit_code == 1, r.output
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.output, r.output
    assert words in r.stderr, r.stderr
    assert _tree(where) == (None if before is None else sorted(before))


# (id, the command's arguments after `eval`, what the refusal says) -- refusals of a good
# file that depend on the file and the arguments alone, made before the data dir too
ARGUMENT_REFUSALS: list[tuple[str, tuple[str, ...], str]] = [
    # `eval cost --sample` naming no sample of the file
    ("cost_no_such_sample", ("cost", "--budget", "500", "--sample", "nope"), "no sample 'nope'"),
    # `eval cost --sample` an index past the file's samples
    ("cost_index_out_of_range", ("cost", "--budget", "500", "--sample", "3"), "sample index 3 out of range 0..0"),
]


@pytest.mark.parametrize(("args", "words"), [a[1:] for a in ARGUMENT_REFUSALS], ids=[a[0] for a in ARGUMENT_REFUSALS])
def test_an_argument_the_file_cannot_serve_writes_nothing(tmp_path: Path, embedder: FastEmbedder,
                                                          args: tuple[str, ...], words: str) -> None:
    r, where = _refused(tmp_path, embedder, json.dumps([GOOD]), args, None)
    assert r.exit_code == 1, r.output
    assert words in r.stderr, r.stderr
    assert not where.exists()


def test_locomo_refuses_a_file_of_no_samples_before_the_data_dir(tmp_path: Path, embedder: FastEmbedder) -> None:
    r, where = _refused(tmp_path, embedder, "[]", ("locomo", "--budget", "500"), None)
    assert r.exit_code == 1, r.output
    assert "holds no samples" in r.stderr, r.stderr
    assert not where.exists()

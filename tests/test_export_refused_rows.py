"""`tiermem export` of a store holding a row that history reads as stored but append
refuses today (stored before a check was added) no longer writes a backup that does not
restore. A reasoning item with a null `id` (refused at append since 3795c3b; a row stored
before is read as stored) was written as stored, and `tiermem import` of the file refused
that line ("id: must be a string, got null"): the export exited 0, the failure came at
the restore. (One without an `id` was refused too until the Agents SDK's
`reasoning_item_id_policy="omit"` made it a form append takes.)
Now every line is checked as import reads it: such a row is named with import's error and
fails the export (exit 1, `-o` writing nothing) unless --skip-unreadable leaves it out, as
an unreadable row is left out (a later retraction renumbered to the file's positions, one
naming the row dropped). The same holds for an assistant message whose tool calls repeat
an id (refused at append since d95a9e0). Real SQLite; the old rows written behind
tiermem's back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import tm
from cold_helpers import rewrite_stored

from tiermem.config import Config
from tiermem.memory import Memory
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

CONV = "c"
BUDGET = 4000  # tokens: room for every message, so a context is what is not retracted
ASK = {"role": "user", "content": "Which fare is cheaper?"}
REPLY = {"role": "assistant", "content": "The Tuesday one."}
CALL = {"id": "c1", "type": "function", "function": {"name": "fares", "arguments": "{}"}}
OLD_AT = 1  # the old row's position in every store below


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def retract(position: int) -> dict[str, Any]:
    return {"type": "tiermem.retract", "position": position}


# (id, the row as an older release stored it, what it is appended as today, the words of
#  import's error)
OLD_ROWS: list[tuple[str, dict[str, Any], dict[str, Any], str]] = [
    # an explicit null id (a model_dump() of an item built without one)
    ("reasoning_null_id", {"type": "reasoning", "id": None, "summary": []},
     {"type": "reasoning", "id": "rs_1", "summary": []}, "id: must be a string, got null"),
    # two calls of one id in one message (a server numbering calls per reply)
    ("repeated_call_id", {"role": "assistant", "content": None, "tool_calls": [CALL, CALL]},
     {"role": "assistant", "content": None, "tool_calls": [CALL, {**CALL, "id": "c2"}]},
     "tool_calls[1].id: 'c1' is the id of tool_calls[0] too"),
]


def _open(data: Path, embedder: FastEmbedder) -> Memory:
    return Memory(Config(data_dir=data), embedder=embedder, hot=False, background_indexing=False)


def old_store(data: Path, embedder: FastEmbedder, rows: list[dict[str, Any]], old: dict[str, Any]) -> None:
    """`rows` appended, then the row at OLD_AT rewritten to `old` as an older release stored it."""
    with _open(data, embedder) as mem:
        mem.append_many(CONV, rows)
        key = mem.cold.key_of("default", CONV)
        assert key is not None
    rewrite_stored(Config(data_dir=data).db_path, key, [(OLD_AT, "body", json.dumps(old))])


def texts(data: Path, embedder: FastEmbedder) -> tuple[list[str], list[str]]:
    """(the history's user texts, the context's)."""
    with _open(data, embedder) as mem:
        history = [m.body["content"] for m in mem.history(CONV) if m.body.get("role") == "user"]
        context = [m["content"] for m in mem.context(CONV, "which one?", BUDGET).messages if m.get("role") == "user"]
    return history, context


@pytest.mark.parametrize(("old", "today", "error"), [r[1:] for r in OLD_ROWS], ids=[r[0] for r in OLD_ROWS])
def test_the_export_fails_naming_the_row_and_writes_nothing(tmp_path: Path, embedder: FastEmbedder,
                                                            old: dict[str, Any], today: dict[str, Any],
                                                            error: str) -> None:
    old_store(tmp_path / "data", embedder, [ASK, today, REPLY], old)
    with _open(tmp_path / "data", embedder) as mem:
        assert mem.history(CONV)[OLD_AT].body == old  # read as stored, not salvaged
    out = tmp_path / "e.jsonl"
    out.write_text("the backup before\n")
    r = tm(tmp_path, embedder, "", "export", "-o", str(out))
    assert r.exit_code == 1, r.output
    assert f"conversation 'c': stored row(s) at position(s) {OLD_AT} are refused by tiermem import" in r.stderr
    assert f"(position {OLD_AT}: {error}" in r.stderr, r.stderr
    assert "1 stored row(s) would be refused by tiermem import" in r.stderr
    assert f"nothing was written to {out}" in r.stderr and "--skip-unreadable" in r.stderr, r.stderr
    assert out.read_text() == "the backup before\n"


@pytest.mark.parametrize(("old", "today", "error"), [r[1:] for r in OLD_ROWS], ids=[r[0] for r in OLD_ROWS])
def test_skip_unreadable_writes_a_file_that_imports(tmp_path: Path, embedder: FastEmbedder, old: dict[str, Any],
                                                    today: dict[str, Any], error: str) -> None:
    # a retraction after the old row: it must hide the same message once the row is left out
    rows = [ASK, today, user("keep me"), user("retracted"), retract(3), user("last")]
    old_store(tmp_path / "data", embedder, rows, old)
    want = texts(tmp_path / "data", embedder)
    assert "retracted" in want[0] and "retracted" not in want[1]
    out = tmp_path / "e.jsonl"
    r = tm(tmp_path, embedder, "", "export", "--skip-unreadable", "-o", str(out))
    assert r.exit_code == 0, r.output
    assert f"(position {OLD_AT}: {error}" in r.stderr, r.stderr
    written = [json.loads(x)["message"] for x in out.read_text().splitlines()]
    assert old not in written and retract(2) in written  # the retraction in the file's numbering
    moved = tmp_path / "moved"
    r = tm(moved, embedder, "", "import", str(out))
    assert r.exit_code == 0, r.output
    assert texts(moved / "data", embedder) == want


def test_a_row_retracted_with_it_is_left_out_too(tmp_path: Path, embedder: FastEmbedder) -> None:
    _name, old, today, _error = OLD_ROWS[0]
    old_store(tmp_path / "data", embedder, [ASK, today, retract(OLD_AT), REPLY], old)
    r = tm(tmp_path, embedder, "", "export")
    assert r.exit_code == 1, r.output
    # the retraction hid only the left-out row: kept, it would hide whatever import writes there
    assert "the retraction(s) at position(s) 2 hid one of them" in r.stderr, r.stderr
    assert f"hidden from every context ({OLD_AT} retracted)" in r.stderr, r.stderr
    assert [json.loads(x)["message"] for x in r.stdout.splitlines()] == [ASK, REPLY]


def test_a_store_append_wrote_today_exports_as_before(tmp_path: Path, embedder: FastEmbedder) -> None:
    with _open(tmp_path / "data", embedder) as mem:
        mem.append_many(CONV, [ASK, *(r[2] for r in OLD_ROWS), REPLY])
    r = tm(tmp_path, embedder, "", "export")
    assert r.exit_code == 0 and r.stderr == "", r.output
    assert [json.loads(x)["message"] for x in r.stdout.splitlines()] == [ASK, *(r[2] for r in OLD_ROWS), REPLY]

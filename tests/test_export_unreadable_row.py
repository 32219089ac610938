"""`tiermem export` of a store holding a row it cannot read keeps each retraction on the
message it hid, and says the export is incomplete. History skips such a row (one an older
release stored in a form read today refuses: `tool_calls` a string; a salvage warning),
so the export lacked it, import numbered the messages by their place in the file and
every later message moved down one, but a retraction kept its stored position: after
import it hid another message (the retracted text came back, a kept one went), and both
commands exited 0 (a review, 2026-12-06). Now each retraction's position is the file's,
one that hid the unreadable row is left out, each left-out row is named on stderr, and
the export fails (exit 1, `-o` writing nothing) unless --skip-unreadable accepts the
loss. A real SQLite file; the old row written behind tiermem's back."""

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
# a row as an older release could store it: `tool_calls` a string fails today's check
UNREADABLE = json.dumps({"role": "assistant", "content": "x", "tool_calls": "not-a-list"})


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def retract(position: int) -> dict[str, Any]:
    return {"type": "tiermem.retract", "position": position}


# (id, the conversation as appended, the positions made unreadable afterwards,
#  the stored retractions the export leaves out)
STORES: list[tuple[str, list[dict[str, Any]], list[int], list[int]]] = [
    # the reviewer's store: a gap at 2, then a retraction of 4 (after the gap)
    ("gap_before_retracted", [user("u0"), user("u1"), user("old row"), user("keep me"), user("retracted"),
                              user("u5"), retract(4), user("u7")], [2], []),
    # the retraction right after what it hides, two gaps before it
    ("two_gaps", [user("old a"), user("u1"), user("old b"), user("retracted"), retract(3), user("u5")],
     [0, 2], []),
    # a retraction of the unreadable row itself: left out (it hid nothing that is exported)
    ("retracts_the_gap", [user("u0"), user("old row"), retract(1), user("u3"), user("retracted"), retract(4)],
     [1], [2]),
    # the last row unreadable: no later row shows the gap
    ("gap_at_the_end", [user("u0"), user("retracted"), retract(1), user("old row")], [3], []),
]


def _open(data: Path, embedder: FastEmbedder) -> Memory:
    return Memory(Config(data_dir=data), embedder=embedder, hot=False, background_indexing=False)


def old_store(data: Path, embedder: FastEmbedder, rows: list[dict[str, Any]], unreadable: list[int]) -> None:
    with _open(data, embedder) as mem:
        mem.append_many(CONV, rows)
        key = mem.cold.key_of("default", CONV)
        assert key is not None
    rewrite_stored(Config(data_dir=data).db_path, key,
                   [(p, col, v) for p in unreadable for col, v in (("role", "assistant"), ("body", UNREADABLE))])


def texts(data: Path, embedder: FastEmbedder) -> tuple[list[str], list[str]]:
    """(the history's message texts, the context's)."""
    with _open(data, embedder) as mem:
        history = [m.body["content"] for m in mem.history(CONV) if "content" in m.body]
        context = [m["content"] for m in mem.context(CONV, "which one?", BUDGET).messages if m["role"] == "user"]
    return history, context


@pytest.mark.parametrize(("rows", "unreadable", "dropped"), [s[1:] for s in STORES], ids=[s[0] for s in STORES])
def test_the_export_imports_to_the_same_history_and_context(tmp_path: Path, embedder: FastEmbedder,
                                                           rows: list[dict[str, Any]], unreadable: list[int],
                                                           dropped: list[int]) -> None:
    old_store(tmp_path / "data", embedder, rows, unreadable)
    want = texts(tmp_path / "data", embedder)
    assert "retracted" in want[0] and "retracted" not in want[1]  # the store hides it
    out = tmp_path / "e.jsonl"
    r = tm(tmp_path, embedder, "", "export", "--skip-unreadable", "-o", str(out))
    assert r.exit_code == 0, r.output
    said = f"warning: conversation 'c': stored row(s) at position(s) {', '.join(map(str, unreadable))} cannot be read"
    assert said in r.stderr, r.stderr
    assert (f"retraction(s) at position(s) {', '.join(map(str, dropped))} hid one of them" in r.stderr) == bool(dropped)
    moved = tmp_path / "moved"
    r = tm(moved, embedder, "", "import", str(out))
    assert r.exit_code == 0, r.output
    assert texts(moved / "data", embedder) == want


def test_without_the_option_the_export_fails_and_keeps_the_file_there(tmp_path: Path,
                                                                      embedder: FastEmbedder) -> None:
    _name, rows, unreadable, _dropped = STORES[0]
    old_store(tmp_path / "data", embedder, rows, unreadable)
    out = tmp_path / "e.jsonl"
    out.write_text("the backup before\n")
    r = tm(tmp_path, embedder, "", "export", "-o", str(out))
    assert r.exit_code == 1, r.output
    assert "conversation 'c': stored row(s) at position(s) 2 cannot be read" in r.stderr
    assert f"nothing was written to {out}" in r.stderr and "--skip-unreadable" in r.stderr, r.stderr
    assert out.read_text() == "the backup before\n"
    # to stdout: the lines are written (retractions in the file's numbering), the exit says it lacks some
    r = tm(tmp_path, embedder, "", "export")
    assert r.exit_code == 1 and "the lines written lack them" in r.stderr, r.output
    written = [json.loads(x)["message"] for x in r.stdout.splitlines()]
    assert retract(4) not in written and written[written.index(retract(3)) - 1] == user("u5")
    assert written[3] == user("retracted")


def test_a_whole_store_exports_as_before(tmp_path: Path, embedder: FastEmbedder) -> None:
    with _open(tmp_path / "data", embedder) as mem:
        mem.append_many(CONV, [user("u0"), user("retracted"), retract(1), user("u3")])
    r = tm(tmp_path, embedder, "", "export")
    assert r.exit_code == 0 and r.stderr == "", r.output
    assert [json.loads(x)["message"] for x in r.stdout.splitlines()][2] == retract(1)

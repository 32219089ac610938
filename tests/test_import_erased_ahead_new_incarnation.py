"""A name erased with lines stamped ahead of the server clock stays refused to dated
imports until that stamp passes, a new incarnation's continuation included.

8b6bdea refuses an erased conversation's lines stamped at or before the later of the
erasure and its newest erased message (`Erasure.until`), on every line past the stored
prefix. 29f34f3 let a file whose first lines were a new incarnation's own export go on with
the erasure's time alone; a review showed `cat new.jsonl old_backup.jsonl` (or lines sorted
by created_at) then restored the erased lines without --restore-erased, so it was taken
back: a continuation by a correct clock cannot be told from the old lines behind it.

Invariants: every dated line of the name stamped at or before `Erasure.until` is refused,
whatever stored prefix it follows; the refusal says how to import a new conversation
(undated lines, after the stamp, or --restore-erased); undated lines import; an old
export is refused (nothing stored, conflicting at 0, sharing a first body, or behind a
prefix restored from the erased data)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from convo_fixtures import write_jsonl
from hash_embedder import HashEmbedder

from tiermem.config import Config
from tiermem.errors import ImportConflict, ImportOfErased
from tiermem.evals.conversations import import_dataset, open_conversations
from tiermem.memory import Memory
from tiermem.tiers.models import Message

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

SECRET = "my SSN is 078-05-1120"
HOUR_S = 3600.0
MINUTE_S = 60.0
AHEAD_S = 10 * HOUR_S  # the erased conversation's client clock ran this far ahead of the server's
PAST_S = 10 * HOUR_S  # an old line stamped by a correct clock, this long before the erasure


def line(text: str, at: float | None) -> dict[str, Any]:
    out: dict[str, Any] = {"conversation_id": "alice", "message": {"role": "user", "content": text}}
    if at is not None:
        out["created_at"] = at
    return out


def import_file(mem: Memory, path: Path, restore_erased: bool = False) -> str:
    """'imported', or the refusal's class name (ImportOfErased is an ImportConflict too)."""
    with open_conversations(path, max_content_bytes=mem.config.max_content_bytes,
                            max_metadata_bytes=mem.config.max_metadata_bytes) as data:
        try:
            import_dataset(mem, data, namespace="default", restore_erased=restore_erased)
        except ImportConflict as refused:
            return type(refused).__name__
    return "imported"


def erased_ahead(mem: Memory, first: str = "hi") -> float:
    """alice ([first, SECRET], stamped AHEAD_S ahead) erased on request; their stamp."""
    ahead = time.time() + AHEAD_S
    mem.append_many("alice", [Message(role="user", content=first, created_at=ahead),
                              Message(role="user", content=SECRET, created_at=ahead)])
    mem.delete_conversation("alice")
    return ahead


def recreated(mem: Memory, texts: list[str]) -> list[dict[str, Any]]:
    """A new alice, server-stamped, after the erasure; its lines as an export writes them."""
    for t in texts:
        mem.append("alice", Message(role="user", content=t))
    return [line(m.body["content"], m.created_at) for m in mem.history("alice")] if texts else []


def contents(mem: Memory) -> list[str]:
    """alice's stored lines ([]: no conversation of the name)."""
    if "alice" not in mem.conversations("default"):
        return []
    return [m.body["content"] for m in mem.history("alice")]


# (case, stored after the erasure, the file's lines from (stored export, erased lines' stamp, now), expected,
#  history after)
CASES = [
    # the new incarnation's export + one line 60 s later, correct clock: refused until the erased stamp
    # passes (it cannot be told from an old line behind the new export; the message says what to do)
    ("continuation", ["fresh start"], lambda exp, ahead, now: [*exp, line("next", now + MINUTE_S)],
     "ImportOfErased", ["fresh start"]),
    # the new incarnation's export with the old backup after it (`cat new.jsonl old.jsonl`): the erased
    # lines stay erased (29f34f3 restored them)
    ("new export then old backup", ["fresh start"],
     lambda exp, ahead, now: [*exp, line("hi", ahead), line(SECRET, ahead)], "ImportOfErased", ["fresh start"]),
    # the same lines ordered by created_at (the new, correctly stamped ones first): still refused
    ("sorted by created_at", ["fresh start", "stored"],
     lambda exp, ahead, now: [*exp, line(SECRET, ahead)], "ImportOfErased", ["fresh start", "stored"]),
    # the old export, its first line's body the same as the new incarnation's (its own old stamp): still refused
    ("old export shares first body", ["hi"], lambda exp, ahead, now: [line("hi", ahead), line(SECRET, ahead)],
     "ImportOfErased", ["hi"]),
    # the old export against a new incarnation it conflicts with at 0: refused as erased
    ("old export conflicts at 0", ["fresh start"], lambda exp, ahead, now: [line(SECRET, ahead)],
     "ImportOfErased", ["fresh start"]),
    # nothing stored: the old export is refused
    ("old export, nothing stored", [], lambda exp, ahead, now: [line("hi", ahead), line(SECRET, ahead)],
     "ImportOfErased", []),
    # nothing stored, a line between the erasure and the newest erased stamp: ambiguous, refused
    ("fresh file, dated", [], lambda exp, ahead, now: [line("brand new", now + HOUR_S)], "ImportOfErased", []),
    # nothing stored, undated lines: written now, new
    ("fresh file, undated", [], lambda exp, ahead, now: [line("brand new", None)], "imported", ["brand new"]),
]


@pytest.mark.parametrize(("stored", "file_lines", "expected", "after"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_new_incarnation_after_erasure_ahead(tmp_path: Path, stored: list[str], file_lines: Any,
                                             expected: str, after: list[str]) -> None:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=HashEmbedder(), hot=False,
                background_indexing=False) as mem:
        ahead = erased_ahead(mem)
        exported = recreated(mem, stored)
        path = write_jsonl(tmp_path / "in.jsonl", file_lines(exported, ahead, time.time()))
        assert import_file(mem, path) == expected
        assert contents(mem) == after


def test_restored_erased_prefix_still_refused(tmp_path: Path) -> None:
    """Part of the erased data brought back with --restore-erased (stamped before the
    erasure) is no new incarnation: the rest of the old export is still refused."""
    with Memory(Config(data_dir=tmp_path / "data"), embedder=HashEmbedder(), hot=False,
                background_indexing=False) as mem:
        old = time.time() - PAST_S
        mem.append_many("alice", [Message(role="user", content="hi", created_at=old),
                                  Message(role="user", content=SECRET, created_at=old)])
        mem.delete_conversation("alice")
        assert import_file(mem, write_jsonl(tmp_path / "part.jsonl", [line("hi", old)]), restore_erased=True) == "imported"
        whole = write_jsonl(tmp_path / "whole.jsonl", [line("hi", old), line(SECRET, old)])
        assert import_file(mem, whole) == "ImportOfErased"
        assert contents(mem) == ["hi"]


def test_fresh_file_refusal_says_what_to_do(tmp_path: Path) -> None:
    """A dated new file of the name, refused until the erased stamp passes, is told how to
    import it: undated lines, or --restore-erased."""
    with Memory(Config(data_dir=tmp_path / "data"), embedder=HashEmbedder(), hot=False,
                background_indexing=False) as mem:
        erased_ahead(mem)
        path = write_jsonl(tmp_path / "new.jsonl", [line("brand new", time.time() + HOUR_S)])
        with (open_conversations(path, max_content_bytes=mem.config.max_content_bytes,
                                 max_metadata_bytes=mem.config.max_metadata_bytes) as data,
              pytest.raises(ImportOfErased) as refused):
            import_dataset(mem, data, namespace="default")
    text = str(refused.value)
    assert "--restore-erased" in text and "without created_at" in text, text

"""`migrate-store`'s verification names the side that differs, with the counts. Every
conversation mismatch asked 'did the source change during the copy?', also where a target
writer had changed the copy; the tombstones' and a missing conversation's said only that
they differ (two digests). Now the message says which side changed (or lacks what), how
many messages each side holds, and what a rerun does.

Each case changes one side for real while the run copies (its `progress` callback, after
the first conversation's commit); real SQLite files and a real PostgreSQL
(tests/pg_server.py), in both directions."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pg_server import MIGRATION_DIRECTIONS, migrate, migration_sides, opened

from tiermem.tiers.errors import MigrationMismatch
from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter

NS = "ns"
FIRST, SECOND, NEW = "a", "b", "z"  # copied in key order; NEW: a conversation the source starts during the copy
MESSAGES_EACH = 2
PINNED_AT, PRIORITY = 0, 3


def _append_first(src: Any, dst: Any) -> None:
    src.append(FIRST, Message(role="user", content="one more"), namespace=NS)


def _pin_first(src: Any, dst: Any) -> None:
    dst.set_pin(dst.key_of(NS, FIRST), PINNED_AT, PRIORITY)


def _erase_first(src: Any, dst: Any) -> None:
    src.delete_conversation(src.key_of(NS, FIRST))


def _start_new(src: Any, dst: Any) -> None:
    src.append(NEW, Message(role="user", content="new"), namespace=NS)


CASES = [
    # the source appended to a copied conversation: the source's side, 3 messages against 2
    pytest.param(_append_first, [f"conversation {FIRST!r} of namespace {NS!r}",
                                 "the source changed since it was copied (the source holds 3 message(s), the target 2)"],
                 id="source-changed"),
    # a target writer pinned a copied turn: the target's side, named by part, counts equal
    pytest.param(_pin_first, [f"conversation {FIRST!r} of namespace {NS!r}",
                              "the target changed since this copy was written (its pins; the source holds 2 "
                              "message(s), the target 2)"],
                 id="target-changed"),
    # the source erased a copied conversation: the target lacks its tombstone and still holds it
    pytest.param(_erase_first, ["the tombstones", "the target lacks 1 of the source's 1 tombstone(s) (it holds 0; "
                                f"e.g. conversation {FIRST!r} of namespace {NS!r}, key {FIRST!r}, which the target "
                                "still holds, 2 message(s))", "rerun, which erases them in the target too"],
                 id="source-erased"),
    # the source started a conversation after the run listed them: the target does not hold it
    pytest.param(_start_new, [f"conversation {NEW!r} of namespace {NS!r}",
                              "the target does not hold it (the source holds 1 message(s)): rerun to copy it"],
                 id="source-new"),
]


@pytest.mark.parametrize("to_postgres", MIGRATION_DIRECTIONS)
@pytest.mark.parametrize(("change", "said"), CASES)
def test_the_mismatch_names_the_side_that_differs(tmp_path: Path, pg_url: str, counter: BpeTokenCounter,
                                                  to_postgres: bool, change: Callable[[Any, Any], None],
                                                  said: list[str]) -> None:
    src, dst = migration_sides(tmp_path, pg_url, to_postgres)
    with opened(src, counter) as store:
        for name in (FIRST, SECOND):
            for i in range(MESSAGES_EACH):
                store.append(name, Message(role="user", content=f"{name} {i}"), namespace=NS)

    def progress(done: int, total: int) -> None:
        if done == 1:  # FIRST committed in the target, SECOND not yet copied
            with opened(src, counter) as s, opened(dst, counter) as d:
                change(s, d)

    with pytest.raises(MigrationMismatch) as raised:
        migrate(src, dst, counter, progress=progress)
    message = str(raised.value)
    for part in said:
        assert part in message, message
    assert "did the source change" not in message  # before: every conversation's mismatch asked it


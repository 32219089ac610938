"""Deleting a detached conversation's rows (`ColdStore._purge_owed`) takes no write
transaction when nothing is owed for the key (never detached, or finished by another
thread or process). Before (a review, 2026-12-06), it took SQLite's write lock only to
find no `erase_owed` record: behind another writer it waited out the busy timeout and
failed with "database is locked" for no work at all. Real SQLite files, the lock held by
a real second connection."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import sqlean  # the store's own SQLite: another library's locks would not meet its in one process

from tiermem.tiers.cold import ColdStore
from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter

BUSY_TIMEOUT_MS = 200  # the store's wait for the write lock: short, the lock is never freed here
BATCH_MESSAGES = 100  # the batch size the caller passes; returned as it is when nothing is done


@contextmanager
def _writer_holding_lock(db: Path) -> Iterator[None]:
    """Another connection holding SQLite's write lock until the block ends."""
    holder = sqlean.connect(str(db), isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        yield
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def _erased(store: ColdStore) -> str:
    """The key of a conversation erased to the end: its owed record is gone."""
    store.append_many("gone", [Message(role="user", content="bye")])
    store.delete_conversation("gone")
    return "gone"


# (case, the key, made on the store)
NOTHING_OWED = [
    # a key never detached
    ("never-owed", lambda store: "no-such-key"),
    # a conversation whose erasure finished: its record went with its last batch
    ("finished", _erased),
]


@pytest.mark.parametrize(("case", "make_key"), NOTHING_OWED, ids=[c[0] for c in NOTHING_OWED])
def test_nothing_owed_takes_no_write_lock(tmp_path: Path, counter: BpeTokenCounter, case: str,
                                          make_key: object) -> None:
    db = tmp_path / "data" / "tiermem.db"
    db.parent.mkdir()
    store = ColdStore(db, tokens=counter, busy_timeout_ms=BUSY_TIMEOUT_MS)
    try:
        key = make_key(store)  # type: ignore[operator]
        with _writer_holding_lock(db):
            assert store._purge_owed(key, BATCH_MESSAGES, terms=True) == ([], BATCH_MESSAGES)
        assert store._read("SELECT COUNT(*) FROM erase_owed")[0][0] == 0
    finally:
        store.close()

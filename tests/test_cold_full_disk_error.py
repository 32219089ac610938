"""A write that meets a full disk raises the disk-full error itself, and leaves nothing
half-written.

After a failed COMMIT (or statement) for a full disk SQLite has rolled the transaction
back itself; the cold store's write transaction (`ColdStore._tx`) then sent ROLLBACK
anyway, and the driver raised "cannot rollback - no transaction is active" in place of
the error that ended it: `Memory.append` and `Memory.consolidate(conv)` raised that
OperationalError, with "database or disk is full" only in its `__context__` (the CLI
stripped the tail from its message: 1587c45). Now the ROLLBACK is sent only while a
transaction is open.

The disk is a real tmpfs the test mounts (root only: skipped otherwise), filled to the
last byte after the open store's WAL is emptied (so every write needs new blocks).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tmpfs_helpers import FILLER, fill, mounted_tmpfs

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.files import storage_problem

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

TMPFS_SIZE = "16m"  # room for the store (well under 1 MB here), were it not filled
TURNS = 30
CONV = "c"
FULL_WORDS = "database or disk is full"  # SQLite's SQLITE_FULL message
ROLLBACK_GONE = "cannot rollback"  # the driver's words for the ROLLBACK that was sent anyway
STORAGE_FULL_STATUS = 507  # storage_problem's status for a full disk
BIG_TURN = "x " * 3000  # a turn of ~6 KB: needs new pages

# (what is written on the full disk, the call): each a write transaction of the cold store
WRITES: list[tuple[str, Callable[[Memory], object]]] = [
    ("append", lambda mem: mem.append(CONV, {"role": "user", "content": BIG_TURN})),  # one turn, one transaction
    ("consolidate(conv)", lambda mem: mem.consolidate(CONV)),  # the views' lease and versions
]


@pytest.fixture
def mnt(tmp_path: Path) -> Iterator[Path]:
    with mounted_tmpfs(tmp_path / "mnt", TMPFS_SIZE) as m:
        yield m


def counts(db: Path) -> tuple[int, int, str]:
    """(turns, warm view versions, integrity_check) read by a connection of its own."""
    with contextlib.closing(sqlite3.connect(db)) as con:
        turns = con.execute("SELECT count(*) FROM messages").fetchone()[0]
        views = con.execute("SELECT count(*) FROM summaries").fetchone()[0]
        ok = con.execute("PRAGMA integrity_check").fetchone()[0]
    return int(turns), int(views), str(ok)


@pytest.mark.parametrize(("name", "write"), WRITES, ids=[name for name, _ in WRITES])
def test_a_write_on_a_full_disk_raises_the_disk_full_error(mnt: Path, embedder: FastEmbedder, name: str,
                                                           write: Callable[[Memory], object]) -> None:
    data = mnt / "data"
    db = data / "tiermem.db"
    config = Config(data_dir=data)
    with Memory(config, hot=False, background_indexing=False, embedder=embedder) as mem:
        for i in range(TURNS):
            mem.append(CONV, {"role": "user", "content": f"Turn {i}: " + "words about hotels " * 20})
    # read with the store closed: another connection's close may remove the WAL under it
    before = counts(db)
    with Memory(config, hot=False, background_indexing=False, embedder=embedder) as mem:
        # the open store's WAL would take the write in the room it already holds: empty it
        # (on the store's own connection), so that the write needs new blocks
        with mem.cold._lock:
            assert mem.cold._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0  # 0: not blocked
        fill(mnt)
        with pytest.raises(Exception) as caught:
            write(mem)
        said = str(caught.value)
        # before: "cannot rollback - no transaction is active", the full disk in __context__ only
        assert ROLLBACK_GONE not in said and FULL_WORDS in said, (name, type(caught.value), said)
        problem = storage_problem(caught.value)
        assert problem is not None and problem.status == STORAGE_FULL_STATUS, problem
        (mnt / FILLER).unlink()
        # the store takes writes again once the disk has room
        mem.append(CONV, {"role": "user", "content": "after the disk has room again"})
    # nothing half-written: the store as before the failed write, whole, and the one append after it
    turns, views, ok = counts(db)
    assert (turns, views, ok) == (before[0] + 1, before[1], "ok"), (before, turns, views, ok)

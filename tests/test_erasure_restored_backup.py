"""A backup restored under a running process does not make it skip later erasures.

A process acts on the erasures past the newest tombstone it has read (its mark,
tiermem.memory `Memory._catch_erasures`). A backup restored under it takes the store's
tombstones back to the backup's, so new erasures number theirs from there, below the
process's mark: before, every one of them was skipped until their ids passed the old
mark, and the process kept the erased text (its epoch state, its turn cache, its memos).
A newest tombstone below the mark is now a reset: every copy goes, and the store's mark
is taken. A real SQLite file restored with SQLite's online backup while a Memory is
open (SQLite's online backup, as `sqlite3` `.restore`), two Memory objects on it (two processes), the real model;
a walk over every object reachable in this process (tests/erasure_child.py `held`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlean
from erasure_child import held

from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder

NS = "acme/alice"
BYSTANDER_NS = "beta"  # a conversation no erasure takes, for the calls that name one
# conversations erased after the backup, before the restore: the process's mark goes past
# the backup's newest tombstone by this many
ERASED_BEFORE_RESTORE = 3


@pytest.fixture
def config(tmp_path: Path) -> Config:
    return Config(data_dir=tmp_path / "data")


@pytest.fixture
def mem(config: Config, embedder: Embedder) -> Iterator[Memory]:
    """The process that outlives the restore (no indexer thread: only its calls check)."""
    with Memory(config, embedder=embedder, hot=False, background_indexing=False) as m:
        yield m


def _online_copy(frm: Path, to: Path) -> None:
    """SQLite's online backup (what the sqlite3 shell's .backup and .restore run), by the
    SQLite the store runs on (tiers.schema: sqlean): a second SQLite library in one
    process does not see the other's locks."""
    src, dst = sqlean.connect(frm), sqlean.connect(to)
    try:
        src.backup(dst)
    finally:
        dst.close()
        src.close()


# the process's next call after another process erased: (what, the call)
NEXT_CALLS: list[tuple[str, Callable[[Memory], object]]] = [
    # names a conversation: the mark is read with its lookup
    ("history", lambda m: m.history("bystander", namespace=BYSTANDER_NS)),
    # names none: reads the tombstones past the mark by itself
    ("conversations", lambda m: m.conversations(NS)),
    # SQLite's append reads them after its write
    ("append", lambda m: m.append("bystander", {"role": "user", "content": "Still nothing."},
                                  namespace=BYSTANDER_NS)),
]


@pytest.mark.parametrize(("what", "call"), NEXT_CALLS, ids=[c[0] for c in NEXT_CALLS])
def test_an_erasure_after_a_restore_under_the_process_reaches_it(
        mem: Memory, config: Config, embedder: Embedder, tmp_path: Path, what: str,
        call: Callable[[Memory], object]) -> None:
    canary = "zq7canary-" + uuid.uuid4().hex
    mem.append("bystander", {"role": "user", "content": "Nothing to see here."}, namespace=BYSTANDER_NS)
    mem.append("doomed", {"role": "user", "content": f"Remember: the vault code is {canary}, keep it safe."},
               namespace=NS)
    for i in range(ERASED_BEFORE_RESTORE):
        mem.append(f"gone-{i}", {"role": "user", "content": "A conversation erased after the backup."},
                   namespace=NS)
    backup = tmp_path / "backup.db"
    _online_copy(config.db_path, backup)
    for i in range(ERASED_BEFORE_RESTORE):
        mem.delete_conversation(f"gone-{i}", namespace=NS)
    mem.conversations(NS)  # reads its own erasures' tombstones: its mark passes the backup's
    _online_copy(backup, config.db_path)  # restored under the running process
    # the process shows the conversation again: its epoch state and turn cache hold the text
    assert canary in str(mem.context("doomed", "what is the vault code?", 1500, namespace=NS).messages)
    with Memory(config, embedder=embedder, hot=False, background_indexing=False) as other:
        other.delete_conversation("doomed", namespace=NS)
        # the premise: the new tombstone is numbered from the backup's, below the old mark
        assert other.cold.erasure_mark() <= ERASED_BEFORE_RESTORE
    call(mem)
    key_gone = mem.cold.key_of(NS, "doomed") is None
    assert key_gone
    assert held(canary) == []

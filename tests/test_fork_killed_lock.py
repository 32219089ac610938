"""A fork killed by SIGKILL leaves no lock file behind once the store is opened again.

A fork of a long prefix (SQLite) takes a file lock (`<db>-fork-<hash>.lock`) before its
first transaction records the unpublished child in `erase_owed`. Killed inside that
first transaction, its writes roll back and no record says a fork was begun, so the
next open's `finish_owed_erasures` (which deletes a killed fork's rows and lock) never
looked at the file: an empty file in the data folder per killed fork, forever. Now the
open (and every erasure, which finishes what is owed first) deletes every fork lock file
that no live process holds (`ColdStore._sweep_fork_locks`); a fork still copying keeps
its lock. Real files, a real forking process, a real SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from cold_helpers import raw

from tiermem.tiers.cold import ColdStore
from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter

ROOT = Path(__file__).resolve().parent.parent
TURNS = 120
UP_TO = 99  # 100 positions: the top batch and three more
BATCH = 25  # FORK_BATCH_MESSAGES in the forking process: a short prefix takes several batches
READY_TIMEOUT_S = 60  # the forking process's start (imports, open) on a loaded 2-core machine

# The forking process stops (sleeps, holding what it holds) at the `nth` occurrence of a
# step of `ColdStore.fork`, says so, and waits for the test's SIGKILL.
CHILD = f"""
import sys, time
from pathlib import Path
import tiermem.tiers.cold as cold
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.tokens import BpeTokenCounter

cold.FORK_BATCH_MESSAGES = {BATCH}
where, nth = sys.argv[2], int(sys.argv[3])
seen = []
def step(name):
    if name == where:
        seen.append(name)
        if len(seen) == nth:
            print("STOPPED", flush=True)
            time.sleep(600)

store = ColdStore(Path(sys.argv[1]), tokens=BpeTokenCounter())
store._fault = step
store.fork(store.key_of("acme", "long"), {UP_TO}, new_id="copy")
print("NOT KILLED", flush=True)
"""

# (step, occurrence, its erase_owed record committed when killed)
KILLS = [
    # inside the first transaction: the lock taken, the record and the first copied rows
    # not committed (before: the lock file stayed, nothing recorded to say whose it was)
    ("fork:messages", 1, False),
    # the first transaction's last step, its vectors' (none here): the same, later
    ("fork:vectors", 1, False),
]


def lock_files(db: Path) -> list[str]:
    return sorted(p.name for p in db.parent.iterdir() if p.name.endswith(".lock"))


def owed_forks(db: Path) -> int:
    with raw(db) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM erase_owed WHERE reason = 'fork'").fetchone()[0])


def data_files(db: Path) -> list[str]:
    """What the data folder holds besides the database's own files."""
    own = {db.name, f"{db.name}-wal", f"{db.name}-shm"}
    return sorted(p.name for p in db.parent.iterdir() if p.name not in own)


def make_store(db: Path, counter: BpeTokenCounter) -> str:
    store = ColdStore(db, tokens=counter)
    try:
        store.append_many("long", [Message(role="user", content=f"turn {t} of the long ticket")
                                   for t in range(TURNS)], namespace="acme")
        return store.key_of("acme", "long") or ""
    finally:
        store.close()


def start_fork(db: Path, where: str, nth: int) -> subprocess.Popen[str]:
    """The forking process, stopped at the `nth` `where` (it has said so)."""
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(db), where, str(nth)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert child.stdout is not None
    line = child.stdout.readline().strip()
    if line != "STOPPED":
        child.kill()
        _out, err = child.communicate(timeout=READY_TIMEOUT_S)
        pytest.fail(f"the forking process did not stop at {where} #{nth}: {line!r} {err[-2000:]}")
    return child


def kill(child: subprocess.Popen[str]) -> None:
    os.kill(child.pid, signal.SIGKILL)
    child.wait(READY_TIMEOUT_S)
    assert child.returncode == -signal.SIGKILL


@pytest.mark.parametrize(("where", "nth", "recorded"), KILLS)
def test_the_next_open_deletes_the_lock_of_a_fork_killed_in_its_first_transaction(
        tmp_path: Path, counter: BpeTokenCounter, where: str, nth: int, recorded: bool) -> None:
    db = tmp_path / "tiermem.db"
    parent = make_store(db, counter)
    child = start_fork(db, where, nth)
    try:
        # the premise: its lock taken, whether its record is committed as the case says
        assert len(lock_files(db)) == 1
        assert owed_forks(db) == int(recorded)
    finally:
        kill(child)
    assert len(lock_files(db)) == 1  # the kill leaves the file: the kernel drops only the lock
    store = ColdStore(db, tokens=counter)  # the next open
    try:
        assert lock_files(db) == []  # before: the empty lock file, for good
        assert owed_forks(db) == 0
        assert data_files(db) == []
        assert store.list_conversations("acme") == [parent]
        # nothing in the way of a retry, nor of an erasure, and neither leaves a file
        copy = store.fork(parent, UP_TO, new_id="copy")
        assert len(store.history(copy)) == UP_TO + 1
        report = store.delete_conversation(copy)
        assert report.scrubbed
        assert data_files(db) == []
    finally:
        store.close()


def test_an_open_leaves_the_lock_of_a_fork_still_copying_and_the_open_after_its_kill_deletes_it(
        tmp_path: Path, counter: BpeTokenCounter) -> None:
    db = tmp_path / "tiermem.db"
    parent = make_store(db, counter)
    # between two batches: the record committed, the store's write lock free
    child = start_fork(db, "fork:batch", 2)
    try:
        held = lock_files(db)
        assert len(held) == 1 and owed_forks(db) == 1
        other = ColdStore(db, tokens=counter)  # another process's start sweeps the folder
        try:
            assert lock_files(db) == held  # held by a live fork: its lock stays
            assert owed_forks(db) == 1  # and its copy with it
        finally:
            other.close()
    finally:
        kill(child)
    store = ColdStore(db, tokens=counter)
    try:
        assert lock_files(db) == [] and owed_forks(db) == 0 and data_files(db) == []
        assert store.list_conversations("acme") == [parent]
    finally:
        store.close()

"""`migrate-store` never carries a source tombstone into the target beside the copy it
erased, still readable there. A conversation the source erased while a resumed run waited
on its first target write (another process's lock) had its tombstone carried by the
run's keys transaction, while its erasure in the target came only with the next run: a
run killed between the two (here: SIGKILLed while a later conversation's copy waits on a
second lock) left the erased messages readable beside their tombstone, and the rerun
that erased them left two tombstones of that conversation for good. Now the run reads
the source's tombstones before it writes, erases such a conversation with the target's
own erasure (tombstone and rows in one transaction), and never copies a tombstone beside
the conversation it erased: at every kill point the target holds it either readable with
no tombstone (it has not learned of the erasure yet) or erased with one, and a rerun
finishes with one.

Real SQLite files, a real PostgreSQL (tests/pg_server.py), a real child process, real
locks held by other connections and a real SIGKILL, in both directions."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from cold_helpers import child_env, hold_lock, release
from pg_server import MIGRATION_DIRECTIONS, Where, copied_sides, migrate, opened

from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter

NS = "ns"
KEPT, GONE, LATER = "a", "b", "c"  # copied; copied, then erased in the source during the rerun; new in the source
MESSAGES_EACH = 2
CHILD_WAIT_MS = 60_000  # the child's lock waits (busy_timeout / lock_timeout): far past the test's own steps
CHILD_WAIT_S = CHILD_WAIT_MS / 1000  # its operation deadline, alike
WAIT_SEEN_S = 30.0  # how long the test waits to see the child blocked on a lock
POLL_S = 0.05
STEADY_POLLS = 3  # the child seen sleeping in SQLite's busy wait this many polls in a row
BUSY_WAIT_WCHAN = "hrtimer_nanosleep"  # where SQLite's busy handler sleeps between tries (Linux)

CHILD = """
import json, sys
sys.path.insert(0, sys.argv[3])
from pg_server import migrate
from tiermem.tiers.tokens import BpeTokenCounter
src, dst = (tuple(json.loads(a)) for a in sys.argv[1:3])
report = migrate(src, dst, BpeTokenCounter(), busy_timeout_ms=int(sys.argv[4]), operation_timeout_s=float(sys.argv[5]))
print("FINISHED", json.dumps(report.to_json()), flush=True)
"""


def _fill(store: Any) -> None:
    for name in (KEPT, GONE):
        for i in range(MESSAGES_EACH):
            store.append(name, Message(role="user", content=f"secret {name} {i}"), namespace=NS)


def _pg(where: Where) -> tuple[str, str]:
    url, schema = where[1].rsplit("#", 1)
    return url, schema


def _until(seen: Callable[[], bool], child: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + WAIT_SEEN_S
    while not seen():
        assert child.poll() is None, f"the child ended ({child.returncode}) before it waited on the lock"
        assert time.monotonic() < deadline, "the child was not seen waiting on the lock"
        time.sleep(POLL_S)


def _pg_waiter(url: str) -> Callable[[], bool]:
    """Whether some session of the server waits on a lock (only the child's can)."""
    def seen() -> bool:
        with psycopg.connect(url, autocommit=True) as c:
            row = c.execute("SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone()
            return bool(row and row[0])
    return seen


def _sqlite_waiter(pid: int) -> Callable[[], bool]:
    """Whether process `pid` sleeps in SQLite's busy wait (the file's write lock held)."""
    steady = [0]

    def seen() -> bool:
        wchan = Path(f"/proc/{pid}/wchan").read_text().strip()
        steady[0] = steady[0] + 1 if wchan == BUSY_WAIT_WCHAN else 0
        return steady[0] >= STEADY_POLLS
    return seen


@contextmanager
def _pg_lock(url: str, schema: str, statement: str) -> Iterator[psycopg.Connection]:
    """Another session holding `statement`'s lock in `schema` until the block ends (rolled back)."""
    conn = psycopg.connect(url)
    try:
        conn.execute(f"SET search_path TO {schema}")
        conn.execute(statement)
        yield conn
    finally:
        conn.rollback()
        conn.close()


def _erase_in_source(src: Where, counter: BpeTokenCounter) -> None:
    with opened(src, counter) as store:
        store.delete_conversation(store.key_of(NS, GONE))


def _kill_after_the_keys(src: Where, dst: Where, counter: BpeTokenCounter, to_postgres: bool) -> None:
    """A rerun in a child that waits on its first target write (lock 1) while the source
    erases GONE, then, let go, waits again on LATER's copy (lock 2: its messages' table in
    the target, or the source's), and is SIGKILLed there."""
    child_args = [json.dumps(src), json.dumps(dst), str(Path(__file__).parent), str(CHILD_WAIT_MS), str(CHILD_WAIT_S)]
    if to_postgres:
        url, schema = _pg(dst)
        # lock 1 (the sequence the run moves first; ALTER SEQUENCE in an open transaction),
        # lock 2 (inserts into the target's messages wait: LATER's copy, an erasure's delete)
        with _pg_lock(url, schema, "LOCK TABLE messages IN SHARE MODE"), \
                _pg_lock(url, schema, "ALTER SEQUENCE messages_id_seq INCREMENT BY 1") as first:
            child = subprocess.Popen([sys.executable, "-c", CHILD, *child_args], stdout=subprocess.PIPE, text=True,
                                     env=child_env())
            try:
                _until(_pg_waiter(url), child)
                _erase_in_source(src, counter)
                first.rollback()
                time.sleep(POLL_S)
                _until(_pg_waiter(url), child)  # waiting on lock 2 now
                os.kill(child.pid, signal.SIGKILL)
            finally:
                child.kill()
                child.wait(timeout=60)
    else:
        url, schema = _pg(src)
        holder = hold_lock(Path(dst[1]))  # lock 1: the target file's write lock, another process's
        try:
            child = subprocess.Popen([sys.executable, "-c", CHILD, *child_args], stdout=subprocess.PIPE,
                                     text=True, env=child_env())
            try:
                _until(_sqlite_waiter(child.pid), child)
                _erase_in_source(src, counter)
                # lock 2: the source's messages, which LATER's copy reads
                with _pg_lock(url, schema, "LOCK TABLE messages IN ACCESS EXCLUSIVE MODE"):
                    release(holder)
                    _until(_pg_waiter(url), child)
                    os.kill(child.pid, signal.SIGKILL)
            finally:
                child.kill()
                child.wait(timeout=60)
        finally:
            release(holder)
            holder.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL


def _gone_state(dst: Where, counter: BpeTokenCounter) -> tuple[list[str] | None, int]:
    """GONE's messages the target holds (None: not there) and its tombstones there."""
    with opened(dst, counter) as store:
        key = store.key_of(NS, GONE)
        texts = [m.text for m in store.history(key)] if key is not None else None
        return texts, len([s for s in store.tombstones(namespace=NS) if s["id"] == GONE])


@pytest.mark.parametrize("to_postgres", MIGRATION_DIRECTIONS)
def test_a_kill_never_leaves_a_tombstone_beside_the_erased_copy(tmp_path: Path, pg_url: str,
                                                                counter: BpeTokenCounter, to_postgres: bool) -> None:
    src, dst = copied_sides(tmp_path, pg_url, counter, to_postgres, _fill)
    with opened(src, counter) as store:  # something to copy after the keys' transaction
        store.append(LATER, Message(role="user", content="later"), namespace=NS)
    _kill_after_the_keys(src, dst, counter, to_postgres)
    texts, stones = _gone_state(dst, counter)
    # either not learned yet (readable, no tombstone) or erased with its one tombstone;
    # before: the tombstone carried, the erased messages readable beside it
    assert (texts, stones) in ((None, 1), ([f"secret {GONE} {i}" for i in range(MESSAGES_EACH)], 0))
    report = migrate(src, dst, counter)  # the rerun finishes the job
    assert _gone_state(dst, counter) == (None, 1)  # before: two tombstones of it
    assert report.copied == 1 and report.conversations == 2
    with opened(dst, counter) as store:
        assert [m.text for m in store.history(store.key_of(NS, LATER))] == ["later"]

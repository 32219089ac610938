"""Another process holding PostgreSQL locks on a store's tables or rows, for the tests of
a sweep that meets them (test_consolidate_sweep_busy, test_sweep_table_lock).

`holding(url, sql)`: a child process runs `sql` in a transaction it leaves open (a
`LOCK TABLE ... IN ACCESS EXCLUSIVE MODE`, the lock an erasure's VACUUM FULL takes; a
`SELECT ... FOR UPDATE` of a conversation's row) and holds it for the block.
`queued(url, sql, waits_for)`: a child whose `sql` waits behind another's lock (a real
VACUUM FULL queued behind a reader, a second writer queued on a row): returns once the
server shows the child waiting for a lock of type `waits_for`. Each child is told to roll
back and exit at the end of its block, and waited for; a queued child's wait is
cancelled first (its lock may never come: the holder outlives it).

Imported explicitly by the test modules (the lead owns conftest.py)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

EXIT_TIMEOUT_S = 30  # how long a released holder may take to roll back and exit
QUEUED_WITHIN_S = 10.0  # how long a queued child may take to reach its lock wait
POLL_S = 0.02
# runs argv[2] (in a transaction, or autocommit: a VACUUM), says so, holds it until a line
# arrives on stdin; its backend's pid first, so the test can find its wait in pg_locks
HOLD = """
import sys, psycopg
conn = psycopg.connect(sys.argv[1], autocommit=sys.argv[3] == "autocommit")
print(conn.info.backend_pid, flush=True)
try:
    conn.execute(sys.argv[2])
    print("holding", flush=True)
except psycopg.Error as exc:  # a queued one cancelled at the end of its block
    print("failed", type(exc).__name__, flush=True)
sys.stdin.readline()
conn.rollback()
conn.close()
"""


def _start(url: str, sql: str, mode: str) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, url, sql, mode], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


def _release(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    try:
        proc.stdin.write("\n")
        proc.stdin.flush()
    except BrokenPipeError:
        pass  # it ended already (its statement failed): nothing to release
    proc.wait(timeout=EXIT_TIMEOUT_S)


@contextmanager
def holding(url: str, sql: str) -> Iterator[None]:
    """A child process holding what `sql` locks, in its open transaction, for the block."""
    proc, _pid = _start(url, sql, "transaction")
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "holding", sql
        yield
    finally:
        _release(proc)


@contextmanager
def queued(url: str, sql: str, waits_for: str, *, autocommit: bool = False) -> Iterator[None]:
    """A child process whose `sql` is waiting for a lock of type `waits_for` (pg_locks'
    locktype: 'relation', 'tuple', 'transactionid') for the block; it may go on once the
    lock it waits for is let go (its transaction stays open until the block ends)."""
    proc, pid = _start(url, sql, "autocommit" if autocommit else "transaction")
    try:
        deadline = time.monotonic() + QUEUED_WITHIN_S
        with psycopg.connect(url, autocommit=True) as conn:
            while not conn.execute("SELECT 1 FROM pg_locks WHERE pid = %s AND NOT granted AND locktype = %s",
                                   (pid, waits_for)).fetchone():
                assert proc.poll() is None, f"{sql}: ended instead of waiting"
                assert time.monotonic() < deadline, f"{sql}: not waiting for a {waits_for} lock"
                time.sleep(POLL_S)
        yield
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("SELECT pg_cancel_backend(%s)", (pid,))  # an idle session's: no effect
        _release(proc)

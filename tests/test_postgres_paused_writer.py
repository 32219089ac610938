"""A writer paused inside its transaction (SIGSTOP: docker pause, a frozen VM, a debugger)
does not block the other writers of its conversation for ever: every session of the store
has an idle_in_transaction_session_timeout (tiers.postgres IDLE_IN_TRANSACTION_SETTING,
the length of the checkout's deadline: cold_operation_timeout_s plus the lock wait), so the
server rolls the paused writer's transaction back and ends its session. Before (a review of
the PostgreSQL engine, 2026-12-07), the server's default, 0, let the paused writer hold the
conversation's row for as long as it stayed stopped, and every other append of that
conversation failed busy at its lock_timeout.

A real child process, stopped by itself right after its keyed append locked the
conversation's row and wrote its batch and key (uncommitted), on each of the store's
connection kinds: its own pool in session mode, its own pool in transaction mode (SET
LOCAL), a caller's pool. The embedded PostgreSQL; the child's deadline is short (its
operation timeout), the parent's lock wait long enough to outlast it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from pg_server import fresh_schema
from psycopg_pool import ConnectionPool

from tiermem.tiers.models import Message
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.tokens import BpeTokenCounter

ROOT = Path(__file__).resolve().parent.parent
# the paused writer's operation timeout: its sessions' idle-in-transaction limit is this
# plus its lock wait (PAUSED_LOCK_TIMEOUT_MS)
PAUSED_OPERATION_S = 0.5
PAUSED_LOCK_TIMEOUT_MS = 100
# the other writer waits for the row this long at most: well past the paused one's limit
# (before the fix it waited all of it, then failed busy)
WAITING_LOCK_TIMEOUT_MS = 8000
CHILD_TIMEOUT_S = 60  # a child that neither stops nor ends is killed, failing the test

# The child: a keyed append that stops its own process (SIGSTOP) once the conversation's
# row is locked and its batch and key are written, before the commit. Once continued, it
# prints what the append ended with.
CHILD = """
import os, signal, sys
from psycopg_pool import ConnectionPool
from tiermem.tiers.errors import StoreUnavailable
from tiermem.tiers.models import Message
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.tokens import BpeTokenCounter
url, schema, kind, op_s, lock_ms = sys.argv[1:6]
opts = dict(tokens=BpeTokenCounter(), schema=schema, operation_timeout_s=float(op_s), lock_timeout_ms=int(lock_ms))
if kind == "callers_pool":
    pool = ConnectionPool(url, min_size=1, max_size=1, open=True, kwargs={"autocommit": True})
    store = PostgresStore(pool=pool, **opts)
else:
    store = PostgresStore(url, pool_mode=kind, erase_scrub="vacuum", **opts)
recorded = PostgresStore._record_key
def paused(self, *a, **k):
    out = recorded(self, *a, **k)
    os.kill(os.getpid(), signal.SIGSTOP)
    return out
PostgresStore._record_key = paused
try:
    store.append_batch("shared", [Message(role="user", content="from the paused writer")],
                       idempotency_key="k1", fingerprint=b"f")
    print("committed", flush=True)
except Exception as e:
    # what it is told: that its idle transaction was ended and rolled back (a word), else the text
    said = "told-rolled-back" if "nothing of it committed" in str(e) else repr(str(e))
    print("failed", "StoreUnavailable" if isinstance(e, StoreUnavailable) else type(e).__name__, said, flush=True)
"""


@pytest.fixture
def schema() -> str:
    return fresh_schema()


@pytest.fixture
def waiting(pg_url: str, schema: str) -> Iterator[PostgresStore]:
    """The other writer: its conversation's first turn appended before the child starts."""
    s = PostgresStore(pg_url, tokens=BpeTokenCounter(), schema=schema, lock_timeout_ms=WAITING_LOCK_TIMEOUT_MS)
    s.append("shared", Message(role="user", content="first"))
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def paused_child(pg_url: str, schema: str, request: pytest.FixtureRequest) -> Iterator[subprocess.Popen[str]]:
    """The child, stopped by itself inside its transaction; continued and ended at teardown."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-c", CHILD, pg_url, schema, request.param, str(PAUSED_OPERATION_S),
                              str(PAUSED_LOCK_TIMEOUT_MS)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        _, status = os.waitpid(child.pid, os.WUNTRACED)  # returns once it stopped (or ended)
        assert os.WIFSTOPPED(status), f"the child ended before it paused (status {status})"
        yield child
    finally:
        if child.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(signal.SIGCONT)
            try:
                child.wait(CHILD_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


@pytest.mark.parametrize("paused_child", [
    "session",  # the store's own pool, one server session per connection (SET at connect)
    "transaction",  # the store's own pool behind a transaction-mode pooler (SET LOCAL per checkout)
    "callers_pool",  # a caller's pool (set for the checkout, the caller's value back after)
], indirect=True)
def test_the_other_writer_goes_on_and_the_paused_batch_is_rolled_back(
        pg_url: str, schema: str, waiting: PostgresStore, paused_child: subprocess.Popen[str]) -> None:
    # the child holds the conversation's row, idle in its transaction; before: this failed
    # busy (lock_not_available) after WAITING_LOCK_TIMEOUT_MS, and so did every later append
    position = waiting.append("shared", Message(role="user", content="from the other writer"))
    assert position == 1  # the paused batch's position taken back with its transaction

    assert [m.text for m in waiting.history("shared")] == ["first", "from the other writer"]
    with psycopg.connect(pg_url, autocommit=True) as c:
        positions = [r[0] for r in c.execute(
            f'SELECT position FROM "{schema}".turns ORDER BY position').fetchall()]
        keys = c.execute(f'SELECT count(*) FROM "{schema}".idempotency_keys').fetchone()
    assert positions == [0, 1]  # dense: no gap where the paused batch was
    assert keys is not None and keys[0] == 0  # its key was not recorded either

    # continued, the paused writer learns its append did not commit: a 503, its connection
    # gone (cut by its own watchdog past its deadline, or found ended by the server), told
    # so (before: "the server did not answer" or "may or may not have committed")
    paused_child.send_signal(signal.SIGCONT)
    out, _ = paused_child.communicate(timeout=CHILD_TIMEOUT_S)
    assert out.split() == ["failed", "StoreUnavailable", "told-rolled-back"], out
    assert waiting.append("shared", Message(role="user", content="after")) == 2


@pytest.mark.parametrize("kind", [
    "session",  # SET at connect; a maintenance checkout's own, set back before the pool has it
    "transaction",  # SET LOCAL at each checkout
    "callers_pool",  # set for each checkout, the caller's value back after it
])
def test_the_limit_is_the_checkouts_deadline(pg_url: str, kind: str) -> None:
    """An operation's checkout: cold_operation_timeout_s plus the lock wait (2 s + 250 ms);
    under maintenance (an erasure, a rebuild, a migration, a tool's lifted deadline) the
    maintenance deadline's (600 s), for that checkout only. One connection, so the checkout
    after the maintenance one reuses its session."""
    pool = ConnectionPool(pg_url, min_size=1, max_size=1, open=True, kwargs={"autocommit": True}) \
        if kind == "callers_pool" else None
    store = PostgresStore(None if pool is not None else pg_url, pool=pool, tokens=BpeTokenCounter(),
                          schema=fresh_schema(), operation_timeout_s=2.0, lock_timeout_ms=250,
                          maintenance_timeout_s=600.0, pool_mode="session" if pool is not None else kind,
                          erase_scrub="vacuum", pool_max=1)

    def shown() -> str:
        with store.reading() as c:
            return str(c.execute("SHOW idle_in_transaction_session_timeout").fetchone()[0])

    try:
        assert shown() == "2250ms"
        with store.maintenance():
            assert shown() == "10min"
        assert shown() == "2250ms"  # not left at the maintenance deadline's
    finally:
        store.close()
        if pool is not None:
            with pool.connection() as c:  # the caller's own value (the server's default) is back
                assert c.execute("SHOW idle_in_transaction_session_timeout").fetchone() == ("0",)
            pool.close()

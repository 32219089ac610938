"""A writer whose transaction sat idle past its limit (its process stopped inside it:
SIGSTOP, a frozen VM, a debugger) learns what is true once it goes on: its session was
ended for sitting idle in the transaction and the transaction rolled back, nothing of it
committed (tiers.postgres `idle_ended`). Not "the server did not answer ... the connection
was cut" (StoreStalled: the server was not asked anything), nor "a write in flight may or
may not have committed" (no COMMIT had been sent).

Two ways it ends, each on every connection kind of the store (its own pool in session
mode, in transaction mode: SET LOCAL, a caller's pool):
- the server ends the session (idle_in_transaction_session_timeout, made shorter than the
  checkout's deadline here so that the watchdog cannot come first): the driver reads the
  server's 25P03;
- the watchdog cuts the connection at the checkout's deadline while it sits idle in the
  transaction (the server's limit lifted here so that it cannot come first).
Before (an operator's report, session 35): "may or may not have committed" for the first,
StoreStalled's "did not answer" for the second (tests/test_postgres_paused_writer.py,
with a real SIGSTOP, meets one or the other).

The embedded PostgreSQL. The writer's pause is a hook after its keyed append wrote its
batch and key (uncommitted) that waits until the server no longer lists its backend,
then lets it go on; no timed assertion.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest
from pg_server import fresh_schema
from psycopg_pool import ConnectionPool

from tiermem.tiers.errors import StoreStalled, StoreUnavailable
from tiermem.tiers.models import Message
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.tokens import BpeTokenCounter

# the server's idle limit where it ends the session first: well inside the deadline below
SERVER_IDLE_MS = 200
LONG_OPERATION_S = 30.0
# the deadline where the watchdog cuts first (its lock wait on top)
SHORT_OPERATION_S = 1.0
LOCK_TIMEOUT_MS = 100
GONE_WAIT_S = 30.0  # a backend still listed this long after its end fails the test
POLL_S = 0.02


def _store(pg_url: str, kind: str, operation_s: float) -> tuple[PostgresStore, ConnectionPool | None]:
    opts: dict[str, Any] = {"tokens": BpeTokenCounter(), "schema": fresh_schema(),
                            "operation_timeout_s": operation_s, "lock_timeout_ms": LOCK_TIMEOUT_MS}
    if kind == "callers_pool":
        pool = ConnectionPool(pg_url, min_size=1, max_size=1, open=True, kwargs={"autocommit": True})
        return PostgresStore(pool=pool, **opts), pool
    return PostgresStore(pg_url, pool_mode=kind, erase_scrub="vacuum", **opts), None  # "full" needs a session


def _until_gone(pg_url: str, backend: int) -> None:
    """Until the server lists backend `backend` no more (its session ended)."""
    deadline = time.monotonic() + GONE_WAIT_S
    with psycopg.connect(pg_url, autocommit=True) as c:
        while c.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (backend,)).fetchone() is not None:
            assert time.monotonic() < deadline, f"backend {backend} still there after {GONE_WAIT_S} s"
            time.sleep(POLL_S)


@pytest.fixture(params=["session", "transaction", "callers_pool"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


# (how the idle transaction ends, the store's operation timeout, the idle limit the
# writer's session is given inside its transaction: milliseconds, 0 none)
ENDS = [
    ("server", LONG_OPERATION_S, SERVER_IDLE_MS),  # the server's idle-in-transaction timeout ends it
    ("watchdog", SHORT_OPERATION_S, 0),  # the checkout's deadline: the watchdog cuts it, idle
]


@pytest.mark.parametrize(("ended_by", "operation_s", "idle_ms"), ENDS, ids=[e[0] for e in ENDS])
def test_a_writer_resumed_after_its_idle_transaction_ended_is_told_nothing_committed(
        pg_url: str, kind: str, ended_by: str, operation_s: float, idle_ms: int) -> None:
    store, pool = _store(pg_url, kind, operation_s)
    try:
        store.append("shared", Message(role="user", content="first"))
        recorded = store._record_key

        def paused(conn: Any, *args: Any, **kwargs: Any) -> Any:
            out = recorded(conn, *args, **kwargs)  # the batch and its key written, not committed
            conn.execute(f"SET idle_in_transaction_session_timeout = {idle_ms}")
            _until_gone(pg_url, conn.info.backend_pid)  # "stopped" until its session is gone
            return out

        store._record_key = paused  # type: ignore[method-assign]
        with pytest.raises(StoreUnavailable) as err:
            store.append_batch("shared", [Message(role="user", content="from the paused writer")],
                               idempotency_key="k1", fingerprint=b"f")
        text = str(err.value)
        assert not isinstance(err.value, StoreStalled), text  # before (watchdog): "did not answer"
        assert "may or may not have committed" not in text, text  # before (server)
        assert "idle_in_transaction_session_timeout" in text and "nothing of it committed" in text, text
        assert err.value.connection_lost
        del store._record_key
        # true: nothing of it is there, and the next append goes on at position 1
        assert [m.text for m in store.history("shared")] == ["first"]
        assert store.append("shared", Message(role="user", content="after")) == 1
    finally:
        store.close()
        if pool is not None:
            pool.close()

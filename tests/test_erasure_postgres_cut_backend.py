"""On PostgreSQL the server process of a cut connection ends soon after the cut, and with
it the locks its transaction held.

The watchdog cuts a checkout past its deadline (StoreStalled) by shutting its socket down,
but a backend notices its client left only when it next reads or writes the socket: one
inside a long statement ran it to its end. An erasure cut inside its deletion kept
ERASURE_ORDER_LOCK and its rows for as long, so every other erasure waited for a
transaction that could only roll back. The store now has the server check its client
(`client_connection_check_interval`): on each session of its own pool, and for a
maintenance transaction on a caller's connection (`SET LOCAL`: the caller's session keeps
its own value).

Real PostgreSQL; the erasure's deletion is long by the server's own work (a trigger of
the test's schema sleeps in it, as tests/test_erasure_postgres_deadline.py does), past a
short maintenance deadline, so the watchdog cuts it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import psycopg
import pytest
from pg_server import fresh_schema
from psycopg_pool import ConnectionPool
from test_erasure_postgres_deadline import NS, _deleting, _slow_deletes

from tiermem.tiers.errors import StoreStalled
from tiermem.tiers.models import Message
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.tokens import BpeTokenCounter

LOCK_TIMEOUT_MS = 100
CUT_S = 1.0  # the first store's maintenance deadline: its erasure is cut there
SLEEP_S = 60.0  # the cut erasure's deletion, had its backend gone on (before: the second waited this long)
CHECK_S = 1.0  # the store's client check interval (tiers.postgres.CLIENT_CHECK_INTERVAL_MS)
SLACK_S = 5.0  # on top of a bound: a busy test machine
HUNG_S = 60.0
CALLER_POOL_MAX = 2
GONE = "SELECT count(*) FROM pg_stat_activity WHERE pid = %s"
LOCKS = "SELECT count(*) FROM pg_locks WHERE pid = %s AND granted"


@pytest.fixture(params=["own pool", "caller's pool"])
def first(request: pytest.FixtureRequest, pg_url: str) -> Iterator[tuple[PostgresStore, ConnectionPool | None]]:
    """The store whose erasure is cut: on a pool of its own (a URL), or on a caller's."""
    schema = fresh_schema()
    caller: ConnectionPool | None = None
    if request.param == "own pool":
        store = PostgresStore(pg_url, tokens=BpeTokenCounter(), schema=schema, lock_timeout_ms=LOCK_TIMEOUT_MS,
                              maintenance_timeout_s=CUT_S)
    else:
        caller = ConnectionPool(pg_url, min_size=1, max_size=CALLER_POOL_MAX, kwargs={"autocommit": True}, open=True)
        store = PostgresStore(pool=caller, tokens=BpeTokenCounter(), schema=schema, lock_timeout_ms=LOCK_TIMEOUT_MS,
                              maintenance_timeout_s=CUT_S)
    try:
        store.append("c", Message(role="user", content="in the erasure that is cut"), namespace=NS)
        store.append("d", Message(role="user", content="erased by another process"), namespace="small")
        _slow_deletes(pg_url, schema, SLEEP_S)
        yield store, caller
    finally:
        store.close()
        if caller is not None:
            caller.close()


def test_a_cut_erasures_backend_ends_and_frees_its_locks(
        pg_url: str, first: tuple[PostgresStore, ConnectionPool | None]) -> None:
    store, caller = first
    other = PostgresStore(pg_url, tokens=BpeTokenCounter(), schema=store.schema, lock_timeout_ms=LOCK_TIMEOUT_MS)
    key = other.key_of("small", "d")
    assert key is not None
    out: dict[str, object] = {}

    def erase(name: str, call: object) -> threading.Thread:
        def run() -> None:
            try:
                out[name] = call()  # type: ignore[operator]
            except Exception as exc:
                out[name] = exc
            out[name + " at"] = time.monotonic()

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread

    pid = 0
    try:
        cut = erase("cut", lambda: store.delete_namespace(NS))
        pid = _deleting(pg_url, store.schema)  # in the deletion: ERASURE_ORDER_LOCK and the rows held
        cut.join(HUNG_S)
        assert isinstance(out.get("cut"), StoreStalled), out
        cut_at = float(out["cut at"])  # type: ignore[arg-type]
        # another process's erasure needs ERASURE_ORDER_LOCK (before: it waited SLEEP_S for it)
        second = erase("second", lambda: other.delete_conversation(key))
        second.join(CHECK_S + SLACK_S)
        assert not second.is_alive(), f"the second erasure still waits {CHECK_S + SLACK_S} s after the cut"
        assert not isinstance(out["second"], Exception), out
        assert float(out["second at"]) - cut_at < CHECK_S + SLACK_S  # type: ignore[arg-type]
        with psycopg.connect(pg_url, autocommit=True) as probe:
            # the cut erasure's server process is gone, holding nothing
            assert probe.execute(GONE, (pid,)).fetchone() == (0,)
            assert probe.execute(LOCKS, (pid,)).fetchone() == (0,)
        # rolled back: the cut erasure erased nothing; the second's is the one tombstone
        assert other.key_of(NS, "c") is not None
        assert [t["id"] for t in other.tombstones()] == ["d"]
        if caller is not None:  # the caller's sessions keep their own value (the server's: never)
            for _ in range(CALLER_POOL_MAX):
                with caller.connection() as conn:
                    assert conn.execute("SHOW client_connection_check_interval").fetchone() == ("0",)
    finally:
        if pid:  # the code before: end the sleeping backend rather than leave it to the server
            with psycopg.connect(pg_url, autocommit=True) as probe:
                probe.execute("SELECT pg_terminate_backend(%s)", (pid,))
        other.close()

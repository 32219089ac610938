"""A store on a caller's pool (`PostgresStore(pool=...)`) leaves the caller's connections
as it found them: tiermem's session settings (lock_timeout, default isolation,
synchronous_commit, search_path, hnsw.*) hold for its own checkout and the caller's are
set back when the connection is given back. Before (a review of the PostgreSQL
operations changes, 2026-12-06), one tiermem call left them on the connection for good:
lock_timeout 1 ms (busy_timeout_ms = 0), so the caller's own UPDATE behind a row lock
failed with LockNotAvailable instead of waiting as it configured, its serializable
default read committed, tiermem's synchronous_commit and search path. The embedded
PostgreSQL; the caller's pool of one connection, in both of psycopg's modes."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator

import numpy as np
import psycopg
import pytest
from pg_server import fresh_schema
from psycopg_pool import ConnectionPool

from tiermem.tiers.models import Message
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.tokens import BpeTokenCounter

HOLD_S = 0.3  # another session holds the caller's row this long
# the caller's own session: a role-like default (the URL's options) and its pool's SETs
CALLERS_OPTIONS = "-c default_transaction_isolation=serializable"
CALLERS_SETS = ("SET lock_timeout = '5s'; SET synchronous_commit = 'local'; SET hnsw.ef_search = 7; "
                "SET hnsw.iterative_scan = strict_order; SET idle_in_transaction_session_timeout = '7min'")
SHOWN = ("lock_timeout", "default_transaction_isolation", "synchronous_commit", "search_path", "hnsw.ef_search",
         "hnsw.iterative_scan", "idle_in_transaction_session_timeout")


def settings(pool: ConnectionPool) -> dict[str, str | None]:
    """What the caller's connection (the pool's one) shows."""
    with pool.connection() as c:
        row = c.execute("SELECT " + ", ".join(f"current_setting('{n}', true)" for n in SHOWN)).fetchone()
    return dict(zip(SHOWN, row, strict=True))


@pytest.fixture(params=[True, False], ids=["autocommit", "transaction_mode"])
def callers_pool(request: pytest.FixtureRequest, pg_url: str) -> Iterator[ConnectionPool]:
    autocommit: bool = request.param

    def configure(conn: psycopg.Connection) -> None:
        conn.execute(CALLERS_SETS)
        if not autocommit:
            conn.commit()

    with ConnectionPool(pg_url, min_size=1, max_size=1, configure=configure, open=True,
                        kwargs={"autocommit": autocommit, "options": CALLERS_OPTIONS}) as pool:
        yield pool


def held_update(pool: ConnectionPool, url: str, table: str) -> float:
    """The caller's own UPDATE of a row another session holds for HOLD_S: how long it
    waited (it waits: the caller's lock_timeout is 5 s)."""
    holder = psycopg.connect(url)
    try:
        holder.execute(f"SELECT * FROM {table} WHERE id = 1 FOR UPDATE")
        timer = threading.Timer(HOLD_S, holder.commit)
        timer.start()
        began = time.monotonic()
        try:
            with pool.connection() as c:
                c.execute(f"UPDATE {table} SET v = v + 1 WHERE id = 1")  # its own search path finds it
        finally:
            timer.join()
        return time.monotonic() - began
    finally:
        holder.close()


def busy_append(store: PostgresStore, url: str) -> None:
    """An append that fails inside its transaction (lock_timeout behind a LOCK TABLE)."""
    with psycopg.connect(url) as locker:
        locker.execute(f'LOCK TABLE "{store.schema}".conversations IN ACCESS EXCLUSIVE MODE')
        with pytest.raises(psycopg.errors.LockNotAvailable):
            store.append_batch("c", [Message(role="user", content="behind the lock")], namespace="ns",
                               idempotency_key="k-busy", fingerprint=b"busy")


# (id, a tiermem operation on the caller's pool)
OPERATIONS: list[tuple[str, Callable[[PostgresStore, str], object]]] = [
    # one statement, its own transaction (autocommit), or wrapped in one (transaction mode)
    ("append", lambda store, url: store.append("c", Message(role="user", content="hello"), namespace="ns")),
    # an explicit transaction: the conversation's row locked, the key recorded
    ("keyed_append", lambda store, url: store.append_batch("c", [Message(role="user", content="again")],
                                                           namespace="ns", idempotency_key="k-1", fingerprint=b"1")),
    # what a context reads: history, keywords and meaning
    ("reads", lambda store, url: (store.history(store.key_of("ns", "c") or ""),
                                  store.search_bm25("hello", 5, namespace="ns"),
                                  store.search_dense(np.ones(8, dtype=np.float32) / np.sqrt(8), 5, namespace="ns"))),
    # a transaction, then VACUUM FULL (transaction mode: the connection switched to autocommit and back)
    ("erasure", lambda store, url: store.delete_conversation(store.key_of("ns", "c") or "")),
    # an operation that fails inside its transaction (rolled back)
    ("failed_append", busy_append),
]


@pytest.mark.parametrize("operation", [o[1] for o in OPERATIONS], ids=[o[0] for o in OPERATIONS])
def test_the_callers_connection_keeps_its_own_settings(callers_pool: ConnectionPool, pg_url: str,
                                                       operation: Callable[[PostgresStore, str], object]) -> None:
    table = "app_" + uuid.uuid4().hex[:12]
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f"CREATE TABLE public.{table}(id int PRIMARY KEY, v int)")
        admin.execute(f"INSERT INTO public.{table} VALUES (1, 0)")
    before = settings(callers_pool)
    assert before["lock_timeout"] == "5s" and before["default_transaction_isolation"] == "serializable"  # premise
    # busy_timeout_ms = 0 (lock_timeout 1 ms) and synchronous_commit off: unlike the caller's
    store = PostgresStore(pool=callers_pool, tokens=BpeTokenCounter(), schema=fresh_schema(), lock_timeout_ms=0,
                          synchronous_commit="off")
    try:
        assert settings(callers_pool) == before  # its opening (bootstrap, migrations, the scrub check)
        store.append("c", Message(role="user", content="hello there"), namespace="ns")
        with store.reading() as c:  # inside tiermem's checkout: its own settings
            assert c.execute("SHOW lock_timeout").fetchone() == ("1ms",)
            assert c.execute("SHOW default_transaction_isolation").fetchone() == ("read committed",)
            # the operation's deadline (60 s) and lock wait (1 ms): a paused writer's rows freed past it
            assert c.execute("SHOW idle_in_transaction_session_timeout").fetchone() == ("60001ms",)
        operation(store, pg_url)
        assert settings(callers_pool) == before  # before: 1ms, read committed, off, tiermem's schema first
        # and the caller's UPDATE waits as it configured (before: LockNotAvailable after 1 ms)
        assert held_update(callers_pool, pg_url, table) >= HOLD_S * 0.8
    finally:
        store.close()
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(f"DROP TABLE public.{table}")

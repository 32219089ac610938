"""`reclaim()`'s VACUUM on a caller's pool (`PostgresStore(pool=...)`) ends at the
maintenance deadline on the server, and leaves the caller's connection as it was.

The VACUUM cannot run in a transaction, so the `SET LOCAL client_connection_check_interval`
that tiermem's maintenance transactions carry on a caller's connection could not cover it,
and the caller's session has no server-side deadline of its own. Before, a VACUUM FULL
stalled behind another session's lock (a report query reading a table) was ended only by
the watchdog cutting the caller's connection at the deadline: the caller's pool lost the
connection, and the server's backend went on waiting for the lock, queued for an ACCESS
EXCLUSIVE lock that made every later reader of the table wait behind it, until the lock
holder finished. Now the statement runs with `statement_timeout` (just inside the
deadline) and the client check, both set for it and set back at the end of tiermem's
checkout (CALLER_SETTINGS): the server cancels it, nothing of it is left on the server,
and the caller gets its connection back with its own settings.

The embedded PostgreSQL; the caller's pool of one connection, in both of psycopg's modes.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from pg_server import fresh_schema
from psycopg_pool import ConnectionPool
from stalled_vacuum import MAINTENANCE_S, SLACK_S, reclaim_behind_a_reader

from tiermem.tiers.models import Message
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.tokens import BpeTokenCounter

# the caller's own session settings (as its pool's configure sets them), which tiermem's
# VACUUM must leave as they were
CALLERS_SETS = "SET statement_timeout = '10min'; SET client_connection_check_interval = 0; SET lock_timeout = 0"
SHOWN = ("statement_timeout", "client_connection_check_interval", "lock_timeout", "search_path")


def session(conn: psycopg.Connection) -> tuple[int, dict[str, str]]:
    """The caller's connection's backend and its settings."""
    row = conn.execute("SELECT pg_backend_pid(), " + ", ".join(f"current_setting('{n}')" for n in SHOWN)).fetchone()
    assert row is not None
    return int(row[0]), dict(zip(SHOWN, row[1:], strict=True))


@pytest.fixture(params=[True, False], ids=["autocommit", "transaction_mode"])
def callers_pool(request: pytest.FixtureRequest, pg_url: str) -> Iterator[ConnectionPool]:
    autocommit: bool = request.param

    def configure(conn: psycopg.Connection) -> None:
        conn.execute(CALLERS_SETS)
        if not autocommit:
            conn.commit()

    with ConnectionPool(pg_url, min_size=1, max_size=1, configure=configure, open=True,
                        kwargs={"autocommit": autocommit}) as pool:
        yield pool


def test_a_stalled_vacuum_on_a_callers_pool_ends_at_the_deadline_on_the_server(
        callers_pool: ConnectionPool, pg_url: str, counter: BpeTokenCounter) -> None:
    # lock_timeout_ms None: the caller's lock_timeout (0: wait for ever) is the one in force
    store = PostgresStore(pool=callers_pool, tokens=counter, schema=fresh_schema(), lock_timeout_ms=None,
                          maintenance_timeout_s=MAINTENANCE_S)
    try:
        store.append("c", Message(role="user", content="hello"), namespace="ns")
        with callers_pool.connection() as conn:
            before = session(conn)
            if not conn.autocommit:
                conn.rollback()
        took, left = reclaim_behind_a_reader(store, pg_url)
        assert took < MAINTENANCE_S + SLACK_S
        assert left == []
        with callers_pool.connection() as conn:
            after = session(conn)
        assert after == before  # the same connection (not cut), with the caller's own settings
        assert store.reclaim(full=True) is True  # and the rewrite runs once the lock is gone
    finally:
        store.close()

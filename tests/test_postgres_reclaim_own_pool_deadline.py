"""`reclaim()`'s VACUUM on the store's own pool ends at the maintenance deadline on the
server, and the pool keeps its connection.

The VACUUM runs outside a transaction, and the store's own sessions had no
statement_timeout: a VACUUM FULL stalled behind another session's lock (a report query
reading a table) was ended only by the watchdog cutting the connection at the deadline,
so the pool lost it (a broken connection given back, a new one opened). As on a caller's
pool (tests/test_postgres_reclaim_callers_deadline.py) the statement now runs with a
`statement_timeout` just inside the deadline: the server cancels it (StoreStalled), the
connection is kept, and its statement_timeout is the session's own again afterwards (the
URL's here, as an operator sets one).

The embedded PostgreSQL; the store's own pool of one connection.
"""

from __future__ import annotations

from pg_server import fresh_schema, with_options
from stalled_vacuum import MAINTENANCE_S, SLACK_S, reclaim_behind_a_reader

from tiermem.tiers.models import Message
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.tokens import BpeTokenCounter

SESSIONS_TIMEOUT = "10min"  # the operator's statement_timeout for the store's sessions (its URL)
# pool statistics that move when the pool loses a connection: a broken one given back,
# a new one opened in its place
LOSS_STATS = ("returns_bad", "connections_num", "connections_lost")


def session(store: PostgresStore) -> tuple[int, str]:
    """The pool's connection's backend and its statement_timeout."""
    with store.reading() as conn:
        row = conn.execute("SELECT pg_backend_pid(), current_setting('statement_timeout')").fetchone()
    assert row is not None
    return int(row[0]), str(row[1])


def loss_stats(store: PostgresStore) -> dict[str, int]:
    pool = store._pool
    assert pool is not None
    stats = pool.get_stats()
    return {name: stats.get(name, 0) for name in LOSS_STATS}


def test_a_stalled_vacuum_on_the_own_pool_ends_at_the_deadline_on_the_server(
        pg_url: str, counter: BpeTokenCounter) -> None:
    # lock_timeout_ms None: the session's lock_timeout (0: wait for ever) is the one in force
    store = PostgresStore(with_options(pg_url, f"-c statement_timeout={SESSIONS_TIMEOUT}"), tokens=counter,
                          schema=fresh_schema(), pool_max=1, lock_timeout_ms=None,
                          maintenance_timeout_s=MAINTENANCE_S)
    try:
        store.append("c", Message(role="user", content="hello"), namespace="ns")
        before = session(store)
        assert before[1] == SESSIONS_TIMEOUT
        stats_before = loss_stats(store)
        took, left = reclaim_behind_a_reader(store, pg_url)
        assert took < MAINTENANCE_S + SLACK_S
        assert left == []
        assert loss_stats(store) == stats_before  # no connection lost, none opened
        # the same connection (not cut), with the session's own statement_timeout again
        assert session(store) == before
        assert store.reclaim(full=True) is True  # and the rewrite runs once the lock is gone
        assert session(store) == before
    finally:
        store.close()

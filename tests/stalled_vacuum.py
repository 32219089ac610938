"""A `reclaim(full=True)` stalled behind another session's lock, shared by the tests of
its maintenance deadline on a caller's pool and on the store's own
(test_postgres_reclaim_callers_deadline, test_postgres_reclaim_own_pool_deadline).

`reclaim_behind_a_reader(store, url)`: a second connection (a report query) reads the
store's messages table and holds its read lock while the store's VACUUM FULL runs, which
must raise StoreStalled saying the server cancelled it (on the code before, the watchdog
cut the connection: "the server did not answer within 2 s; the connection was cut");
returns the seconds the call took and the VACUUMs still on the server once it returned
(`vacuums`), read before the lock is let go.

Imported explicitly by the test modules (the lead owns conftest.py)."""

from __future__ import annotations

import time

import psycopg
import pytest

from tiermem.tiers.errors import StoreStalled
from tiermem.tiers.postgres import PostgresStore

MAINTENANCE_S = 2.0  # the store's maintenance deadline: the stalled VACUUM's bound
SLACK_S = 0.5  # the call's own round trips past the deadline, at most


def vacuums(url: str) -> list[str]:
    """The VACUUMs the server is still running or waiting in (the tests of one session run
    one at a time: any is this test's)."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute("SELECT query FROM pg_stat_activity WHERE query ILIKE 'VACUUM%%' "
                            "AND pid <> pg_backend_pid() AND state = 'active'").fetchall()
    return [str(r[0]) for r in rows]


def reclaim_behind_a_reader(store: PostgresStore, url: str) -> tuple[float, list[str]]:
    holder = psycopg.connect(url, autocommit=False)  # a report query holding a read lock
    try:
        holder.execute(f'SELECT count(*) FROM "{store.schema}".messages').fetchone()
        began = time.monotonic()
        with pytest.raises(StoreStalled, match=r"did not finish within .* the server cancelled it"):
            store.reclaim(full=True)
        took = time.monotonic() - began
        # the server ended it: no VACUUM left queued behind the holder's lock
        return took, vacuums(url)
    finally:
        holder.rollback()
        holder.close()

"""When the PostgreSQL store cannot get a connection in time (the server down or
restarting, at `max_connections`, or every pooled connection in use), the operation
fails with `StoreUnreachable`, which the service answers 503 with `"written": false`:
no statement was sent. Before: psycopg_pool's `PoolTimeout` reached the service
unrecognised and was a 500 "internal error" (seen with `tiermem serve` on a stopped
server: every append 500 after 30 s). A real pool whose one connection is held."""

from __future__ import annotations

import time

import pytest
from pg_server import fresh_schema
from psycopg_pool import ConnectionPool

from tiermem.tiers.errors import StoreUnreachable
from tiermem.tiers.files import storage_problem
from tiermem.tiers.models import Message
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.tokens import BpeTokenCounter

POOL_WAIT_S = 0.3  # the pool's wait for a connection
SLACK_S = 5.0  # on top of the wait: a busy test machine


def test_no_connection_in_time_is_unreachable_and_unwritten(pg_url: str) -> None:
    pool = ConnectionPool(pg_url, min_size=1, max_size=1, timeout=POOL_WAIT_S, kwargs={"autocommit": True})
    try:
        store = PostgresStore(pool=pool, tokens=BpeTokenCounter(), schema=fresh_schema())
        store.append("c", Message(role="user", content="first"))
        with store.reading():  # the pool's only connection, held (as by a slow request)
            started = time.monotonic()
            with pytest.raises(StoreUnreachable) as caught:  # before: psycopg_pool.PoolTimeout
                store.append("c", Message(role="user", content="second"))
            assert time.monotonic() - started < POOL_WAIT_S + SLACK_S
        problem = storage_problem(caught.value)
        assert problem is not None and problem.status == 503 and problem.refused_unwritten
        assert not problem.busy  # /healthz reports it
        assert [m.text for m in store.get("c", [0, 1])] == ["first"]  # nothing was written
        store.append("c", Message(role="user", content="second"))  # the connection is back
        store.close()
    finally:
        pool.close()

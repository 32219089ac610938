"""After the database dropped every connection (a restart, an operator's
`pg_terminate_backend`), the store's next operations run: the pool tries a connection
the server spoke on while it sat idle and replaces it when dead. Before: each idle
connection failed one operation with AdminShutdown (a 503 per pooled connection, up
to `pool_max` of them per process, after the database was back). A real server, its
backends terminated by the test."""

from __future__ import annotations

import time
import uuid

import psycopg
from pg_server import fill_pool, fresh_schema, with_options

from tiermem.tiers.models import Message
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.tokens import BpeTokenCounter

POOLED = 4  # connections the store holds idle when the server drops them
GONE_WAIT_S = 10.0  # for the terminated backends to exit


def test_operations_after_the_server_dropped_every_connection_run(pg_url: str) -> None:
    app = "tiermem-restart-" + uuid.uuid4().hex[:8]
    store = PostgresStore(with_options(pg_url, f"-c application_name={app}"), tokens=BpeTokenCounter(),
                          schema=fresh_schema(), pool_max=POOLED)
    try:
        store.append("c", Message(role="user", content="before"))
        fill_pool(store, POOLED)
        with psycopg.connect(pg_url, autocommit=True) as admin:
            killed = admin.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                   "WHERE application_name = %s", (app,)).fetchone()
            assert killed is not None and killed[0] == POOLED
            deadline = time.monotonic() + GONE_WAIT_S
            while admin.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                                (app,)).fetchone() != (0,):
                assert time.monotonic() < deadline, "the terminated backends did not exit"
                time.sleep(0.05)
        for i in range(POOLED):  # before: the first failed with AdminShutdown
            store.append("c", Message(role="user", content=f"after {i}"))
        assert [m.text for m in store.get("c", list(range(POOLED + 1)))] == [
            "before", *(f"after {i}" for i in range(POOLED))]
    finally:
        store.close()

"""The PostgreSQL engine sets READ COMMITTED on its own sessions instead of assuming the
server's default. Its waits rely on it: a keyed append locks the conversation's row
(FOR UPDATE) and then reads the key that the writer before it committed; the counter
row's UPDATE and the creating INSERT ... ON CONFLICT wait on another writer's row. Under a
role or database whose `default_transaction_isolation` is 'repeatable read' or
'serializable', each of those waits ended in a serialization failure (40001) instead of
a replay or an append (a review of idempotency keys, 2026-12-06). Real processes, as
tests/test_idempotency_concurrency.py races them, on the embedded PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from hash_embedder import HashEmbedder
from pg_server import fresh_schema
from psycopg import sql as pgsql
from psycopg_pool import ConnectionPool
from store_workers import BATCH_MESSAGES, WORKERS, race_keyed_appends

from tiermem.config import Config
from tiermem.memory import Memory
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.tokens import BpeTokenCounter

# the server defaults a role may be given that are stricter than the engine's waits allow
LEVELS = ["repeatable read", "serializable"]


@pytest.fixture(params=LEVELS, ids=[lvl.replace(" ", "_") for lvl in LEVELS])
def strict_url(request: pytest.FixtureRequest, pg_url: str) -> Iterator[str]:
    """A URL of a new role (and database) whose default isolation is `request.param`, set
    as an operator would (ALTER ROLE ... SET), touching no other test's sessions."""
    name = "iso_" + uuid.uuid4().hex[:12]
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(pgsql.SQL("CREATE ROLE {} LOGIN").format(pgsql.Identifier(name)))
        admin.execute(pgsql.SQL("CREATE DATABASE {} OWNER {}").format(pgsql.Identifier(name), pgsql.Identifier(name)))
        admin.execute(pgsql.SQL("ALTER ROLE {} SET default_transaction_isolation = {}").format(
            pgsql.Identifier(name), pgsql.Literal(request.param)))
    parts = urlsplit(pg_url)
    host = parts.netloc.rpartition("@")[2]
    url = urlunsplit((parts.scheme, f"{name}:@{host}", f"/{name}", parts.query, parts.fragment))
    with psycopg.connect(url.replace(f"{name}:@", "postgres:@", 1), autocommit=True) as db_admin:
        db_admin.execute("CREATE EXTENSION IF NOT EXISTS vector")  # a superuser's, as in production
    with psycopg.connect(url, autocommit=True) as c:  # the premise: the role's sessions start strict
        assert c.execute("SHOW transaction_isolation").fetchone() == (request.param,)
    try:
        yield url
    finally:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(pgsql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(pgsql.Identifier(name)))
            admin.execute(pgsql.SQL("DROP ROLE IF EXISTS {}").format(pgsql.Identifier(name)))


@pytest.mark.parametrize("existing", [False, True], ids=["new_conversation", "existing_conversation"])
def test_racing_keyed_appends_under_a_strict_default(tmp_path: Any, strict_url: str, existing: bool) -> None:
    config = Config(data_dir=tmp_path / "data", cold_url=strict_url, cold_schema=fresh_schema())
    before = 0
    if existing:
        with Memory(config, embedder=HashEmbedder(), hot=False, background_indexing=False) as mem:
            before = len(mem.append_many("shared", [{"role": "user", "content": "hello"}], namespace="acme"))
    answers = race_keyed_appends(config)
    want = list(range(before, before + BATCH_MESSAGES))
    assert all(a == (want, a[1]) for a in answers), answers  # no error: every one answers the positions
    assert sorted(replayed for _, replayed in answers) == [False] + [True] * (WORKERS - 1)
    with Memory(config, embedder=HashEmbedder(), hot=False, background_indexing=False) as mem:
        history = mem.history("shared", namespace="acme")
        assert [m.position for m in history] == list(range(before + BATCH_MESSAGES))


def _levels(store: PostgresStore) -> tuple[str, str]:
    """What a read and a write transaction of the engine run under, on one checkout each."""
    with store.reading() as c:
        read = str(c.execute("SHOW transaction_isolation").fetchone()[0])
    with store.transaction() as c:
        write = str(c.execute("SHOW transaction_isolation").fetchone()[0])
    return read, write


# (id, the pool: the engine's own (None) or a caller's, with that autocommit setting)
POOLS: list[tuple[str, bool | None]] = [
    ("own_pool", None),  # configured once per connection: later checkouts keep it
    ("callers_pool_autocommit", True),  # set on every checkout, as the search path is
    ("callers_pool_transaction_mode", False),  # the checkout's transaction began before our SET
]


@pytest.mark.parametrize("autocommit", [p[1] for p in POOLS], ids=[p[0] for p in POOLS])
def test_every_checkout_runs_read_committed(strict_url: str, autocommit: bool | None) -> None:
    tokens = BpeTokenCounter()
    pool = None if autocommit is None else ConnectionPool(strict_url, min_size=1, max_size=1,
                                                           kwargs={"autocommit": autocommit}, open=True)
    try:
        store = (PostgresStore(strict_url, tokens=tokens, schema=fresh_schema(), pool_max=1) if pool is None
                 else PostgresStore(pool=pool, tokens=tokens, schema=fresh_schema()))
        try:
            for _ in range(3):  # the one pooled connection, checked out again and again
                assert _levels(store) == ("read committed", "read committed")
        finally:
            store.close()
    finally:
        if pool is not None:
            pool.close()

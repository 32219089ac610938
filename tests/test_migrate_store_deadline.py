"""`migrate-store` on a store larger than one PostgreSQL operation deadline: every
checkout of a PostgresStore is cut past `operation_timeout_s` (StoreStalled), and the
verification held one connection over its whole loop of conversations, so past the
deadline (60 s: ~40,000 conversations locally, far fewer over a network) the finished copy
was cut, never marked verified, and every rerun failed the same way. Now each conversation
is read with checkouts of its own, and a server that stops answering during a migration
is still cut at the operations' deadline. The real embedded PostgreSQL; a server of the
test's own for the one stopped with SIGSTOP."""

from __future__ import annotations

import time
from contextlib import ExitStack
from pathlib import Path

import pytest
from frozen_server import frozen
from pg_server import StoppableServer, fresh_schema, stoppable_pg  # noqa: F401  (pytest fixture)

from tiermem.tiers.cold import ColdStore
from tiermem.tiers.errors import StoreStalled
from tiermem.tiers.migrate_store import DONE, MigrationReport, migrate_store, unfinished_marks
from tiermem.tiers.models import Message
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.tokens import BpeTokenCounter

TOKENS = BpeTokenCounter()
OPERATION_TIMEOUT_S = 0.5  # the stores' deadline, short for the test
BUSY_TIMEOUT_MS = 0  # no lock wait added to it (PostgreSQL's least, 1 ms)
# the verification of this many held its one connection ~1.5 ms each: well past the
# deadline, while each conversation's own checkouts take a few ms
MANY = 1_000
FEW = 6  # conversations of the stalled migration: it stops at the third
STOP_AT = 3
SLACK_S = 5.0  # on top of a bound: a busy test machine
# closing the stores after the cut waits this long at most for a pool worker still
# connecting to the silent server (psycopg's wait for its workers' threads)
POOL_CLOSE_S = 5.0


def build_source(path: Path, conversations: int) -> Path:
    """A SQLite log of `conversations` small conversations, written through the store."""
    store = ColdStore(path, tokens=TOKENS)
    try:
        for i in range(conversations):
            store.append_batch(f"c{i}", [Message(role="user", content=f"book the 9:40 train {i}"),
                                         Message(role="assistant", content="Booked.")], namespace="acme")
    finally:
        store.close()
    return path


def verified(url: str, schema: str, key: str = DONE) -> bool:
    """Whether the schema's meta holds `key` (DONE: the copy was verified)."""
    store = PostgresStore(url, tokens=TOKENS, schema=schema)
    try:
        with store.reading() as c:
            return c.execute("SELECT 1 FROM meta WHERE key = %s", (key,)).fetchone() is not None
    finally:
        store.close()


def marked(url: str, schema: str) -> bool:
    """Whether the schema holds a migrate-store run's unfinished-copy mark."""
    store = PostgresStore(url, tokens=TOKENS, schema=schema)
    try:
        return bool(unfinished_marks(store))
    finally:
        store.close()


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory, pg_url: str) -> tuple[str, MigrationReport]:
    """MANY conversations migrated from SQLite to a fresh schema under the short deadline:
    the copy both cases start from, made once (each made its own: ~9 s of the module's 28).
    The case back to SQLite only reads the schema (its source)."""
    source = build_source(tmp_path_factory.mktemp("src") / "tiermem.db", MANY)
    schema = fresh_schema()
    there = migrate_store(source, pg_url, tokens=TOKENS, target_schema=schema, busy_timeout_ms=BUSY_TIMEOUT_MS,
                          operation_timeout_s=OPERATION_TIMEOUT_S)
    return schema, there


# (direction: which side is PostgreSQL; the verification's loop reads both sides)
@pytest.mark.parametrize("direction", [
    "sqlite-to-postgres",  # the reviewer's run: the target's connection was cut
    "postgres-to-sqlite",  # back: the source's
])
def test_a_store_larger_than_one_deadline_migrates_and_is_verified(
        tmp_path: Path, pg_url: str, migrated: tuple[str, MigrationReport], direction: str) -> None:
    schema, there = migrated
    assert (there.conversations, there.copied) == (MANY, MANY)
    assert verified(pg_url, schema)
    if direction == "postgres-to-sqlite":
        back = migrate_store(pg_url, tmp_path / "back", tokens=TOKENS, source_schema=schema,
                             busy_timeout_ms=BUSY_TIMEOUT_MS, operation_timeout_s=OPERATION_TIMEOUT_S)
        assert (back.conversations, back.copied, back.digest) == (MANY, MANY, there.digest)


def test_a_server_that_stops_answering_mid_migration_is_cut_and_a_rerun_finishes(
        tmp_path: Path, stoppable_pg: StoppableServer) -> None:  # noqa: F811
    source = build_source(tmp_path / "src" / "tiermem.db", FEW)
    schema = fresh_schema()
    stopped: dict[str, float] = {}
    with ExitStack() as server_stopped:  # continued (SIGCONT) when the block ends

        def stop_at(done: int, _total: int) -> None:
            if done == STOP_AT:  # between two conversations: the next one's checkout meets it
                stopped["at"] = time.monotonic()
                server_stopped.enter_context(frozen(stoppable_pg))

        with pytest.raises(StoreStalled):
            migrate_store(source, stoppable_pg.url, tokens=TOKENS, target_schema=schema, progress=stop_at,
                          busy_timeout_ms=BUSY_TIMEOUT_MS, operation_timeout_s=OPERATION_TIMEOUT_S)
        took = time.monotonic() - stopped["at"]
    # cut at the operations' deadline, not the maintenance one (an hour)
    assert OPERATION_TIMEOUT_S <= took < OPERATION_TIMEOUT_S + POOL_CLOSE_S + SLACK_S, took
    assert not verified(stoppable_pg.url, schema)
    # marked unfinished, so a Memory refuses it (tests/test_migrate_store_unfinished.py)
    assert marked(stoppable_pg.url, schema)
    # the server back, a rerun copies the rest and verifies the whole
    again = migrate_store(source, stoppable_pg.url, tokens=TOKENS, target_schema=schema)
    assert (again.resumed, again.conversations, again.copied, again.already_present) == (
        True, FEW, FEW - STOP_AT, STOP_AT)
    assert verified(stoppable_pg.url, schema)
    assert not marked(stoppable_pg.url, schema)

"""An erasure's rewrite of `pg_statistic` does not stall the rest of the database.

The scrub rewrites pg_catalog.pg_statistic after the store's tables (88e46fd), which takes
an ACCESS EXCLUSIVE lock on a catalog every session of the database reads: the planner's
lookup of a table's statistics, in any schema, queues behind the rewrite while it waits
for a reader of it (a monitoring session's open transaction that read pg_stats). In the
tables' VACUUM it waited the store's lock_timeout: another application's fresh query on
its own table took 2.28 s instead of 0.01 s (lock_timeout_ms=3000), the erasure answered
`scrubbed: false` with the warning "the tables were not rewritten", and the whole scrub
stayed owed (the next open rewrote every table again). Now pg_statistic is its own
statement with a wait of its own (STATISTICS_LOCK_TIMEOUT_MS): the other query waits that
long at most, the erasure answers `scrubbed: false` naming pg_statistic (the report, the
warning, the CLI's note), the tables are rewritten and not owed, and only pg_statistic's
rewrite is owed: the next open does it alone.

The embedded PostgreSQL (tests/pg_server.py). Rewritten or not is read from the relations'
file nodes (pg_relation_filenode: VACUUM FULL gives a relation a new one). On the code
before the test fails on the other application's query (held ~STORE_LOCK_TIMEOUT_MS).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from pg_server import fresh_schema, scrub_owed
from psycopg import sql as pgsql

from tiermem.cli import _erasure_out
from tiermem.tiers.models import ErasureReport, Message
from tiermem.tiers.postgres import (
    SCRUB_STATISTICS_KEY,
    STATISTICS_LOCK_TIMEOUT_MS,
    STATISTICS_TABLE,
    PostgresStore,
)
from tiermem.tiers.tokens import BpeTokenCounter

# The store's own lock_timeout: long, so that a rewrite of pg_statistic waiting that long
# (the code before) is told apart from its short wait on a loaded 2-core machine
STORE_LOCK_TIMEOUT_MS = 5000
# what a fresh connection's planning query may take past pg_statistic's short wait: it
# takes ~0.01 s alone; a loaded 2-core machine
QUERY_SLACK_S = 1.0
# the erasure's own work past the short wait (its transaction, the tables' VACUUM FULL and
# ANALYZE), at most, on a loaded 2-core machine: under the store's lock_timeout
ERASURE_SLACK_S = 3.5
TURNS = 12
ORDERS = 5000  # the other application's table: big enough for ANALYZE to sample values
STATUSES = 7


def filenode(url: str, relation: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT pg_relation_filenode(%s::regclass)", (relation,)).fetchone()
    assert row is not None and row[0] is not None, relation
    return int(row[0])


def statistics_owed(url: str, schema: str) -> bool:
    with psycopg.connect(url) as conn:
        return conn.execute(pgsql.SQL("SELECT 1 FROM {}.meta WHERE key = %s").format(pgsql.Identifier(schema)),
                            (SCRUB_STATISTICS_KEY,)).fetchone() is not None


@pytest.fixture
def other_app(pg_url: str) -> Iterator[str]:
    """Another application's analyzed table in its own schema of the same database: a
    fresh connection planning a query on it looks its statistics up in pg_statistic."""
    schema = "app_" + uuid.uuid4().hex[:10]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(pgsql.SQL("CREATE SCHEMA {}").format(pgsql.Identifier(schema)))
        conn.execute(pgsql.SQL("CREATE TABLE {}.orders(id int, status text)").format(pgsql.Identifier(schema)))
        conn.execute(pgsql.SQL("INSERT INTO {}.orders SELECT g, 'st' || (g %% %s) FROM generate_series(1, %s) g")
                     .format(pgsql.Identifier(schema)), (STATUSES, ORDERS))
        conn.execute(pgsql.SQL("ANALYZE {}.orders").format(pgsql.Identifier(schema)))
    try:
        yield schema
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(pgsql.SQL("DROP SCHEMA {} CASCADE").format(pgsql.Identifier(schema)))


def planning_query_s(url: str, schema: str) -> float:
    """One fresh connection's query on the other application's table (its statistics not
    cached in the new backend), timed without the connect."""
    with psycopg.connect(url) as conn:
        began = time.monotonic()
        conn.execute(pgsql.SQL("SELECT count(*) FROM {}.orders WHERE status = 'st3'")
                     .format(pgsql.Identifier(schema))).fetchone()
        return time.monotonic() - began


def test_a_reader_of_pg_stats_holds_the_database_at_most_the_short_wait(
        pg_url: str, counter: BpeTokenCounter, other_app: str, caplog: pytest.LogCaptureFixture,
        capsys: pytest.CaptureFixture[str]) -> None:
    schema = fresh_schema()
    store = PostgresStore(pg_url, tokens=counter, schema=schema, lock_timeout_ms=STORE_LOCK_TIMEOUT_MS)
    monitor = psycopg.connect(pg_url, autocommit=False)
    try:
        for i in range(TURNS):
            store.append("secret", Message(role="user", content=f"secret turn {i}"), namespace="ns")
            store.append("kept", Message(role="user", content=f"kept turn {i}"), namespace="other")
        store.analyze()
        messages_before = filenode(pg_url, f'"{schema}".messages')
        statistics_before = filenode(pg_url, STATISTICS_TABLE)
        assert planning_query_s(pg_url, other_app) < QUERY_SLACK_S  # alone: quick
        # a monitoring session's open transaction that read pg_stats: a lock on pg_statistic
        monitor.execute("SELECT count(*) FROM pg_stats").fetchone()

        done: dict[str, object] = {}

        def erase() -> None:
            began = time.monotonic()
            done["report"] = store.delete_namespace("ns")
            done["took"] = time.monotonic() - began

        with caplog.at_level(logging.WARNING, logger="tiermem.postgres"):
            eraser = threading.Thread(target=erase)
            eraser.start()
            # fresh connections plan queries the whole time the erasure runs: one of them
            # meets the rewrite of pg_statistic waiting for the monitor's lock
            waits = [planning_query_s(pg_url, other_app)]
            while eraser.is_alive():
                waits.append(planning_query_s(pg_url, other_app))
            eraser.join()

        assert max(waits) < STATISTICS_LOCK_TIMEOUT_MS / 1000 + QUERY_SLACK_S, (max(waits), len(waits))
        report = done["report"]
        assert isinstance(report, ErasureReport) and report.conversation_ids == ["secret"]
        took = done["took"]
        assert isinstance(took, float) and took < STATISTICS_LOCK_TIMEOUT_MS / 1000 + ERASURE_SLACK_S, took
        # not scrubbed, and the report says which part: pg_statistic, not the tables
        assert not report.scrubbed
        assert report.not_rewritten.startswith(STATISTICS_TABLE), report.not_rewritten
        assert report.to_json()["not_rewritten"] == report.not_rewritten
        warned = [r.getMessage() for r in caplog.records]
        assert any(f"but not {STATISTICS_TABLE}" in w for w in warned), warned
        assert not any("tables were not rewritten" in w for w in warned), warned
        # the operator's CLI note names it too
        _erasure_out(report, "erased", False)
        note = capsys.readouterr().err
        assert STATISTICS_TABLE in note and "did not rewrite their storage" not in note, note
        # the tables were rewritten and are not owed again; pg_statistic's rewrite alone is
        assert filenode(pg_url, f'"{schema}".messages') != messages_before
        assert filenode(pg_url, STATISTICS_TABLE) == statistics_before
        assert not scrub_owed(pg_url, schema)
        assert statistics_owed(pg_url, schema)
        messages_scrubbed = filenode(pg_url, f'"{schema}".messages')

        # the monitor gone, the next open rewrites pg_statistic alone: not the tables again
        monitor.rollback()
        store.close()
        store = PostgresStore(pg_url, tokens=counter, schema=schema, lock_timeout_ms=STORE_LOCK_TIMEOUT_MS)
        assert filenode(pg_url, STATISTICS_TABLE) != statistics_before
        assert filenode(pg_url, f'"{schema}".messages') == messages_scrubbed
        assert not statistics_owed(pg_url, schema) and not scrub_owed(pg_url, schema)
        assert len(store.history(store.key_of("other", "kept") or "")) == TURNS
    finally:
        monitor.close()
        store.close()


def test_the_owed_rewrite_of_pg_statistic_waits_at_most_the_short_wait_at_an_open(
        pg_url: str, counter: BpeTokenCounter, caplog: pytest.LogCaptureFixture) -> None:
    """An open that finds pg_statistic's rewrite owed while a reader still holds it: it
    gives up after the short wait, the store opens, and it stays owed (then done by the
    next erasure's scrub)."""
    schema = fresh_schema()
    store = PostgresStore(pg_url, tokens=counter, schema=schema, lock_timeout_ms=STORE_LOCK_TIMEOUT_MS)
    monitor = psycopg.connect(pg_url, autocommit=False)
    try:
        for name in ("secret", "later"):
            store.append(name, Message(role="user", content=f"{name} turn"), namespace=name)
        store.analyze()
        monitor.execute("SELECT count(*) FROM pg_stats").fetchone()
        assert not store.delete_namespace("secret").scrubbed
        assert statistics_owed(pg_url, schema)
        store.close()
        began = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="tiermem.postgres"):
            store = PostgresStore(pg_url, tokens=counter, schema=schema, lock_timeout_ms=STORE_LOCK_TIMEOUT_MS)
        assert time.monotonic() - began < STATISTICS_LOCK_TIMEOUT_MS / 1000 + ERASURE_SLACK_S
        assert any(f"{STATISTICS_TABLE} is still not rewritten" in r.getMessage() for r in caplog.records)
        assert statistics_owed(pg_url, schema) and not scrub_owed(pg_url, schema)
        monitor.rollback()
        statistics_before = filenode(pg_url, STATISTICS_TABLE)
        report = store.delete_namespace("later")  # its scrub rewrites pg_statistic too
        assert report.scrubbed and report.not_rewritten == ""
        assert filenode(pg_url, STATISTICS_TABLE) != statistics_before
        assert not statistics_owed(pg_url, schema)
    finally:
        monitor.close()
        store.close()

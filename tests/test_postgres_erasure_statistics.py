"""An erasure's scrub on PostgreSQL leaves no erased byte in `pg_statistic` either: the
planner's column statistics, which ANALYZE fills with sampled values (a text column's
histogram bounds and most common values, a tsvector's most common lexemes).

The rewrite (`VACUUM (FULL, ANALYZE)` of the store's tables) analyzed the tables again,
which UPDATEs their rows of `pg_statistic`: the old rows, sampled before the erasure (by
an operator's or autovacuum's ANALYZE, or the scrub of an earlier erasure), stayed in the
catalog's pages as dead tuples, the erased text in them, and the erasure answered
`scrubbed: true` (a reviewer found a canary 72 times in pg_statistic's file after DELETE
/v1/namespace). Now the scrub rewrites pg_statistic too, after the ANALYZE; a role that
may not (neither superuser nor the database's owner, no MAINTAIN on it) gets `scrubbed:
false` and a warning saying why.

The embedded PostgreSQL (tests/pg_server.py): the canary is looked for in the bytes of
pg_statistic's own files (its heap and TOAST relations, after a CHECKPOINT). On the code
before every case of the first test fails (the canary in pg_statistic's file), and the
second fails on `scrubbed` (true).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from pg_server import fresh_schema, relation_files, scrub_owed
from psycopg import sql as pgsql
from psycopg.conninfo import make_conninfo

from tiermem.tiers.models import ErasureReport, Message
from tiermem.tiers.postgres import STATISTICS_LOCK_TIMEOUT_MS, STATISTICS_TABLE, PostgresStore
from tiermem.tiers.tokens import BpeTokenCounter

# short, distinct texts: each table's statistics row stays small enough to be stored as
# it is (not compressed), the sampled values readable in the catalog's pages
TURNS = 12
CANARY_TURNS = (2, 5)  # the erased conversation's turns that hold the canary
# Conversations erased before the one under test: the scrub of each ran ANALYZE while the
# canary's rows were there, each time leaving old rows of pg_statistic holding it. Where the
# old rows' bytes end up (a dead tuple, the free space of a pruned page, or overwritten by
# a tuple the pruning moved) depends on the catalog's page layout, shared with every other
# schema of the database: three rounds of them (as the reviewer's three erasures) leave
# some in the file before the fix.
EARLIER_ERASURES = 3
# the store's lock_timeout in the lock test: the rewrite of pg_statistic waits for another
# session's lock on it its own, shorter STATISTICS_LOCK_TIMEOUT_MS instead
# (tests/test_postgres_erasure_statistics_lock.py)
LOCK_TIMEOUT_MS = 1000
# the erasure's own transaction and round trips past the lock wait, at most, on a loaded
# 2-core machine
SLACK_S = 4.0

def statistics_files(url: str) -> list[Path]:
    """The files of pg_statistic now (its heap and TOAST relations, each segment and
    fork), after a CHECKPOINT wrote its dirty pages to them."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
        rels = conn.execute(
            "SELECT pg_relation_filepath(c.oid), pg_relation_filepath(c.reltoastrelid) FROM pg_class c "
            "WHERE c.oid = 'pg_catalog.pg_statistic'::regclass").fetchone()
    assert rels is not None and all(rels), rels
    found = relation_files(url, list(rels))
    assert any(p.name == Path(rels[0]).name for p in found), rels
    return found


def statistics_hold(url: str, needle: str) -> bool:
    return any(needle.encode() in p.read_bytes() for p in statistics_files(url))


def plant(store: PostgresStore, canary: str, ns: str, conv: str) -> None:
    for i in range(TURNS):
        text = f"{conv} {i} code {canary}" if i in CANARY_TURNS else f"{conv} {i}"
        store.append(conv, Message(role="user", content=text), namespace=ns)


@pytest.fixture
def store(pg_url: str, counter: BpeTokenCounter) -> Iterator[PostgresStore]:
    opened = PostgresStore(pg_url, tokens=counter, schema=fresh_schema())
    try:
        yield opened
    finally:
        opened.close()


def canary_word() -> str:
    # one word: the full-text parser keeps it as one lexeme (the tsvector's statistics
    # hold these bytes too); unique, so no other test's rows match it
    return f"zq7stat{uuid.uuid4().hex}kumquat"


# the erasure of conversation "secret" in namespace "ns" ("kept" in "other" stays)
ERASURES: dict[str, Callable[[PostgresStore], ErasureReport]] = {
    # on request, one conversation
    "delete_conversation": lambda s: s.delete_conversation(s.key_of("ns", "secret") or ""),
    # on request, the user's namespace
    "delete_namespace": lambda s: s.delete_namespace("ns"),
    # retention by age (every conversation of the namespace is older than this)
    "prune": lambda s: s.prune(2**40, namespace="ns"),
}


@pytest.mark.parametrize("erasure", list(ERASURES))
def test_no_erased_byte_stays_in_pg_statistic(store: PostgresStore, pg_url: str,
                                              erasure: str) -> None:
    canary = canary_word()
    plant(store, canary, "ns", "secret")
    plant(store, "still here", "other", "kept")
    for i in range(EARLIER_ERASURES):
        plant(store, "gone too", "gone", f"earlier-{i}")
    store.analyze()  # an operator's (or autovacuum's) ANALYZE: the canary sampled
    for i in range(EARLIER_ERASURES):  # and again by each of their scrubs
        assert store.delete_conversation(store.key_of("gone", f"earlier-{i}") or "").scrubbed
    assert statistics_hold(pg_url, canary)  # the probe finds it before

    report = ERASURES[erasure](store)

    assert report.conversation_ids == ["secret"] and report.scrubbed
    assert not statistics_hold(pg_url, canary)
    with psycopg.connect(pg_url) as conn:
        # the planner's statistics are there again, sampled from the rows left (of a column
        # queries filter on: the message bodies are never sampled, m013_no_sampled_text)
        common = conn.execute("SELECT most_common_vals::text FROM pg_stats WHERE schemaname = %s "
                              "AND tablename = 'messages' AND attname = 'conversation_id'", (store.schema,)).fetchone()
    assert common is not None and "kept" in common[0] and "secret" not in common[0]
    assert len(store.history(store.key_of("other", "kept") or "")) == TURNS


def test_the_rewrite_of_pg_statistic_waits_for_its_readers_at_most_its_short_wait(
        pg_url: str, counter: BpeTokenCounter, caplog: pytest.LogCaptureFixture) -> None:
    """Another session reading pg_statistic in an open transaction (a monitoring query
    over pg_stats) holds a lock its rewrite waits for: at most STATISTICS_LOCK_TIMEOUT_MS,
    then `scrubbed: false` naming it, the tables' scrub done and its rewrite alone owed,
    done by reclaim() once the reader is gone."""
    schema = fresh_schema()
    store = PostgresStore(pg_url, tokens=counter, schema=schema, lock_timeout_ms=LOCK_TIMEOUT_MS)
    reader = psycopg.connect(pg_url, autocommit=False)
    try:
        canary = canary_word()
        plant(store, canary, "ns", "secret")
        plant(store, "still here", "other", "kept")
        store.analyze()
        reader.execute("SELECT count(*) FROM pg_catalog.pg_statistic").fetchone()
        began = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="tiermem.postgres"):
            report = store.delete_namespace("ns")
        took = time.monotonic() - began
        assert took < STATISTICS_LOCK_TIMEOUT_MS / 1000 + SLACK_S, took
        assert report.conversation_ids == ["secret"] and not report.scrubbed
        assert report.not_rewritten.startswith(STATISTICS_TABLE), report.not_rewritten
        assert any(f"but not {STATISTICS_TABLE}" in r.getMessage() for r in caplog.records)
        assert not scrub_owed(pg_url, schema)  # the tables were rewritten
        reader.rollback()
        assert store.reclaim() is True  # the reader gone, the scrub is done
        assert not scrub_owed(pg_url, schema)
        assert not statistics_hold(pg_url, canary)
    finally:
        reader.close()
        store.close()


@pytest.fixture
def unprivileged_url(pg_url: str) -> Iterator[str]:
    """A URL of a login role that is neither superuser nor the database's owner and has no
    MAINTAIN on pg_statistic (it may create its schema), dropped with what it owns at the end."""
    role = "tm_" + uuid.uuid4().hex[:12]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(pgsql.SQL("CREATE ROLE {} LOGIN").format(pgsql.Identifier(role)))
        conn.execute(pgsql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(
            pgsql.Identifier(conn.info.dbname), pgsql.Identifier(role)))
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")  # the superuser's to create
    try:
        yield make_conninfo(pg_url, user=role)
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(pgsql.SQL("DROP OWNED BY {} CASCADE").format(pgsql.Identifier(role)))
            conn.execute(pgsql.SQL("DROP ROLE {}").format(pgsql.Identifier(role)))


def test_a_role_that_may_not_rewrite_pg_statistic_is_told_not_scrubbed(
        unprivileged_url: str, pg_url: str, counter: BpeTokenCounter,
        caplog: pytest.LogCaptureFixture) -> None:
    schema = fresh_schema()
    store = PostgresStore(unprivileged_url, tokens=counter, schema=schema)
    try:
        canary = canary_word()
        plant(store, canary, "ns", "secret")
        plant(store, "still here", "other", "kept")
        store.analyze()
        with caplog.at_level(logging.WARNING, logger="tiermem.postgres"):
            report = store.delete_namespace("ns")
        assert report.conversation_ids == ["secret"]
        assert not report.scrubbed  # the old statistics rows may hold the erased text
        warned = [r.getMessage() for r in caplog.records if "pg_statistic" in r.getMessage()]
        assert warned and "VACUUM FULL pg_catalog.pg_statistic" in warned[0], warned
        # the store's own tables were rewritten all the same, and nothing is left owed:
        # retrying at each open cannot give the role the right
        assert not scrub_owed(pg_url, schema)
        assert store.reclaim(full=True) is False  # an operator's reclaim() is told the same
        # what the warning asks for, run by a role that may: then no byte is left
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("VACUUM FULL pg_catalog.pg_statistic")
        assert not statistics_hold(pg_url, canary)
    finally:
        store.close()

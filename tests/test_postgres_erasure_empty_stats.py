"""An erasure that leaves a table empty leaves none of the erased text in the LIVE rows of
`pg_statistic` (readable by anyone with the table's SELECT in `pg_stats`), and ANALYZE
never samples what users wrote (m013_no_sampled_text).

ANALYZE writes a table's statistics only when its sample holds a row, and only for the
columns it samples: the scrub's `VACUUM (FULL, ANALYZE)` of a table the erasure emptied
(the only namespace deleted, everything pruned) replaced nothing, so the most common
values and histogram bounds sampled before (the messages' words, session ids, metadata,
the conversation's id and namespace, the tsvector's lexemes) stayed live, were copied into
pg_statistic's new file by its rewrite, and the erasure answered `scrubbed: true`. On the
code before, every case of the first test fails (the canary in pg_stats after the
erasure), and the second and third fail (the message bodies sampled; m013 missing).

The embedded PostgreSQL (tests/pg_server.py), its superuser role.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import psycopg
import pytest
from pg_server import fresh_schema

from tiermem.tiers.models import ErasureReport, Message
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.tokens import BpeTokenCounter

# enough rows of a few distinct values that ANALYZE keeps most common values and a
# histogram for each column (one row gives neither)
TURNS = 12
DISTINCT_SESSIONS = 3
# the text columns that hold what users wrote (or what was made of it) and no query
# compares by value: never sampled (tiers.postgres UNSAMPLED_COLUMNS)
USER_TEXT_COLUMNS = (("messages", "body"), ("messages", "metadata"), ("messages_fts", "text"),
                     ("checkpoints", "summary"), ("checkpoints", "metadata"), ("plans", "plan"),
                     ("summaries", "body"), ("summary_errors", "error"), ("turns", "label_reason"))
# every sampled value pg_stats shows, as text: a column's most common values, histogram
# bounds, and a tsvector's most common lexemes
SAMPLED_SQL = ("SELECT tablename, attname, concat_ws(' ', most_common_vals::text, histogram_bounds::text, "
               "most_common_elems::text) FROM pg_stats WHERE schemaname = %s")


def canary_word() -> str:
    # one word, so the full-text parser keeps it as one lexeme; unique to this test
    return f"zq7empty{uuid.uuid4().hex}kumquat"


def plant(store: PostgresStore, canary: str, ns: str, conv: str) -> None:
    for i in range(TURNS):
        store.append(conv, Message(role="user", content=f"{canary} said {i % 4}",
                                   session_id=f"{canary}-s{i % DISTINCT_SESSIONS}", metadata={"who": canary}),
                     namespace=ns)


def sampled(url: str, schema: str) -> list[tuple[str, str, str]]:
    with psycopg.connect(url) as conn:
        return [(r[0], r[1], r[2]) for r in conn.execute(SAMPLED_SQL, (schema,)).fetchall()]


@pytest.fixture
def store(pg_url: str, counter: BpeTokenCounter) -> Iterator[PostgresStore]:
    opened = PostgresStore(pg_url, tokens=counter, schema=fresh_schema())
    try:
        yield opened
    finally:
        opened.close()


# every conversation of the store erased, so each table that held them is left empty
ERASE_ALL: dict[str, Callable[[PostgresStore, str], ErasureReport]] = {
    # on request, the only namespace (its conversations named after the canary)
    "delete_namespace": lambda s, ns: s.delete_namespace(ns),
    # on request, the only conversation
    "delete_conversation": lambda s, ns: s.delete_conversation(s.list_conversations(ns)[0]),
    # retention by age, every namespace
    "prune": lambda s, ns: s.prune(2**40, all_namespaces=True),
}


@pytest.mark.parametrize("erasure", list(ERASE_ALL))
def test_no_erased_text_stays_in_live_statistics_of_an_emptied_table(
        store: PostgresStore, pg_url: str, erasure: str) -> None:
    canary = canary_word()
    plant(store, canary, f"ns-{canary}", f"conv-{canary}")
    store.analyze()  # an operator's (or autovacuum's) ANALYZE: the canary sampled
    before = {(t, a) for t, a, values in sampled(pg_url, store.schema) if canary in values}
    # the probe sees it before: the identifiers, and the tsvector's lexemes
    assert {("messages", "conversation_id"), ("messages_fts", "namespace"), ("messages_fts", "tsv"),
            ("turns", "session_id")} <= before

    report = ERASE_ALL[erasure](store, f"ns-{canary}")

    assert report.conversation_ids == [f"conv-{canary}"] and report.scrubbed
    assert [(t, a) for t, a, values in sampled(pg_url, store.schema) if canary in values] == []


def test_analyze_never_samples_what_users_wrote(store: PostgresStore, pg_url: str) -> None:
    canary = canary_word()
    plant(store, canary, "ns", "conv")
    store.analyze()
    columns = {(t, a): values for t, a, values in sampled(pg_url, store.schema)}
    assert [c for c in USER_TEXT_COLUMNS if c in columns] == []
    # the columns queries filter on keep their statistics, sampled from the rows there
    assert canary in columns[("turns", "session_id")] and canary in columns[("messages_fts", "tsv")]


def test_the_migration_clears_what_was_sampled_before(pg_url: str, counter: BpeTokenCounter) -> None:
    """A schema analyzed before m013 (its text columns sampled) keeps none of it after."""
    schema = fresh_schema()
    canary = canary_word()
    first = PostgresStore(pg_url, tokens=counter, schema=schema)
    try:
        plant(first, canary, "ns", "conv")
        with psycopg.connect(pg_url, autocommit=True) as conn:  # fresh_schema: a plain identifier
            # as before m013: the columns sampled, and the step not recorded
            for table, column in USER_TEXT_COLUMNS:
                conn.execute(f'ALTER TABLE {schema}."{table}" ALTER COLUMN "{column}" SET STATISTICS -1')
            conn.execute(f"ANALYZE {schema}.messages")
            # a store from before m013: its row and every later step's (the runner applies
            # the steps past the highest recorded version; m014 on are re-runnable)
            conn.execute(f"DELETE FROM {schema}.schema_migrations WHERE version >= (SELECT version FROM "
                         f"{schema}.schema_migrations WHERE name = 'm013_no_sampled_text')")
        assert any(t == "messages" and a == "body" and canary in v for t, a, v in sampled(pg_url, schema))
    finally:
        first.close()

    again = PostgresStore(pg_url, tokens=counter, schema=schema)  # migrates: m013
    try:
        # recorded again (not the last step: later migrations exist, m014 on)
        assert "m013_no_sampled_text" in [name for _version, name in again.migrations()]
        left = {(t, a) for t, a, _ in sampled(pg_url, schema)}
        assert [c for c in USER_TEXT_COLUMNS if c in left] == []
        assert ("messages", "conversation_id") in left  # the others kept
    finally:
        again.close()

"""An erasure on PostgreSQL does not answer `scrubbed: true` while a snapshot older than it
is open: the rewrite (`VACUUM (FULL, ANALYZE)`) copies into the new files every deleted
row such a snapshot may still see, so the erased text stays in the data files.

Before, the scrub answered `scrubbed: true` and cleared its marker with the canary still in
the schema's relation files (every case of the first test failed on `scrubbed`). Now the
scrub asks the server which snapshots hold the erased rows (tiers.postgres
SNAPSHOT_HOLDERS_SQL): one is there, and the erasure answers `scrubbed: false`, logs what
holds it (the backend's pid), and the scrub stays owed; once that transaction has ended,
the next open or erasure rewrites again and no byte is left.

The holders do not read the store's own tables: one that did would hold a lock the rewrite
waits for, which the scrub's lock timeout already answers (test_postgres_scrub_lock_wait_*).
Real embedded PostgreSQL (tests/pg_server.py); the bytes are read from the relation files
after a CHECKPOINT, as tests/test_postgres_erasure_statistics.py reads pg_statistic's.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from pg_server import SNAPSHOT_HOLDERS, fresh_schema, relation_files, scrub_owed

from tiermem.tiers.models import Message
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.tokens import BpeTokenCounter

TURNS = 6
CANARY_TURNS = (1, 4)  # the erased conversation's turns that hold the canary
# the store's lock_timeout: no holder here takes a lock on its tables, so no case waits
LOCK_TIMEOUT_MS = 1000


def schema_files(url: str, schema: str) -> list[Path]:
    """The files now (after a CHECKPOINT wrote the dirty pages) of every relation of the
    schema (tables, indexes, their TOAST tables) and of pg_statistic, each segment and fork."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
        rels = [r[0] for r in conn.execute(
            "SELECT pg_relation_filepath(c.oid) FROM pg_class c "
            "WHERE c.relnamespace = %s::regnamespace OR c.oid = 'pg_catalog.pg_statistic'::regclass "
            "OR c.oid IN (SELECT reltoastrelid FROM pg_class WHERE relnamespace = %s::regnamespace "
            "OR oid = 'pg_catalog.pg_statistic'::regclass)", (schema, schema)).fetchall() if r[0]]
    found = relation_files(url, rels)
    assert len(found) >= len(rels) > 0, rels
    return found


def files_hold(url: str, schema: str, needle: str) -> bool:
    return any(needle.encode() in p.read_bytes() for p in schema_files(url, schema))


def reopen(url: str, counter: BpeTokenCounter, schema: str, store: PostgresStore) -> None:
    """The next open of the store: the scrub it finds owed is run there."""
    PostgresStore(url, tokens=counter, schema=schema, lock_timeout_ms=LOCK_TIMEOUT_MS).close()


def erase_again(url: str, counter: BpeTokenCounter, schema: str, store: PostgresStore) -> None:
    """The next erasure (of the conversation kept): its scrub rewrites every table again."""
    assert store.delete_conversation(store.key_of("other", "kept") or "").scrubbed


# what runs the scrub owed once the holder has ended
THEN: dict[str, Callable[[str, BpeTokenCounter, str, PostgresStore], None]] = {
    "next_open": reopen,  # the open that finds the marker
    "next_erasure": erase_again,  # another erasure's own scrub
}


@pytest.fixture
def schemas(pg_url: str, counter: BpeTokenCounter) -> Iterator[tuple[PostgresStore, str]]:
    """The store under test on a fresh schema, and another store's schema (the reports' one)."""
    other = PostgresStore(pg_url, tokens=counter, schema=fresh_schema())
    try:
        other.append("report", Message(role="user", content="not erased"), namespace="r")
    finally:
        other.close()
    store = PostgresStore(pg_url, tokens=counter, schema=fresh_schema(), lock_timeout_ms=LOCK_TIMEOUT_MS)
    try:
        yield store, other.schema
    finally:
        store.close()


def plant(store: PostgresStore, canary: str) -> None:
    for i in range(TURNS):
        text = f"secret {i} code {canary}" if i in CANARY_TURNS else f"secret {i}"
        store.append("secret", Message(role="user", content=text), namespace="ns")
        store.append("kept", Message(role="user", content=f"kept {i}"), namespace="other")
    store.analyze()  # the planner's statistics sampled the canary too (pg_statistic's files)


def canary_word() -> str:
    # one word: one lexeme in the GIN index too; unique, so no other test's rows match it
    return f"zq7snap{uuid.uuid4().hex}kumquat"


@pytest.mark.parametrize("then", list(THEN))
@pytest.mark.parametrize("holder", list(SNAPSHOT_HOLDERS))
def test_an_open_snapshot_older_than_the_erasure_is_not_scrubbed(
        schemas: tuple[PostgresStore, str], pg_url: str, counter: BpeTokenCounter,
        caplog: pytest.LogCaptureFixture, holder: str, then: str) -> None:
    store, other_schema = schemas
    canary = canary_word()
    plant(store, canary)
    with SNAPSHOT_HOLDERS[holder](pg_url, other_schema) as held:
        with caplog.at_level(logging.WARNING, logger="tiermem.postgres"):
            report = store.delete_namespace("ns")
        assert report.conversation_ids == ["secret"]
        # the premise: the rewrite kept the rows the open snapshot may see
        assert files_hold(pg_url, store.schema, canary)
        # so the erasure says so, and the scrub stays owed
        assert not report.scrubbed
        assert scrub_owed(pg_url, store.schema)
        warned = [r.getMessage() for r in caplog.records if "snapshot older than the erasure" in r.getMessage()]
        assert len(warned) == 1 and f"backend pid {held.info.backend_pid}" in warned[0], warned
        assert canary not in warned[0]
    # the holder's transaction has ended: the next scrub leaves no byte
    THEN[then](pg_url, counter, store.schema, store)
    assert not scrub_owed(pg_url, store.schema)
    assert not files_hold(pg_url, store.schema, canary)
    if then == "next_open":  # the conversation kept is all there
        assert len(store.history(store.key_of("other", "kept") or "")) == TURNS


def test_with_no_older_snapshot_open_the_erasure_is_scrubbed(
        schemas: tuple[PostgresStore, str], pg_url: str) -> None:
    """The check does not say `false` for nothing: no holder, the bytes gone, `true`."""
    store, _ = schemas
    canary = canary_word()
    plant(store, canary)
    report = store.delete_namespace("ns")
    assert report.conversation_ids == ["secret"] and report.scrubbed
    assert not scrub_owed(pg_url, store.schema)
    assert not files_hold(pg_url, store.schema, canary)

"""An erasure's scrub owed because a snapshot older than the erasure is open is not retried
as a rewrite of the whole store at every open while that snapshot lasts.

Before (467769a), the scrub asked for such snapshots only after its rewrite: each open of
the store found the marker, ran VACUUM (FULL, ANALYZE) of every table and pg_statistic
(ACCESS EXCLUSIVE on each; 0.56-1.02 s an open at 30,000 messages instead of 0.02 s),
found the holder again and kept the marker, for the next open to do it all again. And the
report's `not_rewritten` was empty, so the CLI said "the store did not rewrite their
storage", not why. Now the scrub asks first (tiers.postgres `_reclaim`, holders_first):
while one is open nothing is rewritten (the relation's filenode stays), the scrub stays
owed, the holders are logged at WARNING once and at DEBUG after that, and the report
names them; once the holder has ended, the next open rewrites and clears the marker.

Real embedded PostgreSQL (tests/pg_server.py); the holders read another store's schema
only, as in tests/test_postgres_erasure_open_snapshot.py.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import psycopg
import pytest
from pg_server import SNAPSHOT_HOLDERS, fresh_schema, scrub_owed

from tiermem.cli import _erasure_out
from tiermem.tiers.models import Message
from tiermem.tiers.postgres import SNAPSHOT_HELD_NOTE, PostgresStore
from tiermem.tiers.tokens import BpeTokenCounter

TURNS = 4
LOCK_TIMEOUT_MS = 1000  # the store's: no holder here locks its tables
REOPENS = 2  # opens while the holder lasts: each one finds the scrub owed
HELD_LINE = "snapshot older than the erasure"


def filenode(url: str, relation: str) -> int:
    """The relation's file number: a rewrite (VACUUM FULL) gives it a new one."""
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT pg_relation_filenode(%s::regclass)", (relation,)).fetchone()
    assert row is not None and row[0] is not None, relation
    return int(row[0])


def reopen(url: str, counter: BpeTokenCounter, schema: str) -> None:
    """The next open of the store (another process's, or a restart): it finds the marker."""
    PostgresStore(url, tokens=counter, schema=schema, lock_timeout_ms=LOCK_TIMEOUT_MS).close()


@pytest.fixture
def schemas(pg_url: str, counter: BpeTokenCounter) -> Iterator[tuple[PostgresStore, str]]:
    """The store under test on a fresh schema, and another store's schema (the holders')."""
    other = PostgresStore(pg_url, tokens=counter, schema=fresh_schema())
    try:
        other.append("report", Message(role="user", content="not erased"), namespace="r")
    finally:
        other.close()
    store = PostgresStore(pg_url, tokens=counter, schema=fresh_schema(), lock_timeout_ms=LOCK_TIMEOUT_MS)
    try:
        for i in range(TURNS):
            store.append("secret", Message(role="user", content=f"secret {i}"), namespace="ns")
            store.append("kept", Message(role="user", content=f"kept {i}"), namespace="other")
        yield store, other.schema
    finally:
        store.close()


@pytest.mark.parametrize("holder", list(SNAPSHOT_HOLDERS))
def test_an_owed_scrub_held_by_a_snapshot_is_not_rewritten_at_each_open(
        schemas: tuple[PostgresStore, str], pg_url: str, counter: BpeTokenCounter,
        caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str], holder: str) -> None:
    store, other_schema = schemas
    messages = f'"{store.schema}".messages'
    with SNAPSHOT_HOLDERS[holder](pg_url, other_schema) as held:
        before = filenode(pg_url, messages)
        with caplog.at_level(logging.DEBUG, logger="tiermem.postgres"):
            report = store.delete_namespace("ns")
            for _ in range(REOPENS):
                reopen(pg_url, counter, store.schema)
        # not rewritten, by the erasure nor by any open, and still owed
        assert filenode(pg_url, messages) == before
        assert not report.scrubbed and scrub_owed(pg_url, store.schema)
        # the report names the cause and the holder, and the CLI's note says so
        pid = f"backend pid {held.info.backend_pid}"
        assert report.not_rewritten == SNAPSHOT_HELD_NOTE.format(holders=pid), report.not_rewritten
        _erasure_out(report, "erased", False)
        note = capsys.readouterr().err
        assert HELD_LINE in note and pid in note and "did not rewrite their storage" not in note, note
        # logged at WARNING by the erasure, at DEBUG by each open finding the same holder
        logged = [r for r in caplog.records if HELD_LINE in r.getMessage()]
        assert [r.levelno for r in logged] == [logging.WARNING] + [logging.DEBUG] * REOPENS, \
            [(r.levelname, r.getMessage()) for r in logged]
        assert all(pid in r.getMessage() and "tables were not rewritten" in r.getMessage() for r in logged)
    # the holder has ended: the next open rewrites, and the scrub is owed no more
    reopen(pg_url, counter, store.schema)
    assert filenode(pg_url, messages) != before
    assert not scrub_owed(pg_url, store.schema)
    assert len(store.history(store.key_of("other", "kept") or "")) == TURNS

"""A refused `migrate-store` stays refused when removing what it created fails.

The run refuses before writing (here: a source row PostgreSQL text cannot hold) and drops
the target schema it created. When that drop failed, its error replaced the
MigrationRefused: the user saw a database error about a DROP instead of why the copy was
refused and what to do. Now the refusal is raised, and the cleanup's failure is logged
and noted on it, naming the target to check.

The drop fails for real: an event trigger on the real PostgreSQL refuses the drop of this
test's schema (`sql_drop` runs inside the DROP's transaction, so raising there undoes it).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from pg_server import fresh_schema

from tiermem.tiers.cold import ColdStore
from tiermem.tiers.errors import MigrationRefused
from tiermem.tiers.migrate_store import migrate_store
from tiermem.tiers.models import Message
from tiermem.tiers.schema import sqlite3
from tiermem.tiers.tokens import BpeTokenCounter

KEPT_BY = "the test keeps this schema"  # the event trigger's error


def nul_source(path: Path, counter: BpeTokenCounter) -> Path:
    """A SQLite log with a message body holding a raw NUL (SQLite stores it, PostgreSQL
    text cannot): migrate-store refuses it, after creating the target schema."""
    store = ColdStore(path, tokens=counter)
    try:
        store.append("x", Message(role="user", content="hello"), namespace="ns")
        key = store.key_of("ns", "x")
    finally:
        store.close()
    conn = sqlite3.connect(str(path), isolation_level=None)
    try:
        conn.execute("INSERT INTO messages(conversation_id, position, id, role, body, created_at) "
                     "VALUES (?, 1, 99999, 'user', 'raw' || char(0) || 'nul', 0)", (key,))
    finally:
        conn.close()
    return path


@pytest.fixture
def undroppable(pg_url: str) -> Iterator[str]:
    """A schema name whose DROP the server refuses (an event trigger), removed at the end."""
    schema = fresh_schema()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"""CREATE FUNCTION public.keep_{schema}() RETURNS event_trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF EXISTS (SELECT 1 FROM pg_event_trigger_dropped_objects()
                           WHERE object_type = 'schema' AND object_name = '{schema}') THEN
                    RAISE EXCEPTION '{KEPT_BY}';
                END IF;
            END $$""")
        conn.execute(f"CREATE EVENT TRIGGER keep_{schema} ON sql_drop EXECUTE FUNCTION public.keep_{schema}()")
    try:
        yield schema
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"DROP EVENT TRIGGER keep_{schema}")
            conn.execute(f"DROP FUNCTION public.keep_{schema}()")
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_a_failed_cleanup_keeps_the_refusal_as_the_error(tmp_path: Path, pg_url: str, undroppable: str,
                                                         counter: BpeTokenCounter,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    source = nul_source(tmp_path / "src.db", counter)
    with caplog.at_level(logging.WARNING, logger="tiermem.migrate_store"), \
            pytest.raises(MigrationRefused, match="cannot hold") as err:
        migrate_store(source, pg_url, tokens=counter, target_schema=undroppable)
    # the cleanup's failure is not lost: noted on the refusal and logged, naming the target
    notes = " ".join(getattr(err.value, "__notes__", []))
    assert "cleaning up the target failed" in notes and KEPT_BY in notes and undroppable in notes
    assert any(KEPT_BY in r.getMessage() and undroppable in r.getMessage() for r in caplog.records)

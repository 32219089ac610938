"""PostgreSQL's half of test_old_erasure_rows_trigger: an older tiermem still running
erases a conversation with its own list of tables. idempotency_keys went by its foreign
key (ON DELETE CASCADE: why the reviewer found PostgreSQL clean), but view_claims,
view_failures and supersession_rechecks have none, and 98529cc's erasure did not name
them: m017's trigger deletes their rows, and the upgrade deletes those already left.
The old erasure is the statements 98529cc's ran (CI may have no old commit to run)."""

from __future__ import annotations

import hashlib

import psycopg
from pg_server import fresh_schema

from tiermem.tiers.models import Message
from tiermem.tiers.postgres import MIGRATIONS, PostgresStore
from tiermem.tiers.tokens import BpeTokenCounter

# 98529cc's tiers/postgres.py CONVERSATION_TABLES: the tables its erasure knew
OLD_CONVERSATION_TABLES = ("turns", "messages_fts", "messages_vec", "checkpoints", "pins", "plans", "summaries",
                           "summary_errors", "statement_supersessions")
NEWER_TABLES = ("view_claims", "idempotency_keys", "view_failures", "supersession_rechecks")
VERSION_BEFORE_FIX = [m.__name__ for m in MIGRATIONS].index("m016_supersession_rechecks") + 1
COPIED_DIGEST = "migrated_digest:"


def _keyed(url: str, schema: str, counter: BpeTokenCounter, name: str) -> str:
    store = PostgresStore(url, tokens=counter, schema=schema)
    try:
        key = store.append_batch(name, [Message(role="user", content="Kumquat-secret-42 is my bank PIN")],
                                 idempotency_key="pay-777", fingerprint=hashlib.sha256(b"request").digest()).key
    finally:
        store.close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        conn.execute("INSERT INTO view_claims(conversation_id, kind, key, holder, expires_at) "
                     "VALUES (%s, 'summary', 'all', 'proc-1', 9e9)", (key,))
        conn.execute("INSERT INTO view_failures(conversation_id, kind, key, failures, first_at, retry_at) "
                     "VALUES (%s, 'summary', 'all', 2, 1.0, 2.0)", (key,))
        conn.execute("INSERT INTO supersession_rechecks(conversation_id, position) VALUES (%s, 1)", (key,))
        conn.execute("INSERT INTO meta(key, value) VALUES (%s, 'digest')", (COPIED_DIGEST + key,))
    return key


def _old_erasure(url: str, schema: str, key: str) -> None:
    with psycopg.connect(url) as conn:  # one transaction, as 98529cc's
        conn.execute(f'SET search_path TO "{schema}"')
        for table in OLD_CONVERSATION_TABLES:
            conn.execute(f"DELETE FROM {table} WHERE conversation_id = %s", (key,))
        conn.execute("SET LOCAL tiermem.retention = 'on'")  # (its guard for deleting messages)
        conn.execute("DELETE FROM messages WHERE conversation_id = %s", (key,))
        conn.execute("DELETE FROM conversations WHERE id = %s", (key,))


def _rows(url: str, schema: str, key: str) -> dict[str, int]:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        out = {t: conn.execute(f"SELECT COUNT(*) FROM {t} WHERE conversation_id = %s", (key,)).fetchone()[0]
               for t in NEWER_TABLES}
        out["meta"] = conn.execute("SELECT COUNT(*) FROM meta WHERE key = %s", (COPIED_DIGEST + key,)).fetchone()[0]
    return out


def test_an_older_processs_erasure_deletes_the_rows_of_newer_tables(pg_url: str, counter: BpeTokenCounter) -> None:
    schema = fresh_schema()
    key = _keyed(pg_url, schema, counter, "paid")
    other = _keyed(pg_url, schema, counter, "kept")
    _old_erasure(pg_url, schema, key)
    assert _rows(pg_url, schema, key) == dict.fromkeys((*NEWER_TABLES, "meta"), 0)
    assert _rows(pg_url, schema, other) == dict.fromkeys((*NEWER_TABLES, "meta"), 1)


def test_the_upgrade_deletes_rows_an_older_erasure_left(pg_url: str, counter: BpeTokenCounter) -> None:
    schema = fresh_schema()
    key = _keyed(pg_url, schema, counter, "paid")
    other = _keyed(pg_url, schema, counter, "kept")
    with psycopg.connect(pg_url, autocommit=True) as conn:  # as the code before this fix left it
        conn.execute(f'SET search_path TO "{schema}"')
        conn.execute("DROP TRIGGER IF EXISTS conversations_delete_rows ON conversations")
        conn.execute("DROP FUNCTION IF EXISTS tm_conversation_delete_rows()")
    _old_erasure(pg_url, schema, key)
    assert _rows(pg_url, schema, key)["view_failures"] == 1
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        conn.execute("DELETE FROM schema_migrations WHERE version > %s", (VERSION_BEFORE_FIX,))
    PostgresStore(pg_url, tokens=counter, schema=schema).close()  # the upgrade
    rows = _rows(pg_url, schema, key)
    rows.pop("meta")  # (the sweep is of the tables)
    assert rows == dict.fromkeys(NEWER_TABLES, 0)
    assert _rows(pg_url, schema, other) == dict.fromkeys((*NEWER_TABLES, "meta"), 1)

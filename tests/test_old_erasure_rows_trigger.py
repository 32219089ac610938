"""An older tiermem still running beside a newer one (it opened the file before the newer
one migrated it) erases with its own list of tables: rows of the tables added after it
(an idempotency key's fingerprint of the erased request, view failures and claims,
rechecks) stayed, where PostgreSQL's ON DELETE CASCADE deletes them for any code. m032's
trigger on `conversations` deletes them inside whatever process deletes the row, and the
upgrade deletes the rows such a process already left. Found by a reviewer with 98529cc.

The old erasure is the statements 98529cc's `_erase` ran (CI may have no old commit to
run), on a file this code migrated."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from cold_helpers import raw

from tiermem.tiers import schema
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter

# 98529cc's cold.CONVERSATION_TABLES: the tables its erasure knew
OLD_CONVERSATION_TABLES = ("turns", "checkpoints", "pins", "plans", "summaries", "summary_errors",
                           "statement_supersessions")
# the tables added after it whose rows name a conversation (its erasure left them)
NEWER_TABLES = ("view_claims", "idempotency_keys", "view_failures", "supersession_rechecks")
VERSION_BEFORE_FIX = next(i for i, f in enumerate(schema.MIGRATIONS) if f.__name__ == "m030_fork_parent_owed") + 1
COPIED_DIGEST = "migrated_digest:"  # schema.COPIED_DIGEST_PREFIX: migrate-store's record names the conversation


def _old_erasure(db: Path, key: str) -> None:
    """What 98529cc's erasure deleted, in its order, in one transaction."""
    with raw(db) as conn:
        conn.execute("PRAGMA secure_delete = ON")
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("DELETE FROM messages_fts WHERE rowid IN (SELECT id FROM messages WHERE conversation_id = ?)",
                     (key,))
        for table in OLD_CONVERSATION_TABLES:
            conn.execute(f"DELETE FROM {table} WHERE conversation_id = ?", (key,))
        conn.execute("INSERT INTO prune_guard(armed) VALUES (1)")
        conn.execute("DELETE FROM messages WHERE conversation_id = ?", (key,))
        conn.execute("DELETE FROM prune_guard")
        conn.execute("DELETE FROM conversations WHERE id = ?", (key,))
        conn.execute("COMMIT")


def _newer_rows(db: Path, key: str) -> dict[str, int]:
    with raw(db) as conn:
        rows = {t: conn.execute(f"SELECT COUNT(*) FROM {t} WHERE conversation_id = ?", (key,)).fetchone()[0]
                for t in NEWER_TABLES}
        rows["meta"] = conn.execute("SELECT COUNT(*) FROM meta WHERE key = ?", (COPIED_DIGEST + key,)).fetchone()[0]
    return rows


def _with_newer_rows(db: Path, key: str) -> None:
    """A row of each newer table for `key` (the idempotency key's by a keyed append)."""
    with raw(db) as conn:
        conn.execute("INSERT INTO view_claims(conversation_id, kind, key, holder, expires_at) "
                     "VALUES (?, 'summary', 'all', 'proc-1', 9e9)", (key,))
        conn.execute("INSERT INTO view_failures(conversation_id, kind, key, failures, first_at, retry_at) "
                     "VALUES (?, 'summary', 'all', 2, 1.0, 2.0)", (key,))
        conn.execute("INSERT INTO supersession_rechecks(conversation_id, position) VALUES (?, 1)", (key,))
        conn.execute("INSERT INTO meta(key, value) VALUES (?, 'digest')", (COPIED_DIGEST + key,))


def _keyed_store(db: Path, counter: BpeTokenCounter, name: str) -> str:
    store = ColdStore(db, tokens=counter)
    try:
        result = store.append_batch(name, [Message(role="user", content="Kumquat-secret-42 is my bank PIN"),
                                           Message(role="user", content="and the card is blue")],
                                    idempotency_key="pay-777", fingerprint=hashlib.sha256(b"request").digest())
        store.append("other", Message(role="user", content="unrelated"))
        return result.key
    finally:
        store.close()


def test_an_older_processs_erasure_deletes_the_rows_of_newer_tables(tmp_path: Path, counter: BpeTokenCounter) -> None:
    db = tmp_path / "tiermem.db"
    key = _keyed_store(db, counter, "paid")
    _with_newer_rows(db, key)
    other = _keyed_store(db, counter, "kept")  # another conversation's rows stay
    _with_newer_rows(db, other)
    assert _newer_rows(db, key) == {"view_claims": 1, "idempotency_keys": 1, "view_failures": 1,
                                    "supersession_rechecks": 1, "meta": 1}
    _old_erasure(db, key)
    assert _newer_rows(db, key) == dict.fromkeys((*NEWER_TABLES, "meta"), 0)  # (before: 1 each)
    assert _newer_rows(db, other) == dict.fromkeys((*NEWER_TABLES, "meta"), 1)


@pytest.mark.parametrize("erase", [
    "delete_conversation",  # this code's own erasure: the trigger finds nothing left, nothing else changes
    "delete_namespace",     # (its batches)
])
def test_this_codes_erasure_is_unchanged(tmp_path: Path, counter: BpeTokenCounter, erase: str) -> None:
    db = tmp_path / "tiermem.db"
    key = _keyed_store(db, counter, "paid")
    _with_newer_rows(db, key)
    store = ColdStore(db, tokens=counter)
    try:
        report = store.delete_conversation(key) if erase == "delete_conversation" else store.delete_namespace("default")
        assert key in report.keys and report.scrubbed
    finally:
        store.close()
    assert _newer_rows(db, key) == dict.fromkeys((*NEWER_TABLES, "meta"), 0)


def test_the_upgrade_deletes_rows_an_older_erasure_left(tmp_path: Path, counter: BpeTokenCounter) -> None:
    # a file an older process erased in beside the code before this fix (no trigger yet)
    db = tmp_path / "tiermem.db"
    key = _keyed_store(db, counter, "paid")
    _with_newer_rows(db, key)
    other = _keyed_store(db, counter, "kept")
    _with_newer_rows(db, other)
    with raw(db) as conn:
        conn.execute("DROP TRIGGER IF EXISTS conversations_delete_rows")
    _old_erasure(db, key)
    with raw(db) as conn:
        conn.execute(f"PRAGMA user_version = {VERSION_BEFORE_FIX}")
    assert _newer_rows(db, key)["idempotency_keys"] == 1  # what the reviewer found
    ColdStore(db, tokens=counter).close()  # the upgrade
    rows = _newer_rows(db, key)
    rows.pop("meta")  # (the sweep is of the tables; migrate-store's record goes with a later erasure)
    assert rows == dict.fromkeys(NEWER_TABLES, 0)
    assert _newer_rows(db, other) == dict.fromkeys((*NEWER_TABLES, "meta"), 1)

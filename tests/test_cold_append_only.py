"""Invariant 1 at the SQL level: whatever a connection sends, a stored message is never
changed or removed; only prune, inside its own transaction, deletes."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import sqlean
from cold_helpers import raw

from tiermem.tiers.cold import ColdStore
from tiermem.tiers.models import Message

ATTACKS = [
    # plain UPDATE of a message's text
    ("UPDATE messages SET body = '{\"role\":\"user\",\"content\":\"forged\"}' WHERE position = 1", "UPDATE"),
    # UPDATE of the key columns: reordering the log
    ("UPDATE messages SET position = position + 100", "UPDATE"),
    # an UPDATE that changes nothing is still an UPDATE
    ("UPDATE messages SET body = body", "UPDATE"),
    # DELETE of one message
    ("DELETE FROM messages WHERE position = 0", "DELETE"),
    # DELETE of the whole log
    ("DELETE FROM messages", "DELETE"),
    # an upsert rewrites through its DO UPDATE branch
    ("INSERT INTO messages(conversation_id, position, id, role, body, created_at) "
     "VALUES ('c', 0, 999, 'user', '{\"role\":\"user\",\"content\":\"forged\"}', 0) "
     "ON CONFLICT(conversation_id, position) DO UPDATE SET body = excluded.body", "UPDATE"),
    # REPLACE on the primary key deletes the old row without firing DELETE triggers
    ("INSERT OR REPLACE INTO messages(conversation_id, position, id, role, body, created_at) "
     "VALUES ('c', 0, 999, 'user', '{\"role\":\"user\",\"content\":\"forged\"}', 0)", "REPLACE"),
    # REPLACE on the unique message id would silently drop the row that holds that id
    ("REPLACE INTO messages(conversation_id, position, id, role, body, created_at) "
     "SELECT 'other', 0, id, role, body, created_at FROM messages WHERE position = 2", "REPLACE"),
]


@pytest.fixture
def log_db(cold: ColdStore) -> Path:
    cold.append_many("c", [Message(role="user", content=f"m{i}") for i in range(3)])
    return cold.path


def _snapshot(conn: sqlean.Connection) -> list[tuple[object, ...]]:
    return conn.execute("SELECT conversation_id, position, id, body FROM messages ORDER BY id").fetchall()


@pytest.mark.parametrize(("sql", "kind"), ATTACKS, ids=[f"{k}-{i}" for i, (_, k) in enumerate(ATTACKS)])
def test_raw_sql_cannot_change_messages(log_db: Path, sql: str, kind: str) -> None:
    with raw(log_db) as conn:
        before = _snapshot(conn)
        with pytest.raises(sqlean.DatabaseError, match="append-only"):
            conn.execute(sql)
        assert _snapshot(conn) == before


def test_refusal_inside_a_transaction_rolls_back_nothing_else(log_db: Path) -> None:
    # the trigger aborts the statement, the caller's transaction decides the rest
    with raw(log_db) as conn:
        before = _snapshot(conn)
        conn.execute("BEGIN")
        with pytest.raises(sqlean.DatabaseError, match="append-only"):
            conn.execute("DELETE FROM messages WHERE position = 0")
        conn.execute("ROLLBACK")
        assert _snapshot(conn) == before


def test_prune_still_deletes(cold: ColdStore) -> None:
    cold.append_many("old", [Message(role="user", content=f"m{i}", created_at=1000.0) for i in range(3)])
    cold.append("new", Message(role="user", content="fresh"))
    report = cold.prune(time.time() - 3600, all_namespaces=True)
    assert (report.conversations, report.messages, report.conversation_ids) == (1, 3, ["old"])
    with raw(cold.path) as conn:
        assert conn.execute("SELECT DISTINCT conversation_id FROM messages").fetchall() == [("new",)]
        # prune disarms its guard in the same transaction: DELETE is refused again
        assert conn.execute("SELECT COUNT(*) FROM prune_guard").fetchone()[0] == 0
        with pytest.raises(sqlean.DatabaseError, match="append-only"):
            conn.execute("DELETE FROM messages")
    assert [json.loads(json.dumps(m.body)) for m in cold.history("new")] == [{"role": "user", "content": "fresh"}]

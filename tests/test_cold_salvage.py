"""Invariant 8, second half: a stored row that cannot be decoded is logged (with its
conversation and position), counted, and skipped; its neighbours still load."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from cold_helpers import raw

from tiermem import Memory
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.models import Message

CORRUPTIONS = [
    # truncated JSON: the classic torn write
    ("body", "'{\"role\":\"user\",\"content\":\"trunc'"),
    # valid JSON that is not an object
    ("body", "'[1, 2, 3]'"),
    # an object whose role disagrees with the row's role column
    ("body", "'{\"role\":\"assistant\",\"content\":\"x\"}'"),
    # content of a type no message has
    ("body", "'{\"role\":\"user\",\"content\":42}'"),
    # metadata that is not JSON
    ("metadata", "'{not json'"),
]


def corrupt(db: Path, conversation_id: str, position: int, column: str = "body",
            value: str = "'{\"role\":\"user\",\"content\":\"trunc'") -> None:
    """Rewrite one stored row behind tiermem's back: lift the append-only trigger, write,
    and put the trigger back exactly as it was."""
    with raw(db) as conn:
        (trigger_sql,) = conn.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = 'messages_no_update'"
        ).fetchone()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("DROP TRIGGER messages_no_update")
        conn.execute(f"UPDATE messages SET {column} = {value} WHERE conversation_id = ? AND position = ?",
                     (conversation_id, position))
        conn.execute(trigger_sql)
        conn.execute("COMMIT")


@pytest.fixture
def five(cold: ColdStore) -> ColdStore:
    cold.append_many("conv", [Message(role="user", content=f"message {i}") for i in range(5)])
    return cold


@pytest.mark.parametrize(("column", "value"), CORRUPTIONS, ids=["truncated", "array", "role", "content-type",
                                                                "metadata"])
def test_one_bad_row_is_skipped_logged_and_counted(
    five: ColdStore, caplog: pytest.LogCaptureFixture, column: str, value: str
) -> None:
    corrupt(five.path, "conv", 2, column, value)
    with caplog.at_level(logging.WARNING, logger="tiermem.cold"):
        got = five.history("conv")
    assert [m.position for m in got] == [0, 1, 3, 4]
    assert [m.text for m in got] == ["message 0", "message 1", "message 3", "message 4"]
    assert five.stats()["salvaged_rows"] == 1
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "conversation=conv" in warnings[0].getMessage() and "position=2" in warnings[0].getMessage()


def test_the_same_bad_row_counts_once(five: ColdStore) -> None:
    corrupt(five.path, "conv", 2)
    # every read path meets the row; it is still one salvaged row
    for _ in range(3):
        assert len(five.history("conv")) == 4
    assert [m.position for m in five.get("conv", [1, 2, 3])] == [1, 3]
    assert [m.position for m in five.active("conv")[1]] == [0, 1, 3, 4]
    assert five.stats()["salvaged_rows"] == 1
    assert five.namespace_stats("default")["salvaged_rows"] == 1


def test_salvage_through_memory(cold_memory: Memory) -> None:
    cold_memory.append_many("conv", [{"role": "user", "content": f"message {i}"} for i in range(4)])
    corrupt(cold_memory.cold.path, "conv", 0)
    assert [m.position for m in cold_memory.history("conv")] == [1, 2, 3]
    assert [m.position for m in cold_memory.active("conv").messages] == [1, 2, 3]
    assert cold_memory.stats()["cold"]["salvaged_rows"] == 1
    # the indexes and search keep working around it
    cold_memory.rebuild()
    hits = cold_memory.search("conv", "message 3", k=2)
    assert hits[0].position == 3
    assert cold_memory.stats()["cold"]["salvaged_rows"] == 1

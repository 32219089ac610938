"""`Memory.append_outcome(expect_position=, expect_incarnation=)`: a conditional append,
written only if the conversation goes on exactly there (and is still the incarnation
named), checked inside the append's own write transaction on both engines; else
`PositionMismatch` naming the position expected and found, and nothing written (a
conversation the append would have created is not created). `tiermem import` appends
so (a correctness review of the streaming import, 2026-12-06: an erasure during an
import re-created the conversation holding only the file's tail)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pg_server import fresh_schema

from tiermem.config import Config
from tiermem.errors import PositionMismatch, ValidationError
from tiermem.memory import Memory
from tiermem.tiers.embed_onnx import FastEmbedder

NS = "default"


@pytest.fixture(params=["sqlite", "postgres"])
def config(request: pytest.FixtureRequest, tmp_path: Path) -> Config:
    """Both engines: the check is each store's own, in its write transaction."""
    extra: dict[str, str] = {}
    if request.param == "postgres":
        extra = {"cold_url": request.getfixturevalue("pg_url"), "cold_schema": fresh_schema()}
    return Config(data_dir=tmp_path / "data", **extra)  # type: ignore[arg-type]


@pytest.fixture
def mem(config: Config, embedder: FastEmbedder) -> Memory:
    m = Memory(config, embedder=embedder, hot=False, background_indexing=False)
    yield m  # type: ignore[misc]
    m.close()


def say(i: int) -> dict[str, str]:
    return {"role": "user", "content": f"message {i}"}


def contents(mem: Memory, conv: str) -> list[str]:
    return [m.body["content"] for m in mem.history(conv, namespace=NS)] if conv in mem.conversations(NS) else []


def test_written_where_expected(mem: Memory) -> None:
    first = mem.append_outcome("c", [say(0), say(1)], namespace=NS, expect_position=0)
    assert first.positions == [0, 1] and first.incarnation is not None
    nxt = mem.append_outcome("c", [say(2)], namespace=NS, expect_position=2, expect_incarnation=first.incarnation)
    assert nxt.positions == [2] and nxt.incarnation == first.incarnation
    assert contents(mem, "c") == ["message 0", "message 1", "message 2"]


# (id, messages stored first, the position expected, the position found)
MISMATCHES: list[tuple[str, int, int, int]] = [
    ("behind", 3, 2, 3),  # another writer appended since
    ("ahead", 3, 5, 3),  # the caller counted messages that are not there
    ("missing_conversation", 0, 4, 0),  # nothing stored: not created by the refused append
    ("exists_but_new_expected", 2, 0, 2),
]


@pytest.mark.parametrize(("stored", "expected", "found"), [m[1:] for m in MISMATCHES], ids=[m[0] for m in MISMATCHES])
def test_a_mismatch_names_both_positions_and_writes_nothing(mem: Memory, stored: int, expected: int,
                                                           found: int) -> None:
    if stored:
        mem.append_many("c", [say(i) for i in range(stored)], namespace=NS)
    with pytest.raises(PositionMismatch, match=rf"'c' was expected to go on at position {expected} but goes on at "
                       rf"position {found}; nothing was written") as err:
        mem.append_outcome("c", [say(99)], namespace=NS, expect_position=expected)
    assert (err.value.field, err.value.expected, err.value.found) == ("expect_position", expected, found)
    assert contents(mem, "c") == [f"message {i}" for i in range(stored)]


def test_an_erased_incarnation_is_refused_even_at_the_same_length(mem: Memory) -> None:
    seen = mem.append_outcome("c", [say(0), say(1)], namespace=NS).incarnation
    mem.delete_conversation("c", namespace=NS)
    mem.append_many("c", [say(7), say(8)], namespace=NS)  # written again by another writer, as long
    with pytest.raises(PositionMismatch, match=rf"'c' was expected to be incarnation '{seen}', going on at position 2, "
                       r"but its incarnation is '[0-9a-f]{32}'; nothing was written") as err:
        mem.append_outcome("c", [say(2)], namespace=NS, expect_position=2, expect_incarnation=seen)
    assert err.value.found is None and err.value.expected_incarnation == seen
    assert err.value.found_incarnation not in (None, seen)  # the incarnation written again
    assert contents(mem, "c") == ["message 7", "message 8"]
    # erased and not written again: refused too, and not re-created
    mem.delete_conversation("c", namespace=NS)
    with pytest.raises(PositionMismatch, match="but no conversation of that id exists now; nothing was written") as err:
        mem.append_outcome("c", [say(0)], namespace=NS, expect_position=0, expect_incarnation=seen)
    assert (err.value.found_incarnation, err.value.exists) == (None, False)
    assert "c" not in mem.conversations(NS)


def test_a_replay_is_answered_before_the_position_is_checked(mem: Memory) -> None:
    once = mem.append_outcome("c", [say(0)], namespace=NS, idempotency_key="k1", expect_position=0)
    again = mem.append_outcome("c", [say(0)], namespace=NS, idempotency_key="k1", expect_position=0)
    assert (again.positions, again.replayed) == (once.positions, True)


# (id, keywords, the field named): bad values, refused before anything is read or written
BAD: list[tuple[str, dict[str, object], str]] = [
    ("negative", {"expect_position": -1}, "expect_position"),
    ("a bool", {"expect_position": True}, "expect_position"),
    ("a string", {"expect_position": "3"}, "expect_position"),
    ("incarnation alone", {"expect_incarnation": "c"}, "expect_incarnation"),
    ("incarnation not a string", {"expect_position": 0, "expect_incarnation": 3}, "expect_incarnation"),
]


@pytest.mark.parametrize(("kwargs", "field"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_expectations_are_refused_naming_the_field(mem: Memory, kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as err:
        mem.append_outcome("c", [say(0)], namespace=NS, **kwargs)  # type: ignore[arg-type]
    assert err.value.field == field
    assert "c" not in mem.conversations(NS)

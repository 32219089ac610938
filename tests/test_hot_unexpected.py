"""The hot tier is derived: whatever Redis answers after the log has committed, an
append is acknowledged (it is in the log), a read answers from the log and says
`degraded`, and the hot set is rebuilt from the log once Redis answers sensibly again.

Before this, only connection-type errors were absorbed: any other reply (here a key of
the wrong type, the kind of state a FLUSHALL or another client can leave behind mid-
operation) escaped `Memory.append` after the commit, so the caller was told the write
failed although it was stored (an HTTP 500 for a committed append), and every context
call of that conversation failed until someone repaired Redis by hand."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tiermem import Memory


def _wrong_type(mem: Memory) -> None:
    """Every hot-set meta key replaced by a string: each script that reads it fails."""
    assert mem.hot is not None
    client = mem.hot.client
    keys = [k for k in client.scan_iter("*:meta")]
    assert keys, "no hot set to corrupt"
    for k in keys:
        client.delete(k)
        client.set(k, "not a hash")


def _wrong_type_zset(mem: Memory) -> None:
    """The members' sorted set replaced by a list."""
    assert mem.hot is not None
    client = mem.hot.client
    keys = [k for k in client.scan_iter("*:z")]
    assert keys
    for k in keys:
        client.delete(k)
        client.rpush(k, "x")


CORRUPTIONS: list[tuple[Callable[[Memory], None], str]] = [
    (_wrong_type, "the hot set's meta hash is a string"),
    (_wrong_type_zset, "its member zset is a list"),
]


def _seeded(memory: Memory) -> None:
    for i in range(4):
        memory.append("c1", {"role": "user", "content": f"turn {i}: the flight leaves at nine"})
    assert not memory.context("c1", "when does the flight leave?", budget=300).plan.degraded


def _served_hot_again(memory: Memory, what: str) -> None:
    assert memory.stats()["hot"]["last_error"], what  # the failure is visible
    again = memory.context("c1", "which gate?", budget=300)
    assert not again.plan.degraded, what  # the set was rebuilt from the log
    assert memory.stats()["hot"]["healthy"] is True, what


@pytest.mark.parametrize(("corrupt", "what"), CORRUPTIONS, ids=[c[1] for c in CORRUPTIONS])
def test_an_append_after_an_unexpected_reply_is_acknowledged(
        memory: Memory, corrupt: Callable[[Memory], None], what: str) -> None:
    _seeded(memory)
    corrupt(memory)
    position = memory.append("c1", {"role": "user", "content": "the gate is B12"})
    assert position == 4, what
    assert memory.history("c1")[-1].position == 4  # committed, and the caller was told so
    ctx = memory.context("c1", "which gate?", budget=300)
    assert "the gate is B12" in str(ctx.messages), what
    _served_hot_again(memory, what)


@pytest.mark.parametrize(("corrupt", "what"), CORRUPTIONS, ids=[c[1] for c in CORRUPTIONS])
def test_a_read_after_an_unexpected_reply_answers(
        memory: Memory, corrupt: Callable[[Memory], None], what: str) -> None:
    _seeded(memory)
    memory.append("c1", {"role": "user", "content": "the gate is B12"})
    corrupt(memory)
    ctx = memory.context("c1", "which gate?", budget=300)
    assert "the gate is B12" in str(ctx.messages), what
    _served_hot_again(memory, what)


@pytest.mark.parametrize(("corrupt", "what"), CORRUPTIONS, ids=[c[1] for c in CORRUPTIONS])
def test_a_pin_after_an_unexpected_reply_is_kept(
        memory: Memory, corrupt: Callable[[Memory], None], what: str) -> None:
    _seeded(memory)
    corrupt(memory)
    memory.pin("c1", 1)
    hot = memory.stats()["hot"]
    assert hot["healthy"] is True and hot["pins"] >= 1, (what, hot)  # rebuilt, with the pin
    assert hot["last_error"], what
    corrupt(memory)
    memory.unpin("c1", 1)
    assert memory.stats()["hot"]["pins"] == 0, what
    _served_hot_again(memory, what)

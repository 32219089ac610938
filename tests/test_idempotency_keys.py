"""Idempotency keys on appends (`Memory.append_outcome`, tiers.store "Idempotency keys"),
on both engines with the hot tier on: a retry of the same request under its key writes
nothing and answers the first append's positions; another request under it is refused
and writes nothing; keys belong to one conversation incarnation of one namespace, and
retention takes them with it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from hash_embedder import HashEmbedder

from tiermem.config import Config
from tiermem.memory import Memory
from tiermem.tiers.errors import IdempotencyKeyReused, ValidationError
from tiermem.tiers.redis_server import EmbeddedRedis

BATCH = [{"role": "user", "content": "I moved to Lisbon last spring"},
         {"role": "assistant", "content": "Noted: you live in Lisbon."}]


@pytest.fixture
def mem(engine_config: Config) -> Iterator[Memory]:
    m = Memory(engine_config, embedder=HashEmbedder(), background_indexing=False)
    try:
        yield m
    finally:
        m.close()
        EmbeddedRedis(engine_config.data_dir).stop()


def _state(mem: Memory, conv: str, namespace: str | None = None) -> dict[str, Any]:
    """Everything an append moves: the log, the store's counts, the hot set, the views'
    sequence number, the key's record."""
    ns = namespace or "default"
    key = mem.cold.key_of(ns, conv)
    assert key is not None
    cold = mem.stats()["cold"]
    info = mem.cold.conversation(key)
    assert info is not None and mem.hot is not None
    frontier = {r[0]: r[6] for r in mem.cold.view_frontier()}
    return {"history": [(m.position, m.body, m.created_at) for m in mem.history(conv, namespace=namespace)],
            "messages": cold["messages"], "conversations": cold["conversations"],
            "pending": cold["pending_embeddings"], "last_message_at": info["last_message_at"],
            "hot": mem.hot.stats(namespace=ns), "hot_counters": mem.hot.counters(), "views_seq": frontier.get(key),
            "turns": [(t.position, t.superseded_by) for t in mem.cold.turns(key)]}


def test_a_replay_writes_nothing_and_answers_the_first_positions(mem: Memory) -> None:
    mem.append("c", {"role": "user", "content": "hello"})
    first = mem.append_outcome("c", BATCH, idempotency_key="req-1")
    assert first.positions == [1, 2] and not first.replayed
    before = _state(mem, "c")
    time.sleep(0.01)  # a defaulted created_at of the retry would differ
    again = mem.append_outcome("c", BATCH, idempotency_key="req-1")
    assert again.positions == [1, 2] and again.replayed
    assert mem.append_many("c", BATCH, idempotency_key="req-1") == [1, 2]
    assert _state(mem, "c") == before


def test_append_replays_one_message(mem: Memory) -> None:
    msg = {"role": "user", "content": "my order number is 4471"}
    assert mem.append("c", msg, idempotency_key="k") == 0
    before = _state(mem, "c")
    assert mem.append("c", msg, idempotency_key="k") == 0
    assert _state(mem, "c") == before


def test_another_request_under_the_key_is_refused_and_writes_nothing(mem: Memory) -> None:
    mem.append_many("c", BATCH, idempotency_key="req-1")
    before = _state(mem, "c")
    with pytest.raises(IdempotencyKeyReused) as err:
        mem.append_many("c", [{"role": "user", "content": "something else"}], idempotency_key="req-1")
    assert isinstance(err.value, ValidationError) and err.value.field == "idempotency_key"
    assert "positions 0..1" in str(err.value)
    assert _state(mem, "c") == before


def test_without_a_key_the_same_request_is_stored_again(mem: Memory) -> None:
    mem.append_many("c", BATCH, idempotency_key="req-1")
    assert mem.append_many("c", BATCH) == [2, 3]  # no key: two requests, as before keys existed
    assert mem.append_many("c", BATCH, idempotency_key="req-2") == [4, 5]  # a new key: a new request


def test_keys_are_per_namespace(mem: Memory) -> None:
    a, b = mem.namespaced("acme"), mem.namespaced("globex")
    assert a.append_outcome("c", BATCH, idempotency_key="same").positions == [0, 1]
    out = b.append_outcome("c", BATCH, idempotency_key="same")
    assert out.positions == [0, 1] and not out.replayed  # another tenant's key is another key
    assert len(a.history("c")) == len(b.history("c")) == 2
    assert b.append_outcome("c", BATCH, idempotency_key="same").replayed


def test_keys_are_per_conversation(mem: Memory) -> None:
    mem.append_many("c1", BATCH, idempotency_key="k")
    assert not mem.append_outcome("c2", BATCH, idempotency_key="k").replayed
    assert len(mem.history("c2")) == 2


def _erase_conversation(mem: Memory) -> None:
    mem.delete_conversation("c", namespace="acme")


def _erase_namespace(mem: Memory) -> None:
    mem.delete_namespace("acme")


def _prune(mem: Memory) -> None:
    mem.prune(0.0, namespace="acme")


# every retention operation takes the keys with the conversation
ERASURES = [
    _erase_conversation,  # erasure on request of the one conversation
    _erase_namespace,  # erasure of the tenant
    _prune,  # retention by age (every conversation is older than now)
]


@pytest.mark.parametrize("erase", ERASURES, ids=lambda f: f.__name__)
def test_retention_takes_the_keys_and_a_new_conversation_starts_without(mem: Memory, erase: Any) -> None:
    ns = mem.namespaced("acme")
    ns.append_many("c", BATCH, idempotency_key="k", session_id="s1")
    old = mem.cold.key_of("acme", "c")
    assert old is not None and mem.cold.idempotency_record(old, "k") is not None
    time.sleep(0.01)  # prune(0) takes what is older than now
    erase(mem)
    assert mem.cold.idempotency_record(old, "k") is None
    assert _count_keys(mem) == 0
    # the name again: a new incarnation, which has never seen the key (even for another request)
    out = ns.append_outcome("c", [{"role": "user", "content": "a new start"}], idempotency_key="k")
    assert out.positions == [0] and not out.replayed
    assert [m.text for m in ns.history("c")] == ["a new start"]


def _count_keys(mem: Memory) -> int:
    with mem.cold.reading() as c:  # type: ignore[attr-defined]
        return int(c.execute("SELECT COUNT(*) FROM idempotency_keys").fetchone()[0])


def test_a_fork_copies_no_keys(mem: Memory) -> None:
    mem.append_many("c", BATCH, idempotency_key="k")
    child = mem.fork("c", 1, new_id="child")
    key = mem.cold.key_of("default", child)
    assert key is not None and mem.cold.idempotency_record(key, "k") is None
    out = mem.append_outcome("child", BATCH, idempotency_key="k")
    assert out.positions == [2, 3] and not out.replayed


def test_the_record_holds_the_positions(mem: Memory) -> None:
    mem.append("c", {"role": "user", "content": "first"})
    mem.append_many("c", BATCH * 3, idempotency_key="k")
    key = mem.cold.key_of("default", "c")
    assert key is not None
    rec = mem.cold.idempotency_record(key, "k")
    assert rec is not None and (rec.first_position, rec.count) == (1, 6) and rec.positions == [1, 2, 3, 4, 5, 6]
    assert len(rec.fingerprint) == 32  # sha256

"""An erasure deletes the shared epoch states that showed the erased turns by namespace
recall, in Redis, before it returns (DESIGN invariant 3).

A sibling conversation's context can show another conversation's turns (namespace
recall); its epoch state, kept in Redis under the sibling's hash tag for every process,
holds them. Before, the erasure deleted the erased conversation's own Redis keys only:
the sibling's state kept the text until the sibling's next call or the idle TTL. Now
each state that shows a conversation is listed under that conversation's tag
(planner.epoch `SHOWN_IN_SUFFIX`), and the erasure (or, while Redis is unreachable, the
deferred purge it records) deletes those that still show it. A real SQLite file, the
real embedded Redis, the real model; every Redis key and value is searched for the canary.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from conftest import full_memory

from tiermem import Config, Memory
from tiermem.planner import epoch
from tiermem.tiers.embed import Embedder
from tiermem.tiers.redis_server import EmbeddedRedis

CANARY = "zq7canary-8812-tamarind"
NS = "acme/alice"
QUESTION = "What was the vault code I told you in the other thread?"
# how long ago "secret" was written, and the age a prune takes: it only, never the sibling
SECRET_AGE_S = 3600.0
PRUNE_AGE_S = SECRET_AGE_S / 2


@pytest.fixture
def mem(tmp_path: Path, embedder: Embedder) -> Iterator[Memory]:
    with full_memory(Config(data_dir=tmp_path / "data", hot_budget_tokens=600), embedder) as m:
        yield m


def _redis_with(mem: Memory, needle: bytes) -> list[bytes]:
    """Every key whose name or value holds `needle` (the value as Redis returns it)."""
    client = redis.Redis.from_url(EmbeddedRedis(mem.config.data_dir).url)
    try:
        hits = []
        for key in client.scan_iter(count=1000):
            kind = client.type(key)
            value = {b"string": client.get, b"hash": client.hgetall, b"zset": lambda k: client.zrange(k, 0, -1),
                     b"set": client.smembers, b"list": lambda k: client.lrange(k, 0, -1)}.get(kind, lambda k: None)(key)
            if needle in key or needle in repr(value).encode():
                hits.append(key)
        return hits
    finally:
        client.close()


def _show_in_sibling(mem: Memory) -> None:
    """The canary in "secret", and a context of "sibling" that shows it by recall."""
    then = time.time() - SECRET_AGE_S
    mem.append("secret", {"role": "user", "content": f"Remember: the vault code is {CANARY}, keep it safe."},
               namespace=NS, created_at=then)
    mem.append("secret", {"role": "assistant", "content": "Noted, I will keep it safe."}, namespace=NS,
               created_at=then)
    mem.append("sibling", {"role": "user", "content": "I am planting tomatoes in the garden this week."},
               namespace=NS)
    mem.append("sibling", {"role": "user", "content": QUESTION}, namespace=NS)
    mem.catch_up(namespace=NS)
    shown = json.dumps(mem.context("sibling", QUESTION, 1500, namespace=NS).messages)
    assert CANARY in shown  # the premise: namespace recall showed it
    assert mem.hot is not None
    sibling_epoch = mem.hot.tier.tag(mem.cold.key_of(NS, "sibling") or "") + ":epoch"
    assert any(k.decode() == sibling_epoch for k in _redis_with(mem, CANARY.encode()))  # shared, in Redis


# how "secret" goes: each takes it only, never the sibling
ERASURES: list[tuple[str, Callable[[Memory], object]]] = [
    # erasure of one conversation on request
    ("delete_conversation", lambda m: m.delete_conversation("secret", namespace=NS)),
    # retention by age: the sibling is newer than the cutoff
    ("prune", lambda m: m.prune(PRUNE_AGE_S, namespace=NS)),
]


@pytest.mark.parametrize(("how", "erase"), ERASURES, ids=[e[0] for e in ERASURES])
def test_erasure_deletes_the_sibling_state_that_showed_it(mem: Memory, how: str,
                                                          erase: Callable[[Memory], object]) -> None:
    _show_in_sibling(mem)
    erase(mem)
    assert mem.conversations(NS) == ["sibling"]
    assert _redis_with(mem, CANARY.encode()) == []
    # the sibling goes on: a new epoch, saying why, and no canary
    ctx = mem.context("sibling", "and the tomatoes?", 1500, namespace=NS)
    assert CANARY not in json.dumps(ctx.messages)


def test_erasure_while_redis_is_down_deletes_the_sibling_state_when_it_returns(mem: Memory) -> None:
    _show_in_sibling(mem)
    assert mem.hot is not None
    real = mem.hot.tier.client
    mem.hot.tier.client = redis.Redis(unix_socket_path="/nonexistent/redis.sock")  # unreachable
    try:
        mem.delete_conversation("secret", namespace=NS)
    finally:
        mem.hot.tier.client = real
    assert _redis_with(mem, CANARY.encode())  # still there: Redis could not be reached
    assert mem.purge_deferred() == 1
    assert _redis_with(mem, CANARY.encode()) == []


def test_a_sibling_state_written_after_the_erasure_read_its_list_is_deleted(
        mem: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sibling's call planned before the erasure and writes after the erasure read the
    list of states that show it: the writer, checking after its write that every
    conversation it shows is still in the log, deletes it (the race forced)."""
    _show_in_sibling(mem)
    key = mem.cold.key_of(NS, "sibling")
    store = mem.planner._epochs
    assert key is not None and isinstance(store, epoch.RedisEpochs)
    state = store.get(key)
    assert state is not None
    real = epoch.drop_showing
    raced = []

    def then_the_sibling_writes(*args: Any) -> int:
        gone = real(*args)
        store.put(key, state)  # the sibling's call ends here, with the text it planned before
        raced.append(store.tier.client.exists(store.key(key)))
        return gone

    monkeypatch.setattr(epoch, "drop_showing", then_the_sibling_writes)
    mem.delete_conversation("secret", namespace=NS)
    assert raced == [0]  # the write happened, and was deleted by its own writer
    assert _redis_with(mem, CANARY.encode()) == [] and store.errors == 0

"""The prompt-cache epoch shared by every process on one Redis (planner.epoch.RedisEpochs).

Two Memory objects on one data dir and Redis are two processes of one deployment (each
has its own planner, client and caches): consecutive turns of a conversation that a load
balancer spreads over them extend one lineage, as do the turns either side of a restart;
while Redis does not answer, contexts still come, from each process's own copy; erasure
leaves no text of the state in Redis, nor does a call that planned before it; the state
that goes to Redis reads back equal to itself.

On the code before (per-process `EpochCache` only) the lineage tests fail: the second
Memory's first call starts a new epoch ("first context of this conversation in this
process") and its context does not begin with the previous one; the erasure tests fail
on their precondition (no state was kept in Redis to erase) and the round trip on the
import (nothing serialised the state).
"""

from __future__ import annotations

import itertools
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from hot_fixtures import own_redis, start_local_cluster
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tiermem import Config, Memory
from tiermem.planner.epoch import EPOCH_KEY_SUFFIX, RedisEpochs, state_from_json, state_json
from tiermem.planner.plan import Context
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.errors import BudgetTooSmall
from tiermem.tiers.hot import DEFAULT_SOCKET_TIMEOUT_S
from tiermem.tiers.redis_server import EmbeddedRedis

pytestmark = pytest.mark.usefixtures("shared_vectors")

CANARY = "zq7canary9902quince"
BUDGET = 4000  # room for every call's appends: no epoch here ends for room
QUESTIONS = ["what did we plan for the garden?", "and the violin lessons?", "when is the harbour trip?",
             "what about the pancake recipe?", "remind me of the glacier hike", "which lantern did we buy?"]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    """A Redis server of the test's own, reached by URL (tiermem neither owns nor restarts it)."""
    with own_redis(tmp_path / "redis") as srv:
        yield srv


@pytest.fixture
def cfg(tmp_path: Path, server: EmbeddedRedis) -> Config:
    return Config(data_dir=tmp_path / "data", redis_url=server.url)


def seed(mem: Memory) -> None:
    mem.append_many("c", [{"role": "user" if i % 2 == 0 else "assistant",
                           "content": f"Turn {i}: the garden, the violin and the harbour trip, part {i}."}
                          for i in range(16)])


def ask(mem: Memory, n: int) -> Context:
    """The user's n-th question, appended and answered from `mem`."""
    mem.append("c", {"role": "user", "content": QUESTIONS[n % len(QUESTIONS)]})
    ctx = mem.context("c", QUESTIONS[n % len(QUESTIONS)], BUDGET)
    mem.append("c", {"role": "assistant", "content": f"Answer {n}: noted."})
    return ctx


def extends(prev: Context, ctx: Context) -> bool:
    """`ctx` continues `prev`'s epoch with `prev`'s whole context as its prefix."""
    c = ctx.plan.cache
    return (not c.new_epoch and c.epoch == prev.plan.cache.epoch and c.epoch_calls == prev.plan.cache.epoch_calls + 1
            and c.prefix_messages == len(prev.messages) and ctx.messages[:len(prev.messages)] == prev.messages)


def test_two_processes_in_turn_extend_one_lineage(cfg: Config, embedder: FastEmbedder) -> None:
    with Memory(cfg, embedder=embedder, background_indexing=False) as a, \
            Memory(cfg, embedder=embedder, background_indexing=False) as b:
        seed(a)
        prev = ask(a, 0)
        assert prev.plan.cache.new_epoch  # the conversation's first context
        for n in range(1, 6):  # a load balancer's round robin: b, a, b, a, b
            ctx = ask(b if n % 2 else a, n)
            assert extends(prev, ctx), (n, ctx.plan.cache)
            prev = ctx


def test_one_lineage_and_its_erasure_on_redis_cluster(tmp_path: Path, embedder: FastEmbedder) -> None:
    """The state's key shares its conversation's hash tag: the put script (state and hot
    set meta) runs in one slot, and erasure's scan of the tag finds it."""
    cluster = start_local_cluster(tmp_path / "cluster")
    try:
        cfg = Config(data_dir=tmp_path / "data", redis_url=cluster.url)
        with Memory(cfg, embedder=embedder, background_indexing=False) as a, \
                Memory(cfg, embedder=embedder, background_indexing=False) as b:
            seed(a)
            prev = ask(a, 0)
            ctx = ask(b, 1)
            assert extends(prev, ctx), ctx.plan.cache
            store = b.planner._epochs
            assert isinstance(store, RedisEpochs) and store.errors == 0
            key = b.cold.key_of("default", "c")
            assert key is not None and store.tier.client.exists(store.key(key))
            a.delete_conversation("c")
            assert not store.tier.client.exists(store.key(key))
    finally:
        cluster.stop()


def test_the_epoch_continues_after_a_restart(cfg: Config, embedder: FastEmbedder) -> None:
    with Memory(cfg, embedder=embedder, background_indexing=False) as mem:
        seed(mem)
        ask(mem, 0)
        before = ask(mem, 1)
    with Memory(cfg, embedder=embedder, background_indexing=False) as again:  # a deploy: a new process
        assert extends(before, ask(again, 2))


def test_contexts_still_come_while_redis_does_not_answer(
        cfg: Config, server: EmbeddedRedis, embedder: FastEmbedder) -> None:
    assert server.pid is not None
    with Memory(cfg, embedder=embedder, background_indexing=False) as a, \
            Memory(cfg, embedder=embedder, background_indexing=False) as b:
        seed(a)
        ask(a, 0)
        prev = ask(b, 1)
        os.kill(server.pid, signal.SIGSTOP)  # unreachable, its data kept: every command times out
        try:
            a.cold.turns("c")  # nothing to do with Redis: the log still answers
            t = time.perf_counter()
            ctx = b.context("c", QUESTIONS[2], BUDGET)
            took = time.perf_counter() - t
            # this process's own copy carries the lineage on
            assert extends(prev, ctx), ctx.plan.cache
            # the hot read waited out Redis's timeout (and its retry); the epoch state did
            # not wait again: the store leaves Redis alone while the hot tier is degraded
            assert took < 4 * DEFAULT_SOCKET_TIMEOUT_S + 1.0, took
            prev = b.context("c", QUESTIONS[2], BUDGET)
        finally:
            os.kill(server.pid, signal.SIGCONT)
        # Redis is back with the state from before the outage; b's newer copy wins for b
        b.append("c", {"role": "assistant", "content": "back"})
        assert extends(prev, b.context("c", QUESTIONS[3], BUDGET))


def _holding(client: redis.Redis, text: str) -> list[bytes]:
    """Every key whose value (a string, or a hash's or a zset's fields) holds `text`."""
    found = []
    for k in client.scan_iter(count=1000):
        kind = client.type(k)
        if kind == b"string":
            vals: list[Any] = [client.get(k)]
        elif kind == b"hash":
            vals = list(client.hgetall(k).values())
        elif kind == b"zset":
            vals = list(client.zrange(k, 0, -1))
        else:
            vals = []
        if any(text.encode() in (v or b"") for v in vals):
            found.append(k)
    return found


def _seed_secret(mem: Memory) -> str:
    mem.append_many("secret", [{"role": "user", "content": f"Line {i} about the router."} for i in range(10)])
    mem.append("secret", {"role": "user", "content": f"Never share my recovery code {CANARY}."})
    mem.context("secret", "what is my recovery code?", 2000)
    key = mem.cold.key_of("default", "secret")
    assert key is not None
    return key


def test_erasure_leaves_no_epoch_text_in_redis(cfg: Config, server: EmbeddedRedis, embedder: FastEmbedder) -> None:
    probe = redis.Redis.from_url(server.url)
    with Memory(cfg, embedder=embedder, background_indexing=False) as a, \
            Memory(cfg, embedder=embedder, background_indexing=False) as b:
        key = _seed_secret(a)
        b.context("secret", "and the code again?", 2000)
        assert any(k.endswith(EPOCH_KEY_SUFFIX.encode()) for k in _holding(probe, CANARY))  # the shared state
        b.delete_conversation("secret")  # the other process erases
        assert key and _holding(probe, CANARY) == []


def test_a_call_that_planned_before_an_erasure_does_not_write_its_state_back(
        cfg: Config, server: EmbeddedRedis, embedder: FastEmbedder) -> None:
    probe = redis.Redis.from_url(server.url)
    with Memory(cfg, embedder=embedder, background_indexing=False) as a, \
            Memory(cfg, embedder=embedder, background_indexing=False) as b:
        key = _seed_secret(a)
        store = a.planner._epochs
        assert isinstance(store, RedisEpochs)
        state = store.get(key)
        assert state is not None
        b.delete_conversation("secret")
        store.put(key, state)  # the end of a call that began before the erasure
        assert _holding(probe, CANARY) == []


def test_a_state_of_another_database_on_the_same_redis_is_not_read(cfg: Config, embedder: FastEmbedder) -> None:
    with Memory(cfg, embedder=embedder, background_indexing=False) as mem:
        key = _seed_secret(mem)
        store = mem.planner._epochs
        assert isinstance(store, RedisEpochs)
        state = store.get(key)
        assert state is not None
        assert state_from_json(state_json(state, "another-db-uuid"), mem.cold.db_uuid) is None


# -- the JSON round trip ---------------------------------------------------------------------

# message shapes the planner keeps in a state: text, a name, tool calls and their results,
# list content, metadata values of every JSON type
TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=60)
TOOL_ROUND = st.builds(lambda cid, args, out: [
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": cid, "type": "function", "function": {"name": "lookup", "arguments": args}}]},
    {"role": "tool", "tool_call_id": cid, "content": out}],
    st.from_regex(r"call_[a-z0-9]{4,8}", fullmatch=True), TEXT, TEXT)
PLAIN = st.builds(lambda role, text, name: [{"role": role, "content": text, **({"name": name} if name else {})}],
                  st.sampled_from(["user", "assistant"]), TEXT,
                  st.one_of(st.none(), st.from_regex(r"[a-z]{3,8}", fullmatch=True)))
PARTS = st.builds(lambda text: [{"role": "user", "content": [{"type": "text", "text": text}]}], TEXT)
META = st.builds(lambda text, v: [{"role": "user", "content": text, "metadata": {"k": v}}], TEXT,
                 st.one_of(st.integers(-2**40, 2**40), st.floats(allow_nan=False, allow_infinity=False),
                           st.booleans(), st.none(), TEXT))


EXAMPLES = itertools.count()  # one conversation per example


@pytest.fixture(scope="module")
def shared_mem(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[Memory]:
    data = tmp_path_factory.mktemp("roundtrip") / "data"
    mem = Memory(Config(data_dir=data, hot_budget_tokens=600), embedder=embedder, background_indexing=False)
    try:
        yield mem
    finally:
        mem.close()
        EmbeddedRedis(data).stop()


# derandomized: the same 25 examples on every run (CI included); budget 64 can be smaller than a
# generated latest message, which context() refuses unless told to truncate it (BudgetTooSmall)
@settings(max_examples=25, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rounds=st.lists(st.one_of(PLAIN, TOOL_ROUND, PARTS, META), min_size=1, max_size=12),
       budget=st.sampled_from([64, 300, 2000]), system=st.one_of(st.none(), TEXT), query=TEXT)
def test_the_state_of_a_real_context_round_trips_through_json(
        shared_mem: Memory, rounds: list[list[dict[str, Any]]], budget: int, system: str | None, query: str) -> None:
    conv = f"rt-{next(EXAMPLES)}"
    shared_mem.append_many(conv, [m for r in rounds for m in r])
    for _ in range(2):  # a new epoch's state, then an extension's
        try:
            shared_mem.context(conv, query, budget, system=system, truncate_latest=True)
        except BudgetTooSmall as e:
            # a latest tool round that cannot fit even at its floor is refused, never sent
            # as the question alone (planner.pack fit_round): no context, no state to check
            assert e.part == BudgetTooSmall.PART_ROUND, e
            return
        key = shared_mem.cold.key_of("default", conv)
        assert key is not None
        state = shared_mem.planner._epochs.get(key)
        assert state is not None
        uuid = shared_mem.cold.db_uuid
        assert state_from_json(state_json(state, uuid), uuid) == state
        shared_mem.append(conv, {"role": "user", "content": query})

"""A changed `head_protect`, `tail_protect` or `eviction_bias` applies to existing hot sets
at their next read, as a changed `hot_budget_tokens` does (tiermem.hotlink `_sync`), on a
real redis-server kept across the runs and real SQLite.

A set's meta records the budget and the three rules it was kept under (tiers.hot). On
the code before (review r_hot) only the budget was compared: after the protected tail
was cut from 8 turns to 2 between runs, reads kept serving a set kept under the old
rules, 570 tokens over a budget of 500 that the new rules could meet, until the next
append happened to evict. Now a set kept under other rules is rebuilt from the log,
once per conversation and process; a set whose meta lacks them (written by a version
before they were recorded) is rebuilt so once too, not refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hot_fixtures import own_redis

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.redis_server import EmbeddedRedis

TURNS = 30
TEXT = "alpha beta gamma delta " * 25  # ~100 tokens a turn: 30 turns are ~3,200
BUDGET = 500
DEFAULTS = {"head_protect": 2, "tail_protect": 8, "eviction_bias": 0.25}
RULE_FIELDS = ("head", "tail", "bias")  # the meta fields (tiers.hot) that record them


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    with own_redis(tmp_path / "redis") as srv:
        yield srv


# (the rules of the second run; whether the first run's meta loses its recorded rules, as
#  a set written by a version before they were recorded)
CASES = [
    # the review's case: the protected turns alone (10 x ~100) passed the budget; with 2
    # the set fits it (before: 1,070 tokens served, overflow 570)
    pytest.param({"head_protect": 0, "tail_protect": 2}, False, id="tail_cut"),
    # a longer protected head keeps the first turns the old set evicted
    pytest.param({"head_protect": 4, "tail_protect": 2}, False, id="head_raised"),
    # bias 1 evicts the oldest candidates, not the middle ones: other survivors
    pytest.param({"tail_protect": 2, "eviction_bias": 1.0}, False, id="bias_to_oldest"),
    # the same rules, but the meta does not say so: rebuilt once, the same set
    pytest.param({}, True, id="unrecorded"),
]


@pytest.mark.parametrize(("rules", "unrecorded"), CASES)
def test_a_read_applies_the_configured_rules(tmp_path: Path, server: EmbeddedRedis, embedder: FastEmbedder,
                                             rules: dict[str, float], unrecorded: bool) -> None:
    def config(**kw: float) -> Config:
        return Config(data_dir=tmp_path / "data", redis_url=server.url, hot_budget_tokens=BUDGET, **kw)

    with Memory(config(), embedder=embedder, background_indexing=False) as mem:
        for i in range(TURNS):
            mem.append("c", {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}: {TEXT}"})
        assert mem.hot is not None
        before = mem.hot.tier.read("c")
        assert before is not None
        meta_key = mem.hot.tier.keys("c")[0]
        if unrecorded:
            mem.hot.tier.client.hdel(meta_key, *RULE_FIELDS)
    want = {**DEFAULTS, **rules}
    with Memory(config(**rules), embedder=embedder, background_indexing=False) as mem:
        assert mem.hot is not None
        ctx = mem.context("c", "what about turn 3?", 2000)
        assert not ctx.plan.degraded
        assert mem.hot.rebuilds == 1  # the set kept under other (or unrecorded) rules
        got = mem.hot.tier.read("c")
        assert got is not None
        recorded = mem.hot.tier.client.hmget(meta_key, *RULE_FIELDS)
        assert [None if v is None else float(v) for v in recorded] == [want["head_protect"], want["tail_protect"], want["eviction_bias"]]
        # the very set a rebuild under the rules now in force gives
        mem.hot.refresh("c")
        fresh = mem.hot.tier.read("c")
        assert fresh is not None and fresh.turns == got.turns
        assert (got.total_tokens, got.overflow_tokens) == (fresh.total_tokens, fresh.overflow_tokens)
        if rules:
            assert got.turns != before.turns  # the premise: the rules change the set
        else:
            assert got.turns == before.turns
        # within the budget, or only the protected turns over it, under the rules now
        head, tail = int(want["head_protect"]), int(want["tail_protect"])
        protected = sum(t.tokens for t in got.turns[:head] + got.turns[len(got.turns) - tail:])
        assert got.total_tokens <= max(BUDGET, protected)
        assert got.overflow_tokens == max(0, got.total_tokens - BUDGET)
        # once: the next reads trust the set
        rebuilds = mem.hot.rebuilds
        mem.context("c", "and turn 5?", 2000)
        mem.context("c", "and turn 7?", 2000)
        assert mem.hot.rebuilds == rebuilds


def test_two_processes_with_different_rules_do_not_rebuild_each_other(
        tmp_path: Path, server: EmbeddedRedis, embedder: FastEmbedder) -> None:
    """Two Memory objects (as two processes: each its own HotLink) on one log and one
    Redis with different tail_protect: each rebuilds a set kept under the other's rules
    once, not on every read (as with two budgets, test_hot_budget_change)."""
    def config(tail: int) -> Config:
        return Config(data_dir=tmp_path / "data", redis_url=server.url, hot_budget_tokens=BUDGET, tail_protect=tail)

    with Memory(config(8), embedder=embedder, background_indexing=False) as a, \
            Memory(config(2), embedder=embedder, background_indexing=False) as b:
        assert a.hot is not None and b.hot is not None
        for i in range(TURNS):
            a.append("c", {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}: {TEXT}"})
        before = (a.hot.rebuilds, b.hot.rebuilds)
        for i in range(6):
            b.context("c", "what did we say?", 2000)
            a.context("c", "what did we say?", 2000)
            a.append("c", {"role": "user", "content": f"more {i}: {TEXT}"})
        rebuilt = (a.hot.rebuilds - before[0], b.hot.rebuilds - before[1])
        assert max(rebuilt) <= 1, rebuilt

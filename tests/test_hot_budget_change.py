"""A changed `hot_budget_tokens` applies to existing hot sets at their next read
(tiermem.hotlink `_sync`), on a real redis-server kept across the two runs and real SQLite.

The budget is stored in each set's meta when the set is written. On the code before
(audit_hot, finding 6) a read trusted a set built under another budget: with the budget
lowered, context() kept serving (and renewing) a set four times over it and stats
reported no overflow, until the next append happened to run the eviction; with it
raised, the set stayed as small as before. Now a set whose stored budget is not the
configured one is rebuilt from the log, which gives what live appends under the new
budget would have.
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
TEXT = "lorem ipsum dolor sit amet " * 15  # ~80 tokens a turn: 30 turns are ~2,500


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    with own_redis(tmp_path / "redis") as srv:
        yield srv


# (budget of the first run, budget of the second)
CASES = [
    pytest.param(4000, 500, id="lowered"),  # the set was 5x over the new budget
    pytest.param(500, 4000, id="raised"),  # the set kept only what fit the old one
]


@pytest.mark.parametrize(("first", "second"), CASES)
def test_a_read_applies_the_configured_budget(tmp_path: Path, server: EmbeddedRedis,
                                              embedder: FastEmbedder, first: int, second: int) -> None:
    def config(budget: int) -> Config:
        return Config(data_dir=tmp_path / "data", redis_url=server.url, hot_budget_tokens=budget)

    with Memory(config(first), embedder=embedder, background_indexing=False) as mem:
        for i in range(TURNS):
            mem.append("c", {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}: {TEXT}"})
        assert mem.hot is not None
        built = mem.hot.tier.read("c")
        assert built is not None and built.budget == first  # the premise
    with Memory(config(second), embedder=embedder, background_indexing=False) as mem:
        assert mem.hot is not None
        ctx = mem.context("c", "what did we say?", 800)
        assert not ctx.plan.degraded
        got = mem.hot.tier.read("c")
        assert got is not None and got.budget == second
        assert got.total_tokens <= second or got.overflow_tokens == got.total_tokens - second
        stats = mem.stats()["hot"]
        assert (stats["tokens"], stats["overflow_tokens"]) == (got.total_tokens, got.overflow_tokens)
        # the very set a rebuild under the new budget gives
        mem.hot.refresh("c")
        fresh = mem.hot.tier.read("c")
        assert fresh is not None and fresh.turns == got.turns


def test_two_processes_with_different_budgets_do_not_rebuild_each_other(
        tmp_path: Path, server: EmbeddedRedis, embedder: FastEmbedder) -> None:
    """Two Memory objects (as two processes: each its own HotLink) on one log and one Redis,
    configured with different budgets: each rebuilds a set stored under the other's budget
    once, not on every read. On the code before 44df2f0's follow-up, every read after the
    other's write rebuilt the whole set (O(conversation) a read: 89 ms at 400 turns)."""
    def config(budget: int) -> Config:
        return Config(data_dir=tmp_path / "data", redis_url=server.url, hot_budget_tokens=budget)

    with Memory(config(4000), embedder=embedder, background_indexing=False) as a, \
            Memory(config(3000), embedder=embedder, background_indexing=False) as b:
        assert a.hot is not None and b.hot is not None
        for i in range(TURNS):
            a.append("c", {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}: {TEXT}"})
        before = (a.hot.rebuilds, b.hot.rebuilds)
        for i in range(8):
            b.context("c", "what did we say?", 800)
            a.context("c", "what did we say?", 800)
            a.append("c", {"role": "user", "content": f"more {i}: {TEXT}"})
        rebuilt = (a.hot.rebuilds - before[0], b.hot.rebuilds - before[1])
        assert max(rebuilt) <= 1, rebuilt
        for mem in (a, b):  # and the contexts still end with the log's newest turn
            assert mem.context("c", "and now?", 800).messages[-1]["content"].startswith("more 7:")

"""A /metrics scrape costs the same whatever the number of conversations, and the hot
tier's figures it exports are the ones the sets record (tiermem.service.metrics,
tiermem.hotlink `counters`); real SQLite and the embedded redis-server.

On the code before (audit_scale finding 1) the scrape read every conversation's hot set
(one script call each, plus an SQL lookup each): 169 ms at 210 conversations, 2.2 s at
1,999, past a scraper's timeout at ~20k. The command count below grew with every
conversation added, and `tiermem_hot_demotions` did not exist.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tiermem import Config, Memory
from tiermem.service.auth import TokenAuth
from tiermem.service.metrics import StateCollector
from tiermem.service.runtime import Runtime
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.redis_server import EmbeddedRedis

BUDGET = 600  # tokens per hot set: a dozen turns of TEXT overflow it
TEXT = "lorem ipsum dolor sit amet " * 15  # ~80 tokens a turn
TURNS = 12


@pytest.fixture
def mem(tmp_path: Path, embedder: FastEmbedder) -> Iterator[Memory]:
    data = tmp_path / "data"
    m = Memory(Config(data_dir=data, hot_budget_tokens=BUDGET), embedder=embedder, background_indexing=False)
    try:
        yield m
    finally:
        m.close()
        EmbeddedRedis(data).stop()


def collector(mem: Memory) -> StateCollector:
    auth = TokenAuth({}, enabled=False, default_namespace="default", max_id_chars=128)
    return StateCollector(Runtime(config=mem.config, auth=auth, memory=mem, start_scheduler=False))


def commands(mem: Memory) -> int:
    """Commands the Redis server has run so far, by its own count (INFO commandstats)."""
    assert mem.hot is not None
    info = mem.hot.client.info("commandstats")
    return sum(int(v["calls"]) for v in info.values())


def scrape_cost(col: StateCollector, mem: Memory) -> int:
    before = commands(mem)
    col._gather()  # the collector's cache is bypassed: every call reads the tiers
    return commands(mem) - before  # includes the second INFO, the same each time


def value(col: StateCollector, name: str, labels: dict[str, str] | None = None) -> float:
    for fam in col._gather():
        for s in fam.samples:
            if s.name == name and (labels is None or s.labels == labels):
                return float(s.value)
    raise AssertionError(f"{name} not exported")


def fill(mem: Memory, first: int, count: int) -> None:
    for c in range(first, first + count):
        for i in range(TURNS):
            mem.append(f"c{c}", {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}: {TEXT}"})


# (conversations first scraped, conversations added before the second scrape)
GROWTH = [
    pytest.param(1, 4, id="1-to-5"),  # a handful more
    pytest.param(2, 18, id="2-to-20"),  # ten times as many
]


@pytest.mark.parametrize(("first", "added"), GROWTH)
def test_a_scrape_runs_as_many_redis_commands_whatever_the_conversations(
        mem: Memory, first: int, added: int) -> None:
    col = collector(mem)
    fill(mem, 0, first)
    small = scrape_cost(col, mem)
    fill(mem, first, added)
    assert scrape_cost(col, mem) == small
    assert small <= 3  # PING and the INFO of the count itself (and nothing per conversation)


def test_exported_hot_counts_equal_what_the_sets_record(mem: Memory) -> None:
    assert mem.hot is not None
    col = collector(mem)
    fill(mem, 0, 3)  # ~960 tokens a conversation against 600: evictions
    # pin an evicted turn back in, then enough pins that pins alone exceed the budget:
    # the lowest-priority ones are demoted
    hs = mem.hot.tier.read("c0")
    assert hs is not None
    hot_positions = {t.position for t in hs.turns}
    evicted = [p for p in range(TURNS) if p not in hot_positions]
    assert evicted  # the premise: the budget evicted some
    for p in range(TURNS):
        mem.pin("c0", p, priority=10 + p)
    mem.unpin("c1", 0)  # nothing pinned there: a no-op
    sets = [mem.hot.tier.read(f"c{c}") for c in range(3)]
    assert all(s is not None for s in sets)
    assert mem.hot.rebuilds == 0  # every set is the live one: its counts are this process's
    evictions = sum(s.evictions for s in sets if s is not None)
    demoted = sum(s.demoted_count for s in sets if s is not None)
    assert evictions > 0 and demoted > 0
    assert value(col, "tiermem_hot_evictions_total") == evictions
    assert value(col, "tiermem_hot_demotions_total") == demoted
    assert value(col, "tiermem_hot_rebuilds_total") == 0
    assert value(col, "tiermem_tier_up", {"tier": "hot"}) == 1
    # an erasure deletes the sets, not what happened before: counters never go back
    mem.delete_conversation("c0")
    assert mem.hot.tier.read("c0") is None
    assert value(col, "tiermem_hot_evictions_total") == evictions
    assert value(col, "tiermem_hot_demotions_total") == demoted
    assert value(col, "tiermem_tier_up", {"tier": "hot"}) == 1


def test_a_scrape_with_redis_gone_reports_the_hot_tier_down(mem: Memory, tmp_path: Path) -> None:
    col = collector(mem)
    fill(mem, 0, 1)
    assert mem.hot is not None and mem.hot.embedded is not None
    mem.hot.embedded = None  # so that the failed PING does not start the server again
    EmbeddedRedis(tmp_path / "data").stop()
    assert value(col, "tiermem_tier_up", {"tier": "hot"}) == 0
    assert value(col, "tiermem_tier_up", {"tier": "cold"}) == 1

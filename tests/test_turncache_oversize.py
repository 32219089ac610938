"""A conversation larger than half the turn cache (tiers/turncache.py, `OVERSIZE_SHARE`)
evicts no other conversation: it is served, kept only until another conversation's call,
warned about once naming `turn_cache_mb`, and the cache's figures reach /metrics. Real
Memory over SQLite, the hash embedder (real vectors of MiniLM's width, no model).

On the code before (scale review of 2026-12-07) the newest entry was kept whatever its
size and evicted every other conversation to make room: with turn_cache_mb=32 a 50k-turn
conversation left the cache holding only itself, each call on it after another's took
8.6-9.4 s, nothing logged it and /metrics had no turn-cache figure.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from hash_embedder import HashEmbedder

from tiermem import Config, Memory
from tiermem.service.auth import TokenAuth
from tiermem.service.metrics import StateCollector
from tiermem.service.runtime import Runtime

CACHE_MB = 1  # the smallest turn_cache_mb: a few hundred turns of 384-wide vectors fill it
CACHE_BYTES = CACHE_MB * 1024 * 1024
SMALL = [f"small{i}" for i in range(5)]  # conversations that fit together in CACHE_MB
SMALL_TURNS = 20  # ~0.11 MiB each as the cache counts (64-row buffers, 1.5 KiB a vector)
QUERY = "router keeps disconnecting"


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    with Memory(Config(data_dir=tmp_path / "data", turn_cache_mb=CACHE_MB), embedder=HashEmbedder(), hot=False,
                background_indexing=False) as m:
        yield m


def fill(mem: Memory, conv: str, turns: int) -> None:
    mem.append_many(conv, [{"role": "user" if i % 2 == 0 else "assistant",
                            "content": f"turn {i} of {conv}: the router drops wifi {i % 13} times at {i % 29} pm"}
                           for i in range(turns)])


def key(mem: Memory, conv: str) -> str:
    return mem._key(conv, None)[2]


def held(mem: Memory) -> set[str]:
    """The SMALL conversations the turn cache holds."""
    return {c for c in SMALL if mem.turns.holds(key(mem, c))}


@pytest.mark.parametrize(
    "big_turns",
    [
        # larger than the whole cache (1,024-row buffers, ~1.6 MiB), as the review's 114 MiB against 32
        700,
        # past half of it but within it (512-row buffers, ~0.8 MiB): it would fit beside some of them
        300,
    ],
)
def test_an_oversize_conversation_evicts_no_other(mem: Memory, big_turns: int,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    for c in SMALL:
        fill(mem, c, SMALL_TURNS)
    fill(mem, "big", big_turns)
    mem.cold.index_pending()
    for c in SMALL:
        mem.context(c, QUERY, 2000)
    assert held(mem) == set(SMALL)
    with caplog.at_level(logging.WARNING, logger="tiermem.turncache"):
        mem.context("big", QUERY, 2000)
        assert held(mem) == set(SMALL)  # none evicted for it
        assert mem.turns.holds(key(mem, "big"))  # kept for its next call...
        loads = mem.turns.stats()["loads"]
        mem.context("big", QUERY, 2000)
        assert mem.turns.stats()["loads"] == loads  # ...which reads only the census
        mem.context(SMALL[0], QUERY, 2000)  # until another conversation's call needs the room
        assert not mem.turns.holds(key(mem, "big"))
        assert mem.turns.stats()["bytes"] <= CACHE_BYTES
        mem.context("big", QUERY, 2000)  # read whole again, and still evicts none
        assert held(mem) == set(SMALL)
        for c in SMALL:
            mem.context(c, QUERY, 2000)
    stats = mem.turns.stats()
    assert stats["loads"] == len(SMALL) + 2  # each small once, the big one twice
    assert stats["oversize_loads"] == 2
    warned = [r.getMessage() for r in caplog.records if r.name == "tiermem.turncache"]
    assert len(warned) == 1, warned  # once per conversation, not per load
    assert "turn_cache_mb=1" in warned[0] and key(mem, "big") in warned[0]
    needed = int(warned[0].split("turn_cache_mb=")[2].split()[0])  # "... turn_cache_mb=N or more keeps it"
    assert needed > CACHE_MB


def test_the_turn_cache_figures_reach_metrics(mem: Memory) -> None:
    for c in SMALL[:2]:
        fill(mem, c, SMALL_TURNS)
        mem.context(c, QUERY, 2000)
    stats = mem.turns.stats()
    auth = TokenAuth({}, enabled=False, default_namespace="default", max_id_chars=128)
    col = StateCollector(Runtime(config=mem.config, auth=auth, memory=mem, start_scheduler=False))
    got = {s.name: s.value for fam in col._gather() for s in fam.samples}
    assert got["tiermem_turn_cache_conversations"] == 2
    assert got["tiermem_turn_cache_bytes"] == stats["bytes"] > 0
    assert got["tiermem_turn_cache_loads_total"] == 2
    assert got["tiermem_turn_cache_reloads_total"] == 0
    assert got["tiermem_turn_cache_oversize_loads_total"] == 0

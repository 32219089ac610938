"""Idle hot sets leave Redis (tiers.hot, `hot_idle_ttl_s`), on a real embedded redis-server.

Hot keys had no TTL: Redis kept the working set of every conversation ever touched
(5 keys per conversation, a full set up to `hot_budget_tokens` of text), so a support
backend serving many customers grew it without bound. Every script that reads or writes
a set now renews one idle TTL on all of its keys together; an expired set is a missing
one, which the caller rebuilds from the log, as after a flushed Redis.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from hot_fixtures import own_redis

from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder
from tiermem.tiers.hot import HotTier, HotTurn, make_client
from tiermem.tiers.redis_server import EmbeddedRedis

GEN = "gen-1"
TTL_S = 60.0
IDLE_TTL_S = 2.0  # the Memory test's idle TTL: expired after a short sleep, not during its setup


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[redis.Redis]:
    with own_redis(tmp_path_factory.mktemp("hot-ttl")) as srv:
        c = make_client(srv.url)
        assert isinstance(c, redis.Redis)
        yield c
        c.close()


def tier(client: redis.Redis, ttl_s: float) -> HotTier:
    return HotTier(client, budget_tokens=100, head_protect=1, tail_protect=1, eviction_bias=0.25, idle_ttl_s=ttl_s)


def turns(n: int, pin: int | None = None) -> list[HotTurn]:
    return [HotTurn(i, 30, i == pin, 90 if i == pin else 0, f"turn {i}") for i in range(n)]


def ttls_ms(client: redis.Redis, hot: HotTier, conv: str) -> list[int]:
    """PTTL of each existing key of the set (-1: no TTL)."""
    return [int(client.pttl(k)) for k in hot.keys(conv) if client.exists(k)]


# (how the set was last written, so every path that writes live keys is covered)
WRITES = [
    ("admitted", lambda hot, c: hot.admit_many(c, turns(6, pin=2), generation=GEN)),
    ("pinned", lambda hot, c: (hot.admit_many(c, turns(6), generation=GEN), hot.pin(c, 5, priority=80, generation=GEN))),
    ("rebuilt", lambda hot, c: hot.rebuild(c, turns(6, pin=2), generation=GEN)),
]


@pytest.mark.parametrize("write", [w[1] for w in WRITES], ids=[w[0] for w in WRITES])
def test_every_key_of_a_written_set_carries_the_idle_ttl(client: redis.Redis, write) -> None:  # type: ignore[no-untyped-def]
    hot, conv = tier(client, TTL_S), f"c-{uuid.uuid4().hex}"
    write(hot, conv)
    got = ttls_ms(client, hot, conv)
    assert len(got) >= 4 and all(0 < t <= TTL_S * 1000 for t in got), got


def test_a_read_renews_it(client: redis.Redis) -> None:
    hot, conv = tier(client, TTL_S), f"c-{uuid.uuid4().hex}"
    hot.admit_many(conv, turns(6), generation=GEN)
    for k in hot.keys(conv):
        client.pexpire(k, 5_000)  # as if idle for most of the TTL
    assert hot.read(conv) is not None
    assert all(t > 5_000 for t in ttls_ms(client, hot, conv))


def test_zero_means_never(client: redis.Redis) -> None:
    hot, conv = tier(client, 0), f"c-{uuid.uuid4().hex}"
    hot.rebuild(conv, turns(6), generation=GEN)
    hot.admit_many(conv, [HotTurn(6, 30, False, 0, "turn 6")], generation=GEN)
    assert set(ttls_ms(client, hot, conv)) == {-1}


def test_an_expired_set_is_rebuilt_from_the_log(tmp_path: Path, embedder: Embedder) -> None:
    # long enough that a loaded runner's first context() (embedding, planning) does not
    # outlast it between the append and the premise's read
    cfg = Config(data_dir=tmp_path / "data", hot_idle_ttl_s=IDLE_TTL_S)
    try:
        with Memory(cfg, embedder=embedder, background_indexing=False) as mem:
            mem.append_many("c", [{"role": "user", "content": f"message {i} about the router"} for i in range(6)])
            first = mem.context("c", "what about the router?", 500)
            key = mem.cold.key_of("default", "c") or ""
            assert mem.hot is not None and mem.hot.tier.read(key) is not None  # the premise: the set is there
            time.sleep(IDLE_TTL_S + 1.0)
            assert mem.hot.tier.read(key) is None  # expired, every key of it
            mem.append("c", {"role": "user", "content": "and the firewall?"})
            later = mem.context("c", "and the firewall?", 500)
            assert later.messages[-1]["content"] == "and the firewall?"
            assert not later.plan.degraded and len(later.messages) >= len(first.messages)
    finally:
        EmbeddedRedis(cfg.data_dir).stop()

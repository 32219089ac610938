"""A hot set's counts for stats (`HotTier.summaries`, `Memory.stats`), on a real
redis-server: the same figures as reading the whole set, without renewing its idle TTL
(a polled `/v1/stats` or `tiermem stats` kept every idle set of the namespace alive,
defeating `hot_idle_ttl_s`) and without a script per set (no texts loaded)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from conftest import full_memory
from hot_fixtures import own_redis

from tiermem import Config
from tiermem.tiers.embed import Embedder
from tiermem.tiers.hot import SUMMARY_PIPELINE_SETS, HotSet, HotTier, HotTurn, make_client

GEN = "gen-1"
TTL_S = 60.0
SHORT_TTL_MS = 5_000  # "idle for most of the TTL": what a read would renew


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[redis.Redis]:
    with own_redis(tmp_path_factory.mktemp("hot-summaries")) as srv:
        c = make_client(srv.url)
        assert isinstance(c, redis.Redis)
        yield c
        c.close()


def tier(client: redis.Redis) -> HotTier:
    return HotTier(client, budget_tokens=100, head_protect=1, tail_protect=1, eviction_bias=0.25, idle_ttl_s=TTL_S)


def turns(n: int, tokens: int = 30, pins: tuple[int, ...] = ()) -> list[HotTurn]:
    return [HotTurn(i, tokens, i in pins, 90 - i if i in pins else 0, f"turn {i}") for i in range(n)]


def counts(hs: HotSet) -> tuple[str, int, int, int, int, int, list[int]]:
    """What stats counted from a whole set before."""
    return (hs.generation, hs.total_tokens, len(hs.turns), sum(1 for t in hs.turns if t.pinned), hs.evictions,
            hs.overflow_tokens, list(hs.demoted))


SETS: list[tuple[str, Callable[[HotTier, str], object]]] = [
    # under the budget, nothing evicted
    ("small", lambda hot, c: hot.admit_many(c, turns(3), generation=GEN)),
    # evictions from the middle
    ("evicting", lambda hot, c: hot.admit_many(c, turns(12), generation=GEN)),
    # pins kept while others go
    ("pinned", lambda hot, c: hot.admit_many(c, turns(10, pins=(2, 5)), generation=GEN)),
    # pins alone over the budget: the lowest is demoted
    ("demoting", lambda hot, c: hot.admit_many(c, turns(6, tokens=40, pins=(0, 1, 2, 3, 4, 5)), generation=GEN)),
    # protected head and tail alone over the budget: overflow reported
    ("overflowing", lambda hot, c: hot.admit_many(c, turns(2, tokens=80), generation=GEN)),
    # a set made by the rebuild path, then pinned and unpinned
    ("rebuilt", lambda hot, c: (hot.rebuild(c, turns(8, pins=(3,)), generation=GEN),
                                hot.pin(c, 7, priority=80, generation=GEN), hot.unpin(c, 3, generation=GEN))),
]


@pytest.mark.parametrize("make", [s[1] for s in SETS], ids=[s[0] for s in SETS])
def test_the_counts_are_those_of_the_whole_set(client: redis.Redis, make: Callable[[HotTier, str], object]) -> None:
    hot, conv = tier(client), f"c-{uuid.uuid4().hex}"
    make(hot, conv)
    whole = hot.read(conv)
    assert whole is not None
    got = hot.summaries([conv])[conv]
    assert (got.generation, got.total_tokens, got.members, got.pins, got.evictions, got.overflow_tokens,
            got.demoted) == counts(whole)


def test_missing_and_partly_lost_sets_are_left_out(client: redis.Redis) -> None:
    hot = tier(client)
    whole, lost, never = (f"c-{uuid.uuid4().hex}" for _ in range(3))
    for conv in (whole, lost):
        hot.admit_many(conv, turns(4), generation=GEN)
    client.delete(hot.keys(lost)[3])  # its texts, as maxmemory may evict one key
    assert hot.read(lost) is None and hot.read(never) is None
    assert list(hot.summaries([whole, lost, never])) == [whole]


def test_they_do_not_renew_the_idle_ttl(client: redis.Redis) -> None:
    hot, conv = tier(client), f"c-{uuid.uuid4().hex}"
    hot.admit_many(conv, turns(6, pins=(2,)), generation=GEN)
    for k in hot.keys(conv):
        client.pexpire(k, SHORT_TTL_MS)
    assert conv in hot.summaries([conv])
    ttls = [int(client.pttl(k)) for k in hot.keys(conv) if client.exists(k)]
    assert ttls and all(0 < t <= SHORT_TTL_MS for t in ttls), ttls


def test_many_sets_are_read_in_pipelines(client: redis.Redis) -> None:
    hot = tier(client)
    convs = [f"c-{uuid.uuid4().hex}" for _ in range(SUMMARY_PIPELINE_SETS + 3)]  # two pipelines
    for conv in convs:
        hot.admit_many(conv, turns(2), generation=GEN)
    got = hot.summaries(convs)
    assert list(got) == convs and all(s.members == 2 for s in got.values())


def _scripts_run(client: redis.Redis) -> int:
    stats = client.info("commandstats")
    return sum(int(v["calls"]) for k, v in stats.items() if k in ("cmdstat_evalsha", "cmdstat_eval"))


def test_namespace_stats_leave_idle_sets_to_expire(tmp_path: Path, embedder: Embedder) -> None:
    cfg = Config(data_dir=tmp_path / "data", hot_idle_ttl_s=TTL_S)
    with full_memory(cfg, embedder) as mem:
        for c in range(3):
            mem.append_many(f"c{c}", [{"role": "user", "content": f"message {i} about router {c}"} for i in range(4)],
                            namespace="acme")
        mem.pin("c1", 2, priority=80, namespace="acme")
        assert mem.hot is not None
        hot, rc = mem.hot.tier, mem.hot.tier.client
        keys = [k for c in range(3) for k in hot.keys(mem.cold.key_of("acme", f"c{c}") or "") if rc.exists(k)]
        for k in keys:
            rc.pexpire(k, SHORT_TTL_MS)
        scripts = _scripts_run(rc)
        stats = mem.stats(namespace="acme")["hot"]
        # before: every set read whole, by a script that renewed its TTL to the full idle TTL
        assert all(0 < int(rc.pttl(k)) <= SHORT_TTL_MS for k in keys)
        assert _scripts_run(rc) == scripts
        assert (stats["members"], stats["pins"]) == (12, 1) and stats["tokens"] > 0


def test_namespace_stats_read_the_store_once_and_count_only_their_generation(tmp_path: Path,
                                                                              embedder: Embedder) -> None:
    """`Memory.stats(namespace=)` reads every conversation's creation time in one statement
    (a lookup of each conversation's metadata and log end made the stats of a namespace of
    2,000 conversations cost ~300 ms of SQL), and still leaves out a set of another
    generation (another database sharing this Redis, or an older incarnation of the id)."""
    n = 12
    with full_memory(Config(data_dir=tmp_path / "data"), embedder) as mem:
        for c in range(n):
            mem.append_many(f"c{c}", [{"role": "user", "content": f"note {i} on pump {c}"} for i in range(3)],
                            namespace="acme")
        mem.append("other", {"role": "user", "content": "another tenant's note"}, namespace="globex")
        assert mem.hot is not None
        before = mem.stats(namespace="acme")["hot"]
        assert before["members"] == 3 * n
        # one set claims another generation: not ours to count
        mem.hot.tier.client.hset(mem.hot.tier.keys(mem.cold.key_of("acme", "c0") or "")[0], "gen", "elsewhere:1.0")
        statements: list[str] = []
        with mem.cold.reading() as conn:
            conn.set_trace_callback(statements.append)
        try:
            after = mem.stats(namespace="acme")["hot"]
        finally:
            with mem.cold.reading() as conn:
                conn.set_trace_callback(None)
        assert after["members"] == 3 * (n - 1)
        per_conversation = [s for s in statements if "FROM conversations c WHERE id" in s]
        # before: one metadata read per conversation of the namespace
        assert per_conversation == [], per_conversation[:3]
        assert len(statements) < n, statements

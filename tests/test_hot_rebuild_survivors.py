"""A hot-set rebuild reads the bodies of the turns that stay hot only (tiermem.hotlink
`_replay_rows`, tiers.hot `simulate_replay` / `HotTier.load`), on a real redis-server and real SQLite.

Audit audit_huge, finding F6: rebuilding a conversation's set (after a FLUSHALL, a Redis
restart, the idle TTL, a budget change) read, JSON-decoded and re-encoded every body of
the conversation to keep about 110 turns: 2.0 s at 20,000 turns and 5.8 s at 60,000, the
log read under the store's lock while the other tenant waited. The replay decides the
members from positions, tokens and pins alone, so now only the members' bodies (and the
last row's) are read. The set must be the very one the full replay gave, whatever the log.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from cold_helpers import rewrite_stored
from hot_fixtures import own_redis
from pg_server import fresh_schema

from tiermem import Config, Memory
from tiermem.hotlink import HotLink
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.hot import HotSet, HotTier, HotTurn, make_client, simulate_replay
from tiermem.tiers.redis_server import EmbeddedRedis

WORD = "lorem "  # about a token each


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    with own_redis(tmp_path / "redis") as srv:
        yield srv


def _corrupt(db: Path, key: str, position: int) -> None:
    # a torn body, written behind tiermem's back
    rewrite_stored(db, key, [(position, "body", '{"role":"user","content":"trunc')])


def _full_replay(link: HotLink, key: str) -> HotSet:
    """The rebuild before: every row's body read and encoded, then the same replay (the
    pin stamp and the log's pin version read before the rows, as tiermem.hotlink
    `_rebuild` reads them)."""
    gen = link.generation(key)
    stamp = link.tier.pin_stamp(key, gen)
    version = link.cold.pin_version(key)
    turns, tip = link._hot_turns(key, link.cold.turns(key))
    return link.tier.rebuild(key, turns, generation=gen, tip=tip, pin_stamp=stamp, pin_version=version)


# (turns, words of turn i as a function of i, pins {position: priority}, corrupt positions,
#  budget, head_protect, tail_protect, eviction_bias)
LOGS = [
    # plain recency window, evicting from the middle
    pytest.param(80, lambda i: 20 + (i * 7) % 30, {}, [], 600, 2, 4, 0.25, id="window"),
    # pins among the evicted and kept turns
    pytest.param(80, lambda i: 20 + (i * 7) % 30, {3: 5, 17: 2, 40: 9, 77: 1}, [], 600, 2, 4, 0.25, id="pins"),
    # pins alone exceed the budget: the lowest-priority ones demoted, with their tokens
    pytest.param(40, lambda i: 60, {1: 1, 5: 3, 9: 2, 20: 4, 30: 1, 35: 7}, [], 200, 1, 2, 0.25, id="demotions"),
    # protected tail alone over the budget: overflow reported
    pytest.param(30, lambda i: 90, {}, [], 150, 1, 3, 0.25, id="overflow"),
    # everything fits: nothing evicted
    pytest.param(25, lambda i: 10, {4: 3}, [], 100_000, 2, 4, 0.25, id="fits"),
    # bias 0 (the middle) and 1 (the oldest), no protection at all
    pytest.param(60, lambda i: 15 + i % 11, {10: 2}, [], 300, 0, 0, 0.0, id="bias0-unprotected"),
    pytest.param(60, lambda i: 15 + i % 11, {10: 2}, [], 300, 0, 0, 1.0, id="bias1-unprotected"),
    # the smallest budget (Config: 64): every unprotected turn evicted, pins demoted
    pytest.param(20, lambda i: 40, {2: 1, 15: 2, 17: 2}, [], 64, 1, 1, 0.25, id="budget-min"),
    # unrenderable rows that stay hot (one in the tail, the last one): the full replay
    # never admitted them, so the new rebuild leaves them out and replays again
    pytest.param(50, lambda i: 20 + i % 9, {7: 3}, [46, 49], 500, 2, 4, 0.25, id="salvaged-survivor-and-last"),
    # more turns than one replay chunk (tiers.hot REBUILD_CHUNK) with pins scattered
    pytest.param(2300, lambda i: 3 + i % 17, {5: 2, 1999: 4, 2001: 1, 2250: 3}, [], 400, 3, 5, 0.25,
                 id="two-chunks"),
]


@pytest.mark.parametrize(("n", "words", "pins", "corrupt", "budget", "head", "tail", "bias"), LOGS)
def test_rebuild_gives_the_full_replays_set(tmp_path: Path, server: EmbeddedRedis, embedder: FastEmbedder,
                                            n: int, words, pins: dict[int, int], corrupt: list[int],
                                            budget: int, head: int, tail: int, bias: float) -> None:
    cfg = Config(data_dir=tmp_path / "data", redis_url=server.url, hot_budget_tokens=budget,
                 head_protect=head, tail_protect=tail, eviction_bias=bias)
    _compare(cfg, embedder, n, words, pins, corrupt)


# the same on PostgreSQL (its own read of the survivors' bodies), cases without a
# corrupted row (the log there refuses an UPDATE even of its owner)
PG_LOGS = [p for p in LOGS if p.id in ("pins", "demotions", "overflow", "two-chunks")]


@pytest.mark.parametrize(("n", "words", "pins", "corrupt", "budget", "head", "tail", "bias"), PG_LOGS)
def test_rebuild_gives_the_full_replays_set_postgres(
        tmp_path: Path, server: EmbeddedRedis, embedder: FastEmbedder, pg_url: str,
        n: int, words, pins: dict[int, int], corrupt: list[int], budget: int, head: int, tail: int,
        bias: float) -> None:
    cfg = Config(data_dir=tmp_path / "data", redis_url=server.url, cold_url=pg_url, cold_schema=fresh_schema(),
                 hot_budget_tokens=budget, head_protect=head, tail_protect=tail, eviction_bias=bias)
    _compare(cfg, embedder, n, words, pins, corrupt)


def _compare(cfg: Config, embedder: FastEmbedder, n: int, words, pins: dict[int, int], corrupt: list[int]) -> None:
    with Memory(cfg, embedder=embedder, background_indexing=False) as mem:
        mem.append_many("c", [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " + WORD * words(i)}
                              for i in range(n)])
        for pos, priority in pins.items():
            mem.pin("c", pos, priority=priority)
        key = mem._key("c", None)[2]
        for pos in corrupt:
            _corrupt(cfg.db_path, key, pos)
        assert mem.hot is not None
        old = _full_replay(mem.hot, key)
        mem.hot.client.flushall()  # what the audit did: the next read rebuilds
        new = mem.hot._rebuild(key)
        assert new == old  # members, order, payloads, total, overflow, evictions, demoted, last, tip
        assert mem.hot.tier.read(key) == old
        # the premise of each case
        assert not set(corrupt) & {t.position for t in new.turns}
        if corrupt and n - 1 in corrupt:
            assert new.last_position < n - 1


def test_rebuild_reads_only_the_surviving_bodies(tmp_path: Path, server: EmbeddedRedis,
                                                 embedder: FastEmbedder) -> None:
    """The rebuild of a 600-turn conversation keeping ~20 turns decodes ~20 bodies. On the
    code before it decoded all 600 (every body read, decoded and re-encoded)."""
    turns = 600
    cfg = Config(data_dir=tmp_path / "data", redis_url=server.url, hot_budget_tokens=500)
    with Memory(cfg, embedder=embedder, background_indexing=False) as mem:
        mem.append_many("c", [{"role": "user", "content": f"turn {i} " + WORD * 20} for i in range(turns)])
        key = mem._key("c", None)[2]
        assert mem.hot is not None
        decoded: list[int] = []
        decode = mem.cold._decode

        def counting(row):  # a spy that calls through: the real rows are decoded
            decoded.append(int(row[1]))
            return decode(row)

        mem.cold._decode = counting  # type: ignore[method-assign]
        mem.hot.client.flushall()
        hs = mem.hot._rebuild(key)
        members = {t.position for t in hs.turns}
        assert 0 < len(members) < turns // 10
        assert set(decoded) <= members | {turns - 1}, f"{len(decoded)} bodies decoded for {len(members)} members"


# (seed, turns, pin probability, budget, head_protect, tail_protect, eviction_bias)
RANDOM_LOGS = [
    (1, 300, 0.0, 400, 2, 4, 0.25),  # no pins: the window alone
    (2, 300, 0.05, 400, 2, 4, 0.25),  # a few pins
    (3, 300, 0.5, 400, 2, 4, 0.25),  # pins everywhere: demotions, the scan path of victim_index
    (4, 300, 0.3, 120, 0, 0, 0.0),  # nothing protected, the middle first
    (5, 300, 0.3, 120, 0, 0, 1.0),  # nothing protected, the oldest first
    (6, 300, 0.1, 50, 5, 10, 0.5),  # protection alone over the budget: overflow
    (7, 300, 0.2, 10_000, 3, 3, 0.25),  # everything fits
    (8, 2500, 0.02, 900, 4, 8, 0.25),  # past one Lua replay chunk (REBUILD_CHUNK)
    (9, 300, 1.0, 300, 1, 1, 0.75),  # every turn pinned
    (10, 300, 0.1, 0, 2, 2, 0.25),  # a budget of 0 (HotTier allows it)
]


@pytest.mark.parametrize(("seed", "n", "pin_p", "budget", "head", "tail", "bias"), RANDOM_LOGS)
def test_simulated_replay_equals_the_lua_replay(server: EmbeddedRedis, seed: int, n: int, pin_p: float,
                                                budget: int, head: int, tail: int, bias: float) -> None:
    """tiers.hot.simulate_replay + HotTier.load against HotTier.rebuild (the Lua engine)
    on seeded random logs: gaps in the positions, tokens from 0 to 80, ties of priority."""
    rnd = random.Random(seed)
    turns, pos = [], 0
    for _ in range(n):
        pos += rnd.choice((1, 1, 1, 2, 5))
        pinned = rnd.random() < pin_p
        turns.append(HotTurn(pos, rnd.randint(0, 80), pinned, rnd.randint(0, 4) if pinned else 0, f"t{pos}"))
    client = make_client(server.url)
    try:
        tier = HotTier(client, budget_tokens=budget, head_protect=head, tail_protect=tail, eviction_bias=bias,
                       idle_ttl_s=3600)
        lua = tier.rebuild("lua", turns, generation="g", tip="tip")
        state = simulate_replay(((t.position, t.tokens, t.pinned, t.priority) for t in turns), budget=budget,
                                head=head, tail=tail, bias=bias)
        sim = tier.load("sim", state, {t.position: t.payload for t in turns}, generation="g", tip="tip")
        assert sim == lua
        assert sorted(client.pttl(k) > 0 for k in tier.keys("sim")) == sorted(client.pttl(k) > 0
                                                                               for k in tier.keys("lua"))
    finally:
        client.close()

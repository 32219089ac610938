"""A hot set that lost one of its keys is never served or extended as if it were whole
(tiers.hot), on a real redis-server.

Under `maxmemory` with an evicting policy (`allkeys-lru`, `allkeys-random`, and the
`volatile-*` ones, since every key of a set carries the idle TTL) Redis evicts single keys,
not a conversation's set: a meta can outlive its members' zset, its pins' hash or its
demoted pins' hash. On the code before, `read` checked only that each member had its
token count and text: a set whose zset was gone read as an empty set of 120 tokens, one
whose pin hash was gone read with every pin unpinned (and later admits evicted the
former pins, since the set went on without them), one whose demoted hash was gone read
with no demoted pins; HotLink served each of them as it was, never rebuilding it. The
meta now records how many members and pins the set has, and a read or an admit checks
them, the members' tokens against its total and the demoted pins against their tokens:
a partial set reads as missing (the caller rebuilds it from the log) and an admit into
it raises HotStale.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from hot_fixtures import own_redis

from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder
from tiermem.tiers.errors import HotStale
from tiermem.tiers.hot import HotTier, HotTurn, make_client, simulate_replay
from tiermem.tiers.redis_server import EmbeddedRedis

GEN = "gen-1"
BUDGET = 100
TOKENS = 30
# four pins of 30 tokens over a budget of 100, with the protected first and last turns: the
# three oldest are demoted (tiers.hot: hard but for the protected turns), the newest stays
PINNED = (1, 2, 3, 4)
FILLER = "paid by bank transfer from the account in Lisbon"  # makes each appended turn ~25 tokens


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    with own_redis(tmp_path_factory.mktemp("hot-partial")) as srv:
        yield srv


@pytest.fixture
def client(server: EmbeddedRedis) -> Iterator[redis.Redis]:
    c = make_client(server.url)
    assert isinstance(c, redis.Redis)
    yield c
    c.close()


def tier(client: redis.Redis) -> HotTier:
    return HotTier(client, budget_tokens=BUDGET, head_protect=1, tail_protect=1, eviction_bias=0.25)


def turns(n: int = 8) -> list[HotTurn]:
    return [HotTurn(i, TOKENS, i in PINNED, 50 if i in PINNED else 0, f"turn {i}") for i in range(n)]


def _loaded(hot: HotTier, conv: str) -> None:
    ts = turns()
    state = simulate_replay(((t.position, t.tokens, t.pinned, t.priority) for t in ts), budget=BUDGET, head=1,
                            tail=1, bias=0.25)
    hot.load(conv, state, {t.position: t.payload for t in ts}, generation=GEN)


# (how the set was written: each script that writes a live set records what a read checks)
WRITES: list[tuple[str, Callable[[HotTier, str], object]]] = [
    ("admitted", lambda hot, c: hot.admit_many(c, turns(), generation=GEN)),
    ("rebuilt", lambda hot, c: hot.rebuild(c, turns(), generation=GEN)),
    ("loaded", _loaded),
]

# (the key Redis evicted, by its suffix in HotTier.keys)
LOST = [
    "z",  # the members' zset: read as an empty set whose meta still counts their tokens
    "t",  # the members' token counts (detected before too)
    "p",  # the members' texts (detected before too)
    "pin",  # the pins' hash: read with every pin unpinned
    "d",  # the demoted pins' hash: read with none demoted
]


def _written(hot: HotTier, write: Callable[[HotTier, str], object]) -> str:
    conv = f"c-{uuid.uuid4().hex}"
    write(hot, conv)
    whole = hot.read(conv)
    assert whole is not None and whole.demoted == [1, 2, 3] and [t.position for t in whole.turns if t.pinned] == [4]
    return conv


def _lose(client: redis.Redis, hot: HotTier, conv: str, suffix: str) -> None:
    key = next(k for k in hot.keys(conv) if k.endswith(":" + suffix))
    assert client.delete(key) == 1, key


@pytest.mark.parametrize("suffix", LOST)
@pytest.mark.parametrize("write", [w[1] for w in WRITES], ids=[w[0] for w in WRITES])
def test_a_set_that_lost_one_key_reads_as_missing(client: redis.Redis, write: Callable[[HotTier, str], object],
                                                  suffix: str) -> None:
    hot = tier(client)
    conv = _written(hot, write)
    _lose(client, hot, conv, suffix)
    assert hot.read(conv) is None
    assert hot.summaries([conv]) == {}


@pytest.mark.parametrize("suffix", LOST)
def test_an_admit_into_it_raises_stale(client: redis.Redis, suffix: str) -> None:
    hot = tier(client)
    conv = _written(hot, WRITES[0][1])
    _lose(client, hot, conv, suffix)
    with pytest.raises(HotStale):
        hot.admit(conv, HotTurn(8, TOKENS, False, 0, "turn 8"), generation=GEN)


@pytest.mark.parametrize("suffix", LOST)
def test_memory_rebuilds_it_from_the_log(tmp_path: Path, server: EmbeddedRedis, embedder: Embedder,
                                         suffix: str) -> None:
    cfg = Config(data_dir=tmp_path / "data", redis_url=server.url, hot_budget_tokens=BUDGET, head_protect=1,
                 tail_protect=1)
    with Memory(cfg, embedder=embedder, background_indexing=False) as mem:
        assert mem.hot is not None
        conv = f"c-{uuid.uuid4().hex}"
        for i in range(8):
            mem.append(conv, {"role": "user", "content": f"turn {i}: the invoice number is {1000 + i}, " + FILLER})
        for p in PINNED:
            mem.pin(conv, p)
        key = mem.cold.key_of("default", conv)
        assert key is not None
        mem.hot.refresh(key)  # the canonical set (a replay), which a rebuild after the loss must give again
        whole = mem.hot.read(key).hot
        assert whole is not None and whole.demoted
        _lose(mem.hot.client, mem.hot.tier, key, suffix)  # type: ignore[arg-type]
        again = mem.hot.read(key)
        assert again.rebuilt and again.hot == whole

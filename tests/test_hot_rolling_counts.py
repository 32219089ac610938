"""A process of the version before the hot set's counts (7238178) writing the same sets as
this version, as in a rolling deploy or a rollback, causes no rebuilds here (tiers.hot),
on a real redis-server.

The meta's counts of members, pins and demoted pins (7238178: a set that lost a key to
maxmemory eviction is rebuilt) are written only by this version. HSET never removes a
field, so the older process's admit updated `last` and `total` and left the counts as
this version last wrote them; on the code before, this version's next read found them
wrong and answered no set (HotLink rebuilt it from the log: 2-6 s at 20-60k turns), its
summary left the set out and its admit raised HotStale 'inconsistent'. The counts are now
stamped with the state they describe (meta `counted`) and checked only while the stamp
matches; a set touched by the older version is checked as before the counts existed
until this version's next write restamps it, after which a lost key is found again.

The older version is the file itself: tests/data/hot_before_counts.py.txt is
`git show 7238178^:tiers/hot.py`, loaded as a module of its own beside this one.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import redis
from hot_fixtures import own_redis

from tiermem.tiers.errors import HotStale
from tiermem.tiers.hot import HotTier, HotTurn, make_client, simulate_replay
from tiermem.tiers.redis_server import EmbeddedRedis

OLD_SOURCE = Path(__file__).parent / "data" / "hot_before_counts.py.txt"
GEN = "gen-1"
BUDGET = 60  # tokens: twelve turns of TOKENS, so the later rounds evict
TOKENS = 5
PRIORITY = 50
FIRST = 5  # turns this version writes before the older process joins
ROUNDS = 10  # one admit by the older process, then one by this version, each round
PINNED = (1, 2, 3, 4)  # four pins of 30 tokens over a budget of 100: the oldest is demoted
LOSS_BUDGET = 100
LOSS_TOKENS = 30


@pytest.fixture(scope="module")
def old() -> ModuleType:
    name = "tiermem_hot_before_counts"
    loader = importlib.machinery.SourceFileLoader(name, str(OLD_SOURCE))
    spec = importlib.util.spec_from_loader(name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up
    loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    with own_redis(tmp_path_factory.mktemp("hot-rolling")) as srv:
        yield srv


@pytest.fixture
def client(server: EmbeddedRedis) -> Iterator[redis.Redis]:
    c = make_client(server.url)
    assert isinstance(c, redis.Redis)
    yield c
    c.close()


def _tiers(old: ModuleType, client: redis.Redis, budget: int) -> tuple[HotTier, Any]:
    kwargs: dict[str, Any] = {"budget_tokens": budget, "head_protect": 1, "tail_protect": 1, "eviction_bias": 0.25}
    return HotTier(client, **kwargs), old.HotTier(client, **kwargs)


# (what the older process admits: each leaves a count of this version's stale)
OLD_TURNS = [
    pytest.param(False, id="unpinned"),  # the members' count
    pytest.param(True, id="pinned"),  # the members' and the pins' counts, later the demoted pins'
]


@pytest.mark.parametrize("pinned", OLD_TURNS)
def test_interleaved_old_admits_cause_no_rebuild(old: ModuleType, client: redis.Redis, pinned: bool) -> None:
    new, older = _tiers(old, client, BUDGET)
    conv = f"c-{uuid.uuid4().hex}"
    log: list[tuple[int, int, bool, int]] = []  # what a rebuild would replay

    def admit(tier: Any, turn_type: Any, pin: bool) -> None:
        pos = len(log)
        log.append((pos, TOKENS, pin, PRIORITY if pin else 0))
        tier.admit(conv, turn_type(pos, TOKENS, pin, PRIORITY if pin else 0, f"turn {pos}"), generation=GEN)

    for _ in range(FIRST):
        admit(new, HotTurn, False)
    for _ in range(ROUNDS):
        admit(older, old.HotTurn, pinned)
        assert new.read(conv) is not None  # else HotLink rebuilds it from the log
        assert conv in new.summaries([conv])
        admit(new, HotTurn, False)  # HotStale here: rebuilt as well
    replay = simulate_replay(log, budget=BUDGET, head=1, tail=1, bias=0.25)
    hs = new.read(conv)
    assert hs is not None
    assert [t.position for t in hs.turns] == replay.members  # the same set a rebuild would give
    assert {t.position: t.priority for t in hs.turns if t.pinned} == replay.pins
    assert sorted(hs.demoted) == sorted(replay.demoted)


def _loss_set(new: HotTier, older: Any, old: ModuleType, conv: str) -> None:
    """A set with members, pins and a demoted pin, written by this version, then one admit
    by the older process (its counts now stale)."""
    turns = [HotTurn(i, LOSS_TOKENS, i in PINNED, PRIORITY if i in PINNED else 0, f"turn {i}") for i in range(8)]
    new.admit_many(conv, turns, generation=GEN)
    older.admit(conv, old.HotTurn(8, LOSS_TOKENS, True, PRIORITY, "turn 8"), generation=GEN)


def _lose(client: redis.Redis, hot: HotTier, conv: str, suffix: str) -> None:
    key = next(k for k in hot.keys(conv) if k.endswith(":" + suffix))
    assert client.delete(key) == 1, key


# (the key Redis evicted, by its suffix in HotTier.keys; each is found once this
# version's next write has restamped the counts)
LOST = [
    "z",  # the members' zset
    "t",  # the members' token counts
    "p",  # the members' texts
    "pin",  # the pins' hash: only the counts tell
    "d",  # the demoted pins' hash
]


@pytest.mark.parametrize("suffix", LOST)
def test_a_lost_key_is_found_once_restamped(old: ModuleType, client: redis.Redis, suffix: str) -> None:
    new, older = _tiers(old, client, LOSS_BUDGET)
    conv = f"c-{uuid.uuid4().hex}"
    _loss_set(new, older, old, conv)
    new.admit(conv, HotTurn(9, LOSS_TOKENS, False, 0, "turn 9"), generation=GEN)  # restamps
    whole = new.read(conv)
    assert whole is not None and whole.demoted and any(t.pinned for t in whole.turns)
    _lose(client, new, conv, suffix)
    assert new.read(conv) is None
    assert new.summaries([conv]) == {}
    with pytest.raises(HotStale):
        new.admit(conv, HotTurn(10, LOSS_TOKENS, False, 0, "turn 10"), generation=GEN)


# (the keys whose loss the checks from before the counts find in a read, a summary and an
# admit: a member without its token count or text; the pins' and demoted pins' hashes
# only the counts tell, from this version's next write on)
@pytest.mark.parametrize("suffix", ["z", "t", "p"])
def test_a_lost_key_is_found_before_restamping(old: ModuleType, client: redis.Redis, suffix: str) -> None:
    new, older = _tiers(old, client, LOSS_BUDGET)
    conv = f"c-{uuid.uuid4().hex}"
    _loss_set(new, older, old, conv)
    assert new.read(conv) is not None
    _lose(client, new, conv, suffix)
    assert new.read(conv) is None
    assert new.summaries([conv]) == {}
    with pytest.raises(HotStale):
        new.admit(conv, HotTurn(9, LOSS_TOKENS, False, 0, "turn 9"), generation=GEN)

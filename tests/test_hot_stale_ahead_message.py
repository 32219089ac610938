"""HotStale's message says what the caller has to do for its reason. A pin or unpin of a
position the set has not admitted yet (reason 'ahead', tiers.errors STALE_AHEAD) needs no
rebuild: the set is sound, only behind the log, and the caller catches it up and pins or
unpins again (tiermem.hotlink `_caught_up`). On the code before, its message said
"needs a rebuild" as for a broken set. Real redis-server, tiermem's own HotTier.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from tiermem.tiers.errors import HotStale
from tiermem.tiers.hot import HotTier, HotTurn, make_client
from tiermem.tiers.redis_server import EmbeddedRedis

GEN = "gen-1"
ADMITTED = 5  # turns in the set: positions 0 to 4
PAST = 9  # a position the set has not admitted


@pytest.fixture(scope="module")
def tier(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HotTier]:
    srv = EmbeddedRedis(Path(tmp_path_factory.mktemp("stale")))
    srv.ensure()
    client = make_client(srv.url)
    assert isinstance(client, redis.Redis)
    try:
        yield HotTier(client, budget_tokens=1000, head_protect=1, tail_protect=1, eviction_bias=0.25)
    finally:
        client.close()
        srv.stop()


def turn(pos: int) -> HotTurn:
    return HotTurn(pos, 10, False, 0, f"turn {pos}")


# (the call past the set's last admitted position)
AHEAD_CALLS: list[tuple[str, Callable[[HotTier, str], object]]] = [
    # a pin with the turn to admit: the set must admit the turns before it first
    ("pin", lambda t, c: t.pin(c, PAST, 1, generation=GEN, turn=turn(PAST))),
    # an unpin: the admit on its way may carry the pin
    ("unpin", lambda t, c: t.unpin(c, PAST, generation=GEN)),
]


@pytest.mark.parametrize("call", [c[1] for c in AHEAD_CALLS], ids=[c[0] for c in AHEAD_CALLS])
def test_ahead_says_catch_up_not_rebuild(tier: HotTier, call: Callable[[HotTier, str], object]) -> None:
    conv = f"c-{uuid.uuid4().hex}"
    tier.admit_many(conv, [turn(i) for i in range(ADMITTED)], generation=GEN)
    with pytest.raises(HotStale) as stale:
        call(tier, conv)
    assert stale.value.reason == "ahead"
    message = str(stale.value)
    assert "rebuild" not in message
    assert "catch it up with the log" in message and f"last position {ADMITTED - 1}" in message
    assert conv in message


# (reason: the set cannot be extended as it is, so the message still asks for a rebuild)
REBUILD_REASONS = [
    "generation",  # a set of another database or incarnation
    "missing",  # no set where an admit past position 0 expects one
    "inconsistent",  # a set that lost keys to maxmemory
    "gap",  # a set behind the log: an admit would leave a gap
    "dropped during rebuild",  # a rebuild's scratch keys gone
]


@pytest.mark.parametrize("reason", REBUILD_REASONS)
def test_other_reasons_still_ask_for_a_rebuild(reason: str) -> None:
    message = str(HotStale("c", reason, GEN, 3))
    assert "needs a rebuild" in message and reason in message and "catch it up" not in message

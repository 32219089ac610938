"""A positive `hot_idle_ttl_s` below one millisecond expires hot sets after 1 ms
(tiers.hot.MIN_IDLE_TTL_MS), on a real embedded redis-server.

The scripts take the TTL in whole ms and read 0 as "never". On the code before
(audit_hot, finding 7) any value in (0, 0.001) s was truncated to 0 ms, so the shortest
TTLs one could ask for meant the opposite: the set never expired.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
import redis
from hot_fixtures import own_redis

from tiermem.tiers.hot import HotTier, HotTurn, make_client

GEN = "gen-1"
WAIT_S = 0.05  # far past a 1 ms TTL


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[redis.Redis]:
    with own_redis(tmp_path_factory.mktemp("hot-ttl-floor")) as srv:
        c = make_client(srv.url)
        assert isinstance(c, redis.Redis)
        yield c
        c.close()


# (hot_idle_ttl_s, the TTL in ms the tier applies, whether the set is gone after WAIT_S)
CASES = [
    pytest.param(0.0005, 1, True, id="half-a-ms"),  # the audit's value: was 0, never
    pytest.param(1e-9, 1, True, id="a-nanosecond"),  # the smallest: rounded up, not down
    pytest.param(0.0, 0, False, id="zero-is-never"),  # 0 keeps meaning never
    pytest.param(0.0015, 1, True, id="a-ms-and-a-half"),  # whole ms, as before
    pytest.param(60.0, 60_000, False, id="a-minute"),  # an ordinary TTL, unchanged
]


@pytest.mark.parametrize(("ttl_s", "ttl_ms", "gone"), CASES)
def test_a_positive_ttl_expires(client: redis.Redis, ttl_s: float, ttl_ms: int, gone: bool) -> None:
    hot = HotTier(client, budget_tokens=100, head_protect=1, tail_protect=1, eviction_bias=0.25, idle_ttl_s=ttl_s)
    assert hot.idle_ttl_ms == ttl_ms
    conv = f"c-{uuid.uuid4().hex}"
    hot.admit_many(conv, [HotTurn(i, 10, False, 0, f"turn {i}") for i in range(3)], generation=GEN)
    time.sleep(WAIT_S)
    assert (hot.read(conv) is None) == gone
    assert all(not client.exists(k) for k in hot.keys(conv)) == gone

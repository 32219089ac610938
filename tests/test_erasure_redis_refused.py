"""An erasure while Redis refuses the hot tier for a while (BUSY: another client's script
past lua-time-limit; MISCONF: a failed RDB save), on a real redis-server: once Redis
takes commands again, no key of the erased conversation is left in it (its hot set, its
epoch state, the shown-in set that holds its text), and none is owed any more.

Invariant: every Redis call of an erasure runs under the tier's refusal mapping
(tiers.hot `refusals`), so a refusal degrades the link, the erasure's keys stay owed
(ColdLog.defer_purge), and the recovery purges them (HotLink `on_recover`).

On the code before, BUSY escaped the erasure's SCAN (HotTier.drop_all) and its epoch
state reads (planner.epoch `drop_showing`) as a plain ResponseError: the link never
degraded, nothing was owed, and the erased text stayed in Redis until the next open or
the keys' TTL (review of f2bfefa, r6_erase_misconf.py).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis
from hot_fixtures import TcpRedis, until_healthy
from test_hot_busy_misconf import busy, misconf

from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder

# the fixtures admin, server (hot_fixtures, by hot_server)
pytest_plugins = ["hot_server"]

SECRET = "my secret seat is 12A, paid by bank transfer from the account in Lisbon"
BUDGET = 300  # tokens: any context builds the set and its epoch state

# (what refuses the hot tier while the conversation is erased)
REFUSALS = [
    # every command refused, reads too: the erasure's SCAN and SMEMBERS (not known before)
    ("busy", busy),
    # every write refused: the erasure's DEL (known before; kept as the control)
    ("misconf", misconf),
]


def _keys_of(admin: redis.Redis, mem: Memory, key: str) -> list[str]:
    assert mem.hot is not None
    tag = mem.hot.tier.tag(key)
    return sorted(k for k in admin.scan_iter(match="*") if str(k).startswith(tag))


@pytest.mark.parametrize("refuse", [r[1] for r in REFUSALS], ids=[r[0] for r in REFUSALS])
def test_erased_while_refused_leaves_no_key_after(tmp_path: Path, server: TcpRedis, admin: redis.Redis,
                                                  embedder: Embedder, refuse: Callable[..., Any]) -> None:
    admin.connection_pool.connection_kwargs["decode_responses"] = True
    with Memory(Config(data_dir=tmp_path / "data", redis_url=server.url), embedder=embedder,
                background_indexing=False) as mem:
        assert mem.hot is not None
        for conv in ("c", "other"):
            mem.append(conv, {"role": "user", "content": SECRET})
            mem.context(conv, "which seat?", BUDGET)
        key = mem.cold.key_of("default", "c")
        assert _keys_of(admin, mem, key)  # the set is there to be erased
        with refuse(server, admin, tmp_path / "redis"):
            mem.delete_conversation("c")
            assert not mem.hot.healthy  # the refusal degraded the link: the keys are owed
            assert key in mem.cold.deferred_purges()
        until_healthy(mem, lambda m: m.context("other", "which seat?", BUDGET))
        assert mem.hot.healthy, mem.hot.last_error
        assert _keys_of(admin, mem, key) == []
        assert mem.cold.deferred_purges() == []

"""A Redis that stops answering (CLIENT PAUSE on a real redis-server: a stalled or
overloaded server) costs a context one wait for Redis's timeout, in the hot tier's read,
which degrades the hot link; the warm tier's view cache and the planner's epoch states
leave Redis alone while the link is degraded, and use it again once the link is back.

On the code before, the warm cache ignored the link's state: each context waited out
the timeout again for its cached view (and once more to fill the cache after a miss),
about twice the hot read's wait per context.
"""

from __future__ import annotations

import time

import redis

from tiermem import Memory
from tiermem.planner.epoch import RedisEpochs

# the fixtures admin, mem, server (hot_fixtures, by hot_server)
pytest_plugins = ["hot_server"]

PAUSE_MS = 8000  # how long Redis stops answering: past the contexts measured in it
# the contexts under the pause may take this much of one hot read's wait beyond it
# (planning on a busy machine); a second wait for Redis would take a whole one more
MARGIN = 0.5


def _unpaused(admin: redis.Redis, until: float) -> None:
    time.sleep(max(0.0, until - time.monotonic()))
    deadline = time.monotonic() + 5
    while True:
        try:
            admin.ping()
            return
        except redis.exceptions.TimeoutError:
            assert time.monotonic() < deadline


def test_a_context_waits_for_a_stalled_redis_once(mem: Memory, admin: redis.Redis) -> None:
    conv = "trip"
    for i in range(12):
        mem.append(conv, {"role": "user", "content": f"turn {i}: the flight leaves from terminal {i % 3}"})
    mem.consolidate(conv)  # a rolling view, cached in Redis by the next context
    assert not mem.context(conv, "which terminal?", 300).plan.degraded
    key = mem.cold.key_of("default", conv)
    assert key is not None and mem.hot is not None
    view_key = mem.warm.cache_key(key, "rolling")
    assert admin.exists(view_key)
    admin.delete(view_key)  # a miss: the warm read would also fill it
    epochs = mem.planner._epochs
    assert isinstance(epochs, RedisEpochs)
    epoch_errors = epochs.errors
    cache_errors = mem.warm.cache_errors

    admin.execute_command("CLIENT", "PAUSE", PAUSE_MS, "ALL")
    until = time.monotonic() + PAUSE_MS / 1000
    try:
        t0 = time.monotonic()
        assert mem.hot.read(key).degraded  # one wait for Redis, alone
        one_wait = time.monotonic() - t0
        times = []
        for _ in range(2):
            t0 = time.monotonic()
            ctx = mem.context(conv, "which terminal?", 300)
            times.append(time.monotonic() - t0)
            assert ctx.plan.degraded
        assert time.monotonic() < until, "the pause ended before the contexts did: raise PAUSE_MS"
        # no other reader of Redis tried it (each try that timed out is counted)
        assert mem.warm.cache_errors == cache_errors
        assert epochs.errors == epoch_errors
        assert max(times) < one_wait * (1 + MARGIN), (one_wait, times)
    finally:
        _unpaused(admin, until)

    again = mem.context(conv, "which terminal?", 300)  # the link is back, and so is the cache
    assert not again.plan.degraded
    assert admin.exists(view_key)

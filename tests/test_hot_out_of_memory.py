"""A Redis at `maxmemory` under `maxmemory-policy noeviction` (writes answer "OOM command
not allowed") is a hot tier that cannot be written right now, on a real redis-server:
tiermem writes nothing into it, appends are acknowledged from the log, contexts answer
from the log flagged degraded with one warning and the error in stats, and the hot sets
catch up once memory frees.

On the code before, Redis's rule for scripts (a script is refused out of memory only
until its first write; after that every write goes through, so that a script never
stops half way) let every script whose first write does not take memory past the
limit: a new conversation's admit (its first write deletes leftovers), an admit that
evicts (ZREM first), every rebuild (DEL first). So tiermem kept writing past the
operator's `maxmemory` (60 conversations of 12 turns into a full 3 MB Redis: 3.49 MB,
and it grows with every conversation), and an admit whose first write was refused was
logged as an unexpected failure (an ERROR with its traceback, per append) and answered
by dropping the set and rebuilding it, past the limit again. Each writing script now
first makes a write that takes memory and changes nothing, so Redis refuses the whole
script up front, and the refusal (tiers.errors.HotOutOfMemory) degrades the call like
an outage.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from hot_fixtures import fill_past_maxmemory, own_redis

from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder
from tiermem.tiers.redis_server import EmbeddedRedis

BUDGET = 100  # tokens: a few turns fill a set, so later admits evict
FILLER = "paid by bank transfer from the account in Lisbon, reference attached"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    with own_redis(tmp_path / "redis") as srv:
        yield srv


@pytest.fixture
def admin(server: EmbeddedRedis) -> Iterator[redis.Redis]:
    c = redis.Redis(unix_socket_path=server.url.removeprefix("unix://"), decode_responses=True)
    yield c
    c.close()


@pytest.fixture
def mem(tmp_path: Path, server: EmbeddedRedis, embedder: Embedder) -> Iterator[Memory]:
    cfg = Config(data_dir=tmp_path / "data", redis_url=server.url, hot_budget_tokens=BUDGET, head_protect=1,
                 tail_protect=1)
    with Memory(cfg, embedder=embedder, background_indexing=False) as m:
        yield m


def _say(mem: Memory, conv: str, text: str) -> int:
    return mem.append(conv, {"role": "user", "content": f"{text}, {FILLER}"})


def _tiermem_keys(admin: redis.Redis, conv_key: str) -> dict[str, str]:
    """Every key under the conversation's hash tag and a dump of its value."""
    return {k: str(admin.dump(k)) for k in admin.scan_iter(match=f"{{tm:{conv_key}}}*")}


def test_nothing_is_written_past_maxmemory(mem: Memory, admin: redis.Redis) -> None:
    for i in range(8):  # a full set: the next admit evicts (its first write a ZREM)
        _say(mem, "old", f"old turn {i}")
    mem.context("old", "which account?", 300)
    old = mem.cold.key_of("default", "old")
    assert old is not None
    before = _tiermem_keys(admin, old)
    fill_past_maxmemory(admin)
    for i in range(3):
        _say(mem, "old", f"old turn during OOM {i}")
        _say(mem, f"new-{i}", "a conversation begun during OOM")
        mem.context(f"new-{i}", "which account?", 300)
    mem.context("old", "which account?", 300)
    assert _tiermem_keys(admin, old) == before  # refused whole, not written half
    for i in range(3):
        new = mem.cold.key_of("default", f"new-{i}")
        assert new is not None
        assert _tiermem_keys(admin, new) == {}


def test_it_degrades_like_an_outage_and_recovers(mem: Memory, admin: redis.Redis,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    conv = f"c-{uuid.uuid4().hex}"
    for i in range(4):
        _say(mem, conv, f"turn {i}")
    assert not mem.context(conv, "which account?", 300).plan.degraded
    junk = fill_past_maxmemory(admin)
    with caplog.at_level(logging.WARNING, logger="tiermem"):
        position = _say(mem, conv, "the gate is B12")
        assert position == 4  # acknowledged: the log has it
        ctx = mem.context(conv, "which gate?", 300)
        assert ctx.plan.degraded and "the gate is B12" in str(ctx.messages)
        hot = mem.stats()["hot"]
        assert hot["healthy"] is False and "out of memory" in hot["last_error"], hot
        assert mem.hot is not None and mem.hot.counters()["healthy"] is False  # /metrics: tiermem_tier_up{hot} 0
        _say(mem, conv, "boarding at nine")
        mem.context(conv, "when is boarding?", 300)
    hot_records = [r for r in caplog.records if r.name == "tiermem.hot"]
    assert [r.levelno for r in hot_records] == [logging.WARNING], [r.getMessage() for r in hot_records]
    assert "out of memory" in hot_records[0].getMessage()
    admin.delete(*junk)  # memory frees
    again = mem.context(conv, "when is boarding?", 300)
    assert not again.plan.degraded
    assert mem.stats()["hot"]["healthy"] is True
    key = mem.cold.key_of("default", conv)
    assert key is not None and mem.hot is not None
    hs = mem.hot.tier.read(key)
    assert hs is not None and hs.last_position == 5  # caught up with the appends made meanwhile

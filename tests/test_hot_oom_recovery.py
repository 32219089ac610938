"""A Redis that refused the hot tier's writes for want of memory is found writable again by
a process that only reads, and meanwhile gets the keys of erased conversations deleted
(tiermem.hotlink `_recheck_writes`), on a real redis-server.

On the code before (1b08e98), only a successful write ended that degradation, since
reads, PINGs and stats succeed on a full Redis. A worker that only served contexts of
conversations in sync with their sets (another process appending) never wrote: once
memory had freed, /healthz stayed degraded and tiermem_tier_up{hot} 0 for good, the
shared epoch store stayed switched off, and `on_recover` (the deferred purge of erased
conversations' keys) never ran, so an erased conversation's texts stayed in Redis up to
the idle TTL. Now, while out of memory, a read, a /metrics scrape and stats run the
writing scripts' first step alone (HotTier.check_writes) at most once per
WRITES_RECHECK_INTERVAL_S, which ends the degradation once it succeeds, and run the
deferred purge meanwhile (Redis lets DEL through when full).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from hot_fixtures import RECHECK_POLL_S as POLL_S
from hot_fixtures import RECHECK_SLACK_S as SLACK_S
from hot_fixtures import fill_past_maxmemory, own_redis, scrape_counters, until_healthy

from tiermem import Config, Memory
from tiermem.hotlink import WRITES_RECHECK_INTERVAL_S
from tiermem.tiers.embed import Embedder
from tiermem.tiers.redis_server import EmbeddedRedis

BUDGET = 100  # tokens: a few turns fill a set
FILLER = "paid by bank transfer from the account in Lisbon, reference attached"
# long enough for the client's timeouts (0.5 s, one retry) to give up on Redis
PAUSE_MS = 2500


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


def _free(admin: redis.Redis, junk: list[str]) -> None:
    admin.delete(*junk)
    admin.config_set("maxmemory", 0)


def _probes(admin: redis.Redis) -> int:
    """How many SETRANGE Redis has run (the probe is the only one tiermem makes)."""
    return int(admin.info("commandstats").get("cmdstat_setrange", {}).get("calls", 0))


def _in_sync(mem: Memory) -> None:
    """Two conversations, each in sync with its set."""
    assert mem.hot is not None
    for i in range(3):
        _say(mem, "A", f"a{i}")
        _say(mem, "B", f"b{i}")
    mem.context("A", "which account?", 300)
    mem.context("B", "which account?", 300)


# (what the worker that only reads does, each alone)
READS: list[tuple[str, Callable[[Memory], Any]]] = [
    ("context", lambda m: m.context("B", "which account?", 300)),  # B is in sync: no write
    ("metrics", scrape_counters),  # a /metrics scrape (tiermem_tier_up{hot})
    ("stats", lambda m: m.stats()),  # /v1/stats, /healthz
]


@pytest.mark.parametrize("read", [r[1] for r in READS], ids=[r[0] for r in READS])
def test_a_reading_worker_recovers_once_memory_frees(mem: Memory, admin: redis.Redis,
                                                     read: Callable[[Memory], Any]) -> None:
    _in_sync(mem)
    junk = fill_past_maxmemory(admin)
    _say(mem, "A", "the gate is B12")  # refused: degraded
    assert mem.hot is not None and not mem.hot.healthy and "out of memory" in (mem.hot.last_error or "")
    _free(admin, junk)
    took = until_healthy(mem, read)
    assert mem.hot.healthy, f"still degraded {took:.1f} s after memory freed: {mem.hot.last_error}"
    assert mem.hot.counters()["healthy"] is True
    assert mem.stats()["hot"]["healthy"] is True
    assert mem.hot.epochs().usable()  # the shared epoch store is back in use
    ctx = mem.context("A", "which gate?", 300)  # A missed an append: its set catches up
    assert not ctx.plan.degraded and "the gate is B12" in str(ctx.messages)


def test_checks_are_rate_limited_while_full(mem: Memory, admin: redis.Redis) -> None:
    _in_sync(mem)
    fill_past_maxmemory(admin)
    _say(mem, "A", "the gate is B12")
    assert mem.hot is not None
    before = _probes(admin)
    start = time.monotonic()
    reads = 0
    while time.monotonic() - start < WRITES_RECHECK_INTERVAL_S * 2 + POLL_S:
        mem.context("B", "which account?", 300)
        mem.hot.counters()
        mem.stats()
        reads += 3
    probes = _probes(admin) - before
    assert not mem.hot.healthy  # still full: each check was refused
    # one check per interval, whatever the reads (the first may come at once)
    assert probes <= 3, f"{probes} probes for {reads} reads"


# (which conversation the refused append went to: the worker then reads C)
REFUSED_APPEND = [
    pytest.param("B", id="reads-in-sync"),  # C's reads write nothing
    pytest.param("C", id="reads-refused"),  # C's reads try to catch up: refused too
]


@pytest.mark.parametrize("refused", REFUSED_APPEND)
def test_erased_conversations_keys_go_while_redis_is_full(mem: Memory, admin: redis.Redis, refused: str) -> None:
    assert mem.hot is not None
    for i in range(3):
        _say(mem, "secret", f"my card number is 4111-{i}")
        _say(mem, "B", f"b{i}")
        _say(mem, "C", f"c{i}")
    for conv in ("secret", "B", "C"):
        mem.context(conv, "which account?", 300)
    key = mem.cold.key_of("default", "secret")
    assert key is not None
    pattern = f"{{tm:{key}}}*"
    assert list(admin.scan_iter(match=pattern))
    admin.execute_command("CLIENT", "PAUSE", PAUSE_MS)  # Redis unreachable: timeouts
    paused_at = time.monotonic()
    mem.delete_conversation("secret")
    assert mem.cold.deferred_purges() == [key]  # owed until Redis answers
    time.sleep(max(0.0, PAUSE_MS / 1000 - (time.monotonic() - paused_at)) + POLL_S)
    junk = fill_past_maxmemory(admin)
    _say(mem, refused, "one more")  # refused: out of memory
    assert not mem.hot.healthy and "out of memory" in (mem.hot.last_error or "")
    start = time.monotonic()
    while list(admin.scan_iter(match=pattern)) and time.monotonic() - start < WRITES_RECHECK_INTERVAL_S + SLACK_S:
        mem.context("C", "which account?", 300)
        time.sleep(POLL_S)
    assert list(admin.scan_iter(match=pattern)) == []  # the erased texts are gone, Redis still full
    assert mem.cold.deferred_purges() == []
    assert not mem.hot.healthy
    _free(admin, junk)
    until_healthy(mem, lambda m: m.context("C", "which account?", 300))
    assert mem.hot.healthy

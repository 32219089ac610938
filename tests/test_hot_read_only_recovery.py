"""A Redis that refused the hot tier's writes as a replica (READONLY: a failover left
tiermem on the old primary) is found writable again by a process that only reads, once
it is a primary again (a failover back, REPLICAOF NO ONE), as a full Redis is once
memory frees (tiermem.hotlink `_recheck_writes`); the deferred purge of erased
conversations' keys is not tried against the replica, which refuses DEL, and runs at
that recovery. On real redis-servers: the one tiermem uses fails over to another and
back while a Memory runs.

On the code before, only a successful write ended a replica's degradation, since reads,
PINGs and stats succeed on a replica: a worker that only served contexts of
conversations in sync with their sets (another process appending) stayed degraded for
good after the failover back (/healthz degraded, tiermem_tier_up{hot} 0, the shared
epoch store switched off), and the erased conversation's keys stayed in Redis up to the
idle TTL.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from hot_fixtures import RECHECK_POLL_S as POLL_S
from hot_fixtures import TcpRedis, scrape_counters, tcp_redis, until_healthy, wait_synced

from tiermem import Memory
from tiermem.hotlink import WRITES_RECHECK_INTERVAL_S

# the fixtures admin, mem, server (hot_fixtures, by hot_server); `server`: the one
# tiermem is configured with (the primary, then the old primary)
pytest_plugins = ["hot_server"]

FILLER = "paid by bank transfer from the account in Lisbon, reference attached"


@pytest.fixture
def standby(tmp_path: Path) -> Iterator[TcpRedis]:
    """The server the failover promotes."""
    with tcp_redis(tmp_path / "standby") as srv:
        yield srv


def _fail_over(admin: redis.Redis, server: TcpRedis, standby: TcpRedis) -> None:
    """As Sentinel does: the standby, a replica holding the server's keys, is promoted
    and the server made its replica; tiermem still points at the server. The sets stay
    as they were (in sync), so reading them writes nothing."""
    other = standby.admin()
    try:
        other.execute_command("REPLICAOF", "127.0.0.1", str(server.port))
        wait_synced(other)
        other.execute_command("REPLICAOF", "NO", "ONE")
    finally:
        other.close()
    admin.execute_command("REPLICAOF", "127.0.0.1", str(standby.port))
    wait_synced(admin)
    with pytest.raises(redis.exceptions.ReadOnlyError):
        admin.set("probe", "x")


def _say(mem: Memory, conv: str, text: str) -> int:
    return mem.append(conv, {"role": "user", "content": f"{text}, {FILLER}"})


def _in_sync(mem: Memory, *convs: str) -> None:
    for i in range(3):
        for conv in convs:
            _say(mem, conv, f"{conv}{i}")
    for conv in convs:
        mem.context(conv, "which account?", 300)


def _purge_calls(admin: redis.Redis) -> int:
    """SCANs and DELs the server was sent, refused or not: an erasure's purge of a
    conversation's keys begins with a SCAN of its tag (HotTier.drop_all), and nothing
    else tiermem does scans or deletes on a read."""
    stats = admin.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{cmd}", {}).get(field, 0))
               for cmd in ("scan", "del") for field in ("calls", "rejected_calls", "failed_calls"))


# (what the worker that only reads does, each alone)
READS: list[tuple[str, Callable[[Memory], Any]]] = [
    ("context", lambda m: m.context("B", "which account?", 300)),  # B is in sync: no write
    ("metrics", scrape_counters),  # a /metrics scrape (tiermem_tier_up{hot})
    ("stats", lambda m: m.stats()),  # /v1/stats, /healthz
]


@pytest.mark.parametrize("read", [r[1] for r in READS], ids=[r[0] for r in READS])
def test_a_reading_worker_recovers_once_the_replica_is_a_primary(mem: Memory, admin: redis.Redis,
                                                                 server: TcpRedis, standby: TcpRedis,
                                                                 read: Callable[[Memory], Any]) -> None:
    _in_sync(mem, "A", "B")
    _fail_over(admin, server, standby)
    _say(mem, "A", "the gate is B12")  # refused: degraded
    assert mem.hot is not None and not mem.hot.healthy and "read-only replica" in (mem.hot.last_error or "")
    admin.execute_command("REPLICAOF", "NO", "ONE")  # the failover back
    took = until_healthy(mem, read)
    assert mem.hot.healthy, f"still degraded {took:.1f} s after the failover back: {mem.hot.last_error}"
    assert mem.hot.counters()["healthy"] is True
    assert mem.stats()["hot"]["healthy"] is True
    assert mem.hot.epochs().usable()  # the shared epoch store is back in use
    ctx = mem.context("A", "which gate?", 300)  # A missed an append: its set catches up
    assert not ctx.plan.degraded and "the gate is B12" in str(ctx.messages)


def test_the_deferred_purge_waits_for_the_primary(mem: Memory, admin: redis.Redis, server: TcpRedis,
                                                  standby: TcpRedis) -> None:
    _in_sync(mem, "secret", "B")
    key = mem.cold.key_of("default", "secret")
    assert key is not None and mem.hot is not None
    pattern = f"{{tm:{key}}}*"
    _fail_over(admin, server, standby)
    assert list(admin.scan_iter(match=pattern))
    mem.delete_conversation("secret")  # its DEL refused: READONLY, degraded
    assert mem.cold.deferred_purges() == [key] and not mem.hot.healthy
    before = _purge_calls(admin)
    start = time.monotonic()
    while time.monotonic() - start < WRITES_RECHECK_INTERVAL_S * 2 + POLL_S:  # two rechecks, refused
        mem.context("B", "which account?", 300)
        mem.hot.counters()
        mem.stats()
        time.sleep(POLL_S)
    assert not mem.hot.healthy and "read-only replica" in (mem.hot.last_error or "")
    assert _purge_calls(admin) == before  # a replica refuses DEL: the purge was not tried
    assert mem.cold.deferred_purges() == [key]
    admin.execute_command("REPLICAOF", "NO", "ONE")
    until_healthy(mem, lambda m: m.context("B", "which account?", 300))
    assert mem.hot.healthy
    assert list(admin.scan_iter(match=pattern)) == []  # purged at the recovery
    assert mem.cold.deferred_purges() == []

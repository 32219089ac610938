"""A Redis that has become a replica (a Sentinel or managed-Redis failover leaves clients
on the old primary, which now answers every write `READONLY You can't write against a
read only replica.`) is a hot tier that cannot be written right now, on real
redis-servers (the one tiermem uses is made a replica of another with REPLICAOF while a
Memory runs): appends are acknowledged from the log, contexts answer from the log
flagged degraded, one warning, stats and /metrics say the hot tier is down until a
write succeeds (a PING or a stats read, which a replica answers, does not end it), and
the sets catch up once the server is a primary again.

On the code before, the refusal was a reply no code path expected: an ERROR with its
traceback on every call ("hot set ... failed unexpectedly"), the set dropped and
rebuilt (refused again), and /metrics healthy again after each PING.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from hot_fixtures import REPLICA_WAIT_S, TcpRedis, tcp_redis, wait_synced

from tiermem import Memory

# the fixtures admin, mem, server (hot_fixtures, by hot_server)
pytest_plugins = ["hot_server"]


@pytest.fixture
def primary(tmp_path: Path) -> Iterator[TcpRedis]:
    with tcp_redis(tmp_path / "primary") as srv:
        yield srv


def _become_replica(admin: redis.Redis, primary: TcpRedis) -> None:
    admin.execute_command("REPLICAOF", "127.0.0.1", str(primary.port))
    wait_synced(admin)
    with pytest.raises(redis.exceptions.ReadOnlyError):
        admin.set("probe", "x")


def test_a_replica_degrades_like_an_outage_and_recovers(mem: Memory, admin: redis.Redis, primary: TcpRedis,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    conv = "trip"
    for i in range(4):
        mem.append(conv, {"role": "user", "content": f"turn {i}: the flight leaves from terminal 2"})
    assert not mem.context(conv, "which terminal?", 300).plan.degraded
    _become_replica(admin, primary)
    with caplog.at_level(logging.WARNING, logger="tiermem"):
        assert mem.append(conv, {"role": "user", "content": "the gate is B12"}) == 4  # acknowledged from the log
        ctx = mem.context(conv, "which gate?", 300)
        assert ctx.plan.degraded and "the gate is B12" in str(ctx.messages)
        hot = mem.stats()["hot"]  # its reads succeed on a replica: still down
        assert hot["healthy"] is False and "read-only replica" in hot["last_error"], hot
        assert hot["misconfigured"] is None  # an outage, not the operator's mistake
        assert mem.hot is not None and mem.hot.counters()["healthy"] is False  # /metrics: tiermem_tier_up{hot} 0
        mem.append(conv, {"role": "user", "content": "boarding at nine"})
        assert mem.context(conv, "when is boarding?", 300).plan.degraded
    records = [r for r in caplog.records if r.name.startswith("tiermem")]
    assert [(r.name, r.levelno) for r in records] == [("tiermem.hot", logging.WARNING)], \
        [(r.name, r.getMessage()) for r in records]
    assert "read-only replica" in records[0].getMessage()
    admin.execute_command("REPLICAOF", "NO", "ONE")  # promoted again
    again = mem.context(conv, "when is boarding?", 300)
    assert not again.plan.degraded
    assert mem.stats()["hot"]["healthy"] is True
    key = mem.cold.key_of("default", conv)
    assert key is not None and mem.hot is not None
    hs = mem.hot.tier.read(key)
    assert hs is not None and hs.last_position == 5  # caught up with the appends made meanwhile


def test_an_erasure_on_a_replica_deletes_the_keys_once_it_is_a_primary(mem: Memory, admin: redis.Redis,
                                                                        primary: TcpRedis) -> None:
    # The erasure's deletion of the conversation's keys is a plain DEL, refused too: the
    # erasure stands (committed in the log) and the keys wait for the deferred purge. On
    # the code before, the refusal escaped: the erasure raised after committing.
    mem.append("gone", {"role": "user", "content": "my passport number is X123"})
    key = mem.cold.key_of("default", "gone")
    assert key is not None and mem.hot is not None
    _become_replica(admin, primary)  # the sync from the primary empties it
    meta = mem.hot.tier.keys(key)[0]
    writer = primary.admin()
    writer.hset(meta, "gen", "written before the failover")  # what the replica holds of it
    deadline = time.monotonic() + REPLICA_WAIT_S
    while not admin.exists(meta):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    report = mem.delete_conversation("gone")
    assert report is not None and mem.cold.key_of("default", "gone") is None
    assert admin.exists(meta) and mem.cold.deferred_purges() == [key]
    admin.execute_command("REPLICAOF", "NO", "ONE")
    mem.append("other", {"role": "user", "content": "hello"})  # a write succeeds: recovered, purged
    assert not admin.exists(meta) and mem.cold.deferred_purges() == []
    writer.close()

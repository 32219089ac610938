"""A Redis URL whose host name moves to another server (a failover that repoints a DNS
name or a service address) is followed: redis-py looks the name up (getaddrinfo) at
every connect, so what decides is whether tiermem's client opens a new connection.

- The old address dies (its connections drop): redis-py reconnects at once, to the new
  server. tiermem keeps no address of its own; this passed before too.
- The old primary stays up as a replica (answers READONLY): redis-py keeps its pooled
  connections to it, which it never drops for a READONLY, and its recheck (a write probe
  every WRITES_RECHECK_INTERVAL_S) ran on them, so the hot tier stayed degraded for good
  although the name led to the new primary. The link now drops its client's idle
  connections at a READONLY, so the next command connects, and so looks the name up,
  again.

No DNS here: a TCP forwarder on a loopback port (tests/loopback_forwarder.py) stands for
the name, and at each connection it accepts it connects to the server it points at then
(what a lookup at connect time gives), leaving connections already made where they were.
Real redis-servers on both sides."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hot_fixtures import TcpRedis, tcp_redis, until_healthy, wait_synced
from loopback_forwarder import RedisForwarder

from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder

FILLER = "paid by bank transfer from the account in Lisbon, reference attached"


@pytest.fixture
def old(tmp_path: Path) -> Iterator[TcpRedis]:
    with tcp_redis(tmp_path / "old") as srv:
        yield srv


@pytest.fixture
def new(tmp_path: Path) -> Iterator[TcpRedis]:
    with tcp_redis(tmp_path / "new") as srv:
        yield srv


@pytest.fixture
def name(old: TcpRedis) -> Iterator[RedisForwarder]:
    fwd = RedisForwarder(old.port)
    yield fwd
    fwd.close()


@pytest.fixture
def mem(tmp_path: Path, name: RedisForwarder, embedder: Embedder) -> Iterator[Memory]:
    with Memory(Config(data_dir=tmp_path / "data", redis_url=name.url), embedder=embedder,
                background_indexing=False) as m:
        yield m


def _say(mem: Memory, text: str) -> None:
    mem.append("c", {"role": "user", "content": f"{text}, {FILLER}"})


def _promote(new: TcpRedis, old: TcpRedis) -> None:
    """The standby takes the old primary's keys and is promoted, as Sentinel does."""
    admin = new.admin()
    try:
        admin.execute_command("REPLICAOF", "127.0.0.1", str(old.port))
        wait_synced(admin)
        admin.execute_command("REPLICAOF", "NO", "ONE")
    finally:
        admin.close()


@pytest.mark.parametrize("old_stays", [
    False,  # the old primary's address dies: redis-py reconnects and looks the name up (passed before)
    True,  # the old primary stays up as a replica answering READONLY (stayed degraded before)
], ids=["old-address-dies", "old-primary-now-replica"])
def test_the_hot_tier_follows_the_name_to_the_new_primary(mem: Memory, name: RedisForwarder, old: TcpRedis,
                                                          new: TcpRedis, old_stays: bool) -> None:
    assert mem.hot is not None
    for i in range(3):
        _say(mem, f"before {i}")
    assert not mem.context("c", "which account?", 300).plan.degraded
    _promote(new, old)
    name.target = new.port  # the name now leads to the new primary
    if old_stays:
        old_admin = old.admin()
        old_admin.execute_command("REPLICAOF", "127.0.0.1", str(new.port))
        wait_synced(old_admin)
        old_admin.close()
    else:
        name.drop_all()
        old.proc.kill()
        old.proc.wait()
    _say(mem, "the gate is B12")  # meets the old connection: refused or dropped
    took = until_healthy(mem, lambda m: m.context("c", "which gate?", 300))
    assert mem.hot.healthy, f"still degraded {took:.1f} s after the name moved: {mem.hot.last_error}"
    _say(mem, "after")
    ctx = mem.context("c", "which gate?", 300)
    assert not ctx.plan.degraded and "the gate is B12" in str(ctx.messages)
    probe = new.admin()
    try:  # the writes went to the new primary
        assert any(probe.scan_iter(match="{tm:*"))
        assert probe.info("replication")["role"] == "master"
    finally:
        probe.close()

"""A health check sees the hot tier recover without traffic: /healthz and stats() probe a
degraded link themselves (tiermem.hotlink `HotLink.probe`: one PING, waited on for at most
PROBE_TIMEOUT_S), so once Redis answers again they say so, though no request has read a
hot set since. While Redis still does not answer they keep saying degraded.

Before (an operator's report, session 35), /healthz read the link's flag only: after an
outage it said the hot tier was degraded until some request happened to read a hot set,
and a namespace's stats (or a store's with no conversation) never asked Redis at all.

A real redis-server of the test's own (hot_fixtures), stopped with SIGSTOP (it takes
connections and never answers: the client's socket timeout fails the call) and continued.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator

import pytest
from fastapi.testclient import TestClient
from hot_fixtures import TcpRedis

from tiermem import Memory
from tiermem.service import create_app

pytest_plugins = ["hot_server"]

# health checks a check makes at most after Redis is back: each waits PROBE_TIMEOUT_S at
# most, and one finds the probe's answer (a loaded machine may take longer than one wait)
CHECKS = 5


@contextlib.contextmanager
def stopped(server: TcpRedis) -> Iterator[None]:
    """The server stopped (SIGSTOP) within the block, continued after it."""
    server.proc.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        server.proc.send_signal(signal.SIGCONT)


def _healthz(mem: Memory) -> str:
    app = create_app(mem.config, mem, auth=False, start_scheduler=False)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        res = client.get("/healthz")
    assert res.status_code == 200, res.text
    return str(res.json()["tiers"]["hot"])


def _stats_of_a_quiet_namespace(mem: Memory) -> str:
    # a tenant with no conversation: its stats read no hot set
    return "ok" if mem.stats(namespace="quiet")["hot"]["healthy"] else "degraded"


def _stats(mem: Memory) -> str:
    return "ok" if mem.stats()["hot"]["healthy"] else "degraded"


def _read_degrades(mem: Memory) -> None:
    mem.context("A", "which account?", 300)  # its hot read fails: served from the log


def _scrape_degrades(mem: Memory) -> None:
    assert mem.hot is not None
    mem.hot.counters()  # a /metrics scrape's PING fails


@pytest.mark.parametrize(("has_conversation", "degrade", "check"), [
    (True, _read_degrades, _healthz),  # the HTTP service's /healthz, no request since the outage
    (True, _read_degrades, _stats_of_a_quiet_namespace),  # a namespace's stats (/v1/stats of a tenant)
    (False, _scrape_degrades, _stats),  # a store with no conversation yet: its stats read no set
])
def test_a_health_check_sees_redis_back(mem: Memory, server: TcpRedis, has_conversation: bool,
                                        degrade: Callable[[Memory], None], check: Callable[[Memory], str]) -> None:
    if has_conversation:
        mem.append("A", {"role": "user", "content": "paid from the account in Lisbon"})
    with stopped(server):
        degrade(mem)
        assert mem.hot is not None and not mem.hot.healthy
    said = [check(mem) for _ in range(CHECKS)]
    assert "ok" in said, said  # before: degraded every time
    assert mem.hot.healthy


@pytest.mark.parametrize("check", [
    _healthz,  # /healthz
    _stats_of_a_quiet_namespace,  # a namespace's stats
])
def test_a_health_check_says_degraded_while_redis_does_not_answer(mem: Memory, server: TcpRedis,
                                                                   check: Callable[[Memory], str]) -> None:
    mem.append("A", {"role": "user", "content": "paid from the account in Lisbon"})
    with stopped(server):
        _read_degrades(mem)
        assert check(mem) == "degraded"  # the probe's PING got no answer in time
        assert mem.hot is not None and not mem.hot.healthy


def test_a_healthy_link_is_not_probed(mem: Memory, server: TcpRedis) -> None:
    """/healthz of a healthy link sends Redis nothing: its requests tell."""
    admin = server.admin()
    try:
        before = int(admin.info("commandstats").get("cmdstat_ping", {}).get("calls", 0))
        assert _healthz(mem) == "ok"
        assert int(admin.info("commandstats").get("cmdstat_ping", {}).get("calls", 0)) == before
    finally:
        admin.close()

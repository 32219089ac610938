"""Redis failure under load: the server uses an external redis-server (TIERMEM_REDIS_URL,
started here with EmbeddedRedis in its own dir, so tiermem does not restart it itself).
Mid-load it is SIGKILLed, later restarted, later FLUSHALLed. No context call fails (HTTP
200 throughout, the plan flags `degraded` while Redis is down), no append is refused or
lost, and the hot tier is healthy again after Redis returns: the recovery time (restart ->
first non-degraded plan) is measured, and afterwards every hot set is caught up with the
log."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import redis
from reliability_helpers import (
    SOAK,
    A,
    Server,
    assert_log_ok,
    check_log,
    conv_ids,
    poll,
    record_figure,
    run_load,
    seed,
    serving,
)

from tiermem.tiers.hot import HotTier, make_client
from tiermem.tiers.redis_server import EmbeddedRedis


@dataclass
class Setup:
    server: Server
    redis: EmbeddedRedis


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    root = tmp_path_factory.mktemp("rel-redis")
    ext = EmbeddedRedis(root / "ext")
    url = ext.ensure()
    try:
        with serving(root / "data", root / "server.log", env={"TIERMEM_REDIS_URL": url}) as srv:
            yield Setup(srv, ext)
    finally:
        ext.stop()


def _context(http: httpx.Client, conv: str) -> dict[str, object]:
    r = http.post(f"/v1/conversations/{conv}/context", json={"query": "what did we decide?", "budget": 300},
                  headers=A)
    assert r.status_code == 200, r.text
    plan: dict[str, object] = r.json()["plan"]
    return plan


def _redis_run(setup: Setup, tmp: Path, cycles: int, tag: str) -> None:
    srv, ext = setup.server, setup.redis
    convs = [f"{c}-{tag}" for c in conv_ids(20)]
    probe = f"probe-{tag}"  # read only by this process: its plans are deterministic
    recoveries: list[float] = []
    flush_recoveries: list[float] = []
    down_plans: list[dict[str, object]] = []
    with srv.client() as http:
        seeded = seed(http, A, convs)
        seed(http, A, [probe])
        assert not _context(http, probe)["degraded"]

        def chaos(start_at: float) -> None:
            while time.time() < start_at + 1.0:
                time.sleep(0.01)
            for _ in range(cycles):
                pid = ext.pid
                assert pid is not None
                os.kill(pid, signal.SIGKILL)
                poll(lambda: not ext.is_running(), timeout=10)
                time.sleep(0.5)
                # down: context still answers, from the cold log, and says so
                plan = _context(http, probe)
                down_plans.append(plan)
                r = http.post(f"/v1/conversations/{probe}/messages", headers=A,
                              json={"role": "user", "content": "written while redis was down"})
                assert r.status_code == 201, r.text
                time.sleep(0.5)
                ext.ensure()
                t_up = time.monotonic()
                ok, _ = poll(lambda: not _context(http, probe)["degraded"], timeout=30, interval=0.02)
                assert ok, "hot tier never recovered after redis-server returned"
                recoveries.append(time.monotonic() - t_up)
                time.sleep(0.5)
                # FLUSHALL under load: the next read rebuilds from the log, not degraded
                with redis.Redis.from_url(ext.url) as r:
                    r.flushall()
                t_flush = time.monotonic()
                plan = _context(http, probe)
                flush_recoveries.append(time.monotonic() - t_flush)
                assert not plan["degraded"], plan
                assert plan["tiers"] == {**plan["tiers"], "hot": "rebuilt"}, plan["tiers"]  # type: ignore[dict-item]
                time.sleep(0.5)

        results = run_load(srv.url, convs, 1.0 + cycles * 4.0, 3, tmp, during=chaos)
        chk = check_log(http, A, convs, results, seeded)
        assert_log_ok(chk)

        # every hot set is caught up with the log once it has been read
        client = make_client(ext.url)
        tier = HotTier(client, budget_tokens=100_000, head_protect=0, tail_protect=0, eviction_bias=0.5)
        try:
            for conv in [*convs, probe]:
                assert not _context(http, conv)["degraded"]
                hs = tier.read(conv)
                last = http.get(f"/v1/conversations/{conv}/history", headers=A).json()["messages"][-1]["position"]
                assert hs is not None and hs.last_position == last, (conv, hs and hs.last_position, last)
        finally:
            client.close()
        stats = http.get("/v1/stats", headers=A).json()
        assert stats["hot"]["healthy"] is True
    for plan in down_plans:
        assert plan["degraded"] is True and plan["tiers"]["hot"] == "degraded", plan  # type: ignore[index]
    statuses: dict[str, int] = {}
    for r in results:
        for k, v in r.context_status.items():
            statuses[k] = statuses.get(k, 0) + v
    assert set(statuses) == {"200"}, statuses  # zero failed context calls
    assert not any(r.context_errors for r in results)
    refused = [x for r in results for x in r.refused]
    assert not refused, refused[:5]  # appends go on while Redis is down
    assert chk.maybe == 0
    degraded = sum(r.context_degraded for r in results)
    cmd = f"pytest tests/test_reliability_redis.py{' (TIERMEM_SOAK=1)' if tag == 'soak' else ''}"
    label = f"{cycles} x (SIGKILL redis, restart, FLUSHALL) under load"
    record_figure(f"redis [{label}]: context calls failed", 0, f"of {sum(statuses.values())}", cmd)
    record_figure(f"redis [{label}]: context calls answered degraded", degraded, "", cmd)
    record_figure(f"redis [{label}]: appends acknowledged / lost", f"{chk.acked} / {len(chk.lost)}", "", cmd)
    record_figure(f"redis [{label}]: hot tier recovery after redis restart (max)",
                  round(max(recoveries) * 1000, 1), "ms", cmd)
    record_figure(f"redis [{label}]: first read after FLUSHALL (rebuilt, max)",
                  round(max(flush_recoveries) * 1000, 1), "ms", cmd)


def test_redis_kill_restart_and_flushall_under_load(setup: Setup, tmp_path: Path) -> None:
    _redis_run(setup, tmp_path, cycles=1, tag="b")


@pytest.mark.soak
@pytest.mark.skipif(not SOAK, reason="soak run: TIERMEM_SOAK=1")
def test_soak_redis_failures(setup: Setup, tmp_path: Path) -> None:
    _redis_run(setup, tmp_path, cycles=10, tag="soak")


def test_tiermem_did_not_restart_the_external_redis(setup: Setup) -> None:
    """The server was pointed at the external server (not an embedded one of its own)."""
    stats = httpx.get(setup.server.url + "/v1/stats", headers=A, timeout=10).json()
    assert stats["hot"]["backend"] == "external"
    assert not (setup.server.data_dir / "redis" / "redis.pid").exists()

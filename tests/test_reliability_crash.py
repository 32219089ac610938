"""Crash: SIGKILL the server at random moments under load and restart it, again and again.
Every acknowledged append survives exactly once at its position; an append whose answer
never came back ("maybe") is there at most once; positions stay contiguous; after the last
restart the derived indexes catch up (pending_embeddings reaches 0) and the hot tier is
rebuilt (context plans answer from it, not degraded).

The server processes are forked from a zygote that loaded the embedding model once (see
reliability_helpers.Zygote): each is a real process running the service's app under
uvicorn, killed with a real SIGKILL, and a restart costs about a second instead of the
model load. Bounded: 3 kills; soak (TIERMEM_SOAK=1): 20."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from reliability_helpers import (
    SOAK,
    A,
    Zygote,
    assert_log_ok,
    check_log,
    conv_ids,
    poll,
    record_figure,
    run_load,
    seed,
    stop_redis,
)


@pytest.fixture(scope="module")
def zygote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Zygote]:
    root = tmp_path_factory.mktemp("rel-crash")
    z = Zygote(root / "data", root / "server.log")
    try:
        yield z
    finally:
        z.close()
        stop_redis(root / "data")


def _crash_run(zygote: Zygote, tmp: Path, kills: int, tag: str) -> None:
    rng = random.Random(kills)
    srv = zygote.start()
    convs = [f"{c}-{tag}" for c in conv_ids(20)]
    with srv.client() as http:
        seeded = seed(http, A, convs)
    done: list[float] = []

    def killer(start_at: float) -> None:
        while time.time() < start_at:
            time.sleep(0.01)
        for _ in range(kills):
            time.sleep(rng.uniform(0.2, 1.0))
            t0 = time.monotonic()
            zygote.kill9()
            time.sleep(rng.uniform(0.0, 0.3))
            zygote.start()
            done.append(time.monotonic() - t0)

    seconds = kills * 2.5 + 0.5
    results = run_load(srv.url, convs, seconds, 3, tmp, during=killer, read_share=0.2)
    assert len(done) == kills
    with srv.client() as http:
        chk = check_log(http, A, convs, results, seeded)
        assert_log_ok(chk)
        assert chk.acked > 0

        # derived indexes catch up after the last restart
        def caught_up() -> bool:
            return bool(http.get("/v1/stats", headers=A).json()["cold"]["pending_embeddings"] == 0)

        ok, waited = poll(caught_up, timeout=120, interval=0.25)
        assert ok, http.get("/v1/stats", headers=A).json()
        # the hot tier answers again, caught up with the log
        for conv in convs:
            r = http.post(f"/v1/conversations/{conv}/context", json={"query": "what did we decide?", "budget": 300},
                          headers=A)
            assert r.status_code == 200, r.text
            plan = r.json()["plan"]
            assert not plan["degraded"] and plan["tiers"]["hot"] in ("ok", "rebuilt"), plan["tiers"]
        stats = http.get("/v1/stats", headers=A).json()
        assert stats["hot"]["healthy"] is True and stats["hot"]["members"] > 0
    refused_5xx = [x for r in results for x in r.refused if x[2] >= 500]
    assert not refused_5xx, refused_5xx[:5]
    cmd = f"pytest tests/test_reliability_crash.py{' (TIERMEM_SOAK=1)' if tag == 'soak' else ''}"
    record_figure(f"crash [{kills} x SIGKILL under load]: acknowledged appends", chk.acked, "", cmd)
    record_figure(f"crash [{kills} x SIGKILL under load]: lost / duplicated acknowledged",
                  f"{len(chk.lost)} / {len(chk.duplicated)}", "", cmd)
    record_figure(f"crash [{kills} x SIGKILL under load]: unanswered appends (committed / not)",
                  f"{chk.maybe_committed} / {chk.maybe - chk.maybe_committed}", "", cmd)
    record_figure(f"crash [{kills} x SIGKILL under load]: embeddings caught up after last restart",
                  round(waited, 2), "s", cmd)
    record_figure(f"crash [{kills} x SIGKILL under load]: kill-to-serving (median)",
                  round(sorted(done)[len(done) // 2], 2), "s", cmd)


def test_sigkill_under_load_loses_nothing_acknowledged(zygote: Zygote, tmp_path: Path) -> None:
    _crash_run(zygote, tmp_path, kills=3, tag="b")


@pytest.mark.soak
@pytest.mark.skipif(not SOAK, reason="soak run: TIERMEM_SOAK=1")
def test_soak_twenty_sigkills(zygote: Zygote, tmp_path: Path) -> None:
    zygote.kill9()
    _crash_run(zygote, tmp_path, kills=20, tag="soak")


def test_the_killed_server_was_really_gone(zygote: Zygote) -> None:
    """The kill is real: no answer on the port until a new process is started."""
    zygote.kill9()
    with pytest.raises(httpx.TransportError):
        httpx.get(zygote.server.url + "/healthz", timeout=2)
    srv = zygote.start()
    assert httpx.get(srv.url + "/healthz", timeout=10).status_code == 200

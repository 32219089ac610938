"""Load: N client processes append and read across many conversations against a real
`tiermem serve`; afterwards every acknowledged append is in the log exactly once, at the
position it was acknowledged with, and positions are contiguous per conversation.

Bounded: 3 clients, 20 conversations, 5 s. Soak (TIERMEM_SOAK=1): 6 clients, 100
conversations, 60 s."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from reliability_helpers import (
    SOAK,
    A,
    M,
    Server,
    assert_log_ok,
    check_log,
    conv_ids,
    percentile,
    record_figure,
    run_load,
    seed,
    serving,
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("rel-load")
    with serving(root / "data", root / "server.log") as srv:
        yield srv


def _run(server: Server, tmp: Path, n_workers: int, n_convs: int, seconds: float, tag: str) -> None:
    convs = [f"{c}-{tag}" for c in conv_ids(n_convs)]
    with server.client() as http:
        seeded = seed(http, A, convs)
        results = run_load(server.url, convs, seconds, n_workers, tmp)
        chk = check_log(http, A, convs, results, seeded)
        stats = http.get("/v1/stats", headers=A).json()
    assert_log_ok(chk)
    statuses: dict[str, int] = {}
    for r in results:
        for k, v in r.context_status.items():
            statuses[k] = statuses.get(k, 0) + v
    refused = [x for r in results for x in r.refused]
    # nothing failed: no 5xx, no refusals, no dropped connections on a healthy server
    assert set(statuses) == {"200"}, statuses
    assert not refused, refused[:5]
    assert chk.maybe == 0 and not any(r.context_errors for r in results)
    assert chk.acked > 0 and sum(statuses.values()) > 0
    assert stats["cold"]["messages"] >= chk.acked + len(convs)
    ctx_ms = [x for r in results for x in r.context_ms]
    cmd = f"pytest tests/test_reliability_load.py{' (TIERMEM_SOAK=1)' if tag == 'soak' else ''}"
    label = f"{n_workers} clients x {n_convs} conversations x {seconds:.0f} s"
    record_figure(f"load [{label}]: acknowledged appends", chk.acked, "", cmd)
    record_figure(f"load [{label}]: sustained appends/s", round(chk.acked / seconds, 1), "appends/s", cmd)
    record_figure(f"load [{label}]: context calls", len(ctx_ms), "", cmd)
    record_figure(f"load [{label}]: context p50 under load", round(percentile(ctx_ms, 50), 1), "ms", cmd)
    record_figure(f"load [{label}]: context p99 under load", round(percentile(ctx_ms, 99), 1), "ms", cmd)
    record_figure(f"load [{label}]: lost / duplicated acknowledged appends",
                  f"{len(chk.lost)} / {len(chk.duplicated)}", "", cmd)


def test_concurrent_appends_are_all_there_exactly_once(server: Server, tmp_path: Path) -> None:
    _run(server, tmp_path, n_workers=3, n_convs=20, seconds=5.0, tag="b")


def test_history_shows_the_acknowledged_order(server: Server) -> None:
    """The check above can fail: a log with a gap or a moved message is caught."""
    from reliability_helpers import LogCheck, WorkerResult

    with server.client() as http:
        seeded = seed(http, A, ["probe-check"])
        r = http.post("/v1/conversations/probe-check/messages", json={"role": "user", "content": "x1"}, headers=A)
        pos = r.json()["position"]
        wrong = WorkerResult(acked=[("probe-check", pos + 1, "x1"), ("probe-check", pos + 2, "never-sent")])
        chk: LogCheck = check_log(http, A, ["probe-check"], [wrong], seeded)
    assert chk.misplaced and chk.lost
    with pytest.raises(AssertionError):
        assert_log_ok(chk)


@pytest.mark.soak
@pytest.mark.skipif(not SOAK, reason="soak run: TIERMEM_SOAK=1")
def test_soak_load(server: Server, tmp_path: Path) -> None:
    _run(server, tmp_path, n_workers=6, n_convs=100, seconds=60.0, tag="soak")


def test_server_still_healthy(server: Server) -> None:
    r = httpx.get(server.url + "/healthz", timeout=10)
    assert r.status_code == 200 and r.json()["tiers"]["hot"] == "ok"
    metrics = httpx.get(server.url + "/metrics", headers=M, timeout=10).text
    assert "tiermem_http_unhandled_errors_total 0.0" in metrics

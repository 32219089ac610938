"""Disk full: writes fail with a clear error, never a 5xx-internal-error, nothing is
corrupted, reads go on, and appends succeed again once space is back.

How the disk is filled, honestly: the tests run as root here, where a read-only chmod does
not stop writes, and a small loop-mounted filesystem needs privileges the runner does not
have. SQLite's own `PRAGMA max_page_count`, set on the server's writer connection, makes
the database unable to grow: SQLite then fails exactly as on a full disk (SQLITE_FULL,
"database or disk is full"), through the same code paths. That needs the connection, so
this file serves the real app with uvicorn on loopback from a thread of the test process
(real HTTP, real SQLite file, embedded Redis), not from a `tiermem serve` child."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import uvicorn
from cold_helpers import raw
from ports import free_port
from reliability_helpers import TOKEN_METRICS, TOKENS, A, M, record_figure, stop_redis

from tiermem import Config, Memory
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder

NO_LIMIT = 4294967294


@dataclass
class InProcess:
    memory: Memory
    url: str
    data_dir: Path


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[InProcess]:
    data = tmp_path_factory.mktemp("rel-disk") / "data"
    cfg = Config(data_dir=data, auth_tokens=TOKENS, metrics_tokens=[TOKEN_METRICS])
    mem = Memory(cfg, embedder=embedder)
    port = free_port()
    app = create_app(cfg, mem, start_scheduler=False)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.05)
        yield InProcess(mem, f"http://127.0.0.1:{port}", data)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        mem.close()
        stop_redis(data)


def _set_max_pages(mem: Memory, pages: int | None) -> int:
    """Cap the writer connection's database size (None: at its current size)."""
    with mem.cold._lock:
        conn = mem.cold._conn
        if pages is None:
            pages = int(conn.execute("PRAGMA page_count").fetchone()[0])
        return int(conn.execute(f"PRAGMA max_page_count = {int(pages)}").fetchone()[0])


def test_full_disk_is_a_clear_error_and_recovers(served: InProcess) -> None:
    mem = served.memory
    conv = "disk-1"
    acked: list[int] = []
    with httpx.Client(base_url=served.url, timeout=60, headers=A) as http:
        for i in range(5):
            r = http.post(f"/v1/conversations/{conv}/messages", json={"role": "user", "content": f"before {i}"})
            assert r.status_code == 201, r.text
            acked.append(r.json()["position"])
        # let the background indexer finish, so that the cap hits appends, not embeddings
        deadline = time.monotonic() + 60
        while mem.cold.pending_embeddings() and time.monotonic() < deadline:
            time.sleep(0.05)
        _set_max_pages(mem, None)
        refused: httpx.Response | None = None
        for i in range(300):
            r = http.post(f"/v1/conversations/{conv}/messages",
                          json={"role": "user", "content": f"filling {i} " + "lorem ipsum " * 400})
            if r.status_code != 201:
                refused = r
                break
            acked.append(r.json()["position"])
        assert refused is not None, "the capped database never filled up"
        assert refused.status_code == 507, (refused.status_code, refused.text)
        assert "full" in refused.json()["detail"] and "nothing was written" in refused.json()["detail"]
        # a batch is all or nothing, and another conversation cannot be created either
        r = http.post(f"/v1/conversations/{conv}/messages:batch",
                      json={"messages": [{"role": "user", "content": "b " * 3000}] * 5})
        assert r.status_code == 507, r.text
        r = http.post("/v1/conversations/disk-new/messages", json={"role": "user", "content": "x " * 5000})
        assert r.status_code in (201, 507), r.text  # a tiny new row may still fit in a free page
        new_conv_written = r.status_code == 201
        # reads still answer while the disk is full
        hist = http.get(f"/v1/conversations/{conv}/history")
        assert hist.status_code == 200
        assert [m["position"] for m in hist.json()["messages"]] == acked
        r = http.post(f"/v1/conversations/{conv}/context", json={"query": "lorem", "budget": 500})
        assert r.status_code == 200, r.text
        r = http.get("/v1/search", params={"q": "filling lorem", "conversation_id": conv})
        assert r.status_code == 200, r.text
        assert http.get("/healthz").status_code == 200
        # no corruption, on disk, read by another connection
        with raw(mem.cold.path) as c:
            assert c.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
            n = c.execute("SELECT COUNT(*) FROM messages WHERE conversation_id = ?", (conv,)).fetchone()[0]
            assert n == len(acked)
        # space is back: appends succeed again, at the next position
        _set_max_pages(mem, NO_LIMIT)
        r = http.post(f"/v1/conversations/{conv}/messages", json={"role": "user", "content": "after"})
        assert r.status_code == 201, r.text
        assert r.json()["position"] == acked[-1] + 1
        hist = http.get(f"/v1/conversations/{conv}/history").json()["messages"]
        assert [m["position"] for m in hist] == list(range(len(acked) + 1))
        deadline = time.monotonic() + 60
        while mem.cold.pending_embeddings() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert mem.cold.pending_embeddings() == 0  # derived indexes caught up after the outage
        metrics = http.get("/metrics", headers=M).text
        assert "tiermem_http_unhandled_errors_total 0.0" in metrics
    with raw(mem.cold.path) as c:
        assert c.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    record_figure("disk full: append answer", f"{refused.status_code} {refused.json()['detail'][:60]}...", "",
                  "pytest tests/test_reliability_disk.py")
    record_figure("disk full: integrity_check / appends after recovery", "ok / ok", "",
                  "pytest tests/test_reliability_disk.py")
    _ = new_conv_written

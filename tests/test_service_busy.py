"""A write that waits out SQLite's busy timeout behind another process's transaction
(a long erasure, fork or rebuild in another process: the audit of one huge conversation
saw HTTP 500 "internal error" for other tenants' appends) is answered 503 with a short
Retry-After, names the cause, writes nothing, and leaves /healthz "ok"; once the lock is
free the same request passes. A real lock, held by another connection to the same file."""

from __future__ import annotations

from pathlib import Path

import httpx
from cold_helpers import raw
from service_helpers import TOKEN_ACME, bearer, serve_in_thread

from tiermem import Config, Memory
from tiermem.service.handlers import STORAGE_BUSY_RETRY_AFTER_S
from tiermem.tiers.embed_onnx import FastEmbedder

BUSY_TIMEOUT_MS = 200  # how long a write waits for the lock before it gives up
CONV = "busy-1"


def test_a_write_behind_another_writers_lock_is_503_and_retryable(tmp_path: Path, embedder: FastEmbedder) -> None:
    cfg = Config(data_dir=tmp_path / "data", auth_tokens={TOKEN_ACME: "acme"}, busy_timeout_ms=BUSY_TIMEOUT_MS)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem, \
            serve_in_thread(cfg, mem) as url, httpx.Client(base_url=url, timeout=60) as http:
        path = f"/v1/conversations/{CONV}/messages"
        first = {"role": "user", "content": "before the lock"}
        assert http.post(path, json=first, headers=bearer(TOKEN_ACME)).status_code == 201
        with raw(cfg.db_path) as other:
            other.execute("BEGIN IMMEDIATE")  # another process's long transaction
            r = http.post(path, json={"role": "user", "content": "behind the lock"}, headers=bearer(TOKEN_ACME))
            # before: 500 {"detail": "internal error"}
            assert r.status_code == 503, (r.status_code, r.text)
            assert r.headers["retry-after"] == str(STORAGE_BUSY_RETRY_AFTER_S)
            assert "busy" in r.json()["detail"] and "rolled back" in r.json()["detail"]
            health = http.get("/healthz").json()
            other.execute("ROLLBACK")
        assert health["tiers"]["cold"] == "ok"  # busy is not broken
        got = http.get(f"/v1/conversations/{CONV}/history", headers=bearer(TOKEN_ACME)).json()
        assert [m["message"]["content"] for m in got["messages"]] == ["before the lock"]  # nothing written
        again = http.post(path, json={"role": "user", "content": "behind the lock"}, headers=bearer(TOKEN_ACME))
        assert again.status_code == 201

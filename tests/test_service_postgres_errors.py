"""A PostgreSQL refusal reaches the client as the service's own answer, on a connection
that stays usable: a write behind an operator's `LOCK TABLE` that runs into the
server's `lock_timeout` is 503 busy with `"written": false`, the client's next request
on the same keep-alive connection is answered, and the server logs no traceback.
Before: psycopg's errors had no handler of their own; the catch-all one answered 503,
then Starlette re-raised the error, uvicorn logged "Exception in ASGI application" and
closed the connection, and the client's next request on it failed (connection reset)."""

from __future__ import annotations

from pathlib import Path

import httpx
import psycopg
import pytest
from pg_server import fresh_schema, with_options
from service_helpers import TOKEN_ACME, bearer, serve_in_thread

from tiermem import Config, Memory
from tiermem.service.handlers import STORAGE_BUSY_RETRY_AFTER_S
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.errors import WRITTEN_FIELD

LOCK_TIMEOUT_MS = 200  # the operator's setting on the URL: how long a statement waits for a lock
CONV = "locked-1"


def test_a_lock_timeout_is_503_busy_and_the_connection_stays_usable(
        tmp_path: Path, pg_url: str, embedder: FastEmbedder,
        capsys: pytest.CaptureFixture[str]) -> None:
    schema = fresh_schema()
    cfg = Config(data_dir=tmp_path / "data", cold_url=with_options(pg_url, f"-c lock_timeout={LOCK_TIMEOUT_MS}"),
                 cold_schema=schema, auth_tokens={TOKEN_ACME: "acme"})
    path = f"/v1/conversations/{CONV}/messages"
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem, \
            serve_in_thread(cfg, mem) as url, httpx.Client(base_url=url, timeout=60) as http:
        h = bearer(TOKEN_ACME)
        assert http.post(path, json={"role": "user", "content": "before"}, headers=h).status_code == 201
        with psycopg.connect(pg_url) as operator:
            operator.execute(f'LOCK TABLE "{schema}".messages IN ACCESS EXCLUSIVE MODE')
            r = http.post(path, json={"role": "user", "content": "behind the lock"}, headers=h)
            assert r.status_code == 503, r.text
            assert r.json()[WRITTEN_FIELD] is False and "busy" in r.json()["detail"]
            assert r.headers["retry-after"] == str(STORAGE_BUSY_RETRY_AFTER_S)
            # the same keep-alive connection: before, reset by the server
            assert http.get("/healthz").json()["tiers"]["cold"] == "ok"
        assert http.post(path, json={"role": "user", "content": "after"}, headers=h).status_code == 201
        got = http.get(f"/v1/conversations/{CONV}/history", headers=h).json()
        assert [m["message"]["content"] for m in got["messages"]] == ["before", "after"]
    assert "Exception in ASGI application" not in capsys.readouterr().err  # uvicorn's log of an escaped error

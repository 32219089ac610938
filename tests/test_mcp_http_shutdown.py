"""`/v1/mcp` once the service's lifespan has ended answers 503 with Retry-After, a JSON-RPC
error naming the shutdown (the shape of the endpoint's other refusals), never a 500; and
an app whose lifespan runs again serves MCP again.

Fails on the code before (review of the HTTP contract, 2026-12-07): the endpoint kept the
stopped session manager and handed the request to it, which raised "Task group is not
initialized" -- a 500 `{"detail": "internal error"}`, counted as an unhandled error -- where
the Memory was the caller's (it stays open after the lifespan); where the app owned it,
a 503 that said "the service is starting"; and a second lifespan never served MCP again
(the stop of the first was never cleared: 500).

The real app (`create_app`, the guard and metrics middlewares, the real `mcp` package) over
a real SQLite store, driven through its ASGI interface with Starlette's TestClient: a
request after the lifespan cannot reach uvicorn, which closes its sockets first, but can
reach the app (an ASGI server that shuts down around in-flight connections, a test
harness, an app mounted in another), and must not be a 500 there either."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hash_embedder import HashEmbedder
from service_helpers import TOKEN_ACME

from tiermem import Config, Memory
from tiermem.adapters.mcp_http import JSONRPC_INTERNAL_ERROR, MCP_PATH
from tiermem.service import create_app
from tiermem.service.app import hand_over
from tiermem.service.runtime import STARTING_RETRY_AFTER_S

pytestmark = pytest.mark.usefixtures("clean_env")

NS = "acme"
SHUTTING_DOWN = "the service is shutting down"  # the 503's detail (mcp_http.SHUTTING_DOWN)
BASE = "http://127.0.0.1"  # a loopback name: the guard's Host check passes
HEADERS = {"Authorization": f"Bearer {TOKEN_ACME}", "Accept": "application/json, text/event-stream"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}
LIST_TOOLS = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


def _app(tmp_path: Path, owner: str) -> tuple[FastAPI, Memory]:
    cfg = Config(data_dir=tmp_path / "data", auth_tokens={TOKEN_ACME: NS})
    mem = Memory(cfg, embedder=HashEmbedder(), hot=False, background_indexing=False)
    if owner == "caller":
        return create_app(cfg, mem, start_scheduler=False), mem
    app = create_app(cfg, start_scheduler=False)
    hand_over(app, mem)  # as `tiermem serve`: the lifespan closes it
    return app, mem


def _served(client: TestClient, body: dict[str, Any]) -> None:
    r = client.post(MCP_PATH, json=body, headers=HEADERS)  # waits for the mcp package's import
    assert r.status_code == 200 and r.json()["result"], r.text


# who owns the Memory: the caller (passed to create_app, open after the lifespan: was a
# 500) or the app (handed over, closed by the lifespan: was a 503 "the service is starting")
OWNERS = ["caller", "app"]


@pytest.mark.parametrize("owner", OWNERS)
@pytest.mark.parametrize("body", [INITIALIZE, LIST_TOOLS], ids=["initialize", "tools_list"])
def test_after_the_lifespan_a_request_is_a_503_naming_the_shutdown(tmp_path: Path, owner: str,
                                                                    body: dict[str, Any]) -> None:
    app, mem = _app(tmp_path, owner)
    try:
        client = TestClient(app, base_url=BASE, raise_server_exceptions=False)
        with client:
            _served(client, INITIALIZE)
        r = client.post(MCP_PATH, json=body, headers=HEADERS)
        assert r.status_code == 503, r.text
        assert r.headers["retry-after"] == str(STARTING_RETRY_AFTER_S)
        answer = r.json()
        # a JSON-RPC error with the request's id (read for the refusal), the service's body in data
        assert answer["jsonrpc"] == "2.0" and answer["id"] == body["id"]
        assert answer["error"]["code"] == JSONRPC_INTERNAL_ERROR
        assert answer["error"]["data"] == {"detail": SHUTTING_DOWN}
        assert SHUTTING_DOWN in answer["error"]["message"]
        # nothing answered as a bug (the 500 counted here)
        assert app.state.runtime.registry.get_sample_value("tiermem_http_unhandled_errors_total") == 0
    finally:
        mem.close()


@pytest.mark.parametrize("owner", ["caller"])  # an app-owned Memory is closed by the first shutdown
def test_an_app_started_again_serves_mcp_again(tmp_path: Path, owner: str) -> None:
    app, mem = _app(tmp_path, owner)
    try:
        for _ in range(2):
            with TestClient(app, base_url=BASE, raise_server_exceptions=False) as client:
                _served(client, INITIALIZE)
                _served(client, LIST_TOOLS)
    finally:
        mem.close()

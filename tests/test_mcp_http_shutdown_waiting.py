"""An MCP request that is waiting for the MCP server to start when the service's shutdown
begins is answered at once: 503 with Retry-After naming the shutdown (4c21c76's answer),
not after the rest of its start-up wait (`MCP_START_WAIT_S`, 30 s).

Fails on the code before (review of the HTTP contract, 2026-12-07, base 1be59d0): the
request waited on start-up alone, so it held its connection for the whole 30 s (here:
no answer within ANSWER_WITHIN_S) and only then said the service was shutting down.

The real endpoint of the real app (`create_app`, the real `mcp` package installed), called
through its ASGI interface on one event loop: its server not started (the lifespan, which
starts it, has not run, as while the package's 1-2 s import runs), a request sent to it,
then the shutdown's signal (the event the lifespan sets as it ends)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
from hash_embedder import HashEmbedder
from service_helpers import TOKEN_ACME

from tiermem import Config, Memory
from tiermem.adapters.mcp_http import (
    JSONRPC_INTERNAL_ERROR,
    MCP_PATH,
    MCP_START_WAIT_S,
    SHUTTING_DOWN,
    McpEndpoint,
)
from tiermem.service import create_app
from tiermem.service.runtime import STARTING_RETRY_AFTER_S

pytestmark = pytest.mark.usefixtures("clean_env")

NS = "acme"
WAITING_S = 0.3  # how long the request waits for start-up before the shutdown begins
ANSWER_WITHIN_S = 5.0  # after the shutdown begins; far below MCP_START_WAIT_S
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}


def _endpoint(tmp_path: Path) -> tuple[McpEndpoint, Memory]:
    cfg = Config(data_dir=tmp_path / "data", auth_tokens={TOKEN_ACME: NS})
    mem = Memory(cfg, embedder=HashEmbedder(), hot=False, background_indexing=False)
    app = create_app(cfg, mem, start_scheduler=False)
    endpoint = next(r.endpoint for r in app.router.routes if getattr(r, "path", None) == MCP_PATH)
    assert isinstance(endpoint, McpEndpoint)
    return endpoint, mem


async def _call(endpoint: McpEndpoint) -> tuple[int, dict[bytes, bytes], dict[str, Any]]:
    body = json.dumps(INITIALIZE).encode()
    scope = {"type": "http", "method": "POST", "path": MCP_PATH, "headers": [
        (b"authorization", f"Bearer {TOKEN_ACME}".encode()), (b"content-type", b"application/json"),
        (b"accept", b"application/json, text/event-stream")]}
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: Any) -> None:
        sent.append(message)

    await endpoint(scope, receive, send)
    start, answer = sent[0], sent[1]
    return start["status"], dict(start["headers"]), json.loads(answer["body"])


def test_a_request_waiting_for_start_up_is_answered_when_the_shutdown_begins(tmp_path: Path) -> None:
    endpoint, mem = _endpoint(tmp_path)
    assert ANSWER_WITHIN_S < MCP_START_WAIT_S

    async def scenario() -> tuple[float, tuple[int, dict[bytes, bytes], dict[str, Any]]]:
        request = asyncio.create_task(_call(endpoint))
        await asyncio.sleep(WAITING_S)
        assert not request.done()  # waiting for the server's start-up
        began = time.monotonic()
        endpoint.stop.set()  # what the lifespan does as the shutdown begins
        answered = await asyncio.wait_for(request, ANSWER_WITHIN_S)  # was: TimeoutError (30 s)
        return time.monotonic() - began, answered

    try:
        _, (status, headers, answer) = asyncio.run(scenario())
    finally:
        mem.close()
    assert status == 503
    assert headers[b"retry-after"] == str(STARTING_RETRY_AFTER_S).encode()
    assert answer["error"]["code"] == JSONRPC_INTERNAL_ERROR and answer["error"]["data"] == {"detail": SHUTTING_DOWN}

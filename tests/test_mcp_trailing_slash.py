"""`/v1/mcp/` (with the trailing slash many MCP client configs write) is the MCP endpoint
itself, under the same auth and guard as `/v1/mcp`, counted in the metrics as `/v1/mcp`.

Before, Starlette answered a POST to `/v1/mcp/` with a 307 redirect to `/v1/mcp`, which
not every MCP client follows for a POST (the `mcp` client follows it only within the
URL's origin: not behind a proxy that terminates TLS, whose redirect names http://), and
the guard allowed a message 3 levels fewer there (the MCP envelope's levels were the
exact path's only). A real uvicorn serving the real app, the official `mcp` client.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

pytest.importorskip("mcp")
import httpx2  # the mcp package's HTTP client
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from service_helpers import TOKEN_ACME, TOKEN_METRICS, bearer, serve_in_thread

from tiermem import Config, Memory
from tiermem.adapters.mcp_http import MCP_PATH
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.models import MAX_JSON_DEPTH

pytestmark = pytest.mark.usefixtures("clean_env")

SLASHED = MCP_PATH + "/"
READ_TIMEOUT_S = 60.0
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
ENVELOPE_LEVELS = 3  # {"params": {"arguments": {"message": ...}}} around an append's message


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[tuple[str, Memory]]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("slash") / "data", auth_tokens={TOKEN_ACME: "acme"},
                 metrics_tokens=[TOKEN_METRICS])
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem, \
            serve_in_thread(cfg, mem) as url:
        yield url, mem


def _rpc(method: str, params: dict[str, Any] | None = None) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, **({"params": params} if params else {})}).encode()


def _append(conv: str, message: dict[str, Any]) -> bytes:
    return _rpc("tools/call", {"name": "append", "arguments": {"conversation_id": conv, "message": message}})


def _nested(levels: int) -> Any:
    v: Any = "leaf"
    for _ in range(levels):
        v = {"a": v}
    return v


@pytest.mark.parametrize("path", [MCP_PATH, SLASHED])
def test_both_spellings_answer_in_place(served: tuple[str, Memory], path: str) -> None:
    url, _ = served
    r = httpx.post(url + path, headers={**MCP_HEADERS, **bearer(TOKEN_ACME)}, content=_rpc("tools/list"),
                   timeout=READ_TIMEOUT_S, follow_redirects=False)
    assert r.status_code == 200, (r.status_code, r.headers.get("location"), r.text[:300])
    assert "append" in {t["name"] for t in r.json()["result"]["tools"]}


def test_the_official_client_with_the_slash(served: tuple[str, Memory]) -> None:
    url, mem = served

    async def run() -> Any:
        http = httpx2.AsyncClient(headers=bearer(TOKEN_ACME), timeout=READ_TIMEOUT_S)
        async with Client(streamable_http_client(url + SLASHED, http_client=http),
                          read_timeout_seconds=READ_TIMEOUT_S) as c:
            r = await c.call_tool("append", {"conversation_id": "slashed", "message": {"role": "user",
                                                                                       "content": "hi"}})
            assert not r.is_error, r.content
            return r.structured_content

    got = asyncio.run(run())
    assert got["position"] == 0 and set(got) == {"position", "incarnation"}
    assert [m.body for m in mem.history("slashed", namespace="acme")] == [{"role": "user", "content": "hi"}]


# (headers over the MCP defaults, status): the slash changes nothing the guard decides
SAME_GUARD = [
    ({}, 401),  # no token: refused before the body is read, as at /v1/mcp
    ({"Authorization": "Bearer not-a-token-of-this-service"}, 401),  # a token nobody configured
    ({**bearer(TOKEN_ACME), "Host": "evil.example.com"}, 421),  # DNS rebinding: a name not served
    ({**bearer(TOKEN_ACME), "Origin": "http://evil.example.com"}, 403),  # a page of another origin
    ({**bearer(TOKEN_ACME), "X-Tiermem-Namespace": "globex"}, 403),  # outside the token's prefix
]


@pytest.mark.parametrize(("extra", "status"), SAME_GUARD)
def test_the_slash_has_the_same_auth_and_guard(served: tuple[str, Memory], extra: dict[str, str],
                                               status: int) -> None:
    url, _ = served
    answers = [httpx.post(url + path, headers={**MCP_HEADERS, **extra}, content=_rpc("tools/list"),
                          timeout=READ_TIMEOUT_S) for path in (MCP_PATH, SLASHED)]
    assert [r.status_code for r in answers] == [status, status], [r.text[:200] for r in answers]
    assert answers[0].json() == answers[1].json()


def test_the_slash_keeps_the_envelope_depth(served: tuple[str, Memory]) -> None:
    """A message at MAX_JSON_DEPTH is taken at /v1/mcp/ too (the guard allows the MCP
    envelope's levels on both spellings), and one level more is refused naming the limit."""
    url, mem = served
    headers = {**MCP_HEADERS, **bearer(TOKEN_ACME)}
    at_limit = {"role": "user", "content": "deep", "metadata": _nested(MAX_JSON_DEPTH - 1)}
    r = httpx.post(url + SLASHED, headers=headers, content=_append("deep", at_limit), timeout=READ_TIMEOUT_S)
    assert r.status_code == 200 and not r.json()["result"].get("isError"), r.text[:300]
    over = {"role": "user", "content": "deep", "metadata": _nested(MAX_JSON_DEPTH)}
    r = httpx.post(url + SLASHED, headers=headers, content=_append("deep", over), timeout=READ_TIMEOUT_S)
    assert r.status_code == 422 and str(MAX_JSON_DEPTH + ENVELOPE_LEVELS) in r.text, r.text[:300]
    assert len(mem.history("deep", namespace="acme")) == 1


def test_metrics_count_the_slash_as_the_endpoint(served: tuple[str, Memory]) -> None:
    url, _ = served
    httpx.post(url + SLASHED, headers={**MCP_HEADERS, **bearer(TOKEN_ACME)}, content=_rpc("ping"),
               timeout=READ_TIMEOUT_S)
    metrics = httpx.get(url + "/metrics", headers=bearer(TOKEN_METRICS), timeout=READ_TIMEOUT_S).text
    assert 'route="/v1/mcp"' in metrics
    assert 'route="/v1/mcp/"' not in metrics  # one route, one label

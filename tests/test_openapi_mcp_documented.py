"""`POST /v1/mcp` is in the OpenAPI document, with each status it answers and its shape:
a JSON-RPC error for a refusal of the request (`error.data` the other routes' body), the
service's `{"detail": ...}` where the request is refused before its body is read as
JSON-RPC (no token). Each case sends a real request and checks the answer against what
the document declares for its status.

Fails on the code before (review of the HTTP contract, 2026-12-07): /v1/mcp, a Starlette
route mounted beside FastAPI's, was absent from /openapi.json."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

pytest.importorskip("mcp")
from hash_embedder import HashEmbedder
from service_helpers import READ_TIMEOUT_S, TOKEN_ACME, serve_in_thread

from tiermem import Config, Memory
from tiermem.adapters.mcp_http import MCP_PATH

pytestmark = pytest.mark.usefixtures("clean_env")

FIRST_POST_TIMEOUT_S = 60.0  # the first POST waits for the mcp package's import
AUTH = {"Authorization": f"Bearer {TOKEN_ACME}"}
MCP_HEADERS = {**AUTH, "Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("mcp-openapi") / "data", auth_tokens={TOKEN_ACME: "acme"})
    with Memory(cfg, embedder=HashEmbedder(), hot=False, background_indexing=False) as mem, \
            serve_in_thread(cfg, mem) as base:
        r = httpx.post(base + MCP_PATH, json=INITIALIZE, headers=MCP_HEADERS, timeout=FIRST_POST_TIMEOUT_S)
        assert r.status_code == 200, r.text
        yield base


def _operation(url: str) -> dict[str, Any]:
    spec = httpx.get(url + "/openapi.json", timeout=READ_TIMEOUT_S).json()
    assert MCP_PATH in spec["paths"], sorted(spec["paths"])  # was absent
    op: dict[str, Any] = spec["paths"][MCP_PATH]["post"]
    return op


def _shape_of(body: Any) -> str:
    if isinstance(body, dict) and {"jsonrpc", "id", "error"} <= set(body):
        return "jsonrpc-error"
    if isinstance(body, dict) and "detail" in body:
        return "detail"
    return "jsonrpc" if isinstance(body, dict) and "jsonrpc" in body else "other"


def _declared_shapes(response: dict[str, Any]) -> set[str]:
    schema = response["content"]["application/json"]["schema"]
    out = set()
    for s in schema.get("anyOf", [schema]):
        required = set(s.get("required", ()))
        out.add("jsonrpc-error" if "error" in required else "detail" if "detail" in required else "jsonrpc")
    return out


# each case: the extra headers, the JSON body, the status answered
CASES: list[tuple[dict[str, str], Any, int]] = [
    ({}, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, 200),  # served: the tools
    ({"Authorization": "Bearer wrong"}, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, 401),  # no valid token
    ({"X-Tiermem-Namespace": "globex"}, {"jsonrpc": "2.0", "id": 4, "method": "tools/list"}, 403),  # outside
    ({"X-Tiermem-Namespace": "a b"}, {"jsonrpc": "2.0", "id": 5, "method": "tools/list"}, 422),  # not a namespace
    ({}, {"jsonrpc": "2.0", "id": True, "method": "tools/list"}, 422),  # an id JSON-RPC does not allow
]


@pytest.mark.parametrize(("headers", "body", "status"), CASES,
                         ids=["served", "no-token", "outside", "bad-namespace", "bad-id"])
def test_each_answer_is_declared_with_its_shape(url: str, headers: dict[str, str], body: Any, status: int) -> None:
    op = _operation(url)
    r = httpx.post(url + MCP_PATH, json=body, headers={**MCP_HEADERS, **headers}, timeout=READ_TIMEOUT_S)
    assert r.status_code == status, r.text
    declared = op["responses"][str(status)]
    assert r.headers["content-type"].split(";")[0] in declared["content"]
    assert _shape_of(r.json()) in _declared_shapes(declared), (r.json(), declared)


def test_a_get_is_the_declared_405(url: str) -> None:
    op = _operation(url)
    r = httpx.get(url + MCP_PATH, headers=AUTH, timeout=READ_TIMEOUT_S)
    assert r.status_code == 405 and r.headers["allow"] == "POST"
    assert _shape_of(r.json()) in _declared_shapes(op["responses"]["405"])


def test_a_notification_is_the_declared_202(url: str) -> None:
    op = _operation(url)
    r = httpx.post(url + MCP_PATH, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                   headers=MCP_HEADERS, timeout=READ_TIMEOUT_S)
    assert r.status_code == 202 and "202" in op["responses"], r.text

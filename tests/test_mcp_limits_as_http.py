"""The MCP tools take what the HTTP service takes: a search's `k` up to `/v1/limits`'
`max_search_k`, a history page up to its `max_history_page`, a context `budget` up to its
`max_budget_tokens`, an empty search query; one past each limit is refused by both, naming
the argument. A real `tiermem serve`
(`serve_open`): its `/v1/limits`, its HTTP routes and its `/v1/mcp` endpoint.

Fails on the code before: the MCP server had limits of its own (mcp_server.SEARCH_K_MAX
= 100, HISTORY_PAGE_MAX = 500, a query of at least one character), so `search` with
`k: 150`, `history` with `limit: 501` and `search` with `query: ""` were tool errors
while HTTP, the Client and `/v1/limits` take them. And the `context` tool's `budget` had no
upper limit in its schema (no `maximum`): past max_budget_tokens the library's own check
answered (`budget: must be an integer within ...`), not HTTP's `less than or equal to`
naming `budget`, and a model reading the schema could not know the limit."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

pytest.importorskip("mcp")
import httpx2  # the mcp package's HTTP client
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from service_helpers import serve_open

NS = {"X-Tiermem-Namespace": "acme"}
CONV = "c1"
MCP_PATH = "/v1/mcp"
READ_TIMEOUT_S = 120.0


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, int]]]:
    with serve_open(tmp_path_factory.mktemp("mcp-limits")) as url:
        with httpx.Client(base_url=url, headers=NS, timeout=60) as http:
            r = http.post(f"/v1/conversations/{CONV}/messages", json={"role": "user", "content": "window seat"})
            assert r.status_code in (200, 201), r.text
            limits = http.get("/v1/limits").json()
        yield url, {"k": limits["max_search_k"], "page": limits["max_history_page"],
                    "budget": limits["max_budget_tokens"]}


def _mcp(url: str, tool: str, args: dict[str, Any]) -> tuple[bool, Any]:
    """(is_error, the error's text or the structured answer) of one call to `/v1/mcp`."""
    async def run() -> tuple[bool, Any]:
        http = httpx2.AsyncClient(headers=NS, timeout=READ_TIMEOUT_S)
        async with Client(streamable_http_client(url + MCP_PATH, http_client=http),
                          read_timeout_seconds=READ_TIMEOUT_S) as c:
            r = await c.call_tool(tool, args)
            return r.is_error, r.content[0].text if r.is_error else r.structured_content  # type: ignore[union-attr]

    return asyncio.run(run())


def _http(url: str, method: str, path: str, **kw: Any) -> httpx.Response:
    return httpx.request(method, url + path, headers=NS, timeout=60, **kw)


# (tool, arguments with a limit's name as the value's placeholder, the HTTP request, taken?)
# `"k"`/`"page"`/`"budget"` stand for /v1/limits' max_search_k / max_history_page /
# max_budget_tokens, `+1` one past it
CASES: list[tuple[str, dict[str, Any], tuple[str, str, dict[str, Any]], bool]] = [
    # k = max_search_k (200): MCP refused past 100 before
    ("search", {"query": "seat", "k": "k"}, ("POST", "/v1/search", {"json": {"q": "seat", "k": "k"}}), True),
    # k one past it: both refuse
    ("search", {"query": "seat", "k": "k+1"}, ("POST", "/v1/search", {"json": {"q": "seat", "k": "k+1"}}), False),
    # an empty query: HTTP answers (no hits); MCP refused it before (min_length=1)
    ("search", {"query": ""}, ("POST", "/v1/search", {"json": {"q": ""}}), True),
    # a page of max_history_page (10,000): MCP refused past 500 before
    ("history", {"conversation_id": CONV, "limit": "page"},
     ("GET", f"/v1/conversations/{CONV}/history", {"params": {"limit": "page"}}), True),
    # one past it: both refuse
    ("history", {"conversation_id": CONV, "limit": "page+1"},
     ("GET", f"/v1/conversations/{CONV}/history", {"params": {"limit": "page+1"}}), False),
    # the largest budget (2,000,000): both plan under it
    ("context", {"conversation_id": CONV, "budget": "budget"},
     ("POST", f"/v1/conversations/{CONV}/context", {"json": {"budget": "budget"}}), True),
    # one past it: both refuse, naming `budget` (MCP's schema had no maximum before)
    ("context", {"conversation_id": CONV, "budget": "budget+1"},
     ("POST", f"/v1/conversations/{CONV}/context", {"json": {"budget": "budget+1"}}), False),
]


def _fill(value: Any, limits: dict[str, int]) -> Any:
    """`value` with a limit's placeholder replaced by its number (recursively)."""
    if isinstance(value, dict):
        return {k: _fill(v, limits) for k, v in value.items()}
    if isinstance(value, str) and value.removesuffix("+1") in limits:
        return limits[value.removesuffix("+1")] + (1 if value.endswith("+1") else 0)
    return value


@pytest.mark.parametrize(("tool", "args", "request_", "taken"), CASES,
                         ids=[f"{c[0]}-{'-'.join(map(str, c[1].values()))}" for c in CASES])
def test_mcp_takes_what_http_takes(served: tuple[str, dict[str, int]], tool: str, args: dict[str, Any],
                                   request_: tuple[str, str, dict[str, Any]], taken: bool) -> None:
    url, limits = served
    method, path, kw = request_
    r = _http(url, method, path, **_fill(kw, limits))
    assert (r.status_code == 200) is taken, r.text
    is_error, out = _mcp(url, tool, _fill(args, limits))
    assert is_error is not taken, out
    if not taken:
        (arg,) = (a for a in args if isinstance(args[a], str) and args[a].endswith("+1"))
        assert arg in out.splitlines() and "less than or equal to" in out, out
    elif tool == "search":
        assert len(out["hits"]) == len(r.json()["hits"]), (out, r.text)  # the same hits as HTTP's
    elif tool == "context":
        assert out["messages"] == r.json()["messages"], (out, r.text)  # the same context as HTTP's
    else:
        assert [m["position"] for m in out["messages"]] == [m["position"] for m in r.json()["messages"]]


def test_the_tools_state_the_same_limits(served: tuple[str, dict[str, int]]) -> None:
    """One home for them (tiermem.memory): the tools' schemas state /v1/limits' numbers."""
    url, limits = served

    async def schemas() -> dict[str, Any]:
        http = httpx2.AsyncClient(headers=NS, timeout=READ_TIMEOUT_S)
        async with Client(streamable_http_client(url + MCP_PATH, http_client=http),
                          read_timeout_seconds=READ_TIMEOUT_S) as c:
            return {t.name: t.input_schema["properties"] for t in (await c.list_tools()).tools}

    tools = asyncio.run(schemas())
    assert tools["search"]["k"]["maximum"] == limits["k"]
    assert tools["history"]["limit"]["maximum"] == limits["page"]
    assert tools["context"]["budget"]["maximum"] == limits["budget"]
    assert tools["context"]["pending_tokens"]["maximum"] == limits["budget"]
    assert "minLength" not in tools["search"]["query"]

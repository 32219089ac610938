"""The MCP server mounted in a real `tiermem serve` process (streamable HTTP at /v1/mcp),
against the official `mcp` client over real HTTP: the same tools as over stdio, behind
the HTTP API's auth. No token (or a bad one) is a 401 before anything runs; a token's
namespace confines every tool call; the namespace header picks a namespace below the
token's prefix, and one outside it is a 403, the same for every outside namespace."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
import httpx
import httpx2  # the mcp package's HTTP client
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_helpers import check, exercise, leaves
from reliability_helpers import Server, start_server, stop_server

TOKEN_ACME = "tok-acme-mcp-http-0123456789abcdef"
TOKEN_ALICE = "tok-acme-alice-mcp-http-0123456789"
TOKEN_GLOBEX = "tok-globex-mcp-http-0123456789abcdef"
# a tenant, one of its users with her own token, and a second tenant
TOKENS = {TOKEN_ACME: "acme", TOKEN_ALICE: "acme/alice", TOKEN_GLOBEX: "globex"}
MCP_PATH = "/v1/mcp"
READ_TIMEOUT_S = 120.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    d = tmp_path_factory.mktemp("mcp-http")
    srv = start_server(d / "data", d / "serve.log", env={
        "TIERMEM_AUTH_TOKENS": json.dumps(TOKENS),
        "TIERMEM_REDIS_URL": "redis://127.0.0.1:1/0",  # unreachable: cold-only, no Redis to start
    })
    try:
        yield srv
    finally:
        stop_server(srv)


def _http(headers: dict[str, str]) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(headers=headers, timeout=READ_TIMEOUT_S)


def _client(srv: Server, token: str, namespace: str | None = None) -> Client:
    headers = {"Authorization": f"Bearer {token}"}
    if namespace is not None:
        headers["X-Tiermem-Namespace"] = namespace
    transport = streamable_http_client(srv.url + MCP_PATH, http_client=_http(headers))
    return Client(transport, read_timeout_seconds=READ_TIMEOUT_S)


def _api(srv: Server, token: str, path: str, namespace: str | None = None) -> Any:
    headers = {"Authorization": f"Bearer {token}"}
    if namespace is not None:
        headers["X-Tiermem-Namespace"] = namespace
    r = httpx.get(srv.url + path, headers=headers, timeout=60)
    return r.status_code, r.json()


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}
MCP_ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.mark.parametrize("authorization", [
    None,  # no token at all
    "Bearer not-a-token-of-this-service",  # a token nobody configured
    f"Basic {TOKEN_ACME}",  # a valid token under the wrong scheme
    f"Bearer {TOKEN_ACME}x",  # one character off
])
@pytest.mark.parametrize("method", ["POST", "GET", "DELETE"])
def test_no_valid_token_is_401(server: Server, authorization: str | None, method: str) -> None:
    headers = dict(MCP_ACCEPT)
    if authorization is not None:
        headers["Authorization"] = authorization
    r = httpx.request(method, server.url + MCP_PATH, headers=headers,
                      content=json.dumps(INITIALIZE) if method == "POST" else None, timeout=30)
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert r.json() == {"detail": "missing or invalid bearer token"}


def test_official_client_without_token_fails(server: Server) -> None:
    async def run() -> None:
        transport = streamable_http_client(server.url + MCP_PATH, http_client=_http({}))
        async with Client(transport, read_timeout_seconds=30) as c:
            await c.list_tools()

    # the client reports the refused handshake as an MCPError (inside anyio's task groups)
    with pytest.raises(BaseException) as info:
        asyncio.run(run())
    assert leaves(info.value) and all(type(e).__name__ == "McpError" or type(e).__name__ == "MCPError"
                                       for e in leaves(info.value)), repr(info.value)


def test_every_tool_over_http_in_the_tokens_namespace(server: Server) -> None:
    async def run() -> dict[str, Any]:
        async with _client(server, TOKEN_ACME) as c:
            return await exercise(c)

    check(asyncio.run(run()))
    # it all happened in acme (the token's own prefix), as the HTTP API sees it
    assert _api(server, TOKEN_ACME, "/v1/conversations") == (200, {"namespace": "acme", "conversations": ["trip"], "next_after": None})
    status, body = _api(server, TOKEN_ACME, "/v1/conversations/trip/history")
    assert status == 200 and len(body["messages"]) == 8
    assert _api(server, TOKEN_GLOBEX, "/v1/conversations")[1]["conversations"] == []


def test_another_tenants_conversation_does_not_exist(server: Server) -> None:
    async def run() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with _client(server, TOKEN_ACME) as c:
            await c.call_tool("append", {"conversation_id": "secret", "message": {"role": "user",
                                                                                  "content": "acme's zebra plan"}})
        async with _client(server, TOKEN_GLOBEX) as c:
            for tool, args in [("history", {}), ("context", {"query": "zebra", "budget": 200}),
                               ("pin", {"position": 0}), ("unpin", {"position": 0}), ("confirm", {})]:
                for conv in ("secret", "never-existed"):
                    name, extra = ("erase", {"confirm": conv}) if tool == "confirm" else (tool, args)
                    r = await c.call_tool(name, {"conversation_id": conv, **extra})
                    out[f"{name}:{conv}"] = (r.is_error, r.content[0].text)  # type: ignore[union-attr]
            out["search"] = (await c.call_tool("search", {"query": "zebra plan"})).structured_content
            # the same id in globex is globex's own conversation
            out["own"] = (await c.call_tool("append", {"conversation_id": "secret", "message": {
                "role": "user", "content": "globex's"}})).structured_content
        return out

    out = asyncio.run(run())
    for tool in ("history", "context", "pin", "unpin", "erase"):
        # the same answer as for a conversation that never existed, id aside
        mine, never = out[f"{tool}:secret"], out[f"{tool}:never-existed"]
        assert mine[0] and never[0] and "not found" in mine[1], tool
        assert mine[1].replace("secret", "ID") == never[1].replace("never-existed", "ID"), tool
    assert out["search"] == {"hits": []}
    assert out["own"]["position"] == 0 and set(out["own"]) == {"position", "incarnation"}
    status, body = _api(server, TOKEN_ACME, "/v1/conversations/secret/history")
    assert status == 200 and [m["message"]["content"] for m in body["messages"]] == ["acme's zebra plan"]


def test_namespace_header_below_the_prefix(server: Server) -> None:
    async def run() -> Any:
        async with _client(server, TOKEN_ACME, namespace="acme/alice") as c:
            return (await c.call_tool("append", {"conversation_id": "notes", "message": {
                "role": "user", "content": "written by acme into alice's namespace"}})).structured_content

    got = asyncio.run(run())
    assert got["position"] == 0 and set(got) == {"position", "incarnation"}
    # alice's own token (prefix acme/alice) reads it there; acme itself has no "notes"
    status, body = _api(server, TOKEN_ALICE, "/v1/conversations/notes/history")
    assert status == 200 and body["messages"][0]["message"]["content"].startswith("written by acme")
    assert "notes" not in _api(server, TOKEN_ACME, "/v1/conversations")[1]["conversations"]


@pytest.mark.parametrize(("token", "namespace", "status"), [
    (TOKEN_ALICE, "acme", 403),  # a parent of the token's prefix
    (TOKEN_ALICE, "acme/bob", 403),  # a sibling
    (TOKEN_GLOBEX, "acme", 403),  # another tenant that exists
    (TOKEN_GLOBEX, "initech", 403),  # one that does not: the same answer
    (TOKEN_ACME, "acme//x", 422),  # not a namespace
    (TOKEN_ACME, "a" * 5000, 422),  # over the id length limit
])
def test_namespace_header_outside_or_malformed(server: Server, token: str, namespace: str, status: int) -> None:
    headers = {**MCP_ACCEPT, "Authorization": f"Bearer {token}", "X-Tiermem-Namespace": namespace}
    r = httpx.post(server.url + MCP_PATH, headers=headers, content=json.dumps(INITIALIZE), timeout=30)
    assert r.status_code == status
    # a JSON-RPC error (tests/test_mcp_endpoint_jsonrpc.py), the service's error JSON in data
    answer = r.json()
    assert answer["id"] == INITIALIZE["id"] and "X-Tiermem-Namespace" in answer["error"]["message"]
    if status == 403:
        assert answer["error"]["data"] == {"detail": f"namespace {namespace!r} is outside this token's scope"}
    else:
        assert answer["error"]["data"]["detail"][0]["loc"] == ["header", "X-Tiermem-Namespace"]


def test_the_service_still_serves_its_api_and_log_is_clean(server: Server) -> None:
    assert httpx.get(server.url + "/healthz", timeout=30).status_code == 200
    log = Path(server.log).read_text(errors="replace")
    assert "Traceback" not in log, log[-3000:]


def _messages_in_acme(srv: Server) -> int:
    status, body = _api(srv, TOKEN_ACME, "/v1/stats")
    assert status == 200
    return int(body["cold"]["messages"])


def _rpc(method: str, params: dict[str, Any] | None = None) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 7, "method": method, **({"params": params} if params else {})}).encode()


def _call(tool: str, args: Any) -> bytes:
    return _rpc("tools/call", {"name": tool, "arguments": args})


# (what, body, headers over the defaults, statuses allowed): every one refused as a 4xx
# or answered as a JSON-RPC / tool error, never a 5xx, and none of them writes anything
HOSTILE = [
    ("not json", b"{not json", {}, (400, 422)),
    ("NaN", b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":NaN}}', {}, (422,)),
    ("deep object", b'{"jsonrpc":"2.0","id":1,"method":"ping","params":' + b'{"a":' * 10_000 + b"1"
     + b"}" * 10_001, {}, (422,)),
    ("invalid utf-8", b'{"jsonrpc":"2.0","id":1,"method":"\xc3\x28"}', {}, (400, 422)),
    ("over the body limit", json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "append", "arguments": {"conversation_id": "big", "message": {
            "role": "user", "content": "x" * (8 * 1024 * 1024)}}}}).encode(), {}, (413,)),
    ("not JSON content type", _rpc("ping"), {"Content-Type": "text/plain"}, (415,)),
    ("no event-stream accept", _rpc("tools/list"), {"Accept": "text/html"}, (406, 400)),
    ("a JSON-RPC batch", b"[" + _rpc("ping") + b"," + _rpc("ping") + b"]", {}, (200, 400, 422)),
    ("unknown method", _rpc("tools/destroy"), {}, (200, 400)),
    ("unknown tool", _call("drop_all", {}), {}, (200, 400)),
    ("missing arguments", _call("append", {}), {}, (200, 400)),
    ("arguments not an object", _call("append", ["hostile"]), {}, (200, 400)),
    ("a role that is no role", _call("append", {"conversation_id": "h", "message": {"role": "moderator",
                                                                                   "content": "x"}}), {}, (200,)),
    ("a bad id", _call("append", {"conversation_id": "../../etc", "message": {"role": "user", "content": "x"}}),
     {}, (200,)),
    ("negative budget", _call("context", {"conversation_id": "h", "budget": -1}), {}, (200, 400)),
    ("huge budget type", _call("context", {"conversation_id": "h", "budget": "1e9"}), {}, (200, 400)),
    ("unconfirmed erase", _call("erase", {"conversation_id": "secret", "confirm": "yes"}), {}, (200,)),
]


@pytest.mark.parametrize(("what", "body", "extra", "statuses"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_mcp_requests_write_nothing_and_never_5xx(server: Server, what: str, body: bytes,
                                                          extra: dict[str, str], statuses: tuple[int, ...]) -> None:
    before = _messages_in_acme(server)
    headers = {**MCP_ACCEPT, "Authorization": f"Bearer {TOKEN_ACME}", **extra}
    r = httpx.post(server.url + MCP_PATH, headers=headers, content=body, timeout=60)
    assert r.status_code in statuses, (what, r.status_code, r.text[:300])
    if r.status_code == 200 and body.startswith(b"{"):  # a JSON-RPC answer: an error, or a tool error
        answer = r.json()
        assert "error" in answer or answer["result"].get("isError"), (what, answer)
        text = json.dumps(answer)
        if what == "a role that is no role":
            assert "role" in text and "moderator" in text  # names the field and the value
    assert _messages_in_acme(server) == before, what


def test_no_5xx_from_the_mcp_endpoint(server: Server) -> None:
    from reliability_helpers import M

    metrics = httpx.get(server.url + "/metrics", headers=M, timeout=30).text
    assert "tiermem_http_unhandled_errors_total 0.0" in metrics
    assert not [line for line in metrics.splitlines() if 'route="/v1/mcp"' in line and 'status="5' in line]
    assert 'route="/v1/mcp"' in metrics  # the endpoint's requests are counted like any other route


# (Host, Origin, status): a loopback-bound service checks both, as the mcp package does for
# local servers, so a web page cannot reach the tools through a DNS name rebound to 127.0.0.1
REBINDING = [
    ("evil.example.com", None, 421),  # a name that is not loopback: refused
    ("127.0.0.1", "http://evil.example.com", 403),  # a page of another origin: refused
    ("localhost", "http://localhost:3000", 200),  # a local page: allowed
]


@pytest.mark.parametrize(("host", "origin", "status"), REBINDING)
def test_dns_rebinding_is_refused_on_loopback(server: Server, host: str, origin: str | None, status: int) -> None:
    headers = {**MCP_ACCEPT, "Authorization": f"Bearer {TOKEN_ACME}", "Host": f"{host}:{server.port}"}
    if origin is not None:
        headers["Origin"] = origin
    r = httpx.post(server.url + MCP_PATH, headers=headers, content=_rpc("tools/list"), timeout=30)
    assert r.status_code == status, r.text[:300]


def test_no_auth_serves_the_namespace_header(tmp_path: Path, cold_memory: Any) -> None:
    """`tiermem serve --no-auth` (loopback only): no token needed, the header names the
    namespace, its absence the service's default namespace."""
    from service_helpers import serve_in_thread

    from tiermem import Config

    with serve_in_thread(Config(data_dir=tmp_path / "unused"), cold_memory, auth=False, namespace="solo") as url:
        async def run() -> None:
            for ns in ("bob", None):
                headers = {"X-Tiermem-Namespace": ns} if ns else {}
                transport = streamable_http_client(url + MCP_PATH, http_client=_http(headers))
                async with Client(transport, read_timeout_seconds=60) as c:
                    r = await c.call_tool("append", {"conversation_id": "n", "message": {"role": "user",
                                                                                         "content": "hi"}})
                    assert not r.is_error, r.content

        asyncio.run(run())
    assert cold_memory.conversations("bob") == ["n"] and cold_memory.conversations("solo") == ["n"]


def test_the_service_starts_without_importing_mcp(tmp_path: Path) -> None:
    """The mcp package takes 1-2 s to import: `create_app` (a start-up, a restart after a
    crash) must not wait for it; the lifespan imports it in the background."""
    import subprocess
    import sys

    code = ("import sys; from tiermem import Config; from tiermem.service import create_app; "
            f"create_app(Config(data_dir={str(tmp_path / 'd')!r}, auth_tokens={TOKENS!r})); "
            "print('mcp' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**__import__("os").environ, "HF_HUB_OFFLINE": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "False"

"""A request to the MCP endpoint that the service's guard refuses for its body or framing
(too deep, invalid UTF-8, NaN, wrong Content-Type, too large, a repeated header) is
answered with a JSON-RPC error, as the `mcp` package's own transport answers a body it
cannot take: the same status as before, `id` null where the request was never parsed
(the request's own id where the body parsed and the problem was found in it: see
tests/test_mcp_endpoint_jsonrpc.py), the message naming the field and the limit, the
service's error JSON in `data`. Every other route answers the service's error JSON,
unchanged.

Before, /v1/mcp answered these with the service's `{"detail": ...}` only, which an MCP
client cannot read: the `mcp` client showed "Server returned an error response" and no
reason. A real uvicorn serving the real app, requests written byte for byte where a
client would normalise them, the official `mcp` client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("mcp")
import httpx2  # the mcp package's HTTP client
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_helpers import leaves
from service_helpers import TOKEN_ACME, bearer, raw_request, serve_in_thread

from tiermem import Config, Memory
from tiermem.adapters.mcp_http import MCP_PATH
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.models import MAX_JSON_DEPTH

pytestmark = pytest.mark.usefixtures("clean_env")

READ_TIMEOUT_S = 60.0
BODY_LIMIT = 64 * 1024  # bytes: a small max_body_bytes, so "too large" costs little
PARSE_ERROR = -32700  # JSON-RPC 2.0: the body is not JSON this service parses
INVALID_REQUEST = -32600  # JSON-RPC 2.0: the request itself is refused
INVALID_PARAMS = -32602  # JSON-RPC 2.0: a body that parsed, refused (its id known)
MCP_DEPTH = MAX_JSON_DEPTH + 3  # the guard's limit on /v1/mcp: the append envelope's 3 levels
AUTH = ("Authorization", f"Bearer {TOKEN_ACME}")
ACCEPT = ("Accept", "application/json, text/event-stream")
JSON = ("Content-Type", "application/json")
CONV = "refused"
RPC_ID = 7  # the id of every request below


def _append(message: bytes) -> bytes:
    """A tools/call of `append` with `message` as its raw JSON."""
    return (b'{"jsonrpc":"2.0","id":' + str(RPC_ID).encode() + b',"method":"tools/call","params":{"name":"append","arguments":'
            b'{"conversation_id":"' + CONV.encode() + b'","message":' + message + b"}}}")


def _deep(levels: int) -> bytes:
    return b'{"a":' * levels + b"1" + b"}" * levels


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[tuple[str, Memory]]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("rpc") / "data", auth_tokens={TOKEN_ACME: "acme"},
                 max_body_bytes=BODY_LIMIT, max_content_bytes=BODY_LIMIT)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem, \
            serve_in_thread(cfg, mem) as url:
        yield url, mem


# (headers besides auth and Accept, body, status, JSON-RPC code, what the message must name,
# the id the answer carries: the request's (RPC_ID) where the body parsed, else null)
REFUSED: list[tuple[list[tuple[str, str]], bytes, int, int, list[str], int | None]] = [
    # a message nested past the limit (found in the parsed body): names where and the limit
    ([JSON], _append(b'{"role":"user","content":"x","metadata":' + _deep(MAX_JSON_DEPTH) + b"}"), 422,
     INVALID_PARAMS, ["metadata", str(MAX_JSON_DEPTH), str(MCP_DEPTH)], RPC_ID),
    # invalid UTF-8 in a string: names the byte; the JSON around it gives the id
    ([JSON], _append(b'{"role":"user","content":"\xc3\x28"}'), 422, INVALID_PARAMS, ["UTF-8", "byte"], RPC_ID),
    # NaN, which JSON has not: named where it is, the id carried back (a value refused in a
    # request that parsed, not a parse error)
    ([JSON], _append(b'{"role":"user","content":"x","metadata":{"score":NaN}}'), 422, INVALID_PARAMS,
     ["metadata.score", "NaN"], RPC_ID),
    # a lone UTF-16 surrogate in a key (found in the parsed body): names the key
    ([JSON], _append(b'{"role":"user","content":"x","metadata":{"k\\ud800":1}}'), 422, INVALID_PARAMS,
     ["metadata", "surrogate"], RPC_ID),
    # a Content-Type that is not JSON: names what was sent
    ([("Content-Type", "text/plain")], _append(b'{"role":"user","content":"x"}'), 415, INVALID_REQUEST,
     ["application/json", "text/plain"], None),
    # over max_body_bytes, by Content-Length: names the limit
    ([JSON], _append(b'{"role":"user","content":"' + b"x" * BODY_LIMIT + b'"}'), 413, INVALID_REQUEST,
     [str(BODY_LIMIT)], None),
    # two Content-Types, which the guard and the transport could read apart: names the header
    ([JSON, ("Content-Type", "text/plain")], _append(b'{"role":"user","content":"x"}'), 400, INVALID_REQUEST,
     ["content-type"], None),
]
IDS = ["too deep", "invalid utf-8", "NaN", "lone surrogate", "content type", "too large", "two content types"]


@pytest.mark.parametrize(("headers", "body", "status", "code", "named", "rpc_id"), REFUSED, ids=IDS)
@pytest.mark.parametrize("path", [MCP_PATH, MCP_PATH + "/"])
def test_mcp_refusals_are_jsonrpc_errors(served: tuple[str, Memory], path: str, headers: list[tuple[str, str]],
                                         body: bytes, status: int, code: int, named: list[str],
                                         rpc_id: int | None) -> None:
    url, mem = served
    got, resp_headers, answer = raw_request(url, "POST", path, [AUTH, ACCEPT, *headers], body)
    assert got == status, answer
    assert resp_headers["content-type"] == "application/json"
    assert set(answer) == {"jsonrpc", "id", "error"} and answer["jsonrpc"] == "2.0" and answer["id"] == rpc_id
    assert answer["error"]["code"] == code
    assert code != PARSE_ERROR or rpc_id is None  # JSON-RPC 2.0: a parse error's id is null
    for word in named:
        assert word in answer["error"]["message"], (word, answer["error"]["message"])
    # the service's own error JSON rides along, as every other route answers it
    assert "detail" in answer["error"]["data"]
    assert mem.conversations("acme") == []  # nothing written


@pytest.mark.parametrize(("headers", "body", "status", "code", "named", "rpc_id"), REFUSED, ids=IDS)
def test_other_routes_answer_the_service_json(served: tuple[str, Memory], headers: list[tuple[str, str]],
                                              body: bytes, status: int, code: int, named: list[str],
                                              rpc_id: int | None) -> None:
    url, mem = served
    got, _, answer = raw_request(url, "POST", f"/v1/conversations/{CONV}/messages", [AUTH, *headers], body)
    assert got == status and set(answer) == {"detail"}, answer
    assert mem.conversations("acme") == []


def test_auth_and_host_refusals_stay_plain(served: tuple[str, Memory]) -> None:
    """401 and the Host check answer as the mcp package's own auth and host checks do
    (not JSON-RPC), on the MCP endpoint as elsewhere."""
    url, _ = served
    body = _append(b'{"role":"user","content":"x"}')
    got, headers, answer = raw_request(url, "POST", MCP_PATH, [ACCEPT, JSON], body)
    assert (got, answer) == (401, {"detail": "missing or invalid bearer token"})
    assert headers["www-authenticate"] == "Bearer"
    got, _, answer = raw_request(url, "POST", MCP_PATH, [AUTH, ACCEPT, JSON, ("Origin", "http://evil.example")],
                                 body)
    assert got == 403 and set(answer) == {"detail"}


def _client_error(url: str, message: dict[str, Any]) -> str:
    """What the official client raises for an append of `message`, as text."""
    async def run() -> None:
        http = httpx2.AsyncClient(headers=bearer(TOKEN_ACME), timeout=READ_TIMEOUT_S)
        async with Client(streamable_http_client(url + MCP_PATH, http_client=http),
                          read_timeout_seconds=READ_TIMEOUT_S) as c:
            await c.call_tool("append", {"conversation_id": CONV, "message": message})

    with pytest.raises(BaseException) as info:
        asyncio.run(run())
    return "\n".join(str(e) for e in leaves(info.value))


def _nested(levels: int) -> Any:
    v: Any = 1
    for _ in range(levels):
        v = {"a": v}
    return v


# (the message the client sends, what the error it shows must name)
CLIENT_REFUSALS = [
    # one level past the depth limit
    ({"role": "user", "content": "x", "metadata": _nested(MAX_JSON_DEPTH)}, ["metadata", str(MAX_JSON_DEPTH)]),
    # a body over max_body_bytes
    ({"role": "user", "content": "x" * BODY_LIMIT}, [str(BODY_LIMIT)]),
]


@pytest.mark.parametrize(("message", "named"), CLIENT_REFUSALS, ids=["too deep", "too large"])
def test_the_official_client_shows_the_reason(served: tuple[str, Memory], message: dict[str, Any],
                                              named: list[str]) -> None:
    url, mem = served
    text = _client_error(url, message)
    assert "Server returned an error response" not in text, text
    for word in named:
        assert word in text, (word, text)
    assert mem.conversations("acme") == []

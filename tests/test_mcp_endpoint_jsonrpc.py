"""The MCP endpoint's own refusals are JSON-RPC errors, as the guard's body refusals there
are (tests/test_mcp_guard_jsonrpc.py): a namespace header outside the token's prefix
(403) or malformed (422), the server still starting (503, Retry-After kept). The same
status as before, the request's `id` (read from the body once the headers decided the
refusal; null only where it cannot be read: tests/test_mcp_refusal_request_id.py),
the message naming the header and the rule, the service's error JSON in `data`: what a
namespace route answers for the same header. And a body the guard refuses after parsing
it (nested too deep for the route, a lone surrogate) carries the request's id back,
JSON-RPC 2.0 allowing null only where the id could not be determined; it is invalid
params (-32602), not a parse error (bytes that are not UTF-8 in a string of JSON that
parses around them too): a parse error (-32700: not JSON, past the parser) answers id null, as JSON-RPC 2.0 requires. Before (a review, 2026-12-06), a body
that parsed was answered -32700 with its id, a parse error that knew its id.

Before, the endpoint answered `{"detail": ...}` only, which the `mcp` client cannot read
("Server returned an error response", no reason), and every guard refusal had id null.
A real uvicorn serving the real app, requests written byte for byte, the official `mcp`
client. The 401 and Host/Origin refusals stay plain (tests/test_mcp_guard_jsonrpc.py), as
the mcp package's own bearer auth and host check answer them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

pytest.importorskip("mcp")
import httpx2  # the mcp package's HTTP client
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_helpers import leaves
from service_helpers import (
    SCOPED_TOKENS,
    TOKEN_ACME,
    TOKEN_ALICE,
    TOKEN_GLOBEX,
    raw_request,
    serve_app,
    serve_in_thread,
)

from tiermem import Config, Memory
from tiermem.adapters import mcp_http
from tiermem.adapters.mcp_http import MCP_PATH
from tiermem.config import MAX_ID_CHARS_LIMIT
from tiermem.service import create_app
from tiermem.service.runtime import STARTING_RETRY_AFTER_S
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.models import MAX_JSON_DEPTH

pytestmark = pytest.mark.usefixtures("clean_env")

READ_TIMEOUT_S = 60.0
START_WAIT_S = 0.2  # how long a request waits for a server that never starts, instead of 30 s
INVALID_REQUEST = -32600  # JSON-RPC 2.0: the request itself is refused
PARSE_ERROR = -32700  # JSON-RPC 2.0: the body is not JSON this service parses (its id unknown: null)
INVALID_PARAMS = -32602  # JSON-RPC 2.0: a body that parsed, refused (as the mcp package answers one)
INTERNAL_ERROR = -32603  # JSON-RPC 2.0, as the mcp package's session manager answers its own 503
MAX_ID_CHARS = 64  # the config's max_id_chars: a namespace past it is served (made before it was lowered)
NS = "X-Tiermem-Namespace"
ACCEPT = ("Accept", "application/json, text/event-stream")
JSON = ("Content-Type", "application/json")
PING_ID = 7
PING = b'{"jsonrpc":"2.0","id":7,"method":"ping"}'
CONV = "refused"


def _auth(token: str) -> tuple[str, str]:
    return ("Authorization", f"Bearer {token}")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[tuple[str, Memory]]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("rpc-ns") / "data", auth_tokens=SCOPED_TOKENS,
                 max_id_chars=MAX_ID_CHARS)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem, \
            serve_in_thread(cfg, mem) as url:
        yield url, mem


# (token, namespace header, status, what the message must name)
NAMESPACE_REFUSALS: list[tuple[str, str, int, list[str]]] = [
    # a parent of the token's prefix
    (TOKEN_ALICE, "acme", 403, [NS, "'acme'", "outside this token's scope"]),
    # a sibling
    (TOKEN_ALICE, "acme/bob", 403, [NS, "'acme/bob'", "outside this token's scope"]),
    # another tenant that exists, and one that does not: the same answer
    (TOKEN_GLOBEX, "acme", 403, [NS, "'acme'", "outside this token's scope"]),
    (TOKEN_GLOBEX, "initech", 403, [NS, "'initech'", "outside this token's scope"]),
    # not a namespace: names the header and the form
    (TOKEN_ACME, "acme//x", 422, [NS, "joined by '/'"]),
    # longer than any config allows: names the header and the limit
    (TOKEN_ACME, "a" * (MAX_ID_CHARS_LIMIT + 1), 422, [NS, str(MAX_ID_CHARS_LIMIT)]),
]
NAMESPACE_IDS = ["parent", "sibling", "other tenant", "no such tenant", "malformed", "too long"]


@pytest.mark.parametrize(("token", "namespace", "status", "named"), NAMESPACE_REFUSALS, ids=NAMESPACE_IDS)
@pytest.mark.parametrize("path", [MCP_PATH, MCP_PATH + "/"])
def test_namespace_refusals_are_jsonrpc_errors(served: tuple[str, Memory], path: str, token: str, namespace: str,
                                               status: int, named: list[str]) -> None:
    url, _ = served
    got, headers, answer = raw_request(url, "POST", path, [_auth(token), ACCEPT, JSON, (NS, namespace)], PING)
    assert got == status, answer
    assert headers["content-type"] == "application/json"
    assert set(answer) == {"jsonrpc", "id", "error"} and answer["jsonrpc"] == "2.0"
    assert answer["id"] == PING_ID  # the request's (was null)
    assert answer["error"]["code"] == INVALID_REQUEST
    for word in named:
        assert word in answer["error"]["message"], (word, answer["error"]["message"])
    # data is what a namespace route answers for the same header, word for word
    route_status, _, route_answer = raw_request(url, "GET", "/v1/conversations", [_auth(token), (NS, namespace)])
    assert (route_status, answer["error"]["data"]) == (status, route_answer)


def _client_error(url: str, headers: dict[str, str]) -> str:
    """What the official client raises when it connects with `headers`, as text."""
    async def run() -> None:
        http = httpx2.AsyncClient(headers=headers, timeout=READ_TIMEOUT_S)
        async with Client(streamable_http_client(url + MCP_PATH, http_client=http),
                          read_timeout_seconds=READ_TIMEOUT_S) as c:
            await c.list_tools()

    with pytest.raises(BaseException) as info:
        asyncio.run(run())
    return "\n".join(str(e) for e in leaves(info.value))


# (token, namespace header, what the error the client shows must name)
CLIENT_REFUSALS = [
    # outside the prefix (403)
    (TOKEN_ALICE, "acme/bob", [NS, "'acme/bob'", "outside this token's scope"]),
    # malformed (422)
    (TOKEN_ACME, "acme//x", [NS, "joined by '/'"]),
]


@pytest.mark.parametrize(("token", "namespace", "named"), CLIENT_REFUSALS, ids=["outside", "malformed"])
def test_the_official_client_shows_the_namespace_refusal(served: tuple[str, Memory], token: str, namespace: str,
                                                         named: list[str]) -> None:
    url, _ = served
    text = _client_error(url, {"Authorization": f"Bearer {token}", NS: namespace})
    assert "Server returned an error response" not in text, text
    for word in named:
        assert word in text, (word, text)


def _deep(levels: int) -> bytes:
    return b'{"a":' * levels + b"1" + b"}" * levels


def _call(rpc_id: bytes, message: bytes) -> bytes:
    """A tools/call of `append` with `message` as its raw JSON, `rpc_id` its raw id (b"" for none)."""
    head = b'{"jsonrpc":"2.0",' + (b'"id":' + rpc_id + b"," if rpc_id else b"")
    return (head + b'"method":"tools/call","params":{"name":"append","arguments":{"conversation_id":"'
            + CONV.encode() + b'","message":' + message + b"}}}")


TOO_DEEP = b'{"role":"user","content":"x","metadata":' + _deep(MAX_JSON_DEPTH) + b"}"
SURROGATE = b'{"role":"user","content":"x","metadata":{"k\\ud800":1}}'
PAST_THE_PARSER = _deep(2000)  # deeper than Python's json can parse: the body never parsed

# (raw id, message, status, JSON-RPC code, the id the answer carries)
GUARD_IDS: list[tuple[bytes, bytes, int, int, Any]] = [
    # a body that parsed, too deep for the route: its integer id back (no parse error)
    (b"7", TOO_DEEP, 422, INVALID_PARAMS, 7),
    # the same with a string id
    (b'"req-1"', TOO_DEEP, 422, INVALID_PARAMS, "req-1"),
    # a lone surrogate elsewhere in a parsed body: its id back
    (b"8", SURROGATE, 422, INVALID_PARAMS, 8),
    # a lone surrogate in the id itself: no id a response could carry, null
    (b'"r\\ud800"', b'{"role":"user","content":"x"}', 422, INVALID_PARAMS, None),
    # true is no JSON-RPC id: null
    (b"true", TOO_DEEP, 422, INVALID_PARAMS, None),
    # a fraction is no id the mcp package takes: null
    (b"1.5", TOO_DEEP, 422, INVALID_PARAMS, None),
    # a notification has no id: null
    (b"", TOO_DEEP, 422, INVALID_PARAMS, None),
    # too deep for the parser itself: the id was never read, null
    (b"9", PAST_THE_PARSER, 422, PARSE_ERROR, None),
    # invalid UTF-8 in a string of JSON that parses around it: its id back (was null, a
    # parse error: the mcp client never matched the answer)
    (b"10", b'{"role":"user","content":"\xc3\x28"}', 422, INVALID_PARAMS, 10),
]
GUARD_ID_IDS = ["int id", "string id", "surrogate elsewhere", "surrogate in the id", "true", "fraction",
                "notification", "past the parser", "invalid utf-8"]


@pytest.mark.parametrize(("rpc_id", "message", "status", "code", "expected"), GUARD_IDS, ids=GUARD_ID_IDS)
def test_a_parsed_body_refused_carries_its_id(served: tuple[str, Memory], rpc_id: bytes, message: bytes,
                                              status: int, code: int, expected: Any) -> None:
    url, mem = served
    got, _, answer = raw_request(url, "POST", MCP_PATH, [_auth(TOKEN_ACME), ACCEPT, JSON], _call(rpc_id, message))
    assert got == status, answer
    assert answer["error"]["code"] == code
    assert "id" in answer and answer["id"] == expected and type(answer["id"]) is type(expected), answer["id"]
    # JSON-RPC 2.0: a parse error's id cannot be known, so it is null
    assert answer["error"]["code"] != PARSE_ERROR or answer["id"] is None, answer
    assert mem.conversations("acme") == []  # nothing written


def test_a_batch_too_deep_carries_no_id(served: tuple[str, Memory]) -> None:
    """An array has no one id (and the mcp package takes no batch): null."""
    url, _ = served
    body = b"[" + _call(b"1", TOO_DEEP) + b"]"
    got, _, answer = raw_request(url, "POST", MCP_PATH, [_auth(TOKEN_ACME), ACCEPT, JSON], body)
    assert got == 422 and answer["id"] is None and answer["error"]["code"] == INVALID_PARAMS  # it parsed


@contextmanager
def _never_started(tmp: Any) -> Iterator[str]:
    """The real app served by uvicorn with its lifespan off (as `uvicorn --lifespan off`
    runs it): no Memory is ever opened and the MCP server never starts, so the endpoint
    answers as it does while the service starts."""
    cfg = Config(data_dir=tmp / "data", auth_tokens={TOKEN_ACME: "acme"})
    with serve_app(create_app(cfg, start_scheduler=False), lifespan="off") as url:
        yield url


@pytest.fixture
def starting(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setattr(mcp_http, "MCP_START_WAIT_S", START_WAIT_S)
    with _never_started(tmp_path) as url:
        yield url


@pytest.mark.parametrize("path", [MCP_PATH, MCP_PATH + "/"])
def test_starting_is_a_jsonrpc_error_with_retry_after(starting: str, path: str) -> None:
    got, headers, answer = raw_request(starting, "POST", path, [_auth(TOKEN_ACME), ACCEPT, JSON], PING)
    assert got == 503, answer
    assert headers["retry-after"] == str(STARTING_RETRY_AFTER_S)
    assert set(answer) == {"jsonrpc", "id", "error"} and answer["id"] == PING_ID  # the request's (was null)
    assert answer["error"]["code"] == INTERNAL_ERROR
    message = answer["error"]["message"]
    assert "starting" in message and "Retry-After" in message and str(STARTING_RETRY_AFTER_S) in message, message
    assert answer["error"]["data"] == {"detail": "the service is starting"}  # what the other routes answer


def test_the_official_client_shows_starting(starting: str) -> None:
    text = _client_error(starting, {"Authorization": f"Bearer {TOKEN_ACME}"})
    assert "Server returned an error response" not in text, text
    assert "starting" in text, text

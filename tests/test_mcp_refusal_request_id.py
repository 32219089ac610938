"""The MCP endpoint's own refusals (tiermem/adapters/mcp_http.py) answer with the request's
JSON-RPC id where it can be read, null only where it cannot (JSON-RPC 2.0): a namespace
header outside the token's prefix (403) or malformed (422), the server starting (503), a
verb other than POST (405). Before, each was decided on headers and answered `"id": null`
though the body's id was there to read, so a client matching answers by id (any JSON-RPC
client but the `mcp` one, which puts its own id on an HTTP error) could not match it.

Over a real uvicorn serving the real app (the guard in front, requests written byte for
byte); and the endpoint mounted alone (no guard), where its read of the body for an id is
bounded by max_body_bytes and http_body_timeout_s: past either, null, and still answered.
The official `mcp` client's view of the same refusals: tests/test_mcp_endpoint_jsonrpc.py.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
from hash_embedder import HashEmbedder
from service_helpers import SCOPED_TOKENS, TOKEN_ACME, TOKEN_ALICE, raw_request, serve_app, served_store

from tiermem import Config, Memory
from tiermem.adapters import mcp_http
from tiermem.adapters.mcp_http import MCP_PATH, McpEndpoint
from tiermem.service import create_app

pytestmark = pytest.mark.usefixtures("clean_env")

NS = "X-Tiermem-Namespace"
ACCEPT = ("Accept", "application/json, text/event-stream")
JSON = ("Content-Type", "application/json")
START_WAIT_S = 0.2  # how long a request waits for a server that never starts, instead of 30 s
BODY_LIMIT = 4096  # bytes: max_body_bytes of the endpoint mounted alone
BODY_TIMEOUT_S = 0.5  # http_body_timeout_s of the endpoint mounted alone
ANSWER_WITHIN_S = 5.0  # a body that never ends is still answered, soon after BODY_TIMEOUT_S


def _auth(token: str) -> tuple[str, str]:
    return ("Authorization", f"Bearer {token}")


def _ping(raw_id: bytes) -> bytes:
    """A ping with `raw_id` as its raw JSON id (b"": a notification, no id)."""
    return b'{"jsonrpc":"2.0",' + (b'"id":' + raw_id + b"," if raw_id else b"") + b'"method":"ping"}'


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("rpc-id") / "data", auth_tokens=SCOPED_TOKENS)
    with served_store(cfg) as served:
        yield served.url


# (method, token, namespace header, body, status, the id the answer carries)
REFUSALS: list[tuple[str, str, str | None, bytes, int, Any]] = [
    ("POST", TOKEN_ALICE, "acme/bob", _ping(b"7"), 403, 7),              # outside the prefix: its integer id
    ("POST", TOKEN_ALICE, "acme", _ping(b'"req-9"'), 403, "req-9"),      # a string id
    ("POST", TOKEN_ACME, "acme//x", _ping(b"11"), 422, 11),              # a malformed header
    ("POST", TOKEN_ACME, "a" * 5000, _ping(b'"long"'), 422, "long"),     # a header past any length limit
    ("POST", TOKEN_ALICE, "acme/bob", _ping(b""), 403, None),            # a notification has no id: null
    ("POST", TOKEN_ALICE, "acme/bob", b"[" + _ping(b"7") + b"]", 403, None),  # a batch has no one id: null
    ("POST", TOKEN_ALICE, "acme/bob", b"", 403, None),                   # no body: null
    ("PUT", TOKEN_ACME, None, _ping(b"3"), 405, 3),                      # another verb, with a body: its id
    ("GET", TOKEN_ACME, None, b"", 405, None),                           # a GET has no body: null
]
REFUSAL_IDS = ["403 int", "403 string", "422 malformed", "422 too long", "notification", "batch", "no body",
               "405 put", "405 get"]


@pytest.mark.parametrize(("method", "token", "namespace", "body", "status", "expected"), REFUSALS, ids=REFUSAL_IDS)
def test_a_refusal_carries_the_request_id(served: str, method: str, token: str, namespace: str | None,
                                          body: bytes, status: int, expected: Any) -> None:
    headers = [_auth(token), ACCEPT, JSON, *([(NS, namespace)] if namespace is not None else [])]
    got, _, answer = raw_request(served, method, MCP_PATH, headers, body)
    assert got == status, answer
    assert answer["jsonrpc"] == "2.0" and "error" in answer
    assert "id" in answer and answer["id"] == expected and type(answer["id"]) is type(expected), answer


@pytest.fixture
def starting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The real app with its lifespan off: the MCP server never starts (answered 503)."""
    monkeypatch.setattr(mcp_http, "MCP_START_WAIT_S", START_WAIT_S)
    cfg = Config(data_dir=tmp_path / "data", auth_tokens={TOKEN_ACME: "acme"})
    with serve_app(create_app(cfg, start_scheduler=False), lifespan="off") as url:
        yield url


# (raw id, the id the 503 carries)
STARTING = [(b"7", 7), (b'"s-1"', "s-1"), (b"", None)]


@pytest.mark.parametrize(("raw_id", "expected"), STARTING, ids=["int", "string", "notification"])
def test_starting_carries_the_request_id(starting: str, raw_id: bytes, expected: Any) -> None:
    got, headers, answer = raw_request(starting, "POST", MCP_PATH, [_auth(TOKEN_ACME), ACCEPT, JSON], _ping(raw_id))
    assert got == 503 and "retry-after" in headers, answer
    assert answer["id"] == expected and type(answer["id"]) is type(expected), answer


# -- mounted alone (no guard): the read for an id is bounded ------------------------------------

def _endpoint(tmp_path: Path) -> tuple[McpEndpoint, Memory]:
    cfg = Config(data_dir=tmp_path / "data", auth_tokens=SCOPED_TOKENS, max_body_bytes=BODY_LIMIT,
                 max_content_bytes=BODY_LIMIT // 2,  # the service needs room for a message in a body
                 http_body_timeout_s=BODY_TIMEOUT_S)
    mem = Memory(cfg, embedder=HashEmbedder(), hot=False, background_indexing=False)
    app = create_app(cfg, mem, start_scheduler=False)
    endpoint = next(r.endpoint for r in app.router.routes if getattr(r, "path", None) == MCP_PATH)
    assert isinstance(endpoint, McpEndpoint)
    return endpoint, mem


def _in_chunks(body: bytes, size: int, *, ends: bool = True) -> list[dict[str, Any]]:
    """`body` as ASGI messages of `size` bytes; `ends` False: the last says more is coming."""
    parts = [body[i:i + size] for i in range(0, len(body), size)]
    return [{"type": "http.request", "body": p, "more_body": i < len(parts) - 1 or not ends}
            for i, p in enumerate(parts)]


# (the body's messages, the id the 403 carries)
ALONE: list[tuple[list[dict[str, Any]], Any]] = [
    (_in_chunks(_ping(b"21"), 8), 21),                                    # in small chunks: read whole
    (_in_chunks(_ping(b"22")[:-1] + b" " * BODY_LIMIT + b"}", 1024), None),  # past max_body_bytes: not read, null
    (_in_chunks(_ping(b"23"), 8, ends=False), None),                      # never ends: null at the timeout
    ([{"type": "http.disconnect"}], None),                                # the client went away: null
    (_in_chunks(b'{"jsonrpc":"2.0","id":24,"method":"pi\xff"}', 16), None),  # not UTF-8: no id read, null
]


@pytest.mark.parametrize(("messages", "expected"), ALONE,
                         ids=["chunked", "past the limit", "never ends", "disconnect", "not utf-8"])
def test_mounted_alone_the_read_is_bounded(tmp_path: Path, messages: list[dict[str, Any]], expected: Any) -> None:
    endpoint, mem = _endpoint(tmp_path)
    scope = {"type": "http", "method": "POST", "path": MCP_PATH, "headers": [
        (b"authorization", f"Bearer {TOKEN_ALICE}".encode()), (b"content-type", b"application/json"),
        (NS.lower().encode(), b"acme/bob")]}
    pending = list(messages)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if pending:
            return pending.pop(0)
        await asyncio.sleep(3600)  # a client that sends no more
        raise AssertionError("unreachable")

    async def send(message: Any) -> None:
        sent.append(message)

    began = time.monotonic()
    try:
        asyncio.run(asyncio.wait_for(endpoint(scope, receive, send), ANSWER_WITHIN_S))
    finally:
        mem.close()
    assert time.monotonic() - began < ANSWER_WITHIN_S
    assert sent[0]["status"] == 403
    answer = json.loads(sent[1]["body"])
    assert answer["id"] == expected and type(answer["id"]) is type(expected), answer
    assert "outside this token's scope" in answer["error"]["message"]

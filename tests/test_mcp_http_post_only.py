"""`/v1/mcp` is stateless and serves POST only: a GET (the stream of server-initiated
messages, which it never sends), a DELETE (the end of a session it does not have) or any
other verb is answered 405 Method Not Allowed with `Allow: POST`, at once, as a JSON-RPC
error naming the rule (the MCP streamable-HTTP spec: "The server MUST either return
Content-Type: text/event-stream in response to this HTTP GET, or else return HTTP 405
Method Not Allowed"). A POST is served as ever; a request without a valid token is still
a 401 first (tests/test_mcp_http.py).

Fails on the code before: the `mcp` package's stateless mode answers a listening GET with
200 and an event stream that never sends a byte, held open until the client goes away
(python-sdk#3492; the package has no setting for it), each one holding a task of the
session manager; a GET without `Accept: text/event-stream` got 406, a HEAD 405 with
`Allow: GET, POST, DELETE`, a DELETE 405 without an Allow header; and (review of the
HTTP contract, 2026-12-07) a PUT, PATCH or OPTIONS Starlette's own 405, `Allow: GET,
HEAD, DELETE, POST` and `{"detail": "Method Not Allowed"}`, which no JSON-RPC client reads.

A real uvicorn serving the real app in this process, the real `mcp` package, httpx with
a read timeout, so a held stream fails the test instead of hanging it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytest.importorskip("mcp")
from hash_embedder import HashEmbedder
from service_helpers import TOKEN_ACME, serve_in_thread

from tiermem import Config, Memory
from tiermem.adapters.mcp_http import MCP_PATH

pytestmark = pytest.mark.usefixtures("clean_env")

NS = "acme"
# a held stream would answer its head at once and then no byte: this long without one fails
READ_TIMEOUT_S = 10.0
# the first POST waits for the mcp package's import (1-2 s, more on a busy machine)
FIRST_POST_TIMEOUT_S = 60.0
METHOD_NOT_ALLOWED = 405
INVALID_REQUEST = -32600
AUTH = {"Authorization": f"Bearer {TOKEN_ACME}"}
MCP_ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data_dir: Path = tmp_path_factory.mktemp("mcp-post-only") / "data"
    cfg = Config(data_dir=data_dir, auth_tokens={TOKEN_ACME: NS})
    with Memory(cfg, embedder=HashEmbedder(), hot=False, background_indexing=False) as mem, \
            serve_in_thread(cfg, mem) as base:
        # the MCP server is running (the package imported) before the cases
        r = httpx.post(base + MCP_PATH, json=INITIALIZE, headers={**AUTH, **MCP_ACCEPT}, timeout=FIRST_POST_TIMEOUT_S)
        assert r.status_code == 200 and r.json()["result"]["serverInfo"], r.text
        yield base


# each case: the method, the path, the extra headers
CASES: list[tuple[str, str, dict[str, str]]] = [
    # the listening GET a client opens after initialize: was 200 and a stream that never sent a byte
    ("GET", MCP_PATH, {"Accept": "text/event-stream"}),
    # ... at the spelling with the trailing slash, the same endpoint
    ("GET", MCP_PATH + "/", {"Accept": "text/event-stream"}),
    # ... in a namespace below the token's: the verb is refused before the namespace is read
    ("GET", MCP_PATH, {"Accept": "text/event-stream", "X-Tiermem-Namespace": "acme/alice"}),
    # a GET that accepts no event stream: was 406 (Not Acceptable), a client probing the verb read no 405
    ("GET", MCP_PATH, {"Accept": "application/json"}),
    # HEAD: was 405 naming GET and DELETE allowed
    ("HEAD", MCP_PATH, {}),
    # DELETE: no session to end; was 405 without an Allow header
    ("DELETE", MCP_PATH, {}),
    # PUT, PATCH, OPTIONS: were Starlette's 405, `Allow: GET, HEAD, DELETE, POST` and `{"detail": ...}`
    ("PUT", MCP_PATH, {}),
    ("PATCH", MCP_PATH, {}),
    ("OPTIONS", MCP_PATH, {}),
    # ... at the spelling with the trailing slash too
    ("PUT", MCP_PATH + "/", {}),
]


@pytest.mark.parametrize(("method", "path", "headers"), CASES,
                         ids=["get-listen", "get-slash", "get-namespace", "get-json", "head", "delete", "put",
                              "patch", "options", "put-slash"])
def test_a_verb_other_than_post_is_405_allow_post(url: str, method: str, path: str, headers: dict[str, str]) -> None:
    try:
        r = httpx.request(method, url + path, headers={**AUTH, **headers}, timeout=READ_TIMEOUT_S)
    except httpx.ReadTimeout:
        pytest.fail(f"{method} {path}: no answer within {READ_TIMEOUT_S} s (a stream held open)")
    assert r.status_code == METHOD_NOT_ALLOWED, (r.status_code, r.headers, r.text)
    assert r.headers["allow"] == "POST"
    if method == "HEAD":
        return  # a HEAD's answer has no body
    assert r.headers["content-type"] == "application/json"
    body = r.json()
    assert body["id"] is None and body["error"]["code"] == INVALID_REQUEST, body
    assert "serves POST only" in body["error"]["message"], body


def test_post_is_served_as_ever(url: str) -> None:
    """Passes before and after: a tools/list over POST answers the tools."""
    r = httpx.post(url + MCP_PATH, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                   headers={**AUTH, **MCP_ACCEPT}, timeout=READ_TIMEOUT_S)
    assert r.status_code == 200, r.text
    assert "append" in [t["name"] for t in r.json()["result"]["tools"]]


def test_a_get_without_a_valid_token_is_still_401(url: str) -> None:
    """The token is checked first: the 405 tells no one without one what the endpoint serves."""
    r = httpx.get(url + MCP_PATH, headers={"Accept": "text/event-stream"}, timeout=READ_TIMEOUT_S)
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"

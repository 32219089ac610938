"""A message may nest `MAX_JSON_DEPTH` levels (the message itself level 1) on every way in,
and one level more is refused naming the field and the limit, with nothing written.

Before, the HTTP guard bounded the depth of the whole request body at MAX_JSON_DEPTH, so
the envelope a route wraps a message in counted against the message: over
`POST .../messages:batch` (`{"messages": [<message>]}`) a message could nest only
MAX_JSON_DEPTH - 2 levels, over `/v1/mcp`'s `append` tool (JSON-RPC
`{"params": {"arguments": {"message": <message>}}}`) MAX_JSON_DEPTH - 3, while the library,
a single `POST .../messages` and the MCP server in process took MAX_JSON_DEPTH. Now the
guard allows each route its envelope's levels (tiermem.service.guard.ENVELOPE_LEVELS).
The real app (TestClient, its /v1/mcp mount included), the real MCP server in process,
real SQLite.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tiermem import Config, Memory
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.errors import ValidationError
from tiermem.tiers.models import MAX_JSON_DEPTH

pytest.importorskip("mcp")
from mcp import Client

from tiermem.adapters.mcp_server import build_server

pytestmark = pytest.mark.usefixtures("clean_env")

MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


def nested(levels: int) -> Any:
    """`levels` dicts around a string."""
    v: Any = "leaf"
    for _ in range(levels):
        v = {"a": v}
    return v


def nested_empty(levels: int, empty: dict[str, Any] | list[Any]) -> Any:
    """`levels` containers, the innermost one `empty` (no value inside it)."""
    v: Any = empty
    for _ in range(levels - 1):
        v = {"a": v}
    return v


# (the message of a given depth, the field a refusal must name) -- a deep value in the
# envelope and one in the body; the message itself is level 1, its fields' values level 2
SHAPES: list[tuple[Callable[[int], dict[str, Any]], str]] = [
    # metadata: the envelope field the original reports stored hundreds of levels deep
    (lambda depth: {"role": "user", "content": "hi", "metadata": nested(depth - 1)}, "metadata"),
    # a hosted-tool item's verbatim payload, part of the body sent to a model
    (lambda depth: {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": nested(depth - 1)},
     "action"),
    # the deepest level an empty object: containers count, not the values in them (a leaf
    # was counted as a level, so one object more than the limit passed when it was empty)
    (lambda depth: {"role": "user", "content": "hi", "metadata": nested_empty(depth - 1, {})}, "metadata"),
    # likewise an empty list innermost
    (lambda depth: {"role": "user", "content": "hi", "metadata": nested_empty(depth - 1, [])}, "metadata"),
]
SHAPE_IDS = ["metadata", "action", "metadata-empty-object", "metadata-empty-list"]


@dataclass
class Way:
    mem: Memory
    client: TestClient

    def library_append(self, conv: str, message: dict[str, Any]) -> tuple[bool, str]:
        try:
            self.mem.append(conv, message)
        except ValidationError as exc:
            return False, str(exc)
        return True, ""

    def library_append_many(self, conv: str, message: dict[str, Any]) -> tuple[bool, str]:
        try:
            self.mem.append_many(conv, [message])
        except ValidationError as exc:
            return False, str(exc)
        return True, ""

    def _http(self, path: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> tuple[bool, str]:
        r = self.client.post(path, json=body, headers=headers)
        if r.status_code in (200, 201):
            return True, r.text
        assert r.status_code == 422, r.text  # a refusal, never a 5xx
        return False, r.text

    def http_single(self, conv: str, message: dict[str, Any]) -> tuple[bool, str]:
        return self._http(f"/v1/conversations/{conv}/messages", message)

    def http_batch(self, conv: str, message: dict[str, Any]) -> tuple[bool, str]:
        return self._http(f"/v1/conversations/{conv}/messages:batch", {"messages": [message]})

    def mcp_over_http(self, conv: str, message: dict[str, Any]) -> tuple[bool, str]:
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "append", "arguments": {"conversation_id": conv, "message": message}}}
        ok, text = self._http("/v1/mcp", call, MCP_HEADERS)
        if ok and json.loads(text)["result"].get("isError"):
            return False, text  # a tool error: the library's refusal
        return ok, text

    def mcp_in_process(self, conv: str, message: dict[str, Any]) -> tuple[bool, str]:
        async def call() -> tuple[bool, str]:
            async with Client(build_server(self.mem)) as client:
                r = await client.call_tool("append", {"conversation_id": conv, "message": message})
                return not r.is_error, json.dumps([c.model_dump() for c in r.content])

        return asyncio.run(call())


# every way a message comes in
WAYS: list[str] = [
    "library_append",  # Memory.append
    "library_append_many",  # Memory.append_many: a list of messages
    "http_single",  # POST .../messages: the body is the message
    "http_batch",  # POST .../messages:batch: {"messages": [...]}, two levels above each message
    "mcp_over_http",  # /v1/mcp's append tool: JSON-RPC params.arguments.message, three levels above it
    "mcp_in_process",  # the MCP server without HTTP (`tiermem mcp` over stdio)
]


@pytest.fixture(scope="module")
def way(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[Way]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("depth") / "data")
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem, \
            TestClient(create_app(cfg, mem, auth=False, start_scheduler=False), base_url="http://127.0.0.1",
                       raise_server_exceptions=False) as client:
        yield Way(mem, client)


@pytest.mark.parametrize("shape", range(len(SHAPES)), ids=SHAPE_IDS)
@pytest.mark.parametrize("name", WAYS)
def test_the_limit_is_accepted_and_one_more_refused(way: Way, name: str, shape: int) -> None:
    make, field = SHAPES[shape]
    conv = f"{name}-{SHAPE_IDS[shape]}"
    way.mem.append(conv, {"role": "user", "content": "already here"})
    send = getattr(way, name)
    # the limit itself: accepted and stored whole
    ok, text = send(conv, make(MAX_JSON_DEPTH))
    assert ok, text
    got = way.mem.history(conv)
    assert len(got) == 2
    assert {**got[-1].body, **({"metadata": got[-1].metadata} if got[-1].metadata else {})} == make(MAX_JSON_DEPTH)
    # one level more: refused naming the field and the limit, nothing written
    ok, text = send(conv, make(MAX_JSON_DEPTH + 1))
    assert not ok
    assert field in text and str(MAX_JSON_DEPTH) in text, text
    assert len(way.mem.history(conv)) == 2

"""The MCP tools take a number argument as a JSON integer only (strict), over stdio's
in-process server and the HTTP `/v1/mcp` endpoint alike (both `build_server`): a JSON
`true`/`false`, a string of digits or a fraction is a tool error naming the argument and
the type expected, the tool does not run and nothing is written (every table of the real
SQLite file compared before and after). Integers are still taken. A message's `created_at`
is the library's to refuse (`Message`, strict: tests/test_message_strict_numbers.py); the
tool names it as the library does.

Fails on the code before: the mcp package's argument models are pydantic's lax mode, which
read `true` as 1, `false` as 0 and `"5"` as 5 (the library's check_int refuses all three):
`append` with `expect_position: true` appended on condition of position 1, `pin` with
`position: true` pinned position 1, `unpin` with `position: true` unpinned it, `k: "5"`
answered five hits."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
import httpx
import httpx2  # the mcp package's HTTP client
from cold_helpers import every_row
from hash_embedder import HashEmbedder
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from reliability_helpers import Server, start_server, stop_server

from tiermem import Config, Memory
from tiermem.adapters.mcp_server import build_server

NS = "acme"
CONV = "trip"
MESSAGES = [{"role": "user", "content": f"Lisbon trip, note {i}: window seat, no red-eyes."} for i in range(4)]
PINNED = (1, 7)  # (position, priority) pinned before the cases: an unpin or a re-pin of 1 would show
INTEGER_REFUSAL = "Input should be a valid integer"
STRING_REFUSAL = "Input should be a valid string"

# (tool, the argument, the rest of a valid call): every number argument of every tool
NUMBER_ARGS: list[tuple[str, str, dict[str, Any]]] = [
    # lax: `true` appended on condition of position 1 (`false` of 0, creating the conversation)
    ("append", "expect_position", {"conversation_id": "new", "message": {"role": "user", "content": "hi"}}),
    # lax: `true` read as a budget of 1 token, refused by the planner under its own message
    ("context", "budget", {"conversation_id": CONV, "query": "window seat?"}),
    # strict from the start (the HTTP context's arguments, added since): kept so
    ("context", "pending_tokens", {"conversation_id": CONV, "query": "window seat?"}),
    ("context", "max_breakpoints", {"conversation_id": CONV, "query": "window seat?", "format": "anthropic"}),
    # lax: `"5"` read as the page from position 5
    ("history", "start", {"conversation_id": CONV}),
    # lax: `true` read as a page of one message
    ("history", "limit", {"conversation_id": CONV}),
    # lax: `true` answered one hit
    ("search", "k", {"query": "window seat", "conversation_id": CONV}),
    # lax: `true` pinned position 1 (PINNED's priority overwritten with the default)
    ("pin", "position", {"conversation_id": CONV}),
    # lax: `"5"` pinned position 0 at priority 5
    ("pin", "priority", {"conversation_id": CONV, "position": 0}),
    # lax: `true` unpinned position 1 (PINNED)
    ("unpin", "position", {"conversation_id": CONV}),
]

# (the value sent): each refused for an integer argument
VALUES: list[Any] = [
    True,  # a JSON boolean is no number (the library's check_int refuses it too)
    False,  # ... false neither: lax read it as 0
    "5",  # a string of digits is text, however it reads (the mcp package leaves it a string)
    "true",  # text that parses as a JSON boolean: left a string too, and refused
    5.5,  # a fraction is no integer
    5.0,  # an integral float neither, as check_int has it
]

# (tool, the argument, the rest of a valid call): every boolean argument, a JSON boolean only
BOOL_ARGS: list[tuple[str, str, dict[str, Any]]] = [
    # `"true"`, 1 or `"yes"` would read as true in lax mode (HTTP's ContextIn is strict)
    ("context", "truncate_latest", {"conversation_id": CONV, "query": "window seat?"}),
    ("context", "namespace_recall", {"conversation_id": CONV, "query": "window seat?"}),
]
BOOL_VALUES: list[Any] = [1, 0, "true", "yes"]  # each refused for a boolean argument
BOOLEAN_REFUSAL = "Input should be a valid boolean"

# (tool, the argument, the value, the rest of a valid call): text arguments given another
# type, refused already (pydantic's lax mode makes no string of a number): kept so
STRING_ARGS: list[tuple[str, str, Any, dict[str, Any]]] = [
    # a session id of a number is not stored as its text
    ("append", "session_id", 5, {"conversation_id": CONV, "message": {"role": "user", "content": "hi"}}),
    # an idempotency key of a boolean neither
    ("append", "idempotency_key", True, {"conversation_id": CONV, "message": {"role": "user", "content": "hi"}}),
    # the confirmation of an erasure must be the id as text: a number erases nothing
    ("erase", "confirm", 0, {"conversation_id": CONV}),
]


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    d = tmp_path_factory.mktemp("mcp-strict")
    m = Memory(Config(data_dir=d / "data"), embedder=HashEmbedder(), hot=False, background_indexing=False)
    m.append_many(CONV, MESSAGES, namespace=NS)
    m.pin(CONV, PINNED[0], priority=PINNED[1], namespace=NS)
    yield m
    m.close()


def _call(mem: Memory, tool: str, args: dict[str, Any]) -> tuple[bool, Any]:
    """(is_error, the error's text or the structured answer) of one call to the in-process
    server (as `tiermem mcp` builds it, bound to the namespace)."""
    async def run() -> tuple[bool, Any]:
        async with Client(build_server(mem.namespaced(NS))) as client:
            r = await client.call_tool(tool, args)
            return r.is_error, r.content[0].text if r.is_error else r.structured_content  # type: ignore[union-attr]

    return asyncio.run(run())


def _names(text: str, arg: str, refusal: str) -> bool:
    """The tool error names `arg` (pydantic's location: a line of its own, the problem on the next)."""
    lines = text.splitlines()
    return arg in lines and refusal in lines[lines.index(arg) + 1]


@pytest.mark.parametrize(("tool", "arg", "base", "value"), [
    pytest.param(tool, arg, base, value, id=f"{tool}.{arg}={value!r}")
    for tool, arg, base in NUMBER_ARGS for value in VALUES])
def test_a_number_argument_of_another_json_type_is_a_tool_error(mem: Memory, tool: str, arg: str,
                                                                base: dict[str, Any], value: Any) -> None:
    before = every_row(mem.config.db_path)
    is_error, text = _call(mem, tool, {**base, arg: value})
    assert is_error, text
    assert _names(text, arg, INTEGER_REFUSAL), text
    assert every_row(mem.config.db_path) == before
    assert len(before["messages"]) >= len(MESSAGES)  # the comparison reads the store the tools write


@pytest.mark.parametrize(("tool", "arg", "value", "base"), [
    pytest.param(*s, id=f"{s[0]}.{s[1]}={s[2]!r}") for s in STRING_ARGS])
def test_a_text_argument_of_another_json_type_is_a_tool_error(mem: Memory, tool: str, arg: str, value: Any,
                                                              base: dict[str, Any]) -> None:
    before = every_row(mem.config.db_path)
    is_error, text = _call(mem, tool, {**base, arg: value})
    assert is_error and _names(text, arg, STRING_REFUSAL), text
    assert every_row(mem.config.db_path) == before


def test_every_number_argument_of_every_tool_is_in_the_table(mem: Memory) -> None:
    """A tool or argument added later is strict only if it is tested so: the table must list
    every argument whose schema is a JSON integer, number or boolean (nullable included)."""
    async def run() -> set[tuple[str, str]]:
        async with Client(build_server(mem.namespaced(NS))) as client:
            tools = (await client.list_tools()).tools
        out = set()
        for t in tools:
            for name, prop in t.input_schema.get("properties", {}).items():
                types = {prop.get("type"), *(p.get("type") for p in prop.get("anyOf", []))}
                if types & {"integer", "number", "boolean"}:
                    out.add((t.name, name))
        return out

    assert asyncio.run(run()) == {(tool, arg) for tool, arg, _base in NUMBER_ARGS + BOOL_ARGS}


@pytest.mark.parametrize(("tool", "arg", "base", "value"), [
    pytest.param(tool, arg, base, value, id=f"{tool}.{arg}={value!r}")
    for tool, arg, base in BOOL_ARGS for value in BOOL_VALUES])
def test_a_boolean_argument_of_another_json_type_is_a_tool_error(mem: Memory, tool: str, arg: str,
                                                                 base: dict[str, Any], value: Any) -> None:
    before = every_row(mem.config.db_path)
    is_error, text = _call(mem, tool, {**base, arg: value})
    assert is_error and _names(text, arg, BOOLEAN_REFUSAL), text
    assert every_row(mem.config.db_path) == before


# (tool, a valid call, what the answer holds): integers are still taken
ACCEPTED: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("history", {"conversation_id": CONV, "start": 2, "limit": 1}, {"next_start": 3}),  # a page of one from 2
    ("pin", {"conversation_id": CONV, "position": 0, "priority": 5}, {"pinned": True}),  # integers
    ("unpin", {"conversation_id": CONV, "position": 0}, {"pinned": False}),  # the pin above, taken back
    ("append", {"conversation_id": "strict-new", "message": {"role": "user", "content": "hi"},
                "expect_position": 0}, {"position": 0}),  # a condition of position 0 (a new conversation)
]


@pytest.mark.parametrize(("tool", "args", "holds"), ACCEPTED, ids=[a[0] for a in ACCEPTED])
def test_integers_are_taken(mem: Memory, tool: str, args: dict[str, Any], holds: dict[str, Any]) -> None:
    is_error, out = _call(mem, tool, args)
    assert not is_error, out
    assert {k: out[k] for k in holds} == holds


def test_context_and_search_take_integers(mem: Memory) -> None:
    is_error, ctx = _call(mem, "context", {"conversation_id": CONV, "query": "window seat?", "budget": 300})
    assert not is_error and 0 < ctx["tokens"] <= 300, ctx
    is_error, found = _call(mem, "search", {"query": "window seat", "conversation_id": CONV, "k": 2})
    assert not is_error and 1 <= len(found["hits"]) <= 2, found


def test_a_message_time_of_another_json_type_is_refused_as_the_library_refuses_it(mem: Memory) -> None:
    before = every_row(mem.config.db_path)
    for value in (True, "5"):  # lax: stored at 1970-01-01 00:00:01 / 00:00:05
        is_error, text = _call(mem, "append", {"conversation_id": CONV, "message": {
            "role": "user", "content": "hi", "created_at": value}})
        assert is_error and text.endswith("created_at: Input should be a valid number"), text
    assert every_row(mem.config.db_path) == before


# --- the same tools behind `tiermem serve` (`/v1/mcp`), a real server process ---------------

TOKEN = "tok-acme-mcp-strict-0123456789abcdef"
MCP_PATH = "/v1/mcp"
READ_TIMEOUT_S = 120.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path]]:
    d = tmp_path_factory.mktemp("mcp-strict-http")
    srv = start_server(d / "data", d / "serve.log", env={
        "TIERMEM_AUTH_TOKENS": json.dumps({TOKEN: NS}),
        "TIERMEM_REDIS_URL": "redis://127.0.0.1:1/0",  # unreachable: cold-only, no Redis to start
    })
    try:
        yield srv, Config(data_dir=d / "data").db_path
    finally:
        stop_server(srv)


# the longest the HTTP cases wait (seconds) for the server's background indexer to embed
# the message they append first: loading the model on a busy 2-core runner and one pool
SETTLE_S = 120.0
SETTLE_POLL_S = 0.1
# /healthz's embedder states under which vectors may still come (the indexer embeds once loaded)
EMBEDDER_WORKING = ("loading", "ready")


def _settled(srv: Server, db_path: Path) -> None:
    """Return once the server will write no more vectors on its own: no turn is pending
    (`turns.embedded = 0`), or its embedder is neither loading nor ready. The message
    appended first is plain (no correction), so `append` leaves it to the background
    indexer and returns (tiermem.memory: only a live correction is embedded, or waited
    for, before `append` returns): its vector and `embedded = 1` land whenever the
    indexer gets to it, and a snapshot taken before that differed from the one after
    (CI on ac83487: messages_vec_* rows). Waited for, so that a difference is the tool's."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True) as conn:
            pending = conn.execute("SELECT COUNT(*) FROM turns WHERE embedded = 0").fetchone()[0]
        if pending == 0:
            return
        state = httpx.get(srv.url + "/healthz", timeout=5).json()["tiers"].get("embedder")
        if state not in EMBEDDER_WORKING:
            return  # no model to embed them: nothing more comes
        assert time.monotonic() < deadline, f"{pending} turn(s) still pending after {SETTLE_S} s (embedder {state})"
        time.sleep(SETTLE_POLL_S)


# (tool, arguments, the argument named): over HTTP, each refused, nothing written
HTTP_REFUSED: list[tuple[str, dict[str, Any], str]] = [
    # lax: appended on condition of position 1 (the conversation holds one message)
    ("append", {"conversation_id": CONV, "message": {"role": "user", "content": "b"}, "expect_position": True},
     "expect_position"),
    # lax: pinned position 1
    ("pin", {"conversation_id": CONV, "position": True}, "position"),
    # lax: pinned position 0 at priority 5
    ("pin", {"conversation_id": CONV, "position": 0, "priority": "5"}, "priority"),
]


@pytest.mark.parametrize(("tool", "args", "arg"), HTTP_REFUSED, ids=[f"{h[0]}.{h[2]}" for h in HTTP_REFUSED])
def test_the_http_endpoint_refuses_them_too(server: tuple[Server, Path], tool: str, args: dict[str, Any],
                                            arg: str) -> None:
    srv, db_path = server

    async def run() -> tuple[bool, str, dict[str, list[str]]]:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        transport = streamable_http_client(srv.url + MCP_PATH,
                                           http_client=httpx2.AsyncClient(headers=headers, timeout=READ_TIMEOUT_S))
        async with Client(transport, read_timeout_seconds=READ_TIMEOUT_S) as c:
            # one message, so that position 1 is where the conversation goes on (idempotent: once)
            first = await c.call_tool("append", {"conversation_id": CONV, "idempotency_key": "first",
                                                 "message": {"role": "user", "content": "a"}})
            assert not first.is_error, first.content
            await asyncio.to_thread(_settled, srv, db_path)  # the indexer's vector is no tool's write
            before = every_row(db_path)
            r = await c.call_tool(tool, args)
            return r.is_error, r.content[0].text, before  # type: ignore[union-attr]

    is_error, text, before = asyncio.run(run())
    assert is_error and _names(text, arg, INTEGER_REFUSAL), text
    assert every_row(db_path) == before and len(before["messages"]) == 1

"""An MCP tool refuses an argument it does not take: a tool error naming it (`Extra inputs
are not permitted`), the tool does not run, nothing is written (every table of the real
SQLite file compared before and after), over the in-process server, a real `tiermem mcp`
child on stdio and the HTTP `/v1/mcp` endpoint of a real `tiermem serve` (all three
`build_server`). Every tool's `inputSchema` says so (`additionalProperties: false`).
The `context` tool takes the HTTP context's `pending_tokens`, `truncate_latest`,
`namespace_recall`, `thinking` and `max_breakpoints`, checked as HTTP checks them.

Fails on the code before: the mcp package's argument models ignored unknown keys, so
`append` with a misspelled `expect_postion: 0` wrote unconditionally (at position 1), an
`idempotency_kee` sent twice stored the message twice, and `context` took a
`pending_tokens: -1` it then dropped; no schema had `additionalProperties`."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import pytest

pytest.importorskip("mcp")
import httpx2  # the mcp package's HTTP client
from cold_helpers import every_row
from hash_embedder import HashEmbedder
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_stdio_helpers import child_rows, started_child
from service_helpers import serve_open

from tiermem import Config, Memory
from tiermem.adapters.anthropic import THINKING_SCOPES
from tiermem.adapters.mcp_server import ThinkingScope, build_server

NS = "acme"
CONV = "trip"
MESSAGES = [{"role": "user", "content": f"Lisbon trip, note {i}: window seat, no red-eyes."} for i in range(3)]
EXTRA_REFUSAL = "Extra inputs are not permitted"
NEW_MESSAGE = {"role": "user", "content": "a new note"}
MCP_PATH = "/v1/mcp"
READ_TIMEOUT_S = 120.0

# (tool, a valid call plus one argument the tool does not take, that argument)
UNKNOWN: list[tuple[str, dict[str, Any], str]] = [
    # misspelled condition: before, written at position 3 whatever the log held
    ("append", {"conversation_id": CONV, "message": NEW_MESSAGE, "expect_postion": 0}, "expect_postion"),
    # misspelled key: before, stored (again at every retry)
    ("append", {"conversation_id": CONV, "message": NEW_MESSAGE, "idempotency_kee": "k1"}, "idempotency_kee"),
    # an HTTP body's field name that the tool calls otherwise (`conversation_id` is fine, `id` is not)
    ("append", {"conversation_id": CONV, "message": NEW_MESSAGE, "role": "user"}, "role"),
    # the HTTP history's cursor name, not the tool's `start`: before, read from 0 silently
    ("history", {"conversation_id": CONV, "after": 1}, "after"),
    # the HTTP search's `q`, not the tool's `query`
    ("search", {"query": "window", "q": "seat"}, "q"),
    # pin's misspelled priority: before, pinned at the default 50
    ("pin", {"conversation_id": CONV, "position": 0, "priorty": 90}, "priorty"),
    # unpin takes no priority: before, unpinned anyway
    ("unpin", {"conversation_id": CONV, "position": 1, "priority": 7}, "priority"),
    # erase takes no `force`: before, ignored and the conversation erased
    ("erase", {"conversation_id": CONV, "confirm": CONV, "force": True}, "force"),
    # context with a budget misspelled: before, planned under the default budget
    ("context", {"conversation_id": CONV, "budgte": 50}, "budgte"),
]


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    d = tmp_path_factory.mktemp("mcp-unknown")
    m = Memory(Config(data_dir=d / "data"), embedder=HashEmbedder(), hot=False, background_indexing=False)
    m.append_many(CONV, MESSAGES, namespace=NS)
    m.pin(CONV, 1, priority=7, namespace=NS)
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


def _names(text: str, arg: str) -> bool:
    """The tool error names `arg` (pydantic's location: a line of its own, the problem on the next)."""
    lines = text.splitlines()
    return arg in lines and EXTRA_REFUSAL in lines[lines.index(arg) + 1]


@pytest.mark.parametrize(("tool", "args", "arg"), UNKNOWN, ids=[f"{u[0]}.{u[2]}" for u in UNKNOWN])
def test_an_unknown_argument_is_a_tool_error_and_nothing_is_written(mem: Memory, tool: str, args: dict[str, Any],
                                                                    arg: str) -> None:
    before = every_row(mem.config.db_path)
    is_error, text = _call(mem, tool, args)
    assert is_error and _names(text, arg), text
    assert every_row(mem.config.db_path) == before
    assert len(before["messages"]) == len(MESSAGES)  # the comparison reads the store the tools write


def test_every_tool_schema_forbids_other_arguments(mem: Memory) -> None:
    async def run() -> dict[str, Any]:
        async with Client(build_server(mem.namespaced(NS))) as client:
            return {t.name: t.input_schema for t in (await client.list_tools()).tools}

    schemas = asyncio.run(run())
    assert {name for name, s in schemas.items() if s.get("additionalProperties") is False} == set(schemas)
    assert {u[0] for u in UNKNOWN} == set(schemas)  # every tool is in the table above


# --- context: the HTTP context's arguments ------------------------------------------------

# (arguments beyond the conversation id, the argument the refusal names, a part of its text)
CONTEXT_REFUSED: list[tuple[dict[str, Any], str, str]] = [
    # negative pending tokens: HTTP's ContextIn refuses them (ge=0); before, an unknown argument dropped
    ({"budget": 100, "pending_tokens": -1}, "pending_tokens", "greater than or equal to 0"),
    # a pending count past the largest budget (HTTP: le=MAX_BUDGET_TOKENS)
    ({"budget": 100, "pending_tokens": 10**9}, "pending_tokens", "less than or equal to"),
    # booleans are JSON booleans (HTTP's ContextIn is strict)
    ({"truncate_latest": "yes"}, "truncate_latest", "valid boolean"),
    ({"namespace_recall": 0}, "namespace_recall", "valid boolean"),
    # a scope to_anthropic does not know
    ({"format": "anthropic", "thinking": "some"}, "thinking", "'current_loop' or 'all'"),
    # more marks than Anthropic takes
    ({"format": "anthropic", "max_breakpoints": 5}, "max_breakpoints", "less than or equal to 4"),
    # the Anthropic options mean nothing in an OpenAI context: refused as HTTP refuses them
    ({"thinking": "all"}, "thinking", 'only with format "anthropic"'),
    ({"max_breakpoints": 2}, "max_breakpoints", 'only with format "anthropic"'),
]


@pytest.mark.parametrize(("extra", "arg", "problem"), CONTEXT_REFUSED,
                         ids=[f"{c[1]}={list(c[0].values())[-1]!r}" for c in CONTEXT_REFUSED])
def test_context_refuses_what_http_refuses(mem: Memory, extra: dict[str, Any], arg: str, problem: str) -> None:
    before = every_row(mem.config.db_path)
    is_error, text = _call(mem, "context", {"conversation_id": CONV, "query": "seat?", **extra})
    assert is_error and arg in text and problem in text, text
    assert every_row(mem.config.db_path) == before  # a refused context records no plan either


def test_context_plans_under_the_budget_less_the_pending_tokens(mem: Memory) -> None:
    base = {"conversation_id": CONV, "query": "window seat?", "budget": 120}
    is_error, whole = _call(mem, "context", base)
    assert not is_error, whole
    is_error, less = _call(mem, "context", {**base, "pending_tokens": 80})
    assert not is_error, less
    assert less["tokens"] <= 120 - 80 < whole["tokens"], (less["tokens"], whole["tokens"])


def test_context_truncates_the_latest_message_only_when_asked(tmp_path: Path) -> None:
    m = Memory(Config(data_dir=tmp_path / "data"), embedder=HashEmbedder(), hot=False, background_indexing=False)
    try:
        m.append("long", {"role": "user", "content": "window seat please " * 200}, namespace=NS)
        args = {"conversation_id": "long", "budget": 60}
        is_error, text = _call(m, "context", args)
        assert is_error, text  # the latest message alone is past the budget
        is_error, out = _call(m, "context", {**args, "truncate_latest": True})
        assert not is_error and 0 < out["tokens"] <= 60, out
    finally:
        m.close()


def test_context_anthropic_options_reach_to_anthropic(mem: Memory) -> None:
    base = {"conversation_id": CONV, "query": "seat?", "format": "anthropic", "thinking": "all"}
    is_error, marked = _call(mem, "context", base)
    assert not is_error, marked
    assert "cache_control" in json.dumps(marked["messages"]) + json.dumps(marked["system"])  # by default
    is_error, out = _call(mem, "context", {**base, "max_breakpoints": 0})
    assert not is_error, out
    # no cache marks at all: max_breakpoints reached to_anthropic
    assert "cache_control" not in json.dumps(out["messages"]) + json.dumps(out["system"])


def test_thinking_scopes_are_to_anthropics() -> None:
    assert get_args(ThinkingScope) == THINKING_SCOPES


# --- a real `tiermem mcp` child on stdio ---------------------------------------------------


def test_stdio_refuses_a_misspelled_condition(tmp_path: Path) -> None:
    with started_child(tmp_path, CONV) as child:
        before = child_rows(child)
        answer = child.call(2, "append", {"conversation_id": CONV, "message": NEW_MESSAGE, "expect_postion": 0})
        result = answer["result"]
        assert result["isError"] is True and _names(result["content"][0]["text"], "expect_postion"), answer
        assert child_rows(child) == before
        # spelled right, the same condition is checked: the conversation goes on at 1, not 0
        answer = child.call(3, "append", {"conversation_id": CONV, "message": NEW_MESSAGE, "expect_position": 0})
        assert answer["result"]["isError"] is True and "expect_position" in answer["result"]["content"][0]["text"]
        assert child_rows(child) == before


# --- the HTTP `/v1/mcp` endpoint of a real `tiermem serve` ---------------------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    root = tmp_path_factory.mktemp("mcp-unknown-http")
    with serve_open(root) as url:
        yield url, Config(data_dir=root / "data").db_path


def _messages(db_path: Path) -> int:
    with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True) as conn:
        count: int = conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0]
    return count


def test_the_http_endpoint_refuses_them_too(served: tuple[str, Path]) -> None:
    url, db_path = served

    async def run() -> list[tuple[bool, str]]:
        http = httpx2.AsyncClient(headers={"X-Tiermem-Namespace": NS}, timeout=READ_TIMEOUT_S)
        async with Client(streamable_http_client(url + MCP_PATH, http_client=http),
                          read_timeout_seconds=READ_TIMEOUT_S) as c:
            first = await c.call_tool("append", {"conversation_id": CONV, "message": NEW_MESSAGE})
            assert not first.is_error, first.content
            out = []
            for args in ({"expect_postion": 0}, {"idempotency_kee": "k1"}, {"idempotency_kee": "k1"}):
                r = await c.call_tool("append", {"conversation_id": CONV, "message": NEW_MESSAGE, **args})
                out.append((r.is_error, r.content[0].text))  # type: ignore[union-attr]
            return out

    answers = asyncio.run(run())
    for (is_error, text), arg in zip(answers, ("expect_postion", "idempotency_kee", "idempotency_kee"), strict=True):
        assert is_error and _names(text, arg), text
    assert _messages(db_path) == 1  # the first append only: before, 4

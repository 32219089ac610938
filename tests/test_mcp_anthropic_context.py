"""The MCP `context` tool answers in Anthropic's Messages format on request: `system` and
`messages` as `to_anthropic` builds them from the call's memory (the tool loop's thinking
restored), the default answer unchanged; an unknown format is a tool error naming the
argument. Fails on the code before: the tool took no `format` argument."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

pytest.importorskip("mcp")
from mcp import Client

from tiermem import Memory
from tiermem.adapters.anthropic import from_anthropic, to_anthropic
from tiermem.adapters.mcp_server import build_server

NS = "acme"
CONV = "loop"
QUERY = "What's the weather in Tokyo?"
BUDGET = 4000
THINKING = {"type": "thinking", "thinking": "Call the weather tool.",
            "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxDYXJlZnVsbHkgdGhpbmsiMHNpZ25lZA=="}
LOOP: list[dict[str, Any]] = [
    {"role": "user", "content": QUERY},
    {"role": "assistant", "content": [THINKING, {"type": "tool_use", "id": "toolu_1", "name": "weather",
                                                 "input": {"city": "Tokyo"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}]},
]

# (the tool's arguments besides the conversation and query, the answer's keys; None: a tool error)
CASES: list[tuple[dict[str, Any], list[str] | None]] = [
    # no format: the OpenAI answer, its keys as before
    ({}, ["messages", "tokens", "plan", "explain"]),
    # anthropic: system and messages for messages.create, with what they send counted and
    # to_anthropic's notes on it, the same plan, and where the plan's breakpoints are in them
    ({"format": "anthropic"}, ["format", "system", "messages", "tokens", "notes", "plan", "explain",
                               "breakpoints"]),
    # a format that does not exist: refused, naming the argument
    ({"format": "gemini"}, None),
]


@pytest.mark.parametrize(("args", "keys"), CASES)
def test_context_format(cold_memory: Memory, args: dict[str, Any], keys: list[str] | None) -> None:
    mem = cold_memory.namespaced(NS)
    for m in LOOP:
        mem.append_many(CONV, from_anthropic(m))

    async def run() -> Any:
        async with Client(build_server(mem)) as client:
            return await client.call_tool("context", {"conversation_id": CONV, "query": QUERY, "budget": BUDGET,
                                                      **args})

    r = asyncio.run(run())
    if keys is None:
        assert r.is_error and "format" in str(r.content)
        return
    assert not r.is_error, r.content
    got = r.structured_content
    assert list(got) == keys
    if args.get("format") == "anthropic":
        req = to_anthropic(mem.context(CONV, QUERY, BUDGET), mem)
        assert (got["system"], got["messages"], got["tokens"], got["notes"]) == (req.system, req.messages,
                                                                                 req.tokens, req.notes)
        assert got["breakpoints"] == [dataclasses.asdict(b) for b in req.breakpoints]
        assert got["messages"][1]["content"][0] == THINKING

"""The MCP `history` tool returns each message's metadata, as the HTTP history does.

`append` takes a message with its `metadata` (stored beside the body), and `history`
("every message ... exactly as appended") returned the body alone: an MCP client never
got back the metadata it wrote, nor what the adapters keep there (LangChain ids, the
Anthropic thinking and citations `from_anthropic` keeps under `anthropic_*`). The HTTP
history route returns it, rendered (`finite`). The real MCP server in process
(`build_server`) and the official `mcp` client, real SQLite.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("mcp")
from mcp import Client

from tiermem import Memory
from tiermem.adapters.anthropic import from_anthropic
from tiermem.adapters.mcp_server import build_server

NS = "acme"


def _history(mem: Memory, conversation_id: str, appends: list[dict[str, Any]]) -> list[dict[str, Any]]:
    async def run() -> list[dict[str, Any]]:
        async with Client(build_server(mem.namespaced(NS))) as client:
            for message in appends:
                r = await client.call_tool("append", {"conversation_id": conversation_id, "message": message})
                assert not r.is_error, r.content
            r = await client.call_tool("history", {"conversation_id": conversation_id})
            assert not r.is_error, r.content
            rows: list[dict[str, Any]] = (r.structured_content or {})["messages"]
            return rows

    return asyncio.run(run())


@pytest.mark.parametrize(("message", "metadata"), [
    # a caller's own data, appended through the tool
    ({"role": "user", "content": "Window seat.", "metadata": {"source": "email", "score": 0.5}},
     {"source": "email", "score": 0.5}),
    # unicode and nesting come back as written
    ({"type": "function_call_output", "call_id": "c1", "output": "ok", "metadata": {"tags": ["é", "漢字", "🙂"],
                                                                                     "deep": {"a": {"b": [1]}}}},
     {"tags": ["é", "漢字", "🙂"], "deep": {"a": {"b": [1]}}}),
    # no metadata: null, as the HTTP route says it
    ({"role": "user", "content": "plain"}, None),
])
def test_history_returns_what_append_stored(cold_memory: Memory, message: dict[str, Any],
                                            metadata: dict[str, Any] | None) -> None:
    rows = _history(cold_memory, "trip", [message])
    body = {k: v for k, v in message.items() if k != "metadata"}
    assert [(r["message"], r["metadata"]) for r in rows] == [(body, metadata)]


def test_history_returns_what_the_anthropic_adapter_keeps(cold_memory: Memory) -> None:
    reply = {"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
             "stop_reason": "end_turn", "stop_sequence": None, "usage": {"input_tokens": 4, "output_tokens": 2},
             "content": [{"type": "thinking", "thinking": "Check.", "signature": "EqQB"},
                         {"type": "text", "text": "Sunny."}]}
    cold_memory.append_many("weather", from_anthropic(reply), namespace=NS)
    stored = cold_memory.history("weather", namespace=NS)
    rows = _history(cold_memory, "weather", [])
    assert [r["metadata"] for r in rows] == [m.metadata for m in stored]
    assert any("anthropic" in k for r in rows for k in (r["metadata"] or {}))  # the thinking's keys, not empty

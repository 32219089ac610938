"""The MCP tools serve a row an older version stored deeper than they could encode.

Before the depth limit held on every way in, the library stored messages of any depth.
The HTTP service renders such a row down to `MAX_RENDER_DEPTH` levels, the rest shown as
`DEEP_VALUE_MARKER` (tiermem.service.schemas.finite); the MCP `history` and `context`
tools returned the stored bodies as they were, and past ~255 levels the MCP server's
JSON encoding failed: the call answered a tool error instead of the conversation, on
every call. Now the tools render through the same `finite`. The real MCP server in
process, a row written into a real SQLite store with SQL as an older version wrote it.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from cold_helpers import store_as_an_older_version

from tiermem import Config, Memory
from tiermem.service.schemas import DEEP_VALUE_MARKER, MAX_RENDER_DEPTH
from tiermem.tiers.embed_onnx import FastEmbedder

pytest.importorskip("mcp")
from mcp import Client

from tiermem.adapters.mcp_server import build_server

pytestmark = pytest.mark.usefixtures("clean_env")

CONV = "deep"


def nested_text(levels: int) -> str:
    """`levels` JSON objects around a string, built without json.dumps' recursion."""
    return '{"a": ' * levels + '"leaf"' + "}" * levels


def _call(mem: Memory, tool: str, args: dict[str, Any]) -> tuple[bool, Any]:
    async def call() -> tuple[bool, Any]:
        async with Client(build_server(mem)) as client:
            r = await client.call_tool(tool, args)
            return r.is_error, (r.content[0].text if r.is_error else r.structured_content)

    return asyncio.run(call())


# (the stored body's JSON) -- depths an older version stored
STORED_DEEP = [
    # 300 levels in a hosted-tool item's payload: past what the MCP server's encoder takes
    '{"type": "web_search_call", "id": "ws_1", "status": "completed", "action": ' + nested_text(300) + "}",
    # just past what is rendered
    '{"type": "web_search_call", "id": "ws_2", "status": "completed", "action": '
    + nested_text(MAX_RENDER_DEPTH + 1) + "}",
    # 900 levels: past Python's recursion limit for a recursive encoder
    '{"type": "web_search_call", "id": "ws_3", "status": "completed", "action": ' + nested_text(900) + "}",
]


@pytest.mark.parametrize("body_json", STORED_DEEP, ids=["300", "render+1", "900"])
def test_history_and_context_serve_a_deep_row(tmp_path: Path, embedder: FastEmbedder, body_json: str) -> None:
    cfg = Config(data_dir=tmp_path / "data")
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as m:
        m.append(CONV, {"role": "user", "content": "what did the search find?"})
    store_as_an_older_version(cfg.db_path, CONV, body_json, '{"m": 1}')
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as m:
        m.rebuild()  # the derived index over the old row too, so that context() plans with it
        failed, out = _call(m, "history", {"conversation_id": CONV})
        assert not failed, out
        assert [row["position"] for row in out["messages"]] == [0, 1]
        assert DEEP_VALUE_MARKER in json.dumps(out)  # the part past MAX_RENDER_DEPTH, marked
        failed, out = _call(m, "context", {"conversation_id": CONV, "query": "search", "budget": 100_000})
        assert not failed, out
        assert DEEP_VALUE_MARKER in json.dumps(out["messages"])  # the old row is in the context, rendered
        # the stored row is unchanged
        assert m.history(CONV)[1].body == json.loads(body_json)

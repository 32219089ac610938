"""The MCP `history` tool reads the page it returns, not the whole conversation.

It loaded every message of the conversation and sliced the page out in Python, so one
page cost O(conversation) (seconds at 20,000 messages) and paging through a conversation
was quadratic; the HTTP route reads just the page (`Memory.history_page`). Invariant: a
page reads the rows of its positions only. Shown without timing: a row that cannot be
decoded past the page is never met (the store counts every undecodable row it reads,
`salvaged_rows`), and the page's cursor says where the next one starts. The real MCP
server in process (`build_server`), real SQLite.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from cold_helpers import rewrite_stored

pytest.importorskip("mcp")
from mcp import Client

from tiermem import Config, Memory
from tiermem.adapters.mcp_server import build_server
from tiermem.tiers.embed_onnx import FastEmbedder

MESSAGES = 30
BAD_POSITION = 25  # past the page read below


def _corrupt(db: Path, key: str, position: int) -> None:
    # a torn body, written behind tiermem's back
    rewrite_stored(db, key, [(position, "body", '{"role":"user","content":"trunc')])


def _history(mem: Memory, **args: Any) -> dict[str, Any]:
    async def call() -> dict[str, Any]:
        async with Client(build_server(mem.namespaced("acme"))) as client:
            r = await client.call_tool("history", {"conversation_id": "big", **args})
            assert not r.is_error, r.content
            out: dict[str, Any] = r.structured_content or {}
            return out

    return asyncio.run(call())


def test_a_page_reads_only_its_rows(tmp_path: Path, embedder: FastEmbedder) -> None:
    cfg = Config(data_dir=tmp_path / "data")
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append_many("big", [{"role": "user", "content": f"message {i}"} for i in range(MESSAGES)],
                        namespace="acme")
        key = mem.cold.key_of("acme", "big")
        assert key is not None
        _corrupt(cfg.db_path, key, BAD_POSITION)
        page = _history(mem, start=10, limit=5)
        assert mem.cold.stats()["salvaged_rows"] == 0  # the bad row, past the page, was not read
        assert [m["position"] for m in page["messages"]] == [10, 11, 12, 13, 14]
        assert page["next_start"] == 15
        last = _history(mem, start=20, limit=100)
        assert [m["position"] for m in last["messages"]] == [p for p in range(20, MESSAGES) if p != BAD_POSITION]
        assert last["next_start"] is None

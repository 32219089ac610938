"""What an erasure answers a tenant never depends on another tenant's writes.

The report's `bytes_reclaimed` is measured over the whole store (SQLite's file and WAL,
PostgreSQL's schema), so a tenant erasing its own one-message conversation learned how
much the others had written since its last erasure (audit: 78,312 bytes when nobody
wrote, 156,592 / 169,096 / 185,792 after 1 / 20 / 60 messages of another tenant). The
HTTP and MCP answers carry the tenant's own counts only; the figure stays the
operator's (the service log, the CLI's report).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from service_helpers import SCOPED_TOKENS, TOKEN_ACME, TOKEN_GLOBEX, bearer, serve_in_thread

from tiermem import Config, Memory
from tiermem.adapters.mcp_server import build_server
from tiermem.tiers.embed_onnx import FastEmbedder

BUSY = "quarterly numbers line {} " + "x" * 300


def _own_part(report: dict[str, Any]) -> dict[str, Any]:
    # tombstones carry times; everything else must be the same whatever others did
    return {k: v for k, v in report.items() if k != "tombstones"}


@pytest.fixture
def served(tmp_path: Path, embedder: FastEmbedder) -> Iterator[tuple[str, Memory]]:
    cfg = Config(data_dir=tmp_path / "data", auth_tokens=SCOPED_TOKENS)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem, serve_in_thread(cfg, mem) as u:
        yield u, mem


def test_the_http_answer_is_the_same_whatever_others_wrote(served: tuple[str, Memory],
                                                           caplog: pytest.LogCaptureFixture) -> None:
    url, _mem = served
    answers = []
    with httpx.Client(base_url=url, timeout=60) as http:
        def probe() -> dict[str, Any]:
            r = http.post("/v1/conversations/probe/messages", headers=bearer(TOKEN_GLOBEX),
                          json={"role": "user", "content": "hello"})
            assert r.status_code == 201, r.text
            r = http.delete("/v1/conversations/probe", headers=bearer(TOKEN_GLOBEX))
            assert r.status_code == 200, r.text
            return dict(r.json())

        probe()  # the first erasure settles the file
        with caplog.at_level(logging.INFO, logger="tiermem.service"):
            answers.append(probe())  # nobody else wrote
            for i in range(60):  # another tenant writes
                r = http.post("/v1/conversations/work/messages", headers=bearer(TOKEN_ACME),
                              json={"role": "user", "content": BUSY.format(i)})
                assert r.status_code == 201, r.text
            answers.append(probe())
    assert "bytes_reclaimed" not in answers[0]
    assert _own_part(answers[0]) == _own_part(answers[1])
    assert answers[0]["messages"] == 1
    # the operator still has the figure
    assert sum("bytes reclaimed" in r.getMessage() for r in caplog.records) == 2


def test_the_mcp_answer_is_the_same_whatever_others_wrote(cold_memory: Memory) -> None:
    server = build_server(cold_memory.namespaced("globex"))

    async def probe(client: Client) -> dict[str, Any]:
        await client.call_tool("append", {"conversation_id": "probe",
                                          "message": {"role": "user", "content": "hello"}})
        r = await client.call_tool("erase", {"conversation_id": "probe", "confirm": "probe"})
        return dict(json.loads(r.content[0].text))  # type: ignore[union-attr]

    async def run() -> list[dict[str, Any]]:
        async with Client(server) as client:
            await probe(client)
            quiet = await probe(client)
            cold_memory.append_many("work", [{"role": "user", "content": BUSY.format(i)} for i in range(60)],
                                    namespace="acme")
            return [quiet, await probe(client)]

    quiet, busy = asyncio.run(run())
    assert "bytes_reclaimed" not in quiet and quiet["erased"] and quiet["messages"] == 1
    assert _own_part(quiet) == _own_part(busy)

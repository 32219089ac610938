"""A context degraded by a lost embedding model names the error's type, never the
server's model path, to a tenant.

The planner ended `plan.retrieval` with the embedder's whole error (`FileNotFoundError:
embedding model directory /srv/.../model does not exist`), and the plan goes to every
tenant: `/v1/context` (its `plan` and `explain`) and the MCP `context` tool. `/healthz`
and a search's `degraded` already named the type only. The full message stays for the
operator: the log and the library's `stats()` (the per-namespace `/v1/stats` has no
embedder). A real copy of the bundled model under tmp_path, real SQLite, the real HTTP
service and the real `mcp` client.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest
from service_helpers import TOKEN_ACME, serve_in_thread

from tiermem import Config, Memory
from tiermem.tiers.embed import bundled_model_path

pytest.importorskip("mcp")
from mcp import Client

from tiermem.adapters.mcp_server import build_server

NS = "acme"
QUERY = "When does my flight to Lisbon leave?"
FLIGHT = "My flight to Lisbon leaves at 9:40 from gate B12."
KEYWORDS_ONLY = "keyword (BM25) ranking only, no query vector (FileNotFoundError)"


def _mcp_context(mem: Memory) -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        async with Client(build_server(mem.namespaced(NS))) as client:
            r = await client.call_tool("context", {"conversation_id": "c1", "query": QUERY})
            assert not r.is_error, r.content
            return dict(r.structured_content or {})

    return asyncio.run(run())


def test_a_degraded_context_names_the_error_type_not_the_model_path(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    model = tmp_path / "model"
    shutil.copytree(bundled_model_path(), model)
    config = Config(data_dir=tmp_path / "data", embedding_model=model, embedding_runtime="onnx",
                    embedding_cache_dir=tmp_path / "cache", auth_tokens={TOKEN_ACME: NS})
    with Memory(config, hot=False, background_indexing=False) as mem, serve_in_thread(config, mem) as url:
        mem.append_many("c1", [{"role": "user", "content": FLIGHT}], namespace=NS)
        model.rename(model.with_name("away"))  # a deleted cache, an unmounted volume
        headers = {"Authorization": f"Bearer {TOKEN_ACME}"}

        with caplog.at_level(logging.WARNING, logger="tiermem"):
            ctx = mem.context("c1", query=QUERY, namespace=NS)
        assert ctx.plan.tiers["embedder"] == "degraded"
        assert ctx.plan.retrieval.endswith(KEYWORDS_ONLY)  # before: "(FileNotFoundError: ... <path> ...)"
        assert str(model) not in ctx.plan.retrieval and str(model) not in ctx.plan.explain()

        r = httpx.post(url + "/v1/conversations/c1/context", json={"query": QUERY}, headers=headers)
        assert r.status_code == 200, r.text
        assert r.json()["plan"]["retrieval"].endswith(KEYWORDS_ONLY)
        assert str(model) not in r.text  # neither the plan nor its explanation
        r = httpx.post(url + "/v1/conversations/c1/context", json={"query": QUERY, "format": "anthropic"},
                       headers=headers)
        assert r.status_code == 200 and str(model) not in r.text

        out = _mcp_context(mem)
        assert KEYWORDS_ONLY in str(out) and str(model) not in str(out)

        r = httpx.get(url + "/v1/stats", headers=headers)  # a tenant's stats: no embedder, no path
        assert r.status_code == 200 and str(model) not in r.text

        # the operator's: the library's stats and the log keep the whole message
        assert str(model) in str(mem.stats()["embedder"]["reason"])
        assert any(str(model) in (rec.getMessage() + str(rec.exc_info and rec.exc_info[1]))
                   for rec in caplog.records)

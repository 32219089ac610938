"""An embedding model lost after start degrades `search` to keyword ranking, as it does
`context`; it never fails it.

`search` embedded its query in the store (tiers.dialect) unprotected, and caught up the
conversation's pending turns first, also unprotected: with the model directory deleted
or its weights cut off, every search raised the load's error (a 500 over HTTP, a tool
error over MCP). Now it ranks by keywords (BM25) only, says so where its answer has a
place (HTTP, its client and MCP: `degraded`, the error's type and no path; the library's list:
`SearchHits.degraded`, and a logged warning once per episode), and ranks by meaning
again once the model is back. A real copy of the bundled model under tmp_path, real
SQLite, the real HTTP service and the real `mcp` client.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx
import pytest
from export_cache import copy_export_cache
from service_helpers import TOKEN_ACME, serve_in_thread

from tiermem import Config, Memory
from tiermem.client import Client as HttpClient
from tiermem.tiers.embed import bundled_model_path

pytest.importorskip("mcp")
from mcp_helpers import call_in_process

NS = "acme"
QUERY = "flight to Lisbon"
TURNS = ["My flight to Lisbon leaves at 9:40 from gate B12.", "The tomatoes need water.", "Sure."]
LATER = "The hotel in Porto is booked."  # appended after the loss: its vector waits
KEYWORDS_ONLY = "keyword (BM25) ranking only"


@pytest.mark.parametrize("runtime", [
    "auto",  # the fast runtime, the pipeline as its fallback: both fail
    "onnx",  # the fast runtime alone
])
@pytest.mark.parametrize("conversation", [
    "c1",  # one conversation's search (its pending turns caught up first)
    None,  # the namespace's (its backlog caught up first)
])
def test_a_lost_model_degrades_search_to_keywords_on_every_surface(
        tmp_path: Path, runtime: str, conversation: str | None) -> None:
    model = tmp_path / "model"
    shutil.copytree(bundled_model_path(), model)
    config = Config(data_dir=tmp_path / "data", embedding_model=model, embedding_runtime=runtime,
                    embedding_cache_dir=copy_export_cache(tmp_path), auth_tokens={TOKEN_ACME: NS})
    with Memory(config, hot=False, background_indexing=False) as mem:
        mem.append_many("c1", [{"role": "user", "content": t} for t in TURNS], namespace=NS)
        healthy = mem.search(conversation, QUERY, 3, namespace=NS)
        assert "dense" in healthy[0].ranks and getattr(healthy, "degraded", None) is None

    away = model.with_name("away")
    model.rename(away)
    # a process that starts after the model went
    with Memory(config, hot=False, background_indexing=False) as mem, serve_in_thread(config, mem) as url:
        mem.append_many("c1", [{"role": "user", "content": LATER}], namespace=NS)
        hits = mem.search(conversation, QUERY, 3, namespace=NS)  # before: FileNotFoundError
        assert hits[0].position == 0 and set(hits[0].ranks) == {"bm25"}
        assert KEYWORDS_ONLY in str(hits.degraded)  # type: ignore[attr-defined]
        assert mem.stats()["embedder"]["state"] == "degraded"

        params = {"q": QUERY, "k": 3, **({"conversation_id": conversation} if conversation else {})}
        r = httpx.get(url + "/v1/search", params=params, headers={"Authorization": f"Bearer {TOKEN_ACME}"})
        assert r.status_code == 200, r.text  # before: 500
        body = r.json()
        assert body["hits"][0]["position"] == 0 and set(body["hits"][0]["ranks"]) == {"bm25"}
        assert KEYWORDS_ONLY in body["degraded"] and "FileNotFoundError" in body["degraded"]
        assert str(model) not in r.text  # a tenant is not shown the server's paths
        with HttpClient(url, token=TOKEN_ACME) as client:  # the HTTP client hands it on
            assert client.search(conversation, QUERY, 3).degraded == body["degraded"]

        args = {"query": QUERY, "k": 3, **({"conversation_id": conversation} if conversation else {})}
        out = call_in_process(mem.namespaced(NS), "search", args)  # before: a tool error
        assert out["hits"][0]["position"] == 0
        assert KEYWORDS_ONLY in out["degraded"] and str(model) not in str(out)

        away.rename(model)
        again = mem.search(conversation, QUERY, 3, namespace=NS)
        assert "dense" in again[0].ranks and getattr(again, "degraded", None) is None
        assert "degraded" not in call_in_process(mem.namespaced(NS), "search", args)
        assert httpx.get(url + "/v1/search", params=params,
                         headers={"Authorization": f"Bearer {TOKEN_ACME}"}).json()["degraded"] is None
        assert mem.cold.pending_embeddings() == 0  # the turn that waited has its vector

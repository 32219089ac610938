"""An embedding model lost after start degrades `context` to keyword ranking; it never
fails it.

A model directory deleted after the store was set up (a cleaned cache, a volume not
mounted) or damaged (weights cut off: the model fails to load) made `context(query=...)`
raise the load's error (FileNotFoundError, SafetensorError), so an agent got no context
at all, where a Redis outage only degrades the hot tier. Now the context is built by
keyword (BM25) ranking, the plan says why, `stats()` reports the embedder degraded,
appends store, and once the model is back the next context embeds the turns that waited
and ranks by meaning again. The model is a real copy of the bundled one under tmp_path,
the store real SQLite.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from export_cache import copy_export_cache
from service_helpers import TOKEN_ACME, serve_in_thread

from tiermem import Config, Memory
from tiermem.planner.plan import Context
from tiermem.tiers.embed import bundled_model_path

QUERY = "When does my flight to Lisbon leave?"
FLIGHT = "My flight to Lisbon leaves at 9:40 from gate B12."
# enough other turns that the flight is out of the recent tail: found by retrieval only
FILLER = [f"Let's talk about the garden: the tomatoes in bed {i} need water and the roses need pruning."
          for i in range(30)]
LATER = "Also, the hotel in Porto is booked for two nights."
KEYWORDS_ONLY = "keyword (BM25) ranking only, no query vector"
WEIGHTS = "model.safetensors"


def removed(model: Path) -> Callable[[], None]:
    """The model directory is gone (a deleted cache, an unmounted volume); back later."""
    away = model.with_name("away")
    model.rename(away)
    return lambda: away.rename(model)


def weights_cut_off(model: Path) -> Callable[[], None]:
    """The weights cut off mid-file (a copy that stopped): the model fails to load."""
    os.truncate(model / WEIGHTS, (model / WEIGHTS).stat().st_size // 2)
    return lambda: shutil.copyfile(bundled_model_path() / WEIGHTS, model / WEIGHTS)


def retrieved(ctx: Context) -> set[int]:
    return {p for it in ctx.plan.items if it.slice == "retrieved" for p in it.positions}


@pytest.mark.parametrize("damage", [
    removed,  # FileNotFoundError at the load
    weights_cut_off,  # the load's own error (safetensors: incomplete metadata)
])
@pytest.mark.parametrize("runtime", [
    "auto",  # the fast runtime, the pipeline as its fallback: both fail
    "onnx",  # the fast runtime alone
])
def test_a_lost_model_degrades_context_to_keywords_and_recovers(
        tmp_path: Path, damage: Callable[[Path], Callable[[], None]], runtime: str) -> None:
    model = tmp_path / "model"
    shutil.copytree(bundled_model_path(), model)
    config = Config(data_dir=tmp_path / "data", embedding_model=model, embedding_runtime=runtime,
                    embedding_cache_dir=copy_export_cache(tmp_path))
    with Memory(config, hot=False, background_indexing=False) as mem:
        mem.append_many("c1", [{"role": "user", "content": FLIGHT}, {"role": "assistant", "content": "Noted."}])
        for text in FILLER:
            mem.append_many("c1", [{"role": "user", "content": text}, {"role": "assistant", "content": "Sure."}])
        mem.catch_up()
        assert "embedder" not in mem.context("c1", query=QUERY).plan.tiers

    restore = damage(model)
    # a process that starts after the model went (its directory checked at no point before)
    with Memory(config, hot=False, background_indexing=False) as mem:
        later = mem.append_many("c1", [{"role": "user", "content": LATER}])[0]
        ctx = mem.context("c1", query=QUERY)  # before: raised the load's error
        assert ctx.plan.tiers["embedder"] == "degraded"
        assert KEYWORDS_ONLY in ctx.plan.retrieval
        assert 0 in retrieved(ctx)  # the flight, found by its words
        assert any(LATER in str(m["content"]) for m in ctx.messages)
        health = mem.stats()["embedder"]
        assert health["state"] == "degraded" and health["degraded_since"] is not None
        # the plan, which a tenant reads, names the error's type only; the stats its message too
        assert health["reason"].startswith(ctx.plan.retrieval.rsplit("(", 1)[1].rstrip(")") + ": ")
        assert mem.cold.history("c1")[later].text == LATER  # the append stored
        assert mem.cold.pending_embeddings() >= 1  # its vector waits for the model

        restore()
        ctx = mem.context("c1", query=QUERY)
        assert "embedder" not in ctx.plan.tiers and KEYWORDS_ONLY not in ctx.plan.retrieval
        assert 0 in retrieved(ctx)
        assert mem.cold.pending_embeddings() == 0  # the turns that waited have their vectors
        assert mem.stats()["embedder"] == {**mem.stats()["embedder"], "state": "ok", "degraded_since": None,
                                           "reason": None}


def test_healthz_reports_the_embedder_degraded_and_why(tmp_path: Path) -> None:
    model = tmp_path / "model"
    shutil.copytree(bundled_model_path(), model)
    config = Config(data_dir=tmp_path / "data", embedding_model=model, embedding_cache_dir=tmp_path / "cache",
                    auth_tokens={TOKEN_ACME: "acme"})
    with Memory(config, hot=False, background_indexing=False) as mem, serve_in_thread(config, mem) as url:
        mem.append_many("c1", [{"role": "user", "content": FLIGHT}])
        removed(model)
        assert mem.context("c1", query=QUERY).plan.tiers["embedder"] == "degraded"
        r = httpx.get(url + "/healthz")
        assert r.status_code == 200
        # the status stays the cold tier's (served as with Redis down); no path in an unauthenticated reply
        body = r.json()
        assert body["status"] == "ok" and body["tiers"]["embedder"] == "degraded"
        assert "FileNotFoundError" in body["reasons"]["embedder"] and str(model) not in r.text

"""`runtime="auto"` goes back to the fast runtime when the model comes back.

A load that found the model gone (a deleted cache, a volume not mounted yet) fell back to
the sentence-transformers pipeline, whose own load failed too; once the model was back,
the pipeline loaded and served every vector until a restart (`active_runtime` "torch":
slower queries and catch-ups), though the fast runtime would have loaded. A fallback
that never loaded now leaves the next load to the fast runtime again; one that loaded
and serves is kept (see the module docstring's "Fallback"). A real copy of the bundled
model under tmp_path and of the shared export.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from export_cache import copy_export_cache

from tiermem import Config, Memory
from tiermem.tiers.embed import bundled_model_path
from tiermem.tiers.embed_onnx import FastEmbedder

TEXTS = ["My flight to Lisbon leaves at 9:40.", "ok"]


@pytest.mark.parametrize("call", [
    FastEmbedder.embed,  # vectors to store (a catch-up)
    FastEmbedder.embed_query,  # a query's (it took the pipeline's query path directly)
])
def test_the_fast_runtime_loads_once_the_model_is_back(
        tmp_path: Path, call: Callable[[FastEmbedder, list[str]], np.ndarray]) -> None:
    model = tmp_path / "model"
    shutil.copytree(bundled_model_path(), model)
    emb = FastEmbedder(model, runtime="auto", cache_dir=copy_export_cache(tmp_path))
    model.rename(tmp_path / "away")
    with pytest.raises(FileNotFoundError):
        call(emb, TEXTS)
    assert not emb.loaded
    (tmp_path / "away").rename(model)
    assert call(emb, TEXTS).shape == (len(TEXTS), emb.dim)
    assert emb.active_runtime == "onnx"  # before: "torch", until a restart


def test_a_memory_degraded_at_start_serves_on_the_fast_runtime_after(tmp_path: Path) -> None:
    model = tmp_path / "model"
    shutil.copytree(bundled_model_path(), model)
    config = Config(data_dir=tmp_path / "data", embedding_model=model, embedding_runtime="auto",
                    embedding_cache_dir=copy_export_cache(tmp_path))
    model.rename(tmp_path / "away")
    with Memory(config, hot=False, background_indexing=False) as mem:
        mem.append_many("c1", [{"role": "user", "content": t} for t in TEXTS])
        assert mem.context("c1", query="When is the flight?").plan.tiers["embedder"] == "degraded"
        (tmp_path / "away").rename(model)
        assert "embedder" not in mem.context("c1", query="When is the flight?").plan.tiers
        assert mem.stats()["embedder"]["runtime"] == "onnx"  # before: "torch"

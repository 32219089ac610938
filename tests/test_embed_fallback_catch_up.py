"""A catch-up on the fast runtime's fallback (the sentence-transformers pipeline) embeds a
pool that repeats a text.

`FastEmbedder` computes the texts its memo does not know, each once, inside the caller's
memo scope, which a catch-up gives per text of the whole pool; on the fallback it passed
them to the pipeline's `embed`, whose own memo read that scope again: a pool of 4 turns
holding 2 different texts failed with "4 memo scopes for 2 texts", and the turns stayed
pending for good (every conversation's "Sure." and "ok" repeat). The fallback is real
here: the cached export is cut off and can be exported no more, so `runtime="auto"`
falls back to the pipeline.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from export_cache import block_exports, copy_export_cache

from tiermem import Config, Memory
from tiermem.tiers.embed import SentenceTransformerEmbedder, bundled_model_path, remembered_for
from tiermem.tiers.embed_onnx import MODEL_FILE, FastEmbedder, export_dir


def fallback_cache(tmp_path: Path) -> Path:
    """A cache whose export is damaged for good: the fast runtime falls back."""
    cache = copy_export_cache(tmp_path)
    graph = export_dir(bundled_model_path(), cache) / MODEL_FILE
    os.truncate(graph, graph.stat().st_size // 2)
    block_exports(cache)
    return cache


# (texts of the pool, each one's memo scope)
@pytest.mark.parametrize(("texts", "scopes"), [
    (["ok", "ok"], ("c1", "c1")),  # one text twice in a conversation
    (["ok", "ok"], ("c1", "c2")),  # one text in two conversations
    (["ok", "Sure.", "ok", "Sure."], ("c1", "c1", "c2", "c2")),  # two texts, each twice
    (["ok", "Sure."], ("c1", "c2")),  # no repeat (passed before)
])
def test_the_fallback_embeds_a_pool_that_repeats_a_text(
        tmp_path: Path, reference_embedder: SentenceTransformerEmbedder, texts: list[str],
        scopes: tuple[str, ...]) -> None:
    emb = FastEmbedder(runtime="auto", cache_dir=fallback_cache(tmp_path))
    assert emb.load() == "torch"
    with remembered_for(scopes):
        got = emb.embed(texts)
    assert np.allclose(got, reference_embedder.embed(texts), atol=1e-5)


def test_a_catch_up_on_the_fallback_embeds_every_turn(tmp_path: Path) -> None:
    config = Config(data_dir=tmp_path / "data", embedding_cache_dir=fallback_cache(tmp_path))
    with Memory(config, hot=False, background_indexing=False) as mem:
        for conv in ("c1", "c2"):
            mem.append_many(conv, [{"role": "user", "content": "ok"}, {"role": "assistant", "content": "Sure."},
                                   {"role": "user", "content": "ok"}])
        assert mem.catch_up() == 6  # before: ValueError, 6 memo scopes for 2 texts
        assert mem.cold.pending_embeddings() == 0
        assert mem.embedder.active_runtime == "torch"  # type: ignore[attr-defined]

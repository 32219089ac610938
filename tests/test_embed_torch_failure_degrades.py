"""torch failing to compute with a loaded model degrades `context` and `search`, as a
model that cannot be loaded does; a caller's embedder's RuntimeError is still raised.

torch says its runtime failures (out of memory, tensors whose shapes do not fit) as plain
RuntimeErrors, which no list of errors that mean "the model cannot be used" held: where
onnxruntime's run failures degraded to keyword ranking, torch's (the `torch` runtime, and
the `auto` runtime's fallback) were raised to the caller, so an agent got no context.
Now the torch pipeline raises them as EmbeddingModelFailed, one of
`model_unavailable_errors`; a ValueError or TypeError stays a bug, raised
(test_embed_bug_raises).

The failure is real: a copy of the bundled model under tmp_path whose
`sentence_bert_config.json` lets through more tokens (LONG_SEQ) than its position table
holds (512). The model loads and embeds short turns; the query path's probes (one of
them max-length) fail inside torch ("The size of tensor a (842) must match the size of
tensor b (512)"). The store is real SQLite.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from hash_embedder import HashEmbedder

from tiermem import Config, Memory
from tiermem.tiers.embed import bundled_model_path
from tiermem.tiers.embed_onnx import model_unavailable_errors
from tiermem.tiers.errors import EmbeddingModelFailed

QUERY = "When does my flight to Lisbon leave?"
FLIGHT = "My flight to Lisbon leaves at 9:40 from gate B12."
KEYWORDS_ONLY = "keyword (BM25) ranking only"
# past the model's 512 positions (config.json's max_position_embeddings)
LONG_SEQ = 1024


def _too_long(tmp_path: Path) -> Path:
    model = tmp_path / "model"
    shutil.copytree(bundled_model_path(), model)
    conf = model / "sentence_bert_config.json"
    conf.write_text(json.dumps({**json.loads(conf.read_text("utf-8")), "max_seq_length": LONG_SEQ}), "utf-8")
    return model


@pytest.mark.parametrize("runtime", [
    "torch",  # the pipeline itself
    "auto",  # the export's reference vectors fail, then the fallback's query
    "onnx",  # the export's reference vectors fail
])
def test_torch_failing_to_compute_degrades_to_keywords(tmp_path: Path, runtime: str) -> None:
    config = Config(data_dir=tmp_path / "data", embedding_model=_too_long(tmp_path), embedding_runtime=runtime,
                    embedding_cache_dir=tmp_path / "cache")
    with Memory(config, hot=False, background_indexing=False) as mem:
        mem.append_many("c1", [{"role": "user", "content": FLIGHT}])
        ctx = mem.context("c1", query=QUERY)  # before: torch's RuntimeError raised
        assert ctx.plan.tiers["embedder"] == "degraded"
        assert ctx.plan.retrieval.endswith("(EmbeddingModelFailed)")
        hits = mem.search("c1", QUERY, 3)
        assert hits[0].position == 0 and "EmbeddingModelFailed" in str(hits.degraded)  # type: ignore[attr-defined]
        health = mem.stats()["embedder"]
        assert health["state"] == "degraded"
        # the operator's reason says which model and what torch said
        assert health["reason"].startswith("EmbeddingModelFailed: embedding model ")
        assert "must match the size of tensor" in health["reason"]


def test_the_error_chains_torchs_and_is_one_a_caller_may_degrade_on(tmp_path: Path) -> None:
    from tiermem.tiers.embed_onnx import build_embedder

    model = _too_long(tmp_path)
    emb = build_embedder(model, runtime="torch")
    assert emb.embed(["short"]).shape == (1, 384)  # the model loads and computes short texts
    with pytest.raises(EmbeddingModelFailed) as caught:
        emb.embed_query(["another short one"])  # the query path's probes: one past 512 tokens
    err = caught.value
    assert isinstance(err, model_unavailable_errors()) and isinstance(err, RuntimeError)
    assert type(err.__cause__) is RuntimeError and err.model_path == model


class _QueryRaises(HashEmbedder):
    """A caller's embedder whose query path raises a RuntimeError of its own."""

    def embed_query(self, texts: list[str]) -> np.ndarray:
        raise RuntimeError("dictionary changed size during iteration")


def test_a_callers_runtime_error_is_still_raised(tmp_path: Path) -> None:
    # only the torch pipeline's model computation is said as EmbeddingModelFailed: a
    # RuntimeError elsewhere (here a caller's embedder, as a concurrency bug raises it)
    # says nothing of a model
    with Memory(Config(data_dir=tmp_path / "data"), embedder=_QueryRaises(), hot=False,
                background_indexing=False) as mem:
        mem.append_many("c1", [{"role": "user", "content": FLIGHT}])
        with pytest.raises(RuntimeError, match="dictionary changed size"):
            mem.context("c1", query=QUERY)
        assert mem.stats()["embedder"]["state"] == "ok"

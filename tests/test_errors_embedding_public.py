"""Every embedding error a caller may meet is importable from `tiermem.errors`, the
public home of tiermem's exceptions, as the very class the library raises.

`EmbeddingUnavailable` (what the planner's `embed` raises where the model cannot be
used, and what a caller's `embed` of its own raises to have a context ranked by keywords)
and `EmbeddingModelFailed` were defined in `tiers.errors` but not exported: a caller had
to import them from an internal module. The raises are real: a copy of the bundled model
under tmp_path, removed (no vector: EmbeddingUnavailable), or whose
`sentence_bert_config.json` lets through more tokens than its 512 positions (torch fails
to compute: EmbeddingModelFailed).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from export_cache import copy_export_cache

import tiermem.errors
import tiermem.tiers.errors
from tiermem import Config, Memory
from tiermem.tiers.embed import bundled_model_path
from tiermem.tiers.embed_onnx import build_embedder

QUERY = "When does my flight to Lisbon leave?"
LONG_SEQ = 1024  # past the model's 512 positions (config.json's max_position_embeddings)


@pytest.mark.parametrize("name", [
    "EmbeddingUnavailable",  # no query vector: the model cannot be loaded or run
    "EmbeddingModelFailed",  # torch failed computing with a loaded model
    "EmbeddingModelUnreadable",  # a model file its library cannot parse
    "EmbeddingRuntimeError",  # the fast runtime refused for this model
])
def test_exported_as_the_one_class(name: str) -> None:
    assert name in tiermem.errors.__all__
    assert getattr(tiermem.errors, name) is getattr(tiermem.tiers.errors, name)
    assert issubclass(getattr(tiermem.errors, name), tiermem.errors.TiermemError)


def test_a_lost_model_raises_the_public_embedding_unavailable(tmp_path: Path) -> None:
    from tiermem.errors import EmbeddingUnavailable

    model = tmp_path / "model"
    shutil.copytree(bundled_model_path(), model)
    config = Config(data_dir=tmp_path / "data", embedding_model=model, embedding_runtime="onnx",
                    embedding_cache_dir=copy_export_cache(tmp_path))
    model.rename(tmp_path / "away")
    with Memory(config, hot=False, background_indexing=False) as mem, pytest.raises(EmbeddingUnavailable) as caught:
        mem.planner.embed([QUERY])  # the query vectors a context is planned with
    assert caught.value.error == "FileNotFoundError"


def test_torch_failing_raises_the_public_embedding_model_failed(tmp_path: Path) -> None:
    from tiermem.errors import EmbeddingModelFailed

    model = tmp_path / "model"
    shutil.copytree(bundled_model_path(), model)
    conf = model / "sentence_bert_config.json"
    conf.write_text(json.dumps({**json.loads(conf.read_text("utf-8")), "max_seq_length": LONG_SEQ}), "utf-8")
    with pytest.raises(EmbeddingModelFailed) as caught:
        build_embedder(model, runtime="torch").embed_query([QUERY])  # its probes: one past 512 tokens
    assert caught.value.model_path == model

"""An `embedding_model` directory that is gone or empty is reported by the model's load.

Since stored vectors record their model (`vec_model`), a catch-up first asks the
embedder for its identity, a digest of the model's files; `embedder_identity` returns
None where the directory cannot be read, leaving it to the load to say why. An empty or
missing directory raised `EmbeddingRuntimeError` instead ("ONNX embedding runtime for
...: the directory holds no model files"), which it let through: a catch-up (and a
search) failed naming the ONNX runtime, even with `embedding_runtime = "torch"`, and
never "does not exist".
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tiermem import Config, Memory
from tiermem.tiers.embed import embedder_identity
from tiermem.tiers.embed_onnx import build_embedder


@pytest.mark.parametrize(("model", "says"), [
    ("gone", "does not exist"),  # a path that names nothing
    ("empty", "holds no model files"),  # a directory left empty (a failed download)
])
@pytest.mark.parametrize("runtime", ["auto", "torch"])
def test_the_identity_of_an_unreadable_model_is_unknown(tmp_path: Path, model: str, says: str, runtime: str) -> None:
    path = tmp_path / model
    if model == "empty":
        path.mkdir()
    assert embedder_identity(build_embedder(path, runtime=runtime, cache_dir=tmp_path / "cache")) is None


@pytest.mark.parametrize("runtime", ["auto", "torch"])
def test_a_catch_up_with_a_missing_model_says_it_does_not_exist(tmp_path: Path, runtime: str) -> None:
    # lost after the config was checked (a path that names nothing at the start is refused
    # there: tests/test_config_embedding_model_refused.py); the files are the names the check
    # looks for, never loaded
    missing = tmp_path / "no-such-model"
    missing.mkdir()
    (missing / "config.json").write_text("{}")
    (missing / "model.safetensors").write_bytes(b"\0" * 64)
    config = Config(data_dir=tmp_path / "data", embedding_model=missing, embedding_runtime=runtime,
                    embedding_cache_dir=tmp_path / "cache")
    shutil.rmtree(missing)
    with Memory(config, hot=False, background_indexing=False) as mem:
        mem.append("c1", {"role": "user", "content": "the flight leaves at nine"})
        with pytest.raises(FileNotFoundError, match=f"embedding model directory {missing} does not exist"):
            mem.catch_up()
        assert mem.cold.pending_embeddings() == 1  # nothing marked embedded without a vector

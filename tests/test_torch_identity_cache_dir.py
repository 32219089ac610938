"""The torch runtime remembers its model's digest in `embedding_cache_dir`.

A store records which model its vectors come from (`model_identity()`, a digest of the
model's files), remembered in the cache under the files' stat so a start hashes nothing
it hashed before. The ONNX embedder kept it in its configured cache; the torch pipeline
(`directory_identity`) always wrote to the default one (`~/.cache/tiermem/onnx`): a
deployment with a read-only home and a configured cache dir hashed the model again at
every start, and wrote where it was told not to.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import build_embedder

# a digest no file hashes to: found only by reading the remembered one
PLANTED_DIGEST = "f" * 64


@pytest.fixture
def default_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The default cache dir, moved under `tmp_path` (it must stay empty)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home-cache"))
    return tmp_path / "home-cache"


@pytest.fixture
def model(tmp_path: Path) -> Path:
    """A model directory's files: what the digest hashes (nothing here loads them)."""
    path = tmp_path / "model"
    path.mkdir()
    (path / "config.json").write_text('{"hidden_size": 8}')
    (path / "model.safetensors").write_bytes(b"\1" * 4096)
    return path


@pytest.mark.parametrize("runtime", [
    "torch",  # the pipeline: wrote to the default cache
    "auto",  # the ONNX embedder: already kept it in its own
])
def test_the_digest_is_remembered_in_the_configured_cache_only(
        tmp_path: Path, default_cache: Path, model: Path, runtime: str) -> None:
    cache = tmp_path / "cache"
    identity = build_embedder(model, runtime=runtime, cache_dir=cache).model_identity()
    stamps = list((cache / "stamps").iterdir())
    assert [s.read_text("ascii") for s in stamps] == [identity.removeprefix("sha256:")]
    assert not default_cache.exists()


def test_a_second_start_reads_the_digest_from_the_configured_cache(
        tmp_path: Path, default_cache: Path, model: Path) -> None:
    cache = tmp_path / "cache"
    config = Config(data_dir=tmp_path / "data", embedding_model=model, embedding_runtime="torch",
                    embedding_cache_dir=cache)
    with Memory(config, hot=False, background_indexing=False) as mem:
        first = mem.embedder.model_identity()  # type: ignore[attr-defined]
    (stamp,) = (cache / "stamps").iterdir()
    assert stamp.read_text("ascii") == first.removeprefix("sha256:")
    stamp.write_text(PLANTED_DIGEST)
    with Memory(config, hot=False, background_indexing=False) as mem:
        assert mem.embedder.model_identity() == f"sha256:{PLANTED_DIGEST}"  # type: ignore[attr-defined]
    assert not default_cache.exists()

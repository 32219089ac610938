"""A damaged or missing `tokenizer.json` degrades `context` and `search` to keyword
ranking, as any model file that cannot be used does.

The fast runtime reads the model's `tokenizer.json` itself, with the `tokenizers`
library, which says every failure as a bare `Exception`: not one of
`model_unavailable_errors`, so under `embedding_runtime = "onnx"` a context raised it to
the caller where a cut-off weights file degraded. Now it is EmbeddingModelUnreadable (an
OSError) for a file it cannot parse, FileNotFoundError for one missing.

The runtime meets the file only where an export for the model's files is found: a
damaged file otherwise changes the files' digest, and the export's own load of the
model (the pipeline's) refuses it first. It is found where the cache's digest of the
files is stale: the stamp it keeps under the files' stat signature, which a disk that
alters bytes without a new ctime leaves in place (embed_onnx's docstring), here written
for the damaged files with the intact model's digest. The model is a real copy of the
bundled one under tmp_path, its tokenizer really cut off or removed; the store is real
SQLite.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from export_cache import copy_export_cache

from tiermem import Config, Memory
from tiermem.tiers.embed import bundled_model_path
from tiermem.tiers.embed_onnx import STAMPS_DIR, TOKENIZER_FILE, model_fingerprint

QUERY = "When does my flight to Lisbon leave?"
FLIGHT = "My flight to Lisbon leaves at 9:40 from gate B12."


def _cut(model: Path) -> None:
    tok = model / TOKENIZER_FILE
    os.truncate(tok, tok.stat().st_size // 2)  # a copy that stopped mid-file


def _removed(model: Path) -> None:
    (model / TOKENIZER_FILE).unlink()


def _stamp_says_intact(model: Path, cache: Path) -> None:
    """The cache's digest of `model`'s files as they are now is the intact model's, as
    where a disk altered the bytes under an unchanged stat: the intact export is found."""
    before = set((cache / STAMPS_DIR).glob("*"))
    model_fingerprint(model, cache)  # stamps the files as they are
    (stamp,) = set((cache / STAMPS_DIR).glob("*")) - before
    stamp.write_text(model_fingerprint(bundled_model_path(), cache), "ascii")


def _as_found(_model: Path, _cache: Path) -> None:
    """The cache as the damage left it: the files' digest is computed anew."""


@pytest.mark.parametrize(("damage", "cache_state", "error"), [
    # the runtime reads the cut file itself (before: the tokenizers library's bare Exception, raised)
    (_cut, _stamp_says_intact, "EmbeddingModelUnreadable"),
    # the runtime reads no file there (before: "No such file or directory (os error 2)", a bare Exception)
    (_removed, _stamp_says_intact, "FileNotFoundError"),
    # the export's own load of the model refuses the cut file first (degraded before too)
    (_cut, _as_found, "EmbeddingModelUnreadable"),
])
def test_a_tokenizer_that_cannot_be_read_degrades_to_keywords(
        tmp_path: Path, damage: Callable[[Path], None], cache_state: Callable[[Path, Path], None],
        error: str) -> None:
    model = tmp_path / "model"
    shutil.copytree(bundled_model_path(), model)
    cache = copy_export_cache(tmp_path)
    damage(model)
    cache_state(model, cache)
    config = Config(data_dir=tmp_path / "data", embedding_model=model, embedding_runtime="onnx",
                    embedding_cache_dir=cache)
    with Memory(config, hot=False, background_indexing=False) as mem:
        mem.append_many("c1", [{"role": "user", "content": FLIGHT}])
        ctx = mem.context("c1", query=QUERY)
        assert ctx.plan.tiers["embedder"] == "degraded" and ctx.plan.retrieval.endswith(f"({error})")
        hits = mem.search("c1", QUERY, 3)
        assert hits[0].position == 0 and error in str(hits.degraded)  # type: ignore[attr-defined]
        health = mem.stats()["embedder"]
        assert health["state"] == "degraded" and health["reason"].startswith(f"{error}: ")
        if cache_state is _stamp_says_intact:  # the operator's reason names the file
            assert TOKENIZER_FILE in health["reason"]

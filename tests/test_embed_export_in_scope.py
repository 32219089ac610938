"""The first ONNX export can happen inside a caller's memo scope.

The model loads lazily, on the first `embed`: often the background indexer's batch, which
embeds under one memo scope per text (`remembered_for([...])`). The export's reference
vectors are the pipeline's own probes, embedded for nobody: before the fix they ran under
the caller's per-text scopes, the count did not match ("7 memo scopes for 5 texts"), the
export failed, and `auto` fell back to torch for the whole process (slower queries, more
memory) on every fresh cache; `onnx` raised out of the indexer.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tiermem.tiers.embed import SentenceTransformerEmbedder, remembered_for
from tiermem.tiers.embed_onnx import FastEmbedder


@pytest.mark.parametrize("scopes", [
    ["conv-a"] * 7,  # per-text scopes, more texts than the export's probes
    ["conv-a", "conv-b"],  # fewer
])
def test_an_export_inside_per_text_scopes_loads_the_fast_runtime(tmp_path: Path, scopes: list[str]) -> None:
    texts = [f"turn number {i} of the indexer's batch" for i in range(len(scopes))]
    emb = FastEmbedder(runtime="onnx", cache_dir=tmp_path / "fresh-cache")  # nothing exported yet
    with remembered_for(scopes):
        got = emb.embed(texts)
    assert emb.active_runtime == "onnx" and emb.load_error is None
    want = SentenceTransformerEmbedder().embed(texts)
    assert got.shape == want.shape
    assert float(np.min(np.sum(got * want, axis=1))) > 0.9999

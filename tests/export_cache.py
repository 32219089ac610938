"""Private copies of the shared ONNX export for tests that change or break one (exporting
anew costs a torch start), the perturbation that makes a graph compute other vectors, and
a cache that cannot be exported into again."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from tiermem.tiers.embed import bundled_model_path
from tiermem.tiers.embed_onnx import default_cache_dir, ensure_export, export_dir


def copy_export_cache(tmp_path: Path) -> Path:
    """A cache dir under `tmp_path` holding a copy of the shared export (with its query
    graph, where `tiermem model` made one); returns the cache dir."""
    src = ensure_export(bundled_model_path(), default_cache_dir())
    cache = tmp_path / "cache"
    shutil.copytree(src, export_dir(bundled_model_path(), cache))
    return cache


def block_exports(cache: Path) -> None:
    """No export can be made in `cache` again: its export lock cannot be taken (as in a
    read-only cache; a directory where the lock file goes refuses even root). A damaged
    export is then refused for good, where it would otherwise be exported again."""
    (cache / ".export.lock").mkdir()


def perturb_feed_forward(graph: Path) -> None:
    """One feed-forward weight matrix of `graph` off by noise of a fifth of its spread: a
    file corrupted, or an optimizer that computes something else; the graph still runs."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(graph))
    rng = np.random.default_rng(0)
    weights = [t for t in model.graph.initializer if len(t.dims) == 2 and t.dims[0] == 384 and t.dims[1] == 1536]
    assert weights, "no 384 x 1536 feed-forward weight in the graph"
    w = numpy_helper.to_array(weights[0])
    weights[0].CopyFrom(numpy_helper.from_array((w + rng.standard_normal(w.shape) * 0.2 * w.std()).astype(w.dtype),
                                                weights[0].name))
    onnx.save(model, str(graph))

"""An export or a fusion killed mid-write leaves a temporary file in the export dir (the
graph is ~90 MB); the next one, under the export lock, removes it. Before, nothing did:
each killed `tiermem model` or first start left 90 MB behind for good."""

from __future__ import annotations

from pathlib import Path

from export_cache import copy_export_cache

from tiermem.tiers.embed import bundled_model_path
from tiermem.tiers.embed_onnx import MODEL_FILE, QUERY_MODEL_FILE, ensure_query_graph, export_dir

LEFTOVERS = [".model.k1ll3d.onnx", ".manifest.json.x7q2", f".{QUERY_MODEL_FILE}.p0w3r"]  # the three writers' names


def test_the_next_fusion_removes_what_a_killed_one_left(tmp_path: Path) -> None:
    cache = copy_export_cache(tmp_path)
    out = export_dir(bundled_model_path(), cache)
    (out / QUERY_MODEL_FILE).unlink(missing_ok=True)  # so the fusion runs
    for name in LEFTOVERS:
        (out / name).write_bytes(b"\0" * 4096)
    ensure_query_graph(bundled_model_path(), out, cache)
    assert (out / QUERY_MODEL_FILE).is_file() and (out / MODEL_FILE).is_file()
    assert sorted(p.name for p in out.glob(".*")) == []

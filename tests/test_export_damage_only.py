"""Only an error that says the export's file is bad makes the fast runtime export again.

`OnnxSession` marked every error of onnxruntime's session creation as a damaged export,
and so did the probe check's "cannot be run": an out-of-memory, a session option the
runtime refuses or any other failure that has nothing to do with the file re-exported a
good one (a torch start and ~15 s, under the export lock, on every load), and a load
with `runtime="onnx"` failed with the file's supposed damage as its reason. Now a file
that is missing, not a protobuf, not a valid graph or empty, or whose vectors are wrong,
is exported again; any other error is raised as itself and the export is left as it is.
The export is a real copy of the shared one; the unrelated failure is a real session
option onnxruntime refuses at creation (`FastEmbedder.session_config`).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from export_cache import copy_export_cache

from tiermem.tiers.embed import bundled_model_path
from tiermem.tiers.embed_onnx import MODEL_FILE, FastEmbedder, export_dir

# onnxruntime parses this entry as a number when it builds the session: "x" fails the
# creation ("Exception during initialization: stoi"), whatever the graph file
REFUSED_OPTION = {"session.graph_optimizations_loop_level": "x"}


def _file(path: Path) -> tuple[str, int]:
    """(sha256, mtime) of the file: what an export written again changes."""
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns


def test_a_file_cut_off_is_exported_again(tmp_path: Path) -> None:
    graph = export_dir(bundled_model_path(), copy_export_cache(tmp_path)) / MODEL_FILE
    os.truncate(graph, graph.stat().st_size // 2)  # InvalidProtobuf: the file is bad
    cut = _file(graph)
    emb = FastEmbedder(runtime="onnx", cache_dir=graph.parent.parent)
    assert emb.load() == "onnx" and emb.load_check == "probes"
    assert _file(graph) != cut


@pytest.mark.parametrize("runtime", [
    "onnx",  # the runtime's own error is raised, not a damaged export
    "auto",  # the pipeline serves, and says why
])
def test_a_failure_unrelated_to_the_file_leaves_the_export_alone(tmp_path: Path, runtime: str) -> None:
    graph = export_dir(bundled_model_path(), copy_export_cache(tmp_path)) / MODEL_FILE
    good = _file(graph)
    emb = FastEmbedder(runtime=runtime, cache_dir=graph.parent.parent)
    emb.session_config = dict(REFUSED_OPTION)
    if runtime == "onnx":
        with pytest.raises(Exception) as refused:
            emb.load()
        why = f"{type(refused.value).__name__}: {refused.value}"
    else:
        assert emb.load() == "torch"  # the pipeline serves
        why = str(emb.load_error)
    assert _file(graph) == good  # before: exported again (other bytes, a new mtime)
    assert why.startswith("RuntimeException"), why  # before: EmbeddingRuntimeError, a damaged export

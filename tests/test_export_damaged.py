"""A damaged ONNX export is exported again, once, under the export lock; the export is on
disk before it is trusted.

A cut-off `model.onnx` (or fused query graph) or manifest, or a graph that computes other
vectors, failed every later load: `runtime="auto"` fell back to torch and `"onnx"` raised
at every start until someone deleted the cache, and nothing exported it again. And the
graphs were renamed into place without being flushed (only the manifest was), so a power
loss after the rename could leave a short or empty `model.onnx` beside a valid manifest.
The files here are real files cut off or altered on disk, the second process a real one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from cold_helpers import child_env
from export_cache import block_exports, copy_export_cache, perturb_feed_forward

from tiermem.tiers.embed import SentenceTransformerEmbedder, bundled_model_path
from tiermem.tiers.embed_onnx import (
    MANIFEST,
    MIN_COSINE,
    MODEL_FILE,
    QUERY_MODEL_FILE,
    FastEmbedder,
    export_dir,
    export_model,
    fuse_graph,
)
from tiermem.tiers.errors import EmbeddingRuntimeError

TEXTS = ["where did we land on the airline?", "my cat is called Tom", "ok"]
CHILD_TIMEOUT_S = 300  # a child imports torch and may export (~15 s on 2 shared cores)


def cut_in_half(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 2)


def emptied(path: Path) -> None:
    os.truncate(path, 0)


def other_vectors(path: Path) -> None:
    perturb_feed_forward(path)


def cosines_to_pipeline(got: np.ndarray, reference: SentenceTransformerEmbedder) -> float:
    return float(np.min(np.sum(got * reference.embed(TEXTS), axis=1)))


@pytest.mark.parametrize(("name", "damage"), [
    (MODEL_FILE, cut_in_half),  # a copy or a disk that stopped midway: unreadable protobuf
    (MODEL_FILE, emptied),  # renamed into place, never flushed: a power loss leaves it empty
    (MODEL_FILE, other_vectors),  # loads and runs, but the probe check refuses its vectors
    (MANIFEST, cut_in_half),  # JSON cut off
])
def test_a_damaged_export_is_exported_again(tmp_path: Path, reference_embedder: SentenceTransformerEmbedder,
                                            name: str, damage: Callable[[Path], None]) -> None:
    cache = copy_export_cache(tmp_path)
    out = export_dir(bundled_model_path(), cache)
    damage(out / name)
    emb = FastEmbedder(runtime="onnx", cache_dir=cache)
    assert emb.load() == "onnx" and emb.load_check == "probes"
    assert cosines_to_pipeline(emb.embed(TEXTS), reference_embedder) >= MIN_COSINE
    # the next start finds it whole: no export, its passed check remembered
    graph = (out / MODEL_FILE).stat()
    again = FastEmbedder(runtime="onnx", cache_dir=cache)
    assert again.load() == "onnx" and again.load_check == "remembered"
    assert (out / MODEL_FILE).stat().st_ino == graph.st_ino


def test_a_cut_off_query_graph_is_fused_again(tmp_path: Path, reference_embedder: SentenceTransformerEmbedder) -> None:
    cache = copy_export_cache(tmp_path)
    graph = export_dir(bundled_model_path(), cache) / QUERY_MODEL_FILE
    if not graph.exists():
        FastEmbedder(runtime="onnx", cache_dir=cache).prepare_query_graph()
    cut_in_half(graph)
    emb = FastEmbedder(runtime="onnx", cache_dir=cache)
    assert emb.prepare_query_graph() == QUERY_MODEL_FILE  # before: the plain export, for good
    emb.query_session = "always"
    assert cosines_to_pipeline(np.stack([emb.embed_query([t])[0] for t in TEXTS]), reference_embedder) >= MIN_COSINE


@pytest.mark.parametrize("runtime", ["auto", "onnx"])
def test_only_a_failed_fresh_export_falls_back(tmp_path: Path, runtime: str) -> None:
    cache = copy_export_cache(tmp_path)
    cut_in_half(export_dir(bundled_model_path(), cache) / MODEL_FILE)
    block_exports(cache)
    emb = FastEmbedder(runtime=runtime, cache_dir=cache)
    says = r"cannot be loaded \(InvalidProtobuf.*exporting it again failed too \(IsADirectoryError"
    if runtime == "onnx":
        with pytest.raises(EmbeddingRuntimeError, match=says):
            emb.load()
    else:
        assert emb.load() == "torch"
        assert emb.load_error is not None
        assert "cannot be loaded" in emb.load_error and "exporting it again failed too" in emb.load_error


# Two processes start on one damaged export at once: each waits for the other before its
# load, so both fail their check and ask to export again.
BOTH_START = r"""
import json, logging, sys, time
from pathlib import Path
logging.basicConfig(level=logging.INFO, format="%(message)s")
from tiermem.tiers.embed_onnx import FastEmbedder
cache, me, other = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
emb = FastEmbedder(runtime="onnx", cache_dir=cache)
(cache.parent / me).touch()
while not (cache.parent / other).exists():
    time.sleep(0.01)
emb.load()
print(json.dumps(emb.embed(["where did we land on the airline?", "ok"]).tolist()))
"""


def test_two_processes_export_a_damaged_export_once_and_get_the_same_vectors(tmp_path: Path) -> None:
    cache = copy_export_cache(tmp_path)
    cut_in_half(export_dir(bundled_model_path(), cache) / MODEL_FILE)
    children = [subprocess.Popen([sys.executable, "-c", BOTH_START, str(cache), me, other], env=child_env(),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for me, other in (("ready-a", "ready-b"), ("ready-b", "ready-a"))]
    results = [c.communicate(timeout=CHILD_TIMEOUT_S) for c in children]
    for child, (_out, err) in zip(children, results, strict=True):
        assert child.returncode == 0, err
        assert "exporting it again" in err  # both found it damaged
    assert sum(err.count("exported ") for _out, err in results) == 1  # one export written
    vectors = [np.asarray(json.loads(out)) for out, _err in results]
    assert np.array_equal(vectors[0], vectors[1])


def test_the_graphs_are_on_disk_before_the_manifest_vouches_for_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What `fsync` was called on (the real call still runs), in order: each graph, then
    its directory after the rename, before anything that trusts it is written."""
    synced: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    out = tmp_path / "export"
    export_model(bundled_model_path(), out)
    assert [kind(p, out) for p in synced] == [".model.", "dir", f".{MANIFEST}.", "dir"]
    synced.clear()
    cfg = json.loads((bundled_model_path() / "config.json").read_text("utf-8"))
    fuse_graph(out / MODEL_FILE, out / QUERY_MODEL_FILE, num_heads=int(cfg["num_attention_heads"]),
               hidden_size=int(cfg["hidden_size"]))
    assert [kind(p, out) for p in synced] == [f".{QUERY_MODEL_FILE}.", "dir"]


def kind(synced: str, out: Path) -> str:
    """What a synced path is in the export dir `out`: "dir" itself, or which temporary
    file (its name's prefix, as the writers make them: `.model.`, `.manifest.json.`)."""
    path = Path(synced)
    if path == out:
        return "dir"
    for prefix in (f".{QUERY_MODEL_FILE}.", ".model.", f".{MANIFEST}."):  # the longest first
        if path.parent == out and path.name.startswith(prefix):
            return prefix
    return str(path)

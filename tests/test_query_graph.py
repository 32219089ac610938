"""The query session's fused graph (tiers.embed_onnx, QUERY_MODEL_FILE): made once beside
the export and probe-checked like it; its vectors are never handed out as stored ones;
a graph that cannot be made, or that fails its check and cannot be made again, leaves
queries on the export itself; and no core spins after a query."""

from __future__ import annotations

import json
import resource
import time
from pathlib import Path

import numpy as np
import pytest
from export_cache import block_exports, copy_export_cache, perturb_feed_forward

from tiermem.tiers.embed import bundled_model_path
from tiermem.tiers.embed_onnx import (
    MANIFEST,
    MIN_COSINE,
    MODEL_FILE,
    PROBES,
    QUERY_MODEL_FILE,
    FastEmbedder,
    OnnxSession,
    QuerySessionPolicy,
    export_dir,
)

QUESTION = "When did Caroline go to the LGBTQ support group?"
# CPU the process may use in IDLE_S after its last query: a spinning pool thread takes
# ~0.04 CPU-s in 0.5 s here, nothing at all when it sleeps
IDLE_S = 0.5
IDLE_CPU_MAX_S = 0.015


def _export(cache: Path) -> Path:
    return export_dir(bundled_model_path(), cache)


def _spare(emb: FastEmbedder) -> FastEmbedder:
    emb.query_session = "always"  # whatever the load: queries take the query session
    return emb


def test_the_query_graph_is_fused_once_and_computes_the_pipelines_vectors(tmp_path: Path) -> None:
    cache = copy_export_cache(tmp_path)
    (_export(cache) / QUERY_MODEL_FILE).unlink(missing_ok=True)  # made here, not copied
    emb = FastEmbedder(runtime="onnx", cache_dir=cache)
    assert emb.prepare_query_graph() == QUERY_MODEL_FILE
    graph = _export(cache) / QUERY_MODEL_FILE
    made = graph.stat().st_mtime_ns
    import onnx

    ops = [n.op_type for n in onnx.load(str(graph), load_external_data=False).graph.node]
    assert ops.count("Attention") == 6 and ops.count("SkipLayerNormalization") == 12  # fused, six layers
    manifest = json.loads((_export(cache) / MANIFEST).read_text())
    session = OnnxSession(bundled_model_path(), graph, manifest, threads=1)
    got = np.concatenate([session.run([p]) for p in PROBES])
    want = np.asarray(manifest["reference"], dtype=np.float32)
    assert float(np.min(np.sum(got * want, axis=1))) >= MIN_COSINE
    # a second process finds it made (and its check remembered): nothing fused again
    again = FastEmbedder(runtime="onnx", cache_dir=cache)
    assert again.prepare_query_graph() == QUERY_MODEL_FILE and graph.stat().st_mtime_ns == made
    assert again.load_check == "remembered"


def test_one_query_in_a_loaded_process_builds_no_query_session(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a CLI `context` asks one query, often after the model loaded for something else (a
    # catch-up, the background load): it must not start the session build, which its exit
    # would then wait for
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)  # set, it keeps queries on its threads
    emb = FastEmbedder(runtime="onnx", cache_dir=copy_export_cache(tmp_path))
    emb.memo_size = 0
    emb.load()
    emb.embed_query([QUESTION])
    assert emb._query is None  # nothing started
    emb.embed_query([f"{QUESTION} (again)"])  # the second one-text call starts it
    deadline = time.monotonic() + 60
    while not isinstance(emb._query, OnnxSession) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert isinstance(emb._query, OnnxSession)


def test_a_query_vector_is_never_handed_out_for_storage(tmp_path: Path) -> None:
    emb = _spare(FastEmbedder(runtime="onnx", cache_dir=copy_export_cache(tmp_path)))
    assert emb.prepare_query_graph() == QUERY_MODEL_FILE
    queried = emb.embed_query([QUESTION])[0]
    stored = emb.embed([QUESTION])[0]  # must not come from the query's memory
    assert emb._session is not None
    assert np.array_equal(stored, emb._session.run([QUESTION])[0])  # the export's own vector
    assert not np.array_equal(queried, stored)  # the fused graph did answer the query
    assert float(queried @ stored) >= 0.99999
    # a text stored first is found remembered by a query: the stored vector itself
    emb.embed(["stored before it was asked"])
    hits = emb.memo_hits
    emb.embed_query(["stored before it was asked"])
    assert emb.memo_hits == hits + 1


@pytest.mark.parametrize(("policy", "fused"), [
    ("always", True),  # the query session answers whatever the load average
    ("never", False),  # the export on one thread answers whatever the load average
])
def test_the_query_session_policy_decides_which_path_answers(tmp_path: Path, policy: QuerySessionPolicy,
                                                             fused: bool) -> None:
    emb = FastEmbedder(runtime="onnx", cache_dir=copy_export_cache(tmp_path))
    emb.memo_size = 0
    assert emb.prepare_query_graph() == QUERY_MODEL_FILE
    emb.query_session = policy
    queried = emb.embed_query([QUESTION])[0]
    assert emb._session is not None
    assert (not np.array_equal(queried, emb._session.run([QUESTION])[0])) == fused


def _not_onnx(graph: Path) -> None:
    graph.write_bytes(b"not an onnx graph")


def _other_vectors(graph: Path) -> None:
    perturb_feed_forward(graph)


def _unwritable(graph: Path) -> None:
    graph.unlink(missing_ok=True)
    graph.mkdir()  # the fused file cannot be put there (as in a read-only cache)


@pytest.mark.parametrize("break_it", [
    _not_onnx,       # a truncated or foreign file: onnxruntime refuses to load it
    _other_vectors,  # loads and runs, but computes other vectors: the probe check refuses it
    _unwritable,     # cannot be made: the fusion's write fails
])
def test_a_bad_query_graph_leaves_queries_on_the_export(tmp_path: Path, break_it) -> None:  # type: ignore[no-untyped-def]
    cache = copy_export_cache(tmp_path)
    graph = _export(cache) / QUERY_MODEL_FILE
    if not graph.exists():
        FastEmbedder(runtime="onnx", cache_dir=cache).prepare_query_graph()
    break_it(graph)
    if break_it is not _unwritable:
        block_exports(cache)  # else it is fused again (tests/test_export_damaged.py)
    emb = _spare(FastEmbedder(runtime="onnx", cache_dir=cache))
    assert emb.prepare_query_graph() == MODEL_FILE
    assert isinstance(emb._query, OnnxSession)
    assert emb._session is not None
    # the export on two threads: the stored vector, bit for bit
    assert np.array_equal(emb.embed_query([QUESTION])[0], emb._session.run([QUESTION])[0])


def test_no_core_spins_after_a_query(tmp_path: Path) -> None:
    emb = _spare(FastEmbedder(runtime="onnx", cache_dir=copy_export_cache(tmp_path)))
    emb.memo_size = 0
    assert emb.prepare_query_graph() == QUERY_MODEL_FILE
    for i in range(20):
        emb.embed_query([f"{QUESTION} ({i})"])
    before = resource.getrusage(resource.RUSAGE_SELF)
    time.sleep(IDLE_S)
    after = resource.getrusage(resource.RUSAGE_SELF)
    used = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    assert used < IDLE_CPU_MAX_S, f"{used:.3f} CPU-s used in {IDLE_S} s after the last query"


def test_tiermem_model_prepares_the_query_graph(tmp_path: Path) -> None:
    # what `make install` and the image build run: the fused graph is made there, not by
    # the first serving process's second query
    from click.testing import CliRunner

    from tiermem.cli import cli

    cache = copy_export_cache(tmp_path)
    (_export(cache) / QUERY_MODEL_FILE).unlink(missing_ok=True)
    result = CliRunner().invoke(cli, ["--data-dir", str(tmp_path / "data"), "model", "--json"],
                                env={"TIERMEM_EMBEDDING_CACHE_DIR": str(cache), "TIERMEM_EMBEDDING_RUNTIME": "onnx"})
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["runtime"] == "onnx" and report["query_graph"] == QUERY_MODEL_FILE
    assert (_export(cache) / QUERY_MODEL_FILE).is_file()

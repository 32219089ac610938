"""Start-up: no model where none is needed, and a fast runtime with the same vectors.

Appends, imports, history, stats, fork and prune never import torch or load the model;
turns appended meanwhile stay `embedded = 0` until a process that needs vectors embeds
them, and supersession (which searches by meaning) happens then, with the result an
eager process gets. The ONNX runtime reproduces the sentence-transformers pipeline's
vectors and refuses a cache that does not.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from cold_helpers import child_env
from export_cache import block_exports, copy_export_cache

from tiermem import Config, Memory
from tiermem.tiers.embed import SentenceTransformerEmbedder, bundled_model_path
from tiermem.tiers.embed_onnx import (
    MANIFEST,
    PROBES,
    QUERY_MODEL_FILE,
    FastEmbedder,
    OnnxSession,
    default_cache_dir,
    embedder_loaded,
    ensure_export,
    export_dir,
)
from tiermem.tiers.errors import EmbeddingRuntimeError

# Modules a process that only writes and reads the log must not import: the model's
# runtimes, and the planner (built by the first context(), ~25 ms of imports).
HEAVY = ("torch", "sentence_transformers", "transformers", "onnxruntime", "bpe_openai.compat",
         "tiermem.planner.build", "tiermem.planner.candidates")

# Everything a process that only writes and reads the log does, in a fresh interpreter.
NO_MODEL_CHILD = r"""
import json, sys
HEAVY = %s
from tiermem import Config, Memory
data = sys.argv[1]
with Memory(Config(data_dir=data), hot=False) as mem:
    mem.append("c", {"role": "user", "content": "Seat preference: aisle seat, every time."})
    mem.append_many("c", [{"role": "assistant", "content": "Noted."},
                          {"role": "user", "content": "No red-eyes, please."},
                          {"role": "user", "content": "Switch my seat preference to window seat."}])
    mem.history("c")
    mem.fork("c", 1, new_id="c2")
    stats = mem.stats()
    mem.prune(10 ** 9)
    print(json.dumps({"heavy": sorted(m for m in HEAVY if m in sys.modules),
                      "loaded": stats["embedder"]["loaded"],
                      "pending": stats["cold"]["pending_embeddings"]}))
"""


def test_appends_and_reads_never_load_the_model(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-c", NO_MODEL_CHILD.replace("%s", repr(HEAVY), 1), str(tmp_path / "data")], env=child_env(),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["heavy"] == []
    assert got["loaded"] is False
    assert got["pending"] == 4 + 2  # nothing embedded: 4 turns and the fork's 2 copies
    assert "Loading weights" not in out.stderr  # no transformers progress bar either


# CLI commands that need no model (each a fresh process); the stats shows the lag.
@pytest.mark.parametrize("args", [
    ["append", "c", "--role", "user", "--content", "No red-eyes, please."],  # load-bearing: would search
    ["history", "c"],
    ["stats", "--json"],
    ["fork", "c", "0", "--new-id", "c3"],
])
def test_cli_commands_without_a_model_import_nothing_heavy(tmp_path: Path, args: list[str]) -> None:
    data = tmp_path / "data"
    with Memory(Config(data_dir=data), hot=False, background_indexing=False) as mem:
        mem.append("c", {"role": "user", "content": "hello"})
    code = ("import sys; from tiermem.cli import main\n"
            "try:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
            f"print('HEAVY', sorted(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code, "--data-dir", str(data), *args], env=child_env(),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "HEAVY []"


SMALL_TALK = ["What's a good podcast about volcanoes?", "Ugh, the weather here is windy again.",
              "How long should I cook potatoes for dinner tonight?", "Tell me a fun fact about coral reefs."]


def _chat(mem: Memory, users: list[str]) -> None:
    for u in users:
        mem.append_many("c", [{"role": "user", "content": u}, {"role": "assistant", "content": "Noted."}])


def _superseded(mem: Memory) -> dict[int, int]:
    last = mem.cold.last_position("c")
    return {r.position: r.superseded_by for r in mem.cold.turns("c", start=0, end=last) if r.superseded_by is not None}


def _seat_conversation(mem: Memory) -> None:
    _chat(mem, ["Seat preference: aisle seat, every time."])
    _chat(mem, SMALL_TALK * 15)
    _chat(mem, ["My cousin is picky about airplane seats too, funny how that runs in families."])
    _chat(mem, ["Switch my seat preference to window seat."])


def test_supersession_waits_for_the_embedding_and_matches_the_eager_result(
        tmp_path: Path, embedder: FastEmbedder) -> None:
    # eager: the model is loaded, so an update is embedded and resolved before append returns
    with Memory(Config(data_dir=tmp_path / "eager"), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        _seat_conversation(mem)
        eager = _superseded(mem)
    correction = 2 * (1 + 60 + 1)
    assert eager == {0: correction}
    # lazy: nothing loaded while appending; the turn waits, unembedded and unresolved (user
    # turns lie before its window: the meaning search could pick one, so the rules do not
    # decide it at the append; Superseder.record's `final`)
    lazy = FastEmbedder()
    with Memory(Config(data_dir=tmp_path / "lazy"), embedder=lazy, hot=False, background_indexing=False) as mem:
        _seat_conversation(mem)
        assert not lazy.loaded
        assert _superseded(mem) == {}
        assert mem.cold.pending_embeddings("c") == correction + 2
        mem.catch_up()  # what the indexer, `tiermem index` or a context call does
        assert lazy.loaded and mem.cold.pending_embeddings("c") == 0
        assert _superseded(mem) == eager
        mem.catch_up()  # embedding again finds nothing new to supersede
        assert _superseded(mem) == eager


def test_the_planner_finds_an_unembedded_turn_by_keyword_and_recency(tmp_path: Path) -> None:
    # an unloaded embedder: appends leave every turn without a vector
    with Memory(Config(data_dir=tmp_path / "data"), embedder=FastEmbedder(), hot=False,
                background_indexing=False) as mem:
        _chat(mem, ["My locker combination is 4417, write it on the Zanzibar itinerary."])
        _chat(mem, SMALL_TALK * 30)
        _chat(mem, ["Thanks, that's all for now."])
        assert mem.cold.pending_embeddings("c") == mem.cold.last_position("c") + 1  # no vector at all
        # plan as a context call would if embedding failed: the turn cache has no vectors
        table = mem.turns.get("c")
        assert not table.has_vec.any()
        ctx = mem.planner.build("c", "What was on the Zanzibar itinerary?", 300, namespace="default",
                                hot=mem._hot_view("c"), summaries=[], table=table)
        shown = json.dumps(ctx.messages)
        assert "4417" in shown  # bm25 found the far-back turn without its vector
        assert "Thanks, that's all for now." in shown  # and recency the latest turns
        assert ctx.tokens <= 300


def test_onnx_vectors_match_the_pipeline(reference_embedder: SentenceTransformerEmbedder) -> None:
    fast = FastEmbedder(runtime="onnx")
    texts = [*PROBES, "the flight leaves at nine", "Flight AZ 611 leaves FCO at 09:05 on 12 March.",
             "   padded with spaces   ", "x" * 5000, "Δοκιμή ελληνικών και русский текст"]
    want = reference_embedder.embed(texts)
    one_by_one = np.stack([fast.embed([t])[0] for t in texts])
    fast.memo_size = 0
    batched = fast.embed(texts)  # padded to the longest, sorted by length
    assert fast.active_runtime == "onnx"
    for got in (one_by_one, batched):
        assert got.dtype == np.float32 and got.shape == want.shape
        assert float(np.min(np.sum(got * want, axis=1))) >= 0.9999
    assert np.allclose(np.linalg.norm(batched, axis=1), 1.0, atol=1e-5)


def test_a_cache_that_does_not_reproduce_the_pipeline_is_refused(tmp_path: Path) -> None:
    cache = copy_export_cache(tmp_path)
    manifest_path = export_dir(bundled_model_path(), cache) / MANIFEST
    manifest = json.loads(manifest_path.read_text())
    manifest["reference"][1] = list(-np.asarray(manifest["reference"][1]))  # another model's vector
    manifest_path.write_text(json.dumps(manifest))
    block_exports(cache)  # else it is exported again (tests/test_export_damaged.py)
    with pytest.raises(EmbeddingRuntimeError, match=r"below 0\.9999"):
        FastEmbedder(runtime="onnx", cache_dir=cache).load()
    # auto says why and falls back to the reference pipeline
    auto = FastEmbedder(runtime="auto", cache_dir=cache)
    assert auto.load() == "torch"
    assert auto.load_error is not None and "below 0.9999" in auto.load_error


def test_a_good_copy_loads_and_constructing_loads_nothing(tmp_path: Path) -> None:
    cache = copy_export_cache(tmp_path)
    fast = FastEmbedder(cache_dir=cache)
    assert not fast.loaded and not embedder_loaded(fast) and fast.active_runtime == "unloaded"
    assert fast.load() == "onnx" and fast.loaded


OFFLINE_CHILD = r"""
import json, socket, sys
def refuse(*a, **k):
    raise OSError("network is unreachable (test)")
socket.socket.connect = refuse
socket.create_connection = refuse
from tiermem.tiers.embed_onnx import FastEmbedder
e = FastEmbedder(runtime="onnx")
v = e.embed(["the flight leaves at nine"])
print(json.dumps({"shape": list(v.shape), "torch": "torch" in sys.modules}))
"""


def test_the_fast_runtime_loads_offline_without_torch() -> None:
    ensure_export(bundled_model_path(), default_cache_dir())  # the export is the only torch step
    out = subprocess.run([sys.executable, "-c", OFFLINE_CHILD], env=child_env(), capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"shape": [1, 384], "torch": False}


def test_service_answers_healthz_while_the_model_loads(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from tiermem.service import create_app

    app = create_app(Config(data_dir=tmp_path / "data"), auth=False, start_scheduler=False)
    states = []
    with TestClient(app, base_url="http://127.0.0.1") as client:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            r = client.get("/healthz")
            assert r.status_code == 200  # alive from the start, whatever the model does
            states.append(r.json()["tiers"]["embedder"])
            if states[-1] in ("ready", "failed"):
                break
            time.sleep(0.05)
        mem = app.state.runtime.memory
        assert states[-1] == "ready" and set(states) <= {"idle", "loading", "ready"}
        embedder = mem.stats()["embedder"]  # what a load gives; other keys (a degradation's) may come
        assert (embedder["loaded"], embedder["runtime"], embedder["state"]) == (True, "onnx", "ok")
    from tiermem.tiers.redis_server import EmbeddedRedis

    EmbeddedRedis(tmp_path / "data").stop()


# texts whose counts must not move with how the tokenizer extension is loaded
@pytest.mark.parametrize("text", ["hello world", "Ünïcödé, emoji 🎉 and code: def f(x): return x ** 2.",
                                  "日本語のテキスト", "a  b\n\n\tc" * 50])
def test_token_counts_match_the_bpe_package(text: str) -> None:
    import bpe_openai

    from tiermem.tiers.tokens import BpeTokenCounter

    for name in ("o200k_base", "cl100k_base"):
        assert BpeTokenCounter(name).count(text) == len(bpe_openai.get_encoding(name).encode(text))


def test_a_passed_load_check_is_remembered_and_any_change_checks_again(tmp_path: Path) -> None:
    cache = copy_export_cache(tmp_path)
    first = FastEmbedder(runtime="onnx", cache_dir=cache)
    assert first.load() == "onnx" and first.load_check == "probes"
    again = FastEmbedder(runtime="onnx", cache_dir=cache)
    assert again.load() == "onnx" and again.load_check == "remembered"
    text = ["the flight leaves at nine"]
    assert np.array_equal(again.embed(text), first.embed(text))  # the same session, the same vectors
    # the manifest rewritten (another model's probe vector): the remembered check is not
    # this file's, so the probes run and refuse it
    manifest_path = export_dir(bundled_model_path(), cache) / MANIFEST
    manifest = json.loads(manifest_path.read_text())
    manifest["reference"][1] = list(-np.asarray(manifest["reference"][1]))
    manifest_path.write_text(json.dumps(manifest))
    block_exports(cache)  # else it is exported again (tests/test_export_damaged.py)
    with pytest.raises(EmbeddingRuntimeError, match=r"below 0\.9999"):
        FastEmbedder(runtime="onnx", cache_dir=cache).load()


def test_another_thread_count_checks_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = copy_export_cache(tmp_path)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert FastEmbedder(runtime="onnx", cache_dir=cache).load() == "onnx"
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # other kernels' summation order
    two = FastEmbedder(runtime="onnx", cache_dir=cache)
    assert two.load() == "onnx" and two.load_check == "probes"


def test_a_background_load_serves_the_callers_embed_and_a_failed_one_raises_there(tmp_path: Path) -> None:
    from tiermem.memory import load_in_background

    cache = copy_export_cache(tmp_path)
    emb = FastEmbedder(runtime="onnx", cache_dir=cache)
    thread = load_in_background(emb)
    assert thread is not None
    got = emb.embed(["the flight leaves at nine"])  # waits for that load, never a second one
    thread.join(timeout=60)
    assert emb.loaded and load_in_background(emb) is None  # loaded: nothing to start
    want = FastEmbedder(runtime="onnx", cache_dir=cache).embed(["the flight leaves at nine"])
    assert np.array_equal(got, want)
    broken = FastEmbedder(tmp_path / "no-such-model", runtime="onnx", cache_dir=cache)
    failed = load_in_background(broken)
    assert failed is not None
    failed.join(timeout=60)
    assert not broken.loaded
    with pytest.raises(FileNotFoundError, match="no-such-model"):
        broken.embed(["x"])  # the caller's own call says why


def test_a_query_starts_the_model_load_and_a_context_without_one_does_not(tmp_path: Path) -> None:
    cache = copy_export_cache(tmp_path)
    cfg = Config(data_dir=tmp_path / "data")
    with Memory(cfg, embedder=FastEmbedder(runtime="onnx", cache_dir=cache), hot=False,
                background_indexing=False) as mem:
        mem.append_many("c", [{"role": "user", "content": "We fly to Lisbon on Friday."},
                              {"role": "assistant", "content": "Noted."}])
        assert mem.catch_up() == 2
    emb = FastEmbedder(runtime="onnx", cache_dir=cache)  # a fresh process's, not loaded
    with Memory(cfg, embedder=emb, hot=False, background_indexing=False) as mem:
        mem.context("c", None, 500)
        assert not emb.loaded  # no query: no vector to compute (the pending turns stay pending)
        ctx = mem.context("c", "When do we fly?", 500)
        assert emb.loaded and "Lisbon" in json.dumps(ctx.messages)


def _built_query_session(emb: FastEmbedder) -> object:
    deadline = time.monotonic() + 60
    while not isinstance(emb._query, OnnxSession) and time.monotonic() < deadline:
        time.sleep(0.05)
    return emb._query


def test_one_text_calls_get_a_two_thread_query_session_and_stored_vectors_stay_the_exports(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    cache = copy_export_cache(tmp_path)
    emb = FastEmbedder(runtime="onnx", cache_dir=cache)
    emb.memo_size = 0
    texts = [*PROBES, "When did Caroline go to the LGBTQ support group?"]
    before = np.stack([emb.embed([t])[0] for t in texts])  # the second call starts the build
    query = _built_query_session(emb)
    assert isinstance(query, OnnxSession) and emb.query_graph == QUERY_MODEL_FILE
    emb.workers = 10 ** 6  # every load average leaves a core spare
    assert emb._spare_query_session() is query
    after = np.stack([emb.embed([t])[0] for t in texts])
    assert np.array_equal(after, before)  # a text to store never takes the fused graph
    queried = np.stack([emb.embed_query([t])[0] for t in texts])
    assert float(np.min(np.sum(queried * before, axis=1))) >= 0.99999
    emb.workers = 0  # no load average leaves a core spare: the one-thread session answers
    assert emb._spare_query_session() is None
    assert np.array_equal(np.stack([emb.embed_query([t])[0] for t in texts]), before)


def test_omp_num_threads_keeps_queries_on_its_threads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    emb = FastEmbedder(runtime="onnx", cache_dir=copy_export_cache(tmp_path))
    emb.embed(["one text"])
    assert emb._query is None  # one query: nothing started
    emb.embed(["another text"])
    assert emb._query is False  # none built, none will be

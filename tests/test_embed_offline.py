"""The embedder works with the network unreachable, and without the caller having to
know about HF_HUB_OFFLINE: the model ships in a pip package and is loaded by path."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from cold_helpers import child_env

from tiermem.tiers.embed import MEMO_MAX_TEXTS

CHILD = r"""
import json, socket

attempts = []

def refuse(*args, **kwargs):
    attempts.append(repr(args[1:] or args)[:200])
    raise OSError("network is unreachable (test)")

# before anything imports sentence_transformers, huggingface_hub or requests
socket.socket.connect = refuse
socket.socket.connect_ex = refuse
socket.create_connection = refuse

import numpy as np
from tiermem.tiers.embed import SentenceTransformerEmbedder

emb = SentenceTransformerEmbedder()
vecs = emb.embed(["x"])
more = emb.embed(["the flight leaves at nine", "the plane departs at 9", "marmalade recipe"])
query_path_after_storing = emb.effective_query_precision
query = emb.embed_query(["when does the flight leave"])  # not in the memo: computed
print(json.dumps({
    "query_path_after_storing": query_path_after_storing,
    "query_precision": emb.effective_query_precision,
    "query_near": float(query[0] @ more[0]),
    "query_far": float(query[0] @ more[2]),
    "shape": list(vecs.shape),
    "dtype": str(vecs.dtype),
    "norm": float(np.linalg.norm(vecs[0])),
    "dim": emb.dim,
    "similar": float(more[0] @ more[1]),
    "unrelated": float(more[0] @ more[2]),
    "attempts": attempts,
}))
"""


def test_embedding_works_with_the_network_unreachable() -> None:
    env = child_env()
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        env.pop(var, None)  # the test does not help: tiermem must go offline by itself
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-4000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["shape"] == [1, 384] and got["dim"] == 384
    assert got["dtype"] == "float32"
    assert abs(got["norm"] - 1.0) < 1e-5
    # and the vectors mean something: a paraphrase is nearer than an unrelated text
    assert got["similar"] > got["unrelated"] + 0.2
    # nothing even tried to reach the network
    assert got["attempts"] == []
    # storing never built the query path (its probes and bfloat16 copy cost ~2 s); the
    # first query did, and its vector finds the stored text it asks about
    assert got["query_path_after_storing"] == "unloaded"
    assert got["query_precision"] in ("float32", "bfloat16")
    assert got["query_near"] > got["query_far"] + 0.2


def test_a_text_embedded_once_is_served_from_memory(embedder) -> None:  # type: ignore[no-untyped-def]
    embedder.memo_size = MEMO_MAX_TEXTS  # the shared embedder may have been used by an eval (memory off)
    first = embedder.embed(["the hotel must be near the station", "a different text"])
    hits = embedder.memo_hits
    again = embedder.embed(["the hotel must be near the station"])
    assert embedder.memo_hits == hits + 1
    np.testing.assert_array_equal(again[0], first[0])
    again[0][:] = 0.0  # a caller's copy: changing it does not change what is remembered
    assert float(np.linalg.norm(embedder.embed(["the hotel must be near the station"])[0])) == pytest.approx(1.0)


def test_context_reuses_the_vector_of_the_message_it_is_asked_about(cold_memory) -> None:  # type: ignore[no-untyped-def]
    cold_memory.append_many("c", [{"role": "user", "content": f"note {i} about the trip"} for i in range(5)])
    text = "Which gate does the 9:40 train to Lyon leave from?"
    cold_memory.embedder.memo_size = MEMO_MAX_TEXTS
    cold_memory.append("c", {"role": "user", "content": text})
    hits = cold_memory.embedder.memo_hits
    cold_memory.context("c", text, budget=300)  # embeds the new turn, then the query: the same text
    assert cold_memory.embedder.memo_hits > hits


def test_evals_run_the_model_for_every_query(embedder) -> None:  # type: ignore[no-untyped-def]
    from tiermem.evals.baselines import without_memo

    embedder.memo_size = MEMO_MAX_TEXTS
    embedder.embed(["asked at every budget"])
    without_memo(embedder)
    hits = embedder.memo_hits
    embedder.embed(["asked at every budget"])
    assert embedder.memo_hits == hits
    embedder.memo_size = MEMO_MAX_TEXTS


QUERIES = [
    "where did we land on the airline?",  # a question
    "ok",  # one word
    "Ünïcödé, émojis 🎉 and code: def f(x): return x ** 2",  # beyond ASCII
    "word " * 400,  # past the model's 256 tokens: truncated the same way
]


@pytest.mark.parametrize("text", QUERIES)
def test_query_vectors_match_stored_ones(embedder, text: str) -> None:  # type: ignore[no-untyped-def]
    # the query path (bfloat16 where the CPU has it, a direct traced encoder) against the
    # float32 pipeline that stored vectors come from
    embedder.memo_size = 0
    try:
        stored = embedder.embed([text])[0]
        query = embedder.embed_query([text])[0]
    finally:
        embedder.memo_size = MEMO_MAX_TEXTS
    assert query.dtype == np.float32 and float(np.linalg.norm(query)) == pytest.approx(1.0, abs=1e-4)
    assert float(query @ stored) >= 0.999


@pytest.fixture(scope="module")
def float32_pipeline():  # type: ignore[no-untyped-def]
    """The torch pipeline with float32 queries, loaded once for the two tests that use it."""
    from tiermem.tiers.embed import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(query_precision="float32")


def test_a_query_vector_is_never_handed_out_for_storage(embedder, float32_pipeline) -> None:  # type: ignore[no-untyped-def]
    text = "a text first asked as a query, then stored"
    embedder.memo_size = MEMO_MAX_TEXTS
    embedder.embed_query([text])
    stored = embedder.embed([text])[0]  # must come from the float32 pipeline, not the query's memory
    np.testing.assert_allclose(stored, float32_pipeline.embed([text])[0], atol=1e-6)


def test_float32_queries_are_the_stored_vectors(float32_pipeline) -> None:  # type: ignore[no-untyped-def]
    emb = float32_pipeline
    emb.memo_size = 0  # both paths computed, neither remembered
    for text in QUERIES:
        assert float(emb.embed_query([text])[0] @ emb.embed([text])[0]) == pytest.approx(1.0, abs=1e-5)
    assert emb.effective_query_precision == "float32"


@pytest.mark.parametrize("bad", ["fp16", "", "BFLOAT16"])
def test_an_unknown_query_precision_is_refused(bad: str) -> None:
    from pydantic import ValidationError as PydanticError

    from tiermem import Config
    from tiermem.tiers.embed import SentenceTransformerEmbedder

    with pytest.raises(ValueError, match="query_precision"):
        SentenceTransformerEmbedder(query_precision=bad)
    with pytest.raises(PydanticError, match="embedding_query_precision"):
        Config(embedding_query_precision=bad)  # type: ignore[arg-type]


def test_concurrent_callers_neither_fail_nor_mix_vectors(embedder) -> None:  # type: ignore[no-untyped-def]
    # request threads embedding queries while the indexer embeds batches: a fast
    # tokenizer called from two threads at once raises "Already borrowed"
    import threading

    texts = [f"sentence {i} about the trip to topic {i % 5}" for i in range(16)]
    embedder.memo_size = 0
    try:
        stored = embedder.embed(texts)
        queried = np.stack([embedder.embed_query([t])[0] for t in texts])
        errors: list[BaseException] = []

        def work(k: int) -> None:
            try:
                for r in range(8):
                    if (k + r) % 2:
                        got = embedder.embed([*texts[:8], f"filler {k} {r}"])  # a batch: the pipeline
                        assert float(np.min(np.sum(got[:8] * stored[:8], axis=1))) > 0.99999
                    else:
                        i = (3 * k + r) % len(texts)
                        assert float(embedder.embed_query([texts[i]])[0] @ queried[i]) > 0.99999
            except BaseException as exc:  # collected: a thread's failure must fail the test
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert errors == []
    finally:
        embedder.memo_size = MEMO_MAX_TEXTS

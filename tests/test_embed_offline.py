"""The embedder works with the network unreachable, and without the caller having to
know about HF_HUB_OFFLINE: the model ships in a pip package and is loaded by path."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from cold_helpers import child_env

from tiers.embed import MEMO_MAX_TEXTS

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
from tiers.embed import SentenceTransformerEmbedder

emb = SentenceTransformerEmbedder()
vecs = emb.embed(["x"])
more = emb.embed(["the flight leaves at nine", "the plane departs at 9", "marmalade recipe"])
print(json.dumps({
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
    from evals.baselines import without_memo

    embedder.memo_size = MEMO_MAX_TEXTS
    embedder.embed(["asked at every budget"])
    without_memo(embedder)
    hits = embedder.memo_hits
    embedder.embed(["asked at every budget"])
    assert embedder.memo_hits == hits
    embedder.memo_size = MEMO_MAX_TEXTS

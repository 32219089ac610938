"""The embedder works with the network unreachable, and without the caller having to
know about HF_HUB_OFFLINE: the model ships in a pip package and is loaded by path."""

from __future__ import annotations

import json
import subprocess
import sys

from cold_helpers import child_env

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

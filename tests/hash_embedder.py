"""A deterministic embedder for storage tests that need many vectors but no model: unit
vectors from a hash of the text (384 wide, MiniLM's width), the same text always the
same vector."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

DIM = 384  # MiniLM's width, the default model's


class HashEmbedder:
    dim = DIM

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.empty((len(texts), DIM), dtype=np.float32)
        for i, t in enumerate(texts):
            seed = int.from_bytes(hashlib.blake2b(t.encode(), digest_size=8).digest(), "little")
            v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
            out[i] = v / np.linalg.norm(v)
        return out

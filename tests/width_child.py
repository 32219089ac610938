"""A child process of tests/test_vector_width_conflict.py and test_embedding_model_conflict.py:
another live process on the same store, its embedder of another width or another model of
the same width (DIM:MODEL, an identity as `model_identity()` gives one). It opens the store,
catches up every pending turn (the switch empties the vectors and re-embeds every turn)
and prints how many it embedded.

    python tests/width_child.py DATA_DIR DIM[:MODEL] [PG_URL SCHEMA]    (no URL: the SQLite store in DATA_DIR)
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tiermem import Config, Memory


class SizedHashEmbedder:
    """tests/hash_embedder.py's unit vectors from a hash of the text, `dim` wide: two of
    different widths stand for two embedding models."""

    def __init__(self, dim: int) -> None:
        self.dim = dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            seed = int.from_bytes(hashlib.blake2b(t.encode(), digest_size=8).digest(), "little")
            v = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
            out[i] = v / np.linalg.norm(v)
        return out


class NamedHashEmbedder(SizedHashEmbedder):
    """A SizedHashEmbedder that names its model (`model_identity()`, recorded as the store's
    `vec_model`, as the bundled embedder's sha256 of its files is): two names of one width
    stand for two models of that width, their vectors of one text different (seeded by the
    name too)."""

    def __init__(self, dim: int, model: str) -> None:
        super().__init__(dim)
        self.model = model

    def model_identity(self) -> str:
        return self.model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return super().embed([f"{self.model}\x00{t}" for t in texts])


def embedder(spec: str) -> SizedHashEmbedder:
    """DIM, or DIM:MODEL (a named model)."""
    dim, _, model = spec.partition(":")
    return NamedHashEmbedder(int(dim), model) if model else SizedHashEmbedder(int(dim))


def config(data_dir: Path, url: str | None, schema: str | None) -> Config:
    """The store's config: SQLite in `data_dir`, or `schema` on the PostgreSQL at `url`."""
    if url is None:
        return Config(data_dir=data_dir)
    return Config(data_dir=data_dir, cold_url=url, cold_schema=schema)


def main(data_dir: Path, spec: str, url: str | None, schema: str | None) -> None:
    with Memory(config(data_dir, url, schema), embedder=embedder(spec), hot=False,
                background_indexing=False) as mem:
        print(mem.cold.index_pending())


if __name__ == "__main__":
    args = sys.argv[1:]
    main(Path(args[0]), args[1], *(args[2:4] if len(args) >= 4 else (None, None)))

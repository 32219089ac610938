"""Stored vectors are recorded with the model they come from (meta `vec_model`).

Two models of one width used to mix silently: a store embedded by the bundled MiniLM and
reopened with another 384-wide `embedding_model` kept the old vectors and compared them
with the new model's query vectors (the dense ranking was noise, nothing said so). Now a
store records the embedder's `model_identity()` (the sha256 of the model's files) and a
different one drops the derived vectors and re-embeds every turn, as a new width always
did. Vectors stored before the identity was recorded are adopted, not re-embedded.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hash_embedder import HashEmbedder

from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder, SentenceTransformerEmbedder, bundled_model_path, embedder_identity
from tiermem.tiers.schema import VEC_MODEL_KEY

TEXTS = ["My sister adopted a beagle puppy last spring.", "How lovely, what did she name it?",
         "The quarterly report is due on Friday.", "We hiked up to the lake on Sunday."]


@pytest.fixture(scope="module")
def other_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A second real model as wide as the bundled one (384): MiniLM with a seeded
    384 -> 384 Dense layer and a Normalize after its pooling."""
    import torch
    from sentence_transformers import SentenceTransformer, models

    torch.manual_seed(0)
    word = models.Transformer(str(bundled_model_path()))
    pool = models.Pooling(word.get_embedding_dimension(), pooling_mode="mean")
    dense = models.Dense(384, 384, activation_function=torch.nn.Identity())
    out = tmp_path_factory.mktemp("other") / "model"
    SentenceTransformer(modules=[word, pool, dense, models.Normalize()], device="cpu").save(str(out))
    return out


@pytest.fixture(params=["sqlite", "postgres"])
def config(request: pytest.FixtureRequest, tmp_path: Path) -> Config:
    cfg = Config(data_dir=tmp_path / "data")
    if request.param == "postgres":
        from pg_server import fresh_schema

        cfg = cfg.model_copy(update={"cold_url": request.getfixturevalue("pg_url"), "cold_schema": fresh_schema()})
    return cfg


def opened(config: Config, embedder: Embedder) -> Memory:
    return Memory(config, embedder=embedder, hot=False, background_indexing=False)


def meta(mem: Memory, key: str) -> str | None:
    ph = "%s" if mem.config.cold_url else "?"
    with mem.cold.reading() as conn:
        row = conn.execute(f"SELECT value FROM meta WHERE key = {ph}", (key,)).fetchone()
    return None if row is None else str(row[0])


def stored(mem: Memory) -> np.ndarray:
    vecs = mem.cold.embeddings("c1", list(range(len(TEXTS))))
    return np.stack([vecs[p] for p in sorted(vecs)])


@pytest.fixture
def first(config: Config, embedder: Embedder) -> Iterator[Config]:
    """The conversation stored and embedded by the bundled model."""
    mem = opened(config, embedder)
    try:
        mem.append_many("c1", [{"role": "user", "content": t} for t in TEXTS])
        assert mem.cold.index_pending(conversation_id="c1") == len(TEXTS)
        assert meta(mem, VEC_MODEL_KEY) == embedder_identity(embedder)
    finally:
        mem.close()
    yield config


def test_another_model_of_the_same_width_re_embeds_every_turn(first: Config, other_model: Path) -> None:
    other = SentenceTransformerEmbedder(other_model)
    mem = opened(first, other)
    try:
        assert mem.cold.index_pending() == len(TEXTS)  # none kept: each re-embedded by the new model
        assert meta(mem, VEC_MODEL_KEY) == other.model_identity() != embedder_identity(SentenceTransformerEmbedder())
        assert float(np.min(np.sum(stored(mem) * other.embed(TEXTS), axis=1))) > 0.9999
        assert mem.cold.index_pending() == 0  # checked once: nothing more to do
    finally:
        mem.close()


def test_the_same_model_keeps_its_vectors(first: Config, reference_embedder: SentenceTransformerEmbedder) -> None:
    # the pipeline (torch) and the export (onnx) are one model: the runtime is not its identity
    mem = opened(first, reference_embedder)
    try:
        assert mem.cold.index_pending() == 0
    finally:
        mem.close()


def test_vectors_without_an_identity_are_adopted(first: Config, embedder: Embedder) -> None:
    mem = opened(first, embedder)
    try:
        with mem.cold.transaction() as c:  # a store from before the identity was recorded
            c.execute(f"DELETE FROM meta WHERE key = {'%s' if first.cold_url else '?'}", (VEC_MODEL_KEY,))
    finally:
        mem.close()
    mem = opened(first, embedder)
    try:
        assert mem.cold.index_pending() == 0
        assert meta(mem, VEC_MODEL_KEY) == embedder_identity(embedder)
    finally:
        mem.close()


def test_an_embedder_without_an_identity_changes_nothing(first: Config) -> None:
    # a custom embedder that cannot say which model it is: the recorded identity stays, no re-embedding
    mem = opened(first, HashEmbedder())  # type: ignore[arg-type]
    try:
        assert embedder_identity(mem.embedder) is None
        before = meta(mem, VEC_MODEL_KEY)
        assert mem.cold.index_pending() == 0 and meta(mem, VEC_MODEL_KEY) == before
    finally:
        mem.close()

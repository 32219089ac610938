"""Two live processes on one store whose embedders are two models of the SAME width (two
384-wide sentence-transformers directories: the store tells them apart by `vec_model`,
the sha256 of the model's files; here two named hash embedders). As for two widths
(tests/test_vector_width_conflict.py), the one opened later wins: it empties the vectors
and re-embeds every turn with its model. The other, still running, gets
EmbeddingModelConflict (a RuntimeError; VectorWidthConflict is its subclass for two
widths) naming `embedding_model`, both models and the width, from its catch-ups (checked
in the transaction that would store), its searches and its context's reads of stored
vectors; HTTP 503 with that text. It stores none of its model's vectors beside the
winner's.

Before: nothing told them apart once both had checked the store at open. The earlier
process kept storing its model's vectors into a store recorded as the other model's and
ranked its query vectors against the other model's turn vectors, silently, on both
engines.

Also the two leftovers of 46acfe9, on PostgreSQL, for two widths: the losing process's
search of a conversation with no vector left answered keyword-only results, silently
(SQLite's vec0 refuses the query vector: the error already); and during a bulk load
(`drop_vector_index`, no HNSW index to cast the vectors to the store's width) its catch-up
stored vectors of its width into a store of another.

The winner is a real child process (tests/width_child.py); the loser this test's Memory.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from width_child import NamedHashEmbedder, SizedHashEmbedder
from width_conflict_helpers import TEXTS, loser_after_switch, store, winner

from tiermem import Memory
from tiermem.errors import EmbeddingModelConflict, VectorWidthConflict
from tiermem.service.app import create_app
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.store import ColdLog
from tiermem.tiers.tokens import BpeTokenCounter

DIM = 384  # both models' width (MiniLM's)
LOSER_MODEL = "a1" * 32  # the process open first (a sha256's length)
WINNER_MODEL = "b2" * 32  # the process opened after it: another model of the same width
WINNER_DIM = 256  # the other width, for the PostgreSQL leftovers


def assert_names_both_models(text: str) -> None:
    assert "embedding_model" in text
    assert LOSER_MODEL in text and WINNER_MODEL in text
    assert f"{DIM} wide" in text and f"{DIM}-wide" in text


def stored_vectors(mem: Memory, conversation: str, n: int) -> dict[int, np.ndarray]:
    key = mem._key(conversation, None)[2]
    return mem.cold.embeddings(key, list(range(n)))


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_the_earlier_process_of_another_model_of_the_same_width_stores_and_compares_nothing(
        tmp_path: Path, request: pytest.FixtureRequest, engine: str) -> None:
    cfg, extra = store(engine, tmp_path, request)
    # every turn re-embedded by the winner's model
    with loser_after_switch(cfg, NamedHashEmbedder(DIM, LOSER_MODEL), f"{DIM}:{WINNER_MODEL}", extra) as loser:
        loser.append("c", {"role": "user", "content": "a turn the loser appends"})  # appends still store
        # the catch-up: refused in its transaction (was: stored, beside the winner's)
        with pytest.raises(EmbeddingModelConflict) as caught:
            loser.catch_up("c")
        assert isinstance(caught.value, RuntimeError) and not isinstance(caught.value, VectorWidthConflict)
        assert_names_both_models(str(caught.value))
        # a conversation's search, a namespace's, and a context (its turn cache's read of
        # the stored vectors): never this model's query against the winner's vectors
        for conversation in ("c", None):
            with pytest.raises(EmbeddingModelConflict) as caught:
                loser.search(conversation, TEXTS[0], k=3)
            assert_names_both_models(str(caught.value))
        with pytest.raises(EmbeddingModelConflict):
            loser.context("c", TEXTS[0])

        # over HTTP: the declared 503 with the text, no Retry-After, no store path
        app = create_app(loser.config, memory=loser, auth=False, start_scheduler=False)
        with TestClient(app, raise_server_exceptions=False, base_url="http://localhost") as client:
            got = client.get("/v1/search", params={"conversation_id": "c", "q": TEXTS[0]})
        assert got.status_code == 503, got.text
        assert_names_both_models(got.json()["detail"])
        assert str(cfg.data_dir) not in got.text and "Retry-After" not in got.headers

    # the loser stored nothing: a process of the winner's model finds its new turn
    # pending, and every stored vector is the winner's model's
    model = NamedHashEmbedder(DIM, WINNER_MODEL)
    with Memory(cfg, embedder=model, hot=False, background_indexing=False) as mem:
        assert mem.catch_up("c") == 1
        got_vectors = stored_vectors(mem, "c", len(TEXTS) + 1)
        want = model.embed([*TEXTS, "a turn the loser appends"])
        assert sorted(got_vectors) == list(range(len(TEXTS) + 1))
        for position, vector in got_vectors.items():
            np.testing.assert_allclose(vector, want[position], atol=1e-6)


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_a_reader_without_an_embedder_reads_the_winners_vectors(
        tmp_path: Path, request: pytest.FixtureRequest, engine: str) -> None:
    # a process that embeds nothing (a tool reading the log, open before the switch)
    # compares no vectors: no conflict is its to report, whichever model made them
    cfg, extra = store(engine, tmp_path, request)
    with Memory(cfg, embedder=SizedHashEmbedder(DIM), hot=False, background_indexing=False) as first:
        first.append_many("c", [{"role": "user", "content": t} for t in TEXTS])
        assert first.catch_up("c") == len(TEXTS)
        key = first._key("c", None)[2]
    reader: ColdLog = (PostgresStore(cfg.cold_url, tokens=BpeTokenCounter(), schema=cfg.cold_schema)
                       if engine == "postgres" else ColdStore(cfg.db_path, tokens=BpeTokenCounter(), embedder=None))
    try:
        assert len(reader.turn_facts(key)) == len(TEXTS)  # read once before, as a cache does
        assert winner(cfg, str(WINNER_DIM), extra) == len(TEXTS)
        assert {len(v) for v in reader.embeddings(key, list(range(len(TEXTS)))).values()} == {WINNER_DIM}
        assert [f[5] is not None for f in reader.turn_facts(key)] == [True] * len(TEXTS)
    finally:
        reader.close()


def test_postgres_search_of_a_conversation_with_no_vector_left_is_the_error(
        tmp_path: Path, request: pytest.FixtureRequest) -> None:
    # a conversation the loser appends after the winner's switch has no vector (the
    # loser's catch-up is refused): its search found no dense row and answered by
    # keywords alone, silently; SQLite's vec0 refuses the query vector (the error already)
    cfg, extra = store("postgres", tmp_path, request)
    with loser_after_switch(cfg, SizedHashEmbedder(DIM), str(WINNER_DIM), extra) as loser:
        loser.append_many("d", [{"role": "user", "content": t} for t in TEXTS])
        with pytest.raises(VectorWidthConflict) as caught:
            loser.search("d", TEXTS[0], k=3)
        assert f"{WINNER_DIM} wide" in str(caught.value) and f"{DIM}-wide" in str(caught.value)


def test_postgres_bulk_load_stores_no_vector_of_another_width(
        tmp_path: Path, request: pytest.FixtureRequest) -> None:
    # without the HNSW index (dropped for a bulk load) nothing cast the loser's vectors to
    # the store's width: its catch-up stored them, 384 wide in a 256-wide store
    cfg, extra = store("postgres", tmp_path, request)
    with loser_after_switch(cfg, SizedHashEmbedder(DIM), str(WINNER_DIM), extra) as loser:
        loser.cold.drop_vector_index()  # type: ignore[attr-defined]  # PostgresStore's
        loser.append("c", {"role": "user", "content": "a turn the loser appends"})
        with pytest.raises(VectorWidthConflict):
            loser.catch_up("c")
        with loser.cold.reading() as c:  # type: ignore[attr-defined]
            widths = dict(c.execute("SELECT vector_dims(embedding), COUNT(*) FROM messages_vec "
                                    "GROUP BY 1").fetchall())
        assert widths == {WINNER_DIM: len(TEXTS)}

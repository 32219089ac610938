"""Two live processes on one store whose embedders differ in width (two embedding
models): the one opened later wins, emptying the vectors and re-embedding every turn at
its width (as a restart with a new model does); the other, still running, gets a clear
error naming `embedding_model` and both widths from its catch-ups and dense searches
(VectorWidthConflict, a RuntimeError; HTTP 503 with that text), and never switches the
width back: the winner's vectors stay. The same on both engines.

Before: the loser's catch-up and search raised the database's own error (SQLite: sqlite-vec's
"Dimension mismatch for inserted vector"; PostgreSQL: a DataException), GET /v1/search
answered 500; and on PostgreSQL the winner's switch itself failed for good (see
tests/test_vector_width_switch.py).

The winner is a real child process (tests/width_child.py); the loser this test's Memory,
open before it and after it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from width_child import SizedHashEmbedder
from width_conflict_helpers import TEXTS, loser_after_switch, store

from tiermem import Memory
from tiermem.errors import VectorWidthConflict
from tiermem.service.app import create_app

LOSER_DIM = 384  # the process open first
WINNER_DIM = 256  # the process opened after it, another model


def assert_names_both(text: str) -> None:
    assert "embedding_model" in text
    assert f"{WINNER_DIM} wide" in text and f"{LOSER_DIM}-wide" in text


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_the_earlier_process_gets_a_clear_error_and_keeps_the_winners_vectors(
        tmp_path: Path, request: pytest.FixtureRequest, engine: str) -> None:
    cfg, extra = store(engine, tmp_path, request)
    # every turn re-embedded at the winner's width
    with loser_after_switch(cfg, SizedHashEmbedder(LOSER_DIM), str(WINNER_DIM), extra) as loser:
        loser.append("c", {"role": "user", "content": "a turn the loser appends"})  # appends still store
        with pytest.raises(VectorWidthConflict) as caught:
            loser.catch_up("c")
        assert isinstance(caught.value, RuntimeError)
        assert_names_both(str(caught.value))
        # a conversation's search, and a namespace's (PostgreSQL: the HNSW index's cast)
        for conversation in ("c", None):
            with pytest.raises(VectorWidthConflict) as caught:
                loser.search(conversation, TEXTS[0], k=3)
            assert_names_both(str(caught.value))

        # over HTTP: a declared 503 with the text, never the 500 of an unexpected error
        app = create_app(loser.config, memory=loser, auth=False, start_scheduler=False)
        with TestClient(app, raise_server_exceptions=False, base_url="http://localhost") as client:
            got = client.get("/v1/search", params={"conversation_id": "c", "q": TEXTS[0]})
        assert got.status_code == 503, got.text
        assert_names_both(got.json()["detail"])
        assert str(cfg.data_dir) not in got.text and "Retry-After" not in got.headers

    # the loser switched nothing back: a process of the winner's width finds only the
    # loser's new turn to embed, and searches by the winner's vectors
    with Memory(cfg, embedder=SizedHashEmbedder(WINNER_DIM), hot=False, background_indexing=False) as mem:
        assert mem.catch_up("c") == 1
        hits = mem.search("c", TEXTS[1], k=3)
        assert next(h for h in hits if h.ranks.get("dense") == 1).position == 1

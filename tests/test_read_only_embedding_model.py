"""A store opened READ-ONLY by a process whose embedding model is not the store's
(`vec_model` / `vec_dim`, recorded by the process that embedded its turns). A read-only
open runs no catch-up, so it never checked its model against the store's: another model
of the same width searched and built contexts by comparing its query vectors with the
other model's turn vectors, silently; another width raised VectorWidthConflict blaming
"another process". Now both raise as a live conflict does (EmbeddingModelConflict,
VectorWidthConflict for a width: README's `embedding_model` row, HTTP 503), with a message
that fits a read-only store: nothing can be re-embedded here, open it with the store's
model or where it can be written. Its own model still searches by dense and keywords.

Read-only for real (`frozen`: chattr +i as root, else the mode bits)."""

from __future__ import annotations

from pathlib import Path

import pytest
from service_helpers import frozen
from width_child import NamedHashEmbedder

from tiermem import Config, Memory
from tiermem.errors import EmbeddingModelConflict, VectorWidthConflict

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

DIM = 384  # the store's width (MiniLM's)
STORE_MODEL = "a1" * 32  # the model the store's vectors come from (a sha256's length)
OTHER_MODEL = "b2" * 32
OTHER_DIM = 256
TEXTS = ["my sister adopted a beagle", "the report is due friday", "we met in lisbon"]

# (the reader's width, its model, the error its search and context raise: None = none)
CASES = [
    (DIM, STORE_MODEL, None),  # the store's own model: dense ranking as when writable
    (DIM, OTHER_MODEL, EmbeddingModelConflict),  # the review's: ranked on mixed vectors, silently
    (OTHER_DIM, OTHER_MODEL, VectorWidthConflict),  # another width: raised, but blaming "another process"
]


@pytest.mark.parametrize(("dim", "model", "error"), CASES, ids=["same-model", "same-width", "other-width"])
def test_read_only_store_opened_with_another_model(tmp_path: Path, dim: int, model: str,
                                                   error: type[EmbeddingModelConflict] | None) -> None:
    data = tmp_path / "data"
    cfg = Config(data_dir=data)
    with Memory(cfg, embedder=NamedHashEmbedder(DIM, STORE_MODEL), hot=False, background_indexing=False) as mem:
        mem.append_many("c", [{"role": "user", "content": t} for t in TEXTS])
        assert mem.catch_up("c") == len(TEXTS)
    with frozen(data), Memory(cfg, embedder=NamedHashEmbedder(dim, model), hot=False,
                              background_indexing=False) as mem:
        assert mem.cold.read_only  # type: ignore[attr-defined]  # ColdStore's
        if error is None:
            hits = mem.search("c", TEXTS[2], k=3)
            assert hits and "dense" in hits[0].ranks  # its own model's vectors compared
            assert mem.context("c", TEXTS[2]).tokens > 0
            return
        for conversation in ("c", None):  # a conversation's search, a namespace's
            with pytest.raises(error) as caught:
                mem.search(conversation, TEXTS[2], k=3)
            assert type(caught.value) is error
            text = str(caught.value)
            assert "read-only" in text and "another process" not in text, text
            assert STORE_MODEL in text and model in text and f"{DIM} wide" in text and f"{dim}-wide" in text
            assert "embedding_model" in text
        with pytest.raises(error):  # a context's turn cache never reads the other model's vectors
            mem.context("c", TEXTS[2])

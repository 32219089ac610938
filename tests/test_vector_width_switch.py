"""A store whose vectors are of one width, reopened alone with an embedder of another
width (another embedding_model), drops the derived vectors and re-embeds every turn, and
its search ranks by the new vectors: on both engines, as the README promises.

Before the fix, on PostgreSQL the switch emptied the vectors with DELETE and then built
the HNSW index on their cast to the new width in the same transaction: the index build
still saw the deleted rows and failed ("expected 256 dimensions, not 384"), the switch
rolled back, and every catch-up and search after it raised that DataException for good
(GET /v1/search answered 500). TRUNCATE leaves the index build no old row.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pg_server import fresh_schema
from width_child import SizedHashEmbedder, config

from tiermem import Config, Memory

TEXTS = ["my sister adopted a beagle", "the report is due friday", "we met in lisbon", "pottery on tuesdays"]


def store_config(engine: str, tmp_path: Path, request: pytest.FixtureRequest) -> Config:
    if engine == "postgres":
        return config(tmp_path / "data", request.getfixturevalue("pg_url"), fresh_schema())
    return config(tmp_path / "data", None, None)


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
@pytest.mark.parametrize(("first", "then"), [
    (384, 256),  # a narrower model: the old rows do not fit the new index's cast
    (256, 384),  # a wider one
])
def test_another_width_re_embeds_every_turn_and_searches(
        tmp_path: Path, request: pytest.FixtureRequest, engine: str, first: int, then: int) -> None:
    cfg = store_config(engine, tmp_path, request)
    with Memory(cfg, embedder=SizedHashEmbedder(first), hot=False, background_indexing=False) as mem:
        mem.append_many("c", [{"role": "user", "content": t} for t in TEXTS])
        assert mem.catch_up("c") == len(TEXTS)
    with Memory(cfg, embedder=SizedHashEmbedder(then), hot=False, background_indexing=False) as mem:
        mem.append("c", {"role": "user", "content": "and one more turn"})
        # every turn again, the old ones included: their vectors were dropped
        assert mem.catch_up("c") == len(TEXTS) + 1
        assert mem.cold.pending_embeddings() == 0
        for pos, text in enumerate(TEXTS):
            # the same text is the same vector: distance 0, first by the new vectors
            hits = mem.search("c", text, k=3)
            assert next(h for h in hits if h.ranks.get("dense") == 1).position == pos
    # and the switch held: a third process of the new width finds nothing to re-embed
    with Memory(cfg, embedder=SizedHashEmbedder(then), hot=False, background_indexing=False) as mem:
        assert mem.catch_up("c") == 0

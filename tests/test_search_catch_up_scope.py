"""A namespace search catches up its own namespace's vectors only.

`Memory.search(None, ..., namespace=ns)` embedded every pending turn of the database
before searching: a tenant's search waited for, and spent the model on, another tenant's
backlog (its latency said how much the others had just written). It now embeds only the
turns of the namespace searched; the others stay pending for their own requests or the
background indexer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pg_server import fresh_schema

from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_a_namespace_search_embeds_its_own_backlog_only(tmp_path: Path, pg_url: str,
                                                        embedder: Embedder, engine: str) -> None:
    cfg: dict[str, Any] = {"cold_url": pg_url, "cold_schema": fresh_schema()} if engine == "postgresql" else {}
    with Memory(Config(data_dir=tmp_path, **cfg), embedder=embedder, hot=False, background_indexing=False) as m:
        m.append_many("work", [{"role": "user", "content": f"acme's quarterly line {i}"} for i in range(20)],
                      namespace="acme")
        m.append_many("mine", [{"role": "user", "content": f"my note about trains {i}"} for i in range(5)],
                      namespace="evil")
        assert m.cold.stats()["pending_embeddings"] == 25  # the premise: nothing embedded yet
        hits = m.search(None, "note about trains", 3, namespace="evil")
        assert {h.conversation_id for h in hits} == {"mine"}
        # evil's turns were embedded for its search (found by meaning too); acme's wait
        assert m.cold.stats()["pending_embeddings"] == 20
        assert all(h.ranks.get("dense") for h in hits)

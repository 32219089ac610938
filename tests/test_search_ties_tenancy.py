"""What a tenant's search shows never depends on another namespace (DESIGN invariants 9
and 10), not even the order of hits with equal scores.

A fork copies its parent's text and vectors, so their hits tie exactly. PostgreSQL's
namespace dense search and the rank fusion of both engines broke ties by the internal
conversation key, and a key is spelled `s1` or `s1~<hex>` depending on whether another
namespace used the id `s1` first: the order of a tenant's own results told it so. Ties
now go by the retrievers' order and the row id, which other namespaces cannot move.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pg_server import fresh_schema

from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder


def hits(tmp_path: Path, embedder: Embedder, cfg: dict[str, Any], other_first: bool) -> list[Any]:
    with Memory(Config(data_dir=tmp_path, **cfg), embedder=embedder, hot=False, background_indexing=False) as m:
        if other_first:  # another tenant used the id first: this one's key is "s1~<hex>"
            m.append("s1", {"role": "user", "content": "unrelated"}, namespace="other")
        for text in ("I am allergic to peanuts", "the hotel budget is 300 euros", "my dog is called Biscuit"):
            m.append("s1", {"role": "user", "content": text}, namespace="acme")
        m.fork("s1", 2, new_id="s1f", namespace="acme")
        m.catch_up()
        assert (m.cold.key_of("acme", "s1") == "s1") is not other_first  # the premise
        return [(h.conversation_id, h.position, h.ranks) for h in m.search(None, "peanut allergy", 4,
                                                                            namespace="acme")]


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_tied_hits_come_in_the_same_order_whatever_another_namespace_did(
        tmp_path: Path, pg_url: str, embedder: Embedder, engine: str) -> None:
    def cfg() -> dict[str, Any]:
        return {"cold_url": pg_url, "cold_schema": fresh_schema()} if engine == "postgresql" else {}

    alone = hits(tmp_path / "a", embedder, cfg(), other_first=False)
    after_other = hits(tmp_path / "b", embedder, cfg(), other_first=True)
    assert {h[0] for h in alone} == {"s1", "s1f"}  # the fork's copies are among the hits
    assert alone == after_other

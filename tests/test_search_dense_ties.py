"""Rows of equal vectors (the same text written again, a fork's copies of its parent's
rows) tie in the dense search, and ties go to the earlier row on both engines, also when
more rows tie than the search asks for: SQLite's vec0 kept any of the rows tied at the
k-th distance, so a vector-only search there answered positions 1..5 where PostgreSQL
answered 0..4 (found by tests/test_engines_differential.py)."""

from __future__ import annotations

import pytest

from tiermem import Config, Memory
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.embed import Embedder
from tiermem.tiers.models import Message

TIED_ROWS = 30  # equal texts: more than a search's candidates (tiers.dialect: 3k, at least 20)
K = 5
NO_MATCH_QUERY = "zqxv"  # no keyword matches: the order is the vectors' alone

CASES = [
    # one conversation: its rows in log order
    pytest.param(["c"], "c", id="conversation"),
    # a namespace: the first conversation's rows, then the second's
    pytest.param(["c", "d"], None, id="namespace"),
]


@pytest.mark.parametrize(("convs", "scope"), CASES)
def test_tied_rows_come_earliest_first(engine_config: Config, embedder: Embedder, convs: list[str],
                                       scope: str | None) -> None:
    with Memory(engine_config, embedder=embedder, hot=False, background_indexing=False) as mem:
        for conv in convs:
            mem.append_many(conv, [{"role": "user", "content": "peanut"}] * TIED_ROWS)
        hits = mem.search(scope, NO_MATCH_QUERY, K)
        assert [(h.conversation_id, h.position) for h in hits] == [("c", p) for p in range(K)]
        assert [h.ranks for h in hits] == [{"dense": r} for r in range(1, K + 1)]


def test_a_search_without_a_tie_scans_once(cold: ColdStore, embedder: Embedder) -> None:
    # the tie check compares the k-th row with the one after it: asking for exactly k
    # compared the k-th with itself, so every search past k vectors scanned vec0 twice
    texts = [f"turn {i} about {word}" for i, word in enumerate(["tea", "rain", "trains", "maps", "jazz",
                                                                  "bread", "chess", "moss", "kites", "wool"])]
    cold.append_many("c", [Message(role="user", content=t) for t in texts])
    cold.index_pending()
    scans: list[int] = []
    nearest = cold._nearest

    def counted(qb: bytes, want: int, convs: list[str]) -> list[tuple[int, float]]:
        scans.append(want)
        return nearest(qb, want, convs)

    cold._nearest = counted  # type: ignore[method-assign]
    hits = cold.search_dense(embedder.embed(["tea"])[0], K, conversation_id=cold.key_of("default", "c"))
    assert len(hits) == K and len(scans) == 1

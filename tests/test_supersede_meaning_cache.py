"""Supersession's meaning search on a live append scores the conversation's vectors in
the turn cache, not the store's vector index (consolidation/supersede.py `_nearest`).

Before: each correction appended ran an exhaustive KNN over the conversation's vectors
in vec0 (a `MATCH` statement) under the store's lock, plus a read of the conversation's
turns for pending vectors when none were pending: 49 ms per correction at 20,000 turns,
119 ms at 60,000, every other statement of the process waiting behind it. The decisions
must stay exactly those the store's index gave.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tiermem import Config, Memory, Message
from tiermem.consolidation.supersede import SUPERSEDE_SEARCH_K, Superseder
from tiermem.tiers.embed import Embedder, cosine_from_l2

FILLER = ["What's a good podcast about volcanoes?", "Tell me a fun fact about coral reefs.",
          "How do tides work exactly?", "Any tips for a rainy weekend?"]
FILLER_TURNS = 60  # user/assistant pairs between the statement and its correction: past the window


def _conversation(statement: str) -> list[Message]:
    msgs = [Message(role="user", content=statement), Message(role="assistant", content="Noted.")]
    msgs += [Message(role=r, content=FILLER[i % len(FILLER)] if r == "user" else f"Sure ({i}).")
             for i in range(FILLER_TURNS) for r in ("user", "assistant")]
    return msgs


def _traced(mem: Memory, fn: Callable[[], object]) -> list[str]:
    seen: list[str] = []
    with mem.cold.reading() as conn:
        conn.set_trace_callback(seen.append)
    try:
        fn()
    finally:
        with mem.cold.reading() as conn:
            conn.set_trace_callback(None)
    return seen


def _superseded(mem: Memory, conv: str) -> dict[int, int]:
    return {r.position: r.superseded_by for r in mem.cold.turns(conv) if r.superseded_by is not None}


# (a statement far back, its correction appended live, whether the correction supersedes it)
CASES = [
    # a habit 120 turns back, switched "from now on"
    ("I usually take the 8:15 train to work.", "I switched to the 7:40 train to work from now on.", True),
    # a fact about the user, updated by a state change
    ("I live in Lisbon with my partner.", "We moved to Porto last month, so I live in Porto now.", True),
    # a person's role, a new value with "now"
    ("My manager is Priya.", "My manager is Tom now.", True),
    # an update on another topic: nothing near enough in meaning, nothing superseded
    ("My dentist is Dr. Almeida.", "From now on call me Sam.", False),
    # an update cue on the same topic without a new value of the statement's kind
    ("I drink my coffee with oat milk.", "From now on I take my coffee black.", False),
]


@pytest.mark.parametrize(("statement", "correction", "supersedes"), CASES)
def test_a_live_correction_searches_the_turn_cache_not_the_vector_index(
        tmp_path: Path, embedder: Embedder, statement: str, correction: str, supersedes: bool) -> None:
    with Memory(Config(data_dir=tmp_path / "cached"), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        mem.append_many("c", _conversation(statement))
        mem.cold.index_pending()
        statements = _traced(mem, lambda: mem.append("c", {"role": "user", "content": correction}))
        knn = [s for s in statements if "MATCH" in s]
        assert knn == [], knn  # before: one exhaustive KNN over the conversation's vectors
        # nothing was pending: no read of the conversation's turns for pending vectors
        # beyond the append's own embedding (before: one more, from the meaning search)
        pending_reads = [s for s in statements if "t.embedded = 0 AND t.conversation_id" in s]
        assert len(pending_reads) <= 2, pending_reads
        cached = _superseded(mem, "c")
    # the same decision as the store's vector index gives (a Memory without the cache's
    # help: its superseder searches vec0)
    with Memory(Config(data_dir=tmp_path / "vec0"), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        mem.superseder.turns = None
        mem.append_many("c", _conversation(statement))
        mem.cold.index_pending()
        mem.append("c", {"role": "user", "content": correction})
        assert _superseded(mem, "c") == cached
    assert (0 in cached) is supersedes, cached


def test_nearest_in_the_cache_equals_the_vector_index(tmp_path: Path, embedder: Embedder) -> None:
    """For every earlier cut and a few queries, the cache's nearest turns are the store's:
    the same cosines (to float precision) and positions in the same order. Turns of the
    very same text (equal vectors) tied at the k-th place are cut in log order: vec0 cuts
    such a tie arbitrarily (which of them it returns changes with how many turns follow),
    so the reference is the store's whole ranking, cut that way."""
    with Memory(Config(data_dir=tmp_path / "d"), embedder=embedder, hot=False, background_indexing=False) as mem:
        from tiermem.consolidation.supersede import _nearest_in  # (new with the cache search)

        # repeated texts: exact ties in distance
        mem.append_many("c", _conversation("Seat preference: aisle seat on every flight.") * 2)
        mem.cold.index_pending()
        table = mem.turns.get("c")
        queries = embedder.embed(["I switched to a window seat", "coral reefs fun facts", "rainy weekend tips"])
        last = int(table.positions[-1])
        for q in queries:
            # cuts: none before, one turn before, the middle, everything before the last
            for before in (0, 1, last // 2, last):
                got = _nearest_in(table, np.asarray(q), before, SUPERSEDE_SEARCH_K)
                hits = mem.cold.search_dense(q, last + 1, conversation_id="c", before=before)
                ranked = sorted(((cosine_from_l2(d), p) for _c, p, d in hits if p < before),
                                key=lambda h: (-h[0], h[1]))
                want = [(p, c) for c, p in ranked[:SUPERSEDE_SEARCH_K]]
                assert got is not None
                assert [p for p, _ in got] == [p for p, _ in want]
                assert np.allclose([c for _, c in got], [c for _, c in want], atol=1e-5)


def test_a_turn_without_its_vector_in_the_cache_falls_back_to_the_index(tmp_path: Path,
                                                                       embedder: Embedder) -> None:
    """A cached table read before the vectors were stored cannot answer: the search goes
    to the store, which has them."""
    from tiermem.consolidation.supersede import _nearest_in  # (new with the cache search)

    with Memory(Config(data_dir=tmp_path / "d"), embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append_many("c", _conversation("Seat preference: aisle seat on every flight."))
        stale = mem.turns.get("c")  # read while every vector is still pending
        assert not bool(stale.has_vec.any())
        q = embedder.embed(["I switched to a window seat"])[0]
        assert _nearest_in(stale, q, 10, SUPERSEDE_SEARCH_K) is None
        mem.cold.index_pending()
        sup = Superseder(mem.cold, embedder, mem.classifier, turns=mem.turns)
        last = mem.cold.last_position("c")
        near = sup._nearest("c", {last + 1: "From now on I want a window seat on flights."}, small=False)
        assert [p for p, _ in near[last + 1]][:1] == [0]

"""planner.feedback.expansion_terms reads FB_TERMS when it is called: recall_rounds'
`fbterms` variant sets that module constant for its calls, and a default bound at
import (`limit=FB_TERMS`) made the variant run the shipped planner unchanged."""

from __future__ import annotations

import pytest
from test_feedback import BEST, QUESTION, _talk

from tiermem import Memory
from tiermem.evals.recall_rounds import applied, parse_variant
from tiermem.planner import feedback

FEWER_TERMS = 1  # fewer than the feedback turns' topic words (kayaking, cabin, ...)


def test_fbterms_variant_limits_the_expansion_terms(cold_memory: Memory) -> None:
    _talk(cold_memory)
    table = cold_memory.turns.get("c")
    shipped = feedback.expansion_terms(BEST, QUESTION, table)
    assert len(shipped) > FEWER_TERMS  # else the limit below would change nothing
    with applied(parse_variant(f"few:fbterms={FEWER_TERMS}")):
        assert feedback.FB_TERMS == FEWER_TERMS
        limited = feedback.expansion_terms(BEST, QUESTION, table)
    assert len(limited) == FEWER_TERMS
    assert limited[0][0] == shipped[0][0]  # the heaviest term, weights renormalized
    assert limited[0][1] == pytest.approx(1.0)
    # back to the shipped value once the variant is over
    assert len(feedback.expansion_terms(BEST, QUESTION, table)) == len(shipped)


def test_an_explicit_limit_still_wins(cold_memory: Memory) -> None:
    _talk(cold_memory)
    table = cold_memory.turns.get("c")
    assert len(feedback.expansion_terms(BEST, QUESTION, table, limit=FEWER_TERMS)) == FEWER_TERMS

"""evals.bench_ab: a setting sets only the knobs it names (the rest stay as shipped, unlike
recall_rounds' off defaults) and puts them back after its block."""

from __future__ import annotations

from tiermem.evals.bench_ab import knobs
from tiermem.planner import excerpt, multihop


def test_knobs_set_only_what_they_name_and_restore() -> None:
    hop, mode = multihop.HOP_WEIGHT, excerpt.EXCERPT
    with knobs({"excerpt": excerpt.INLINE}):
        assert excerpt.EXCERPT == excerpt.INLINE != mode and isinstance(excerpt.EXCERPT, int)
        assert hop == multihop.HOP_WEIGHT  # not named: shipped value, not recall_rounds' 0
    assert (hop, mode) == (multihop.HOP_WEIGHT, excerpt.EXCERPT)

"""evals.bench_ab: a setting sets only the knobs it names (the rest stay as shipped, unlike
recall_rounds' off defaults) and puts them back after its block."""

from __future__ import annotations

from tiermem.evals.bench_ab import knobs
from tiermem.planner import excerpt, multihop


def test_knobs_set_only_what_they_name_and_restore() -> None:
    hop, mode = multihop.HOP_WEIGHT, excerpt.EXCERPT
    with knobs({"excerpt": 0}):
        assert excerpt.EXCERPT == 0 and isinstance(excerpt.EXCERPT, int)
        assert multihop.HOP_WEIGHT == hop  # not named: shipped value, not recall_rounds' 0
    assert (multihop.HOP_WEIGHT, excerpt.EXCERPT) == (hop, mode)

"""evals.recall_misses: each evidence turn is classified by what the planner did with it,
and the probe that watches the ranking leaves the planner's methods as they were."""

from __future__ import annotations

import pytest

from tiermem import Memory
from tiermem.evals.recall_misses import Probe, bucket, classify

RANKING = {p: p for p in range(300)}  # eligible turns: rank == position


@pytest.mark.parametrize(("p", "outcome", "where"), [
    (1, "packed", "packed"),  # shown verbatim
    (2, "excerpt", "excerpt"),  # shown as an excerpt only
    (5, "room", "room<10"),  # a candidate (rank 1 among them), not packed
    (7, "room", "room<20"),  # candidate rank 12
    (120, "below", "below<200"),  # eligible, not a candidate
    (250, "below", "below200+"),
    (999, "gated", "gated"),  # not eligible at all
])
def test_classify(p: int, outcome: str, where: str) -> None:
    candidates = [3, 5, *list(range(10, 20)), 7]
    assert classify(p, {1}, {2}, candidates, RANKING) == (outcome, where)


def test_bucket_bounds() -> None:
    assert [bucket("room", r, (10, 20)) for r in (0, 9, 10, 19, 20)] == [
        "room<10", "room<10", "room<20", "room<20", "room20+"]


def test_probe_records_and_restores(memory: Memory) -> None:
    memory.append_many("c", [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn about topic {i}"}
                             for i in range(30)])
    memory.append("c", {"role": "user", "content": "what did we say about topic 7?"})
    cands = memory.planner.candidates
    probe = Probe()
    with probe.on(cands):
        ctx = memory.context("c", "what did we say about topic 7?", budget=400, record=False)
    assert probe.candidates and probe.ranking  # the call was observed
    shown = {p for it in ctx.plan.items if it.slice == "retrieved" for p in it.positions}
    assert shown <= {c.position for c in probe.candidates} <= set(probe.ranking)
    assert "_top" not in vars(cands) and "retrieved" not in vars(cands)  # the class's methods again

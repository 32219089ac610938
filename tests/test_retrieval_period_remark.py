"""A remark that names a period does not bring that period's turns back (issue 22,
planner.candidates): "I went hiking last week" tells, the tail carries it; only a
message that asks about the period ("What did I do last week?") retrieves its turns.

Fails on the code before: any message of a non-recall class that named a period made
every turn of the period eligible, so a chat remark like this filled the per-turn part
with a week's turns (a cache miss, then a new epoch on the next turn)."""

from __future__ import annotations

import datetime as dt
import random

import pytest

from tiermem import Memory

DAY_S = 86_400.0
NOW = dt.datetime(2026, 5, 14, 18, 0, tzinfo=dt.UTC).timestamp()
WORDS = ["garden", "violin", "harbour", "pancake", "glacier", "lantern", "marathon", "orchid", "pottery",
         "satellite", "tunnel", "umbrella", "volcano", "walrus", "yoga", "zeppelin", "bakery", "canyon"]


def session(memory: Memory, start: float, n: int, seed: int) -> list[int]:
    """`n` turns of small talk a minute apart from `start`; their positions."""
    rnd = random.Random(seed)
    rows = [{"role": "user" if i % 2 == 0 else "assistant", "content": " ".join(rnd.sample(WORDS, 6)),
             "created_at": start + 60.0 * i} for i in range(n)]
    return memory.append_many("c", rows)


# (message, whether the period's turns come back): a remark tells, a question asks
CASES = [
    ("I went hiking with my cousins last week, it was lovely.", False),  # a remark naming the period
    ("Last week was great, I finally fixed the bike! Anyway, how are things with you?", False),  # remark + chat
    ("What did I talk about last week?", True),  # asks about the period: a temporal recall
]


@pytest.mark.parametrize(("message", "brings_period"), CASES)
def test_a_period_named_in_a_remark_brings_none_of_its_turns(memory: Memory, message: str,
                                                            brings_period: bool) -> None:
    week_ago = session(memory, NOW - 7 * DAY_S, 40, seed=1)  # the period "last week" names
    session(memory, NOW - 2 * DAY_S, 200, seed=2)  # more than the tail and its epoch-start fill reach
    session(memory, NOW - 600.0, 10, seed=3)
    memory.append("c", {"role": "user", "content": message, "created_at": NOW})
    ctx = memory.context("c", message, budget=2000)
    retrieved = {p for it in ctx.plan.items if it.slice == "retrieved" for p in it.positions}
    from_period = retrieved & set(week_ago)
    if brings_period:
        assert ctx.plan.retrieval.startswith("broad") and from_period, ctx.plan.explain()
    else:
        assert ctx.plan.retrieval.split(":")[0] in ("narrow", "none"), ctx.plan.explain()
        assert not from_period, ctx.plan.explain()

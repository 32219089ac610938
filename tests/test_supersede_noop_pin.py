"""A correction or retraction that revises nothing is no pin.

Invariant (consolidation/supersede.py, `Superseder._demote`): the classifier labels "Never
mind." and "Actually the flight leaves from Porto, not Lisbon." corrections, load-bearing at
priority 90, for what they would revise. Where supersession finds that they revise nothing
(a bare retraction after a question; a correction whose old value nobody stated), the label
drops to the turn's ordinary one: a bare retraction to small talk, a correction carrying a
fact of nobody in particular to its label as a plain statement. Before, at 350 tokens that
pin filled the pinned share, so the allergy it no longer retracts "did not fit its share".
A correction stating a value of the user's own keeps its pin, and one that does revise
something keeps its label and pin as before.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from tiermem import Memory

CONV = "c"
# the budget of the review's context: its pinned share holds one pin of this size
BUDGET_TOKENS = 350
QUERY = "Any allergies?"
CORRECTION_PRIORITY = 90  # consolidation.classify.PRIORITY["correction"]
# the cold log alone, and with the hot tier (real Redis), whose pin set follows the relabel
STORES = ["cold_memory", "memory"]

Turn = str | tuple[str, str]  # a user turn's text, or (role, text)

# filler that revises nothing and is revised by nothing: it moves the turns out of the tail,
# so that only the pinned share can show them
FILLER_TEXTS = ["I had a long day at work.", "The weather was lovely this morning.", "I made pasta for dinner."]
FILLER: list[Turn] = [t for i in range(12) for t in (FILLER_TEXTS[i % len(FILLER_TEXTS)], ("assistant", "I see."))]


def _append(mem: Memory, turns: Sequence[Turn]) -> None:
    msgs = [{"role": "user", "content": t} if isinstance(t, str) else {"role": t[0], "content": t[1]}
            for t in [*turns, *FILLER]]
    mem.append_many(CONV, msgs)
    mem.catch_up(CONV)


def _pinned(mem: Memory, position: int) -> bool:
    ctx = mem.context(CONV, QUERY, BUDGET_TOKENS)
    return any(it.slice == "pinned" and position in it.positions for it in ctx.plan.items)


@pytest.mark.parametrize(("last", "pinned"), [
    # the review's case: a bare retraction after a question takes back nothing
    ("Never mind.", False),
    # the same with a word before it
    ("Oh, scratch that.", False),
    # a correction of a thing of nobody's that nothing before it states: a plain statement
    ("Actually the flight leaves from Porto, not Lisbon.", False),
    # a new fact of the user's own stated as a correction keeps a correction's pin
    ("Actually I live in Porto, not Lisbon.", True),
])
@pytest.mark.parametrize("store", STORES)
def test_a_correction_that_revises_nothing_leaves_the_allergy_in_the_pinned_share(
        request: pytest.FixtureRequest, store: str, last: str, pinned: bool) -> None:
    cold_memory: Memory = request.getfixturevalue(store)
    _append(cold_memory, ["I'm allergic to peanuts.", "What's the weather in Rome?", last])
    rows = {r.position: r for r in cold_memory.cold.turns(CONV)}
    assert not any(r.superseded_by is not None for r in rows.values()), [r for r in rows.values() if r.superseded_by]
    ctx = cold_memory.context(CONV, QUERY, BUDGET_TOKENS)
    text = "\n".join(str(m.get("content")) for m in ctx.messages)
    assert "allergic to peanuts" in text, (text, ctx.plan.left_out)
    assert _pinned(cold_memory, 2) is pinned, ctx.plan.items
    if not pinned:
        # the share the correction's pin filled before now holds the allergy (a pin kept at
        # 90 still ranks first there, and the allergy comes by recall)
        assert _pinned(cold_memory, 0), ctx.plan.items
    assert bool(rows[2].load_bearing) is pinned, rows[2]
    assert (rows[2].priority == CORRECTION_PRIORITY) is pinned, rows[2]


@pytest.mark.parametrize(("turns", "superseded"), [
    # a bare retraction of the user's previous request (the reply passed over) retracts it
    (["Book a table at Nong's", ("assistant", "Done."), "Never mind."], {0}),
    # a correction that revises the value before it
    (["My flight is from Lisbon.", "Actually the flight leaves from Porto, not Lisbon."], {0}),
])
@pytest.mark.parametrize("store", STORES)
def test_a_correction_that_revises_something_keeps_its_label_and_pin(
        request: pytest.FixtureRequest, store: str, turns: Sequence[Turn], superseded: set[int]) -> None:
    cold_memory: Memory = request.getfixturevalue(store)
    _append(cold_memory, turns)
    rows = {r.position: r for r in cold_memory.cold.turns(CONV)}
    last = len(turns) - 1
    assert {p for p, r in rows.items() if r.superseded_by == last} == superseded, rows
    assert rows[last].intent == "correction" and rows[last].load_bearing, rows[last]
    assert rows[last].priority == CORRECTION_PRIORITY, rows[last]
    assert _pinned(cold_memory, last), cold_memory.context(CONV, QUERY, BUDGET_TOKENS).plan.items

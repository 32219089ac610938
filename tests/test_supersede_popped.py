"""A popped correction supersedes nothing; a popped item is not believed.

Invariants:
- A retraction row (the adapters' pop) hides the correction it names from every view;
  the value it replaced is then current again: shown unmarked and pinned in the
  context, listed current by ``facts()``, never said to be "replaced" by a turn nobody
  can see. Read at read time (tiers.statements.Hidden): the derived records stay as
  they are until a rebuild.
- ``facts()`` never lists a popped item, current or not.
- ``rebuild`` replays supersession without popped turns, as correction or as target:
  it records what readers already see.
- A chain A -> B -> C with C popped reads A -> B, B current.
"""

from __future__ import annotations

from tiermem import Memory
from tiermem.tiers.formats import RETRACT_TYPE
from tiermem.tiers.models import message_text

FILLER = ["I had a long day at work.", "The weather was lovely this morning.", "My cat knocked a glass over.",
          "I finally finished that novel."]
BUDGET = 800
OLD = "555-1111"


def _fact_then_correction(mem: Memory) -> int:
    msgs = [{"role": "user", "content": f"My phone number is {OLD}."}, {"role": "assistant", "content": "Noted."}]
    for f in FILLER:
        msgs += [{"role": "user", "content": f}, {"role": "assistant", "content": "I see."}]
    mem.append_many("c", msgs)
    [corr] = mem.append_many("c", [{"role": "user", "content": "Actually, my new number is 555-2222."}])
    mem.catch_up("c")
    assert mem.cold.turns("c")[0].superseded_by == corr  # recorded before the pop
    return corr


def _pop(mem: Memory, position: int) -> None:
    mem.append("c", {"type": RETRACT_TYPE, "position": position})
    for f in FILLER:
        mem.append_many("c", [{"role": "user", "content": f}, {"role": "assistant", "content": "I see."}])
    mem.catch_up("c")


def test_a_popped_correction_leaves_the_old_value_current_in_the_context(cold_memory: Memory) -> None:
    _pop(cold_memory, _fact_then_correction(cold_memory))
    q = "What phone number do you have for me?"
    cold_memory.append("c", {"role": "user", "content": q})
    ctx = cold_memory.context("c", q, BUDGET, namespace_recall=False)
    lines = [ln for m in ctx.messages for ln in message_text(m).splitlines() if OLD in ln]
    assert lines and not [ln for ln in lines if "SUPERSEDED" in ln]
    assert not [it for it in ctx.plan.left_out if 0 in it.positions and "superseded" in it.reason]


def test_facts_follow_the_pop(cold_memory: Memory) -> None:
    corr = _fact_then_correction(cold_memory)
    _pop(cold_memory, corr)
    facts = {f.position: f for f in cold_memory.facts("c")}
    assert corr not in facts  # the popped correction is not believed
    assert facts[0].status == "current" and facts[0].until_position is None


def test_facts_leave_out_a_popped_statement(cold_memory: Memory) -> None:
    [p] = cold_memory.append_many("c", [{"role": "user", "content": "My locker code is 4411, keep it on file."}])
    cold_memory.append_many("c", [{"role": "assistant", "content": "Noted."}])
    cold_memory.append("c", {"type": RETRACT_TYPE, "position": p})
    assert [f for f in cold_memory.facts("c") if f.position == p] == []


def test_rebuild_replays_without_the_popped_correction(cold_memory: Memory) -> None:
    _pop(cold_memory, _fact_then_correction(cold_memory))
    cold_memory.rebuild()
    assert [r.position for r in cold_memory.cold.turns("c") if r.superseded_by is not None] == []


def test_a_popped_last_step_of_a_chain_leaves_the_step_before_current(cold_memory: Memory) -> None:
    mem = cold_memory
    corr = _fact_then_correction(mem)
    [third] = mem.append_many("c", [{"role": "user", "content": "Sorry, my new number is 555-3333, not 555-2222."}])
    mem.catch_up("c")
    assert mem.cold.turns("c", start=corr, end=corr)[0].superseded_by == third  # a chain of three
    _pop(mem, third)
    facts = {f.position: f for f in mem.facts("c")}
    assert third not in facts
    assert facts[0].status == "superseded" and facts[0].current_position == corr
    assert facts[corr].status == "current"

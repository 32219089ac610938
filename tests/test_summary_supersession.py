"""A summary line never presents a superseded value as current.

Invariants:
- A rolling view built before a correction (not refreshed yet, inside its freshness
  budget) holds the old value's line; the planner leaves it out, and the plan says which
  turn superseded it, as it does for a superseded pin.
- A correction of one statement of a turn that holds several ("the hotel is now ...")
  cuts that statement out of the summary: before the view refreshes (the planner cuts the
  line) and after (the summarizer cuts the sentence); the rest of the turn stays.
- The constraint view marks a superseded statement superseded and keeps the rest of its
  sentence current.
- An epoch that showed such a line as current does not go on showing it.
"""

from __future__ import annotations

from tiermem import Memory
from tiermem.tiers.models import message_text

FILLER = ["I had a long day at work.", "The weather was lovely this morning.", "My cat knocked a glass over.",
          "I finally finished that novel.", "Traffic was terrible on the bridge.", "I made pancakes today.",
          "We watched a movie last night.", "The garden needs watering."]
BUDGET = 1000
QUERY = "Can you remind me what you have on file for me?"
TWO_FACTS = "My flight is LH 1172 and my hotel is the Tivoli Oriente."


def _chat(mem: Memory, first: str, correction: str) -> None:
    """`first`, filler, a refreshed view, then `correction` and more filler (no refresh)."""
    msgs = [{"role": "user", "content": first}, {"role": "assistant", "content": "Noted."}]
    for f in FILLER[:5]:
        msgs += [{"role": "user", "content": f}, {"role": "assistant", "content": "I see."}]
    mem.append_many("c", msgs)
    mem.catch_up("c")
    mem.consolidate("c")
    mem.append_many("c", [{"role": "user", "content": correction}, {"role": "assistant", "content": "Updated."}])
    for f in FILLER[5:]:
        mem.append_many("c", [{"role": "user", "content": f}, {"role": "assistant", "content": "I see."}])
    mem.catch_up("c")


def _summary_lines(mem: Memory) -> tuple[list[str], list[str]]:
    """The summary block's lines of a context for QUERY, and the plan's left-out summary reasons."""
    mem.append("c", {"role": "user", "content": QUERY})
    ctx = mem.context("c", QUERY, BUDGET, namespace_recall=False)
    lines = [ln for m in ctx.messages if m["role"] == "system" for ln in message_text(m).splitlines()
             if ln.startswith("- ")]
    return lines, [it.reason for it in ctx.plan.left_out if it.slice == "summary"]


def test_a_line_of_a_value_corrected_since_the_view_was_built_is_left_out(cold_memory: Memory) -> None:
    _chat(cold_memory, "My phone number is 555-1111.", "Actually, my new number is 555-2222.")
    assert cold_memory.cold.turns("c")[0].superseded_by is not None
    lines, left_out = _summary_lines(cold_memory)
    assert not [ln for ln in lines if "555-1111" in ln]
    assert any("superseded by #" in why for why in left_out)


def test_a_superseded_statement_is_cut_from_its_line_before_and_after_a_refresh(cold_memory: Memory) -> None:
    _chat(cold_memory, TWO_FACTS, "Actually the hotel is now the Pestana Palace.")
    assert [s.position for s in cold_memory.cold.superseded_statements("c")] == [0]
    lines, _ = _summary_lines(cold_memory)
    assert not [ln for ln in lines if "Tivoli" in ln]
    assert [ln for ln in lines if "LH 1172" in ln]  # the statement that holds stays
    cold_memory.consolidate("c")
    view = cold_memory.warm.latest("c", "rolling")
    assert view is not None
    current = [s.text for s in view.sentences if s.status == "current"]
    assert not [t for t in current if "Tivoli" in t]
    assert [t for t in current if "LH 1172" in t]
    lines, _ = _summary_lines(cold_memory)
    assert not [ln for ln in lines if "Tivoli" in ln]


def test_the_constraint_view_marks_a_superseded_statement(cold_memory: Memory) -> None:
    cold_memory.append_many("c", [{"role": "user", "content": "Remember: " + TWO_FACTS},
                                  {"role": "assistant", "content": "Noted."},
                                  {"role": "user", "content": "Actually the hotel is now the Pestana Palace."}])
    cold_memory.catch_up("c")
    assert [s.position for s in cold_memory.cold.superseded_statements("c")] == [0]
    cold_memory.consolidate("c")
    view = cold_memory.warm.latest("c", "constraints")
    assert view is not None
    status = {s.text: s.status for s in view.sentences if 0 in s.positions}
    assert [st for t, st in status.items() if "Tivoli" in t] == ["superseded"]
    assert [st for t, st in status.items() if "LH 1172" in t] == ["current"]


def test_an_epoch_that_showed_the_line_does_not_go_on_showing_it(cold_memory: Memory) -> None:
    msgs = [{"role": "user", "content": "My phone number is 555-1111."}, {"role": "assistant", "content": "Noted."}]
    for f in FILLER[:5]:
        msgs += [{"role": "user", "content": f}, {"role": "assistant", "content": "I see."}]
    cold_memory.append_many("c", msgs)
    cold_memory.catch_up("c")
    cold_memory.consolidate("c")
    lines, _ = _summary_lines(cold_memory)
    assert [ln for ln in lines if "555-1111" in ln]  # shown as current before the correction
    cold_memory.append_many("c", [{"role": "user", "content": "Actually, my new number is 555-2222."},
                                  {"role": "assistant", "content": "Updated."}])
    cold_memory.catch_up("c")
    lines, _ = _summary_lines(cold_memory)
    assert not [ln for ln in lines if "555-1111" in ln]

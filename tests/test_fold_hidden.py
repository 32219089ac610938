"""A fold never shows what a control row hides (DESIGN invariant 4), in the conversation
that wrote it or in a fork of it.

- A warm fold keeps, per line, the positions of the view sentence it renders
  (`Checkpoint.lines`): a line drawn from an item popped after the fold was written is
  left out of `active()` and, when the fold stands in for the summary, of the context.
- A fold without those positions (a caller's checkpoint) is passed over once a later pop
  hides an item inside it: its text may hold the item.
- A fork gets the parent's newest rolling view inside its prefix, sentences with their
  positions, so the child's summary hides what the child's log hides and keeps the
  positions a reader needs to see inside it (never the fold as one opaque line).
"""

from __future__ import annotations

import sqlite3

from tiermem import Memory
from tiermem.tiers.formats import RETRACT_TYPE
from tiermem.tiers.models import message_text

FILLER = ["I had a long day at work.", "The weather was lovely this morning.", "My cat knocked a glass over.",
          "I finally finished that novel.", "Traffic was terrible on the bridge.", "I made pancakes today.",
          "We watched a movie last night.", "The garden needs watering.", "My sister called me yesterday."]
SECRET = "4411"
BUDGET_TOKENS = 2000


def key(mem: Memory, conv: str) -> str:
    k = mem.cold.key_of("default", conv)
    assert k is not None
    return k


def folded(mem: Memory, conv: str, first: str) -> int:
    """A conversation opening with `first`, consolidated (a rolling view and its fold at
    the last position); returns that position."""
    msgs = [{"role": "user", "content": first}, {"role": "assistant", "content": "Noted."}]
    for f in FILLER:
        msgs += [{"role": "user", "content": f}, {"role": "assistant", "content": "I see."}]
    mem.append_many(conv, msgs)
    mem.catch_up(conv)
    mem.consolidate(conv)
    cp = mem.cold.latest_checkpoint(key(mem, conv))
    assert cp is not None and first in cp.summary  # the fold holds the item to pop
    return cp.position


def summary_text(mem: Memory, conv: str, query: str) -> str:
    mem.append(conv, {"role": "user", "content": query})
    ctx = mem.context(conv, query, BUDGET_TOKENS, namespace_recall=False)
    # the summary block is a system message; the whole context is checked all the same
    # (a popped item may come back through no slice)
    return "\n".join(message_text(m) for m in ctx.messages)


def pop_then_more(mem: Memory, conv: str, position: int) -> None:
    mem.append(conv, {"type": RETRACT_TYPE, "position": position})
    mem.append_many(conv, [{"role": "user", "content": "I went for a run."}, {"role": "assistant", "content": "Nice."}])


def test_a_fork_does_not_show_an_item_popped_before_its_fork_point(memory: Memory) -> None:
    folded(memory, "q", f"My locker code is {SECRET}.")
    pop_then_more(memory, "q", 0)
    memory.fork("q", memory.cold.last_position(key(memory, "q")), new_id="q-fork")
    assert SECRET not in summary_text(memory, "q-fork", "What is my locker code?")
    # the parent, with its own rolling view, hid it already: the fork now agrees
    assert SECRET not in summary_text(memory, "q", "What is my locker code?")


def test_a_forks_summary_lines_keep_their_source_positions(memory: Memory) -> None:
    # a correction after the fold: whether its line shows is the summary's supersession
    # rule, the same for parent and fork; the fork must let that rule see the line's
    # source turn (#0), not only the fold's position
    end = folded(memory, "p", "My phone number is 555-1111.")
    memory.append_many("p", [{"role": "user", "content": "Actually, my new number is 555-2222."},
                             {"role": "assistant", "content": "Updated."}])
    memory.fork("p", memory.cold.last_position(key(memory, "p")), new_id="p-fork")
    q = "What phone number do you have for me?"
    plans = {}
    for conv in ("p", "p-fork"):
        memory.append(conv, {"role": "user", "content": q})
        plans[conv] = memory.context(conv, q, BUDGET_TOKENS, namespace_recall=False).plan
    lines = {conv: [(it.positions, it.reason) for it in plan.items if it.slice == "summary"]
             for conv, plan in plans.items()}
    assert lines["p-fork"] and lines["p-fork"] == lines["p"]
    assert [(v.kind, v.covers) for v in plans["p-fork"].views] == [("rolling", (0, end))]


def test_active_leaves_out_the_folds_line_of_a_popped_item(cold_memory: Memory) -> None:
    end = folded(cold_memory, "q", f"My locker code is {SECRET}.")
    pop_then_more(cold_memory, "q", 0)
    view = cold_memory.active("q")
    assert view.checkpoint is not None and view.checkpoint.position == end  # the read boundary stays
    assert SECRET not in view.checkpoint.summary
    assert "My cat knocked a glass over." in view.checkpoint.summary  # the other lines stay
    lines = view.checkpoint.lines()
    assert lines is not None and all(0 not in ln.positions for ln in lines)
    assert view.messages[0].position == end + 1


def test_a_fold_standing_in_for_lost_views_hides_a_popped_line(cold_memory: Memory) -> None:
    folded(cold_memory, "q", f"My locker code is {SECRET}.")
    pop_then_more(cold_memory, "q", 0)
    # the views are derived and may be lost (invariant 2); the fold then stands in
    with sqlite3.connect(cold_memory.config.db_path) as db:
        db.execute("DELETE FROM summaries")
    cold_memory.warm.invalidate(key(cold_memory, "q"), "rolling")
    text = summary_text(cold_memory, "q", "What is my locker code?")
    assert "My cat knocked a glass over." in text  # the fold is shown, line by line
    assert SECRET not in text


def test_a_callers_checkpoint_is_passed_over_after_a_later_pop_inside_it(cold_memory: Memory) -> None:
    cold_memory.append_many("c", [{"role": "user", "content": f"My locker code is {SECRET}."},
                                  {"role": "assistant", "content": "Noted."},
                                  {"role": "user", "content": "I made pancakes today."}])
    cold_memory.checkpoint("c", f"The user's locker code is {SECRET}; they made pancakes.", 2)
    assert SECRET in summary_text(cold_memory, "c", "What did I cook?")  # before the pop it stands in
    pop_then_more(cold_memory, "c", 0)
    assert SECRET not in summary_text(cold_memory, "c", "What is my locker code?")
    view = cold_memory.active("c")
    assert view.checkpoint is None and view.messages[0].position == 0


def test_a_callers_checkpoint_written_after_the_pop_stands(cold_memory: Memory) -> None:
    # control: a pop before the checkpoint is one its writer knew of
    cold_memory.append_many("c", [{"role": "user", "content": f"My locker code is {SECRET}."},
                                  {"role": "assistant", "content": "Noted."}])
    pop_then_more(cold_memory, "c", 0)
    last = cold_memory.cold.last_position(key(cold_memory, "c"))
    cold_memory.checkpoint("c", "The user went for a run.", last)
    view = cold_memory.active("c")
    assert view.checkpoint is not None and view.checkpoint.summary == "The user went for a run."
    assert "went for a run" in summary_text(cold_memory, "c", "What did I do?")

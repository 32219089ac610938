"""A turn superseded in part and then whole (planner/candidates.py), shown as a caller pin
or as a retrieved turn: every line of it carries the label "SUPERSEDED, not current", and
once (as 85ebfd6 made planner.marks `marks` do for a mark).

Before: a caller pin's first line took the whole turn's label on top of its statement's
("[user · SUPERSEDED, not current: ... · SUPERSEDED, not current: ...] My flight lands at
9am"), and a retrieved turn labelled only its superseded statements, so what the
statements left of it ("Can you book me a taxi?") was shown unlabelled, as current,
though the turn was superseded whole.
"""

from __future__ import annotations

import pytest

from tiermem import Memory

MARK = "SUPERSEDED, not current"
BUDGET = 400  # the turn is out of the recent tail (the chatter after it), in the pinned or retrieved block
BOTH = "My flight lands at 9am and my hotel is the Hilton."
REST = " Can you book me a taxi?"  # no statement of a fact: what the statements leave of the turn
CORRECTIONS = ["Actually my hotel is the Marriott now.", "Actually my flight lands at 11am now."]
QUESTION = "Which hotel was it before, the Hilton, and when did my flight land?"


def _setup(mem: Memory, text: str, pin: bool) -> int:
    p = mem.append("c", {"role": "user", "content": text})
    if pin:
        mem.pin("c", p, priority=100)
    mem.append("c", {"role": "assistant", "content": "Noted."})
    for u in CORRECTIONS:  # the hotel first (in part), then the flight: the whole turn
        mem.append_many("c", [{"role": "user", "content": u}, {"role": "assistant", "content": "Noted."}])
    mem.append_many("c", [{"role": "user" if i % 2 else "assistant", "content": f"the weather is nice today ({i})"}
                          for i in range(30)])
    assert mem.cold.turns("c")[p].superseded_by is not None  # superseded whole, after in part
    return p


# (the turn's text, pinned by the caller or retrieved, the slice it is shown in, its old statements' words)
CASES = [
    (BOTH, True, "pinned", ["9am", "Hilton"]),                 # before: the 9am line labelled twice
    (BOTH + REST, True, "pinned", ["9am", "Hilton", "taxi"]),  # its rest took the whole's label before too
    (BOTH, False, "retrieved", ["9am", "Hilton"]),             # each statement's label, once (as before)
    (BOTH + REST, False, "retrieved", ["9am", "Hilton", "taxi"]),  # before: "[user] Can you book me a taxi?"
]


@pytest.mark.parametrize(("text", "pin", "slice_", "words"), CASES)
def test_each_line_of_the_turn_is_labelled_once(cold_memory: Memory, text: str, pin: bool, slice_: str,
                                                 words: list[str]) -> None:
    p = _setup(cold_memory, text, pin)
    cold_memory.append("c", {"role": "user", "content": QUESTION})
    ctx = cold_memory.context("c", QUESTION, BUDGET, record=False)
    assert any(it.slice == slice_ and p in it.positions for it in ctx.plan.items), ctx.plan.items
    lines = [ln for m in ctx.messages if m["role"] == "system"
             for ln in str(m["content"]).split("\n") if any(w in ln for w in words)]
    for w in words:  # each part of the turn shown on one line, with one label
        [line] = [ln for ln in lines if w in ln]
        assert line.count(MARK) == 1, line
    assert not any("11am" in ln or "Marriott" in ln for ln in lines)  # the new values stay current

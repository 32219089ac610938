"""A value swapped at the start of a sentence with only a comma between: "Not Tuesday,
Wednesday.", the shape "Not Tuesday but Wednesday" without its "but".

Invariants:
- A clause that is "not <value>, <value>" (an opener such as "no," before it, a unit
  after the new value at most: "Not 3, 5 boxes.") is a not-x-but-y correction, and
  revises the turn holding the old value. Before, only the form with "but" was read, and
  the comma form revised nothing.
- The second side must be a value and end the clause: "Not today, thanks.", "Not now,
  maybe later.", "Not Monday, I'm busy." swap nothing.
"""

from __future__ import annotations

import pytest
from supersede_harness import FILLER, fact_superseded

from tiermem import Memory
from tiermem.consolidation.classify import correction_cue, normalize


# (text, whether it is a not-x-but-y correction)
@pytest.mark.parametrize(("text", "cue"), [
    ("Not Tuesday, Wednesday.", True),  # a day for a day: before, no cue
    ("Not 3, 5 boxes.", True),  # a count with its unit: before, no cue
    ("No, not 7pm, 8pm.", True),  # an opener before it: before, no cue
    ("Not the 3rd, the 5th.", True),  # ordinals with their article: before, no cue
    ("Not Tuesday but Wednesday.", True),  # with 'but': read before too
    ("Not today, thanks.", False),  # thanks is no value
    ("Not now, maybe later.", False),  # 'now' is no value
    ("Not bad, thanks.", False),
    ("Not Monday, I'm busy.", False),  # a reason, no value, follows
])
def test_not_a_value_comma_a_value_is_a_correction(text: str, cue: bool) -> None:
    got = correction_cue(normalize(text), "user")
    assert (got is not None and got[0] == "not-x-but-y") is cue


# (an earlier request, a later turn, whether the later turn supersedes the request)
@pytest.mark.parametrize(("fact", "later", "superseded"), [
    # the day the request holds, swapped: before, not superseded (no cue)
    ("Book the plumber for Tuesday at 10am.", "Not Tuesday, Wednesday.", True),
    # a count with the same unit: before, not superseded (no cue)
    ("Order 3 boxes of printer paper.", "Not 3, 5 boxes.", True),
    # a polite refusal swaps nothing: superseded neither before nor after
    ("Book a table at Osteria Roma for Friday at 8pm.", "Not today, thanks.", False),
])
def test_a_value_swapped_after_a_comma_revises_its_turn(cold_memory: Memory, fact: str, later: str,
                                                        superseded: bool) -> None:
    assert fact_superseded(cold_memory, fact, later, FILLER) is superseded

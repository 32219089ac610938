"""A plan called off by its name: "Cancel the haircut.", "Call off the concert.".

Invariants:
- An order opening the turn that calls off a thing by its name ("cancel", "call off",
  "scratch" and "the / my / our / that" and a noun phrase of up to
  `supersede.PLAN_OBJECT_WORDS` words, then a mark, the end, or a time or place after
  "for", "on", "at"; `_PLAN_RETRACTION`) retracts the latest earlier request whose words
  after its verb share a content word with that name (`_called_off`). Before, "cancel"
  and "call off" were no cue at all: the booking stayed current.
- Only a request is called off, or a statement of the user's own arrangement that stands
  ("I have a dentist appointment on March 12.", `supersede._states_arrangement`): "Cancel
  my subscription." after "My Netflix subscription is $15 a month." orders a
  cancellation and corrects no fact; nor is a
  request that shares only its verb with the name ("Cancel the order for the blue
  chairs." after "Order a large pepperoni ..."), nor one that shares nothing ("Cancel my
  gym membership."). "Drop" is no call-off here ("drop the kids at school" is an
  errand).
"""

from __future__ import annotations

import pytest
from supersede_harness import FILLER, fact_superseded

from tiermem import Memory
from tiermem.consolidation.classify import normalize
from tiermem.consolidation.supersede import _PLAN_RETRACTION, _cue_text


# (text, the name of what it calls off, or None)
@pytest.mark.parametrize(("text", "name"), [
    ("Cancel the haircut.", "haircut"),
    ("Call off the concert on Friday.", "concert"),  # the day is no part of the name
    ("Scratch the landlord call, something came up.", "landlord call"),  # a reason after a mark
    ("Please cancel the dentist appointment.", "dentist appointment"),
    ("Cancel it.", None),  # no name: the bare retractions' rule
    ("Drop the plants off at my mom's.", None),  # an errand
    ("Scratch the surface first.", None),  # an idiom
    ("Cancel the whole thing with the caterers and the band.", None),  # no short name
])
def test_a_call_off_names_its_plan(text: str, name: str | None) -> None:
    m = _PLAN_RETRACTION.match(_cue_text(normalize(text)))
    assert (m.group("obj") if m else None) == name


# (an earlier turn, a later turn, whether the later turn supersedes it)
@pytest.mark.parametrize(("fact", "later", "superseded"), [
    # the booking called off by its name: before, not superseded (no cue)
    ("Book a haircut with Marco for Saturday at 10am.", "Cancel the haircut.", True),
    # 'call off': before, not superseded
    ("Book two tickets for the jazz concert on Friday.", "Call off the concert.", True),
    # a name of two words after 'please': before, not superseded
    ("Set up a dentist appointment for March 12 at 9am.", "Please cancel the dentist appointment.", True),
    # a reason after a mark: before, not superseded
    ("Add the premium plan to my account.", "Cancel the premium plan, it's too expensive.", True),
    # a fact, no request: superseded neither before nor after
    ("My Netflix subscription is $15 a month.", "Cancel my subscription.", False),
    # a fact of the user's own appointment that stands: called off as a booking asked
    # for is (before: not superseded; test_knowledge_update_wrong_kinds.py)
    ("I have a dentist appointment on March 12.", "Cancel the dentist appointment.", True),
    # one that is over: superseded neither before nor after
    ("I had a dentist appointment on March 12.", "Cancel the dentist appointment.", False),
    # the name shares only the request's verb: superseded neither before nor after
    ("Order a large pepperoni from Luigi's for 7pm tonight.", "Cancel the order for the blue chairs.", False),
    # no earlier plan of that name: superseded neither before nor after
    ("Order a large pepperoni from Luigi's for 7pm tonight.", "Cancel my gym membership.", False),
])
def test_a_call_off_retracts_the_request_it_names(cold_memory: Memory, fact: str, later: str,
                                                  superseded: bool) -> None:
    assert fact_superseded(cold_memory, fact, later, FILLER) is superseded

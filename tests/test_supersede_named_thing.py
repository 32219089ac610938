"""A correction about a thing of nobody in particular never revises the user's own state
because the two share a value; a change of mind, or a request opened by the value it
replaces, revises a choice, never a fact (a review of 2026-12-06, F2).

Invariants:
- A clause stating a value of a thing of nobody in particular ("the meeting is in
  Munich", "the flight leaves from Porto", "the rental car is a Honda") revises a
  statement of the user's own that names no thing and tells the user's state ("I work at
  Acme in Berlin", "I moved to Lisbon") only where that statement mentions the thing
  (`supersede._thing_fits`). Naming the old value ("..., not Berlin") scored 3.0 against
  any turn holding it: the employer, the home were hidden. A plan the user tells ("We're
  going to Lisbon in May", "I'm meeting the client in Berlin") is an event that such a
  thing may be, and is revised as before.
- A clause that only names the value replaced (", not a Toyota", ", not to Berlin") is
  part of the clause before it, not a clause of nobody in particular that may revise
  anyone's fact (`_OLD_VALUE_CLAUSE`).
- "I changed my mind" is no change of state: with what it is about ("about the trip"),
  it revises a request or a turn mentioning that thing, also at the end of a chain
  (`_choice_only`, `_choice_fits`); so does a correction saying only the value it
  replaces, the part before a request ("Instead of Lisbon, can you find flights from
  Porto?"), revise only a request.
"""

from __future__ import annotations

import pytest
from supersede_harness import superseded_positions

from tiermem import Memory


# (the user's turns, each answered "Noted.", and {superseded user turn: its superseder})
@pytest.mark.parametrize(("users", "want"), [
    # the review's F2b: the meeting's place is no employer's (before: {0: 1}, the job hidden)
    (["I work at Acme in Berlin.", "Actually the meeting is in Munich, not Berlin."], {}),
    # the review's F2: the flight's airport is no home (before: the move hidden, {0: 1, 1: 2})
    (["I live in Porto.", "I moved to Lisbon last month.", "Actually the flight leaves from Porto, not Lisbon."],
     {0: 1}),
    # the review's F2d: the part before the request is no statement (before: {0: 1})
    (["I moved to Lisbon last month.", "Instead of Lisbon, can you find flights from Porto?"], {}),
    # the review's F2c: a change of mind about a trip, no change of home, through the chain
    # of the home either (before: {0: 1, 1: 2})
    (["I live in Porto.", "I moved to Lisbon last month.", "I changed my mind about the trip to Porto, let's skip it."],
     {0: 1}),
    # a thing's value naming the user's own (before: {0: 1})
    (["I drive a Toyota.", "Actually the rental car is a Honda, not a Toyota."], {}),
    # "not to Berlin" is the brother's, no clause of nobody's (before: {0: 1})
    (["I live in Berlin.", "My brother moved to Munich, not to Berlin."], {}),
    # corrections that must keep working:
    # the user's own state changed
    (["I live in Porto.", "I moved to Lisbon last month."], {0: 1}),
    # an elliptical replacement of a plan's day
    (["Let's meet on Monday.", "Actually make it Tuesday."], {0: 1}),
    # the same thing by another determiner
    (["My flight is at 7am.", "The flight is now at 9am."], {0: 1}),
    # a plan told by its verb, which the named trip is
    (["We're going to Lisbon in May.", "Actually the trip is to Porto, not Lisbon."], {0: 1}),
    # the statement mentions the thing, by its verb ("meeting")
    (["I'm meeting the client in Berlin on Friday.", "Actually the meeting is in Munich, not Berlin."], {0: 1}),
    # a change of mind about a request's thing
    (["Book a trip to Boston for May.", "I changed my mind about the trip to Boston, let's skip it."], {0: 1}),
    # a change of mind with a new value, about nothing named
    (["I'd like an aisle seat.", "I changed my mind, I want a window seat."], {0: 1}),
    # a request opened by the value it replaces revises a request
    (["Find me flights from Lisbon.", "Instead of Lisbon, can you find flights from Porto?"], {0: 1}),
])
def test_a_named_thing_revises_only_its_own_value(cold_memory: Memory, users: list[str],
                                                  want: dict[int, int]) -> None:
    got = {q // 2: new // 2 for q, new in superseded_positions(cold_memory, users).items() if q % 2 == 0}
    assert got == want

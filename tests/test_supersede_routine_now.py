"""A routine that holds from now on: "I now go to the gym on weekday mornings".

Invariants:
- "<I / we / he / she / they> now <verb>", whatever the verb (`supersede.ROUTINE_NOW`),
  announces an update, found by meaning. Before, only "now" before a few verbs did ("now
  live", "now work", "now have"), so "I now go to the gym on weekday mornings." revised
  nothing.
- A routine's time is a value: a weekday in general ("weekday", "weekdays") and a part of
  the day said as a routine's ("Tuesday evenings", "every evening", "early in the
  morning", "at night"; slot "daypart"), not one day's ("this morning") nor a count of
  stays ("4 nights"). Before, "weekday mornings" held no value, so no new value was read.
- Such a routine revises only a turn that shares a content word with it, the same
  activity: any routine has a time, so "I now drink coffee in the evenings." never
  revises "I take my vitamins every morning."; nor another person's ("She now works from
  home on Fridays." after "I work from the office on Mondays.").
"""

from __future__ import annotations

import pytest
from supersede_harness import FILLER, fact_superseded

from tiermem import Memory
from tiermem.consolidation.supersede import detect_slots


# (text, the routine's values detected)
@pytest.mark.parametrize(("text", "slots"), [
    # a weekday in general and a part of the day: before, {}
    ("I now go to the gym on weekday mornings.", {"weekday": {"weekday"}, "daypart": {"mornings"}}),
    # before, only 'tuesday'
    ("I go to the gym on Tuesday evenings.", {"weekday": {"tuesday"}, "daypart": {"evenings"}}),
    ("I walk the dog every evening.", {"daypart": {"every evening"}}),  # before, {}
    ("I walk the dog early in the morning.", {"daypart": {"early in the morning"}}),  # before, {}
    ("This morning I ran.", {}),  # one day's morning is no routine's time
    ("I stayed 4 nights.", {"number": {"4 nights"}}),  # a count of stays, unchanged
])
def test_a_routines_time_is_a_value(text: str, slots: dict[str, set[str]]) -> None:
    assert detect_slots(text) == slots


# (an earlier routine, a later turn, whether the later turn supersedes it)
@pytest.mark.parametrize(("fact", "later", "superseded"), [
    # the same routine at another time, past two words after the verb: before, not superseded
    ("I go to the gym on Tuesday evenings.", "I now go to the gym on weekday mornings.", True),
    # a part of the day for a part of the day: before, not superseded
    ("I walk the dog around the park every evening.", "I now walk the dog early in the morning before work.",
     True),
    # another day and part of the day: before, not superseded
    ("I practise piano on Saturday mornings.", "I now practise piano on Sunday afternoons.", True),
    # another routine at another time: superseded neither before nor after (no shared word)
    ("I take my vitamins every morning.", "I now drink coffee in the evenings.", False),
    # someone else's routine: superseded neither before nor after
    ("I work from the office on Mondays.", "She now works from home on Fridays.", False),
    # another activity: superseded neither before nor after
    ("My sister goes to yoga on Monday evenings.", "I now go to pilates on weekday mornings.", False),
])
def test_a_routine_from_now_on_revises_the_same_routine(cold_memory: Memory, fact: str, later: str,
                                                        superseded: bool) -> None:
    assert fact_superseded(cold_memory, fact, later, FILLER) is superseded

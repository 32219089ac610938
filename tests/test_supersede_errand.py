"""A retraction word that opens an errand of its own: "Drop the kids at the pool at 5pm.".

Invariants:
- A retraction found by meaning names what it ends: a place or a time of its own in the
  clause of its cue (after "at", "to", "in", "on", "from", ...) that the target lacks
  makes it a new request, no retraction of that turn ("Drop the kids at the pool at
  5pm." after "Pick up the kids from school at 3pm." is a second errand that shares a
  word). Before, a shared word and "drop" were enough: the pickup was superseded.
- A retraction whose place or time is the target's own, or that names none, still
  retracts it ("Drop the dinner at Nando's." after "Book a table at Nando's ...", "Drop
  the yoga class, I'm too busy.": what follows the mark is a reason); "for" and "with"
  tell a purpose or a party, "to" and a number a value moved: no place of its own.
- A revision with a new value ("... instead") is no retraction: unchanged.
"""

from __future__ import annotations

import pytest
from supersede_harness import FILLER, fact_superseded

from tiermem import Memory


# (an earlier turn, a later turn, whether the later turn supersedes it)
@pytest.mark.parametrize(("fact", "later", "superseded"), [
    # a second errand with its own place and time: before, superseded (a shared 'kids')
    ("Collect the kids from football practice at 4pm.", "Drop the kids at the library at 6pm.", False),
    # a second errand with its own place: before, superseded (a shared 'parcel')
    ("Pick up the parcel from the post office tomorrow.", "Drop the parcel at my neighbour's house.", False),
    # its own destination, one word of it the target's ('dentist'): before, superseded
    ("Book a dentist check-up for next Tuesday.", "Drop the dentist forms at the front office.", False),
    # the place named is the target's own: a retraction, before and after
    ("Book a table at Nando's for Friday at 7pm.", "Drop the dinner at Nando's.", True),
    # no place or time: a retraction, before and after
    ("Sign me up for the yoga class on Monday.", "Drop the yoga class.", True),
    # a reason after the mark adds nothing to the name: a retraction, before and after
    ("Sign me up for the yoga class on Monday.", "Drop the yoga class, I'm too busy.", True),
    # the day named is the target's own: a retraction, before and after
    ("Sign me up for the yoga class on Monday.", "Forget the yoga class on Monday.", True),
    # 'for' tells a purpose, no place of its own: a retraction, before and after
    ("Order flowers for Saturday.", "Ignore the flowers for the party.", True),
    # 'to' and a number is a value moved, no destination: superseded before and after
    ("Set the monthly budget at $400.", "Drop the budget to $500.", True),
    # a revision with a new value, no retraction word: superseded before and after
    ("Collect the kids from football practice at 4pm.", "Actually, collect the kids at 5pm instead.", True),
])
def test_an_errand_is_no_retraction(cold_memory: Memory, fact: str, later: str, superseded: bool) -> None:
    assert fact_superseded(cold_memory, fact, later, FILLER) is superseded

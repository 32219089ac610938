"""A new value for "it", nothing named ("Sorry, it's the 14th."), revises what the user
just said, pinned or not (a review of 2026-12-06, F4).

Invariant: a bare match of a slot type ("make it Wednesday") revises only a load-bearing
turn, so that it does not take any turn that mentions a day; but a correction that gives
"it" or "that" a new value (`supersede._IT_VALUE`: "Sorry, it's ...", "Oops, that's ...")
is about the user's previous turn, which it revises on the slot type alone. "My flight is
on the 12th." was no pin (priority 30, where "on March 12" is 85; both 85 since the
day-of-month rule of classify.py), so "Sorry, it's the 14th." recorded nothing and the 12th
stayed current. A turn further back keeps the old
rule: the value of "it" is not looked for past the turn just before.
"""

from __future__ import annotations

import pytest
from supersede_harness import superseded_positions

from tiermem import Memory


# (the user's turns, each answered "Noted.", and {superseded user turn: its superseder})
@pytest.mark.parametrize(("users", "want"), [
    # the review's F4: an ordinal day, the fact no pin (before: {}, nothing recorded)
    (["My flight is on the 12th.", "Sorry, it's the 14th."], {0: 1}),
    # "that" and a count, of a request that is pinned (worked before too)
    (["We need the cabin for 3 nights.", "Oops, that's 4 nights."], {0: 1}),
    # a pinned date, which worked before too
    (["My flight is on March 12.", "Sorry, it's March 14."], {0: 1}),
    # the day of "it" is not looked for past the previous turn: an unpinned plan two user
    # turns back stays (as before; this row held "My flight is on the 12th.", no pin then)
    (["We're meeting her for dinner on the 12th.", "I had a long day at work.", "Sorry, it's the 14th."], {}),
    # a pinned date is revised by its kind from further back, the day of the month as its
    # month form always was ("My flight is on March 12.": {0: 2} before too)
    (["My flight is on the 12th.", "I had a long day at work.", "Sorry, it's the 14th."], {0: 2}),
    (["My flight is on March 12.", "I had a long day at work.", "Sorry, it's March 14."], {0: 2}),
])
def test_a_value_for_it_revises_the_previous_turn(cold_memory: Memory, users: list[str],
                                                  want: dict[int, int]) -> None:
    got = {q // 2: new // 2 for q, new in superseded_positions(cold_memory, users).items() if q % 2 == 0}
    assert got == want

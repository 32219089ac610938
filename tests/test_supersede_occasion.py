"""A correction of one occasion's event supersedes that occasion's statement, never another's.

A review found: "The team meeting on Monday is at 3pm." ... "The team meeting on Friday is
at 2pm." ... "Actually Friday's meeting is at 4pm." superseded MONDAY's statement and left
Friday's current. "Friday's" was read as a person's possessive (`_holder`: "named:friday",
as "Anna's meeting"), so Friday's statement, which names no Friday as its holder, was no
fact of the same holder (`may_revise`), and the only statement left was Monday's.

Invariants (consolidation.supersede, `_holder`, `_qualifying_occasions`):
- A capitalised occasion in the possessive ("Friday's", "Tomorrow's") says when, never whose.
- A correction about a named occasion (a possessive one, or one qualifying another value it
  gives: "The meeting on Friday is at 4pm.") supersedes no statement of another named
  occasion, whatever the order the two were said in; one that moves a thing to an occasion
  ("Actually make it Wednesday.") still revises the statement of the day it moves from, and
  so does one whose occasion no statement names ("Actually the meeting is on Tuesday at
  3pm." after "... on Monday at 3pm.": a move, not another occasion's event).
- A phone number is a value: a new number supersedes the old one however it is said.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder

ACK = {"role": "assistant", "content": "Got it."}
MONDAY = "The team meeting on Monday is at 3pm."
FRIDAY = "The team meeting on Friday is at 2pm."
FRIDAYS = "Actually Friday's meeting is at 4pm."
FILLER = [f"What is the weather like in city {i}?" for i in range(3)]  # questions: supersede nothing

# (user turns, for each the index of the user turn that supersedes it; None: current)
CASES = [
    # the review's repro: Friday's superseded (before: Monday's, and Friday's stayed current)
    ([MONDAY, FRIDAY, *FILLER, FRIDAYS], [None, 5, None, None, None, None]),
    # the other order: recency does not decide it either (before: Friday's stayed current)
    ([FRIDAY, MONDAY, *FILLER, FRIDAYS], [5, None, None, None, None, None]),
    # the correction names Monday's: Friday's stays current
    ([MONDAY, FRIDAY, *FILLER, "Actually Monday's meeting is at 4pm."], [5, None, None, None, None, None]),
    # a relative occasion in the possessive: tomorrow's, not today's
    (["The standup today is at 9am.", "The standup tomorrow is at 10am.", "Actually tomorrow's standup is at 11am."],
     [None, 2, None]),
    # an occasion qualifying the new time, no possessive: Friday's statement only
    ([MONDAY, FRIDAY, "Actually the team meeting on Friday is at 4pm."], [None, 2, None]),
    # a move to another day: the occasion is the new value, the old day's statement revised
    (["The dentist appointment is on Tuesday.", "Actually make it Wednesday."], [1, None]),
    # a move that gives the new day and the time, when no statement names the new day: the
    # old day's statement is revised (1da60fd left it current beside the new one)
    (["The meeting is on Monday at 3pm.", "Actually the meeting is on Tuesday at 3pm."], [1, None]),
    (["My flight is on Tuesday at 8am.", "Actually my flight is Wednesday at 9am."], [1, None]),
    (["The call is today at 5pm.", "Actually the call is tomorrow at 5pm."], [1, None]),
    (["The standup is at 9am on Monday.", "Actually the standup is at 9am on Tuesday."], [1, None]),
    (["My meeting with Anna is on Friday.", "Actually my meeting with Anna is on Thursday at 2pm."], [1, None]),
    # phone numbers: a new number supersedes the old, however it is said
    (["Call me on 555-1111.", "Actually my number is 555-2222."], [1, None]),
    (["Call me on 555-1111.", "Call me on 555-2222 instead."], [1, None]),
    (["My number is 555-1111.", "Actually my number is 555-2222."], [1, None]),
]


def _say(mem: Memory, texts: list[str]) -> None:
    """Each of `texts` as a user turn answered "Got it." (user turn i at position 2*i)."""
    for t in texts:
        mem.append("k", {"role": "user", "content": t})
        mem.append("k", ACK)
    mem.catch_up("k")


def _superseded_by(mem: Memory, n: int) -> list[int | None]:
    """For each of the `n` user turns, the user turn (its index) that superseded it."""
    by = {r.position: r.superseded_by for r in mem.cold.turns("k")}
    return [None if by[2 * i] is None else by[2 * i] // 2 for i in range(n)]


@pytest.mark.parametrize(("texts", "expected"), CASES)
def test_a_correction_supersedes_its_own_occasion(tmp_path: Path, embedder: FastEmbedder, texts: list[str],
                                                  expected: list[int | None]) -> None:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        _say(mem, texts)
        assert _superseded_by(mem, len(texts)) == expected

"""In a group chat the message's `name` is the holder of its "I" and "my".

Invariants (consolidation/supersede.py, `voices_may_revise`; tiers.models.speaker_name):
- Two different named speakers ("alice", "bob"; compared without case or surrounding
  spaces): a first-person clause of one never revises a first-person clause of the other
  (Bob's "I moved to Lisbon" is not Alice's home), nor does one's bare retraction take
  back the other's request. Before, the name was read only for the index text, and Bob's
  move hid Alice's home.
- A clause of nobody in particular still revises across speakers ("Actually the team
  meeting is at 5pm" by Bob after Alice's "The team meeting is at 4pm"), as it does
  within one speaker's turns.
- A message without a name may be anyone's: it revises, and is revised by, a named one as
  before (a client may name the speaker on some messages only, or begin to midway).
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from tiermem import Memory

CONV = "c"


def _superseded(mem: Memory, turns: Sequence[tuple[str | None, str]]) -> dict[int, int]:
    """Append user turns as (speaker name or None, text), each answered "Noted.", and map
    each superseded position, whole turn or statement, to the position that superseded it."""
    msgs: list[dict[str, str]] = []
    for name, text in turns:
        msgs += [{"role": "user", "content": text, **({"name": name} if name else {})},
                 {"role": "assistant", "content": "Noted."}]
    mem.append_many(CONV, msgs)
    mem.catch_up(CONV)
    rows = mem.cold.turns(CONV)
    out = {r.position: r.superseded_by for r in rows if r.superseded_by is not None}
    out.update((s.position, s.superseded_by) for s in mem.cold.superseded_statements(CONV, [r.position for r in rows]))
    return out


# (user turns as (name, text), each answered "Noted."; superseded position -> superseder)
@pytest.mark.parametrize(("turns", "expected"), [
    # the review's F3: Bob's move is not Alice's home; before, {0: 2}
    ([("alice", "I live in Porto."), ("bob", "I moved to Lisbon last month.")], {}),
    # the same with a budget; before, Alice's budget was replaced by Bob's
    ([("alice", "My budget for the trip is $2,000."), ("bob", "Actually my budget is $3,000 now.")], {}),
    # Bob's "never mind" does not take back Alice's request; before, {0: 2}
    ([("alice", "Book a table at Nong's for 7pm."), ("bob", "Never mind.")], {}),
    # one speaker's own move, the name in another case: superseded as before
    ([("alice", "I live in Porto."), ("Alice ", "I moved to Lisbon last month.")], {0: 2}),
    # one speaker's own request taken back: as before
    ([("bob", "Book a table at Nong's for 7pm."), ("bob", "Never mind.")], {0: 2}),
    # a fact of nobody in particular, corrected by another speaker: as before
    ([("alice", "The team meeting is at 4pm on Friday."),
      ("bob", "Actually the team meeting is at 5pm, not 4pm.")], {0: 2}),
    # unnamed, then named: may be the same user (today's behaviour, kept)
    ([(None, "I live in Porto."), ("bob", "I moved to Lisbon last month.")], {0: 2}),
    # named, then unnamed: likewise
    ([("alice", "I live in Porto."), (None, "I moved to Lisbon last month.")], {0: 2}),
])
def test_a_named_speakers_i_is_their_own(cold_memory: Memory, turns: Sequence[tuple[str | None, str]],
                                         expected: dict[int, int]) -> None:
    assert _superseded(cold_memory, turns) == expected

"""Namespace recall never brings back a fork family's copy of the asking conversation's turns.

Invariants (planner.family, planner.candidates `namespace_hits`):
- A fork copies positions 0..up_to; that prefix, recalled from another member of the
  family (an ancestor, a descendant, transitively: a fork of a fork, or a branch of a
  common ancestor), would come back as "another conversation", duplicated and without the
  asking conversation's own correction marks. It is skipped, in both directions.
- What a branch added after its fork stays recallable from every other member, and so do
  unrelated conversations' turns.
- Both search paths: the turn cache's tables (a namespace of a few conversations) and the
  cold tier's indexes (more than NAMESPACE_IN_MEMORY_CONVERSATIONS), the latter asked for
  more hits while the family's copies crowd the k best.
Both engines (a SQLite file; a fresh PostgreSQL schema: tests/conftest.py `engine_config`).
"""

from __future__ import annotations

import pytest
from fork_family_helpers import FILLERS, T0, ask, recalled

from tiermem import Config, Memory

TRIP = [("user", "My dinner budget is 40 EUR."),        # 0: copied into trip-alt and trip-alt2
        ("assistant", "Noted: dinner budget 40 EUR."),  # 1: copied into trip-alt and trip-alt2
        ("user", "I like Italian food for dinner."),    # 2: copied into trip-alt
        ("assistant", "Noted, Italian dinner.")]        # 3: copied into trip-alt
AFTER = {  # what each member adds after its fork
    "trip": ["Actually my dinner budget is 60 EUR now.", "Updated: dinner budget 60 EUR."],
    "trip-alt": ["In this plan my dinner budget is 55 EUR.", "Noted: dinner budget 55 EUR here."],
    "trip-alt2": ["For the cheap plan my dinner budget is 45 EUR.", "Noted: dinner budget 45 EUR."],
}
# the last position each pair of members shares (fork points: trip-alt at 3, trip-alt2 of it at 1)
SHARED = {("trip", "trip-alt"): 3, ("trip", "trip-alt2"): 1, ("trip-alt", "trip-alt2"): 1}


def _shared(a: str, b: str) -> int | None:
    return SHARED.get((a, b), SHARED.get((b, a)))


def _build(mem: Memory, fillers: int) -> None:
    for i, (role, text) in enumerate(TRIP):
        mem.append("trip", {"role": role, "content": text}, created_at=T0 + i * 60)
    mem.fork("trip", 3, new_id="trip-alt")
    mem.fork("trip-alt", 1, new_id="trip-alt2")
    for conv, texts in AFTER.items():
        start = len(mem.history(conv))
        for j, text in enumerate(texts):
            mem.append(conv, {"role": "user" if j % 2 == 0 else "assistant", "content": text},
                       created_at=T0 + 600 + (start + j) * 60)
    mem.append("friend", {"role": "user", "content": "My friend's dinner budget is 30 EUR."}, created_at=T0)
    ask(mem, AFTER, fillers)  # each member asks (a user turn: every member's log is of even length)


@pytest.mark.parametrize("fillers", FILLERS)  # each search path: the turn cache's tables, the cold tier's indexes
@pytest.mark.parametrize("asking", [
    "trip",       # the root: its child's and grandchild's copies skipped
    "trip-alt",   # the middle: its parent's 0..3 and its child's 0..1 skipped
    "trip-alt2",  # the grandchild: 0..1 of both ancestors skipped, trip-alt's #2, #3 not (not in its prefix)
])
def test_fork_family_copies_not_recalled(engine_config: Config, fillers: int, asking: str) -> None:
    with Memory(engine_config) as mem:
        _build(mem, fillers)
        got = recalled(mem, asking)
        copies = {(c, p) for c, p in got if c in AFTER and p <= (_shared(asking, c) or -1)}
        assert copies == set()
        for member in AFTER:
            if member != asking:
                # its own budget line after its fork (position 4 of the root and of trip-alt, 2 of trip-alt2)
                assert (member, 2 if member == "trip-alt2" else 4) in got
        assert ("friend", 0) in got  # an unrelated conversation: recalled as before

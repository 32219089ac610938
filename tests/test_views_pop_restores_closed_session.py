"""A popped correction in a later session gives the old value back to a closed session's view.

Invariants (consolidation.views, `ViewMaintainer.restorable_views`; docs/design.md
invariant 4; README "Design notes", a popped correction):
- Session s0 states a value, a later session s1 corrects it, the correction is retracted
  (the adapters' pop): s0's view shows the old value again, as the rolling view, `facts()`
  and the context do. s0 gets no turn after its end and cites no popped line, so neither
  coverage nor `outdated_views` picks it: the sweep (`Memory.consolidate()`, a scheduler
  run) and a refresh by name (`Memory.consolidate(conv)`) pick it for what came back.
- A statement of a turn that held in part comes back too (the line citing the turn grows).
- Picked once: a view whose summarizer was given the restored turn and left it out (for
  its budget) is not picked again by every later sweep.
Real store (a SQLite file), the extractive summarizer (the default), the real embedder.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from tiermem import Memory
from tiermem.consolidation.summarize import SourceTurn, Summarizer
from tiermem.tiers.formats import RETRACT_TYPE
from tiermem.tiers.warm import Sentence

OLD = "My hotel is the Hilton in Lisbon."
BOTH = "My hotel is the Hilton in Lisbon and my budget is 3000 euros."
STAYS = "My budget is 3000 euros."
CORRECTION = "Change of plan: my hotel is now the Marriott, not the Hilton."
FILLER = ["Tell me about the museums in the city.", "There are several art museums downtown."]


def _say(mem: Memory, text: str, session: str, role: str = "user") -> int:
    [p] = mem.append_many("c", [{"role": role, "content": text}], session_id=session)
    return p


def _current(mem: Memory, session: str) -> dict[str, tuple[int, ...]]:
    view = mem.warm.latest("c", "session", session)
    assert view is not None
    return {s.text: s.positions for s in view.sentences if s.status == "current"}


def _closed_session_then_popped(mem: Memory, first: str, pop_session: str | None) -> tuple[int, int]:
    """s0 says `first` (and filler), s1 corrects it, views refreshed, the correction
    popped: (position of `first`, position of the correction)."""
    old = _say(mem, first, "s0")
    for i, text in enumerate(FILLER):
        _say(mem, text, "s0", ("user", "assistant")[i % 2])
    corr = _say(mem, CORRECTION, "s1")
    _say(mem, "Updated to the Marriott.", "s1", "assistant")
    mem.catch_up("c")
    mem.consolidate("c")
    assert OLD not in " ".join(_current(mem, "s0"))  # superseded: s0's view left it out
    mem.append("c", {"type": RETRACT_TYPE, "position": corr}, session_id=pop_session)
    mem.catch_up("c")
    return old, corr


@pytest.mark.parametrize("by_name, pop_session", [
    (False, "s1"),  # the sweep (Memory.consolidate(), as a scheduler run), the pop in s1
    (False, None),  # the sweep, a retraction row without a session
    (True, "s1"),  # a refresh by name (Memory.consolidate("c")): each session view checked
])
def test_a_closed_session_gets_the_old_value_back(cold_memory: Memory, by_name: bool,
                                                  pop_session: str | None) -> None:
    mem = cold_memory
    old, corr = _closed_session_then_popped(mem, OLD, pop_session)
    mem.consolidate("c" if by_name else None)
    assert _current(mem, "s0").get(OLD) == (old,)  # current again, citing its own turn
    for view in mem.warm.sessions("c"):  # the popped correction is in no session view
        assert not [s for s in view.sentences if corr in s.positions]


def test_a_statement_of_a_turn_held_in_part_comes_back(cold_memory: Memory) -> None:
    mem = cold_memory
    old, _corr = _closed_session_then_popped(mem, BOTH, "s1")
    assert mem.cold.superseded_statements("c", [old])  # the correction took one statement
    assert _current(mem, "s0").get(STAYS.lower()) == (old,)  # the rest of the turn held
    mem.consolidate()
    assert _current(mem, "s0").get(BOTH) == (old,)  # the whole turn again


class Leaving:
    """The Memory's own summarizer, leaving out the lines that cite `left_out` (as one
    over its budget would), and recording the positions each call was given."""

    def __init__(self, inner: Summarizer, left_out: int) -> None:
        self.inner = inner
        self.name = inner.name
        self.left_out = left_out
        self.calls: list[list[int]] = []

    def summarize(self, turns: Sequence[SourceTurn], *, target_tokens: int) -> list[Sentence]:
        self.calls.append([t.position for t in turns])
        return [s for s in self.inner.summarize(turns, target_tokens=target_tokens)
                if self.left_out not in s.positions]


def test_a_view_given_the_old_value_is_picked_once(cold_memory: Memory) -> None:
    mem = cold_memory
    old, corr = _closed_session_then_popped(mem, OLD, "s1")
    leaving = Leaving(mem.views.summarizer, old)
    mem.views.summarizer = leaving
    mem.consolidate()
    s0 = set(range(old, corr))  # s0's turns: a call given only those is s0's refresh
    given = [c for c in leaving.calls if old in c and set(c) <= s0]
    assert len(given) == 1  # s0's refresh was given the restored turn, once
    assert OLD not in _current(mem, "s0")  # and left it out
    calls = len(leaving.calls)
    for _ in range(2):  # later sweeps: nothing picked, no summarizer call
        again = mem.consolidate()
        assert (int(again), again.picked) == (0, 0)
    assert len(leaving.calls) == calls

"""Namespace recall of a turn forks copied, where the member that would show it has hidden its copy.

Invariants (planner.family `copied_prefixes`, per position):
- Of other members holding copies of one turn, the first ranked (closest to the asker,
  else the original) shows it; where that member has since hidden its copy (a
  retraction: what a pop or an edit writes too), the next member's still-active copy is
  recalled instead, once. Positions it did not hide stay with it.
- A correction is no hiding: the keeper's copy stays the one shown, labelled superseded
  by the correction, and the fork's unlabelled copy of the same text is not shown again.
- The asker's own copies stay skipped even where it retracted them: recalling the fork's
  copy would undo the asker's retraction.
- Both search paths (the turn cache's tables; the cold tier's indexes past
  NAMESPACE_IN_MEMORY_CONVERSATIONS) and both engines (tests/conftest.py `engine_config`).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fork_family_helpers import BASE, FILLERS, T0, ask, retrieved, say

from tiermem import Config, Memory


def _retract(mem: Memory, conv: str, *positions: int) -> None:
    for n, p in enumerate(positions):
        mem.append(conv, {"type": "tiermem.retract", "position": p}, created_at=T0 + 900 + n)


def retract(mem: Memory) -> str:
    """b; its fork c (0..3 copied); b retracts #0 and #1; a third conversation a asks."""
    say(mem, "b", BASE, T0)
    mem.fork("b", 3, new_id="c")
    _retract(mem, "b", 0, 1)
    say(mem, "a", ["Planning a trip to Rome."], T0)
    return "a"


def chain(mem: Memory) -> str:
    """b; its fork c; c's fork d (0..3 each); b retracts #0 and #1, c retracts #0; a asks."""
    say(mem, "b", BASE, T0)
    mem.fork("b", 3, new_id="c")
    mem.fork("c", 3, new_id="d")
    _retract(mem, "b", 0, 1)
    _retract(mem, "c", 0)
    say(mem, "a", ["Planning a trip to Rome."], T0)
    return "a"


def correct(mem: Memory) -> str:
    """b; its fork c; b corrects the budget (a supersession, nothing hidden); a asks."""
    say(mem, "b", BASE, T0)
    mem.fork("b", 3, new_id="c")
    say(mem, "b", ["Correction: my dinner budget is 90 EUR, not 40."], T0 + 600)
    say(mem, "a", ["Planning a trip to Rome."], T0)
    return "a"


def asker_retracts(mem: Memory) -> str:
    """b; its fork c; b retracts its own #0 and #1 and asks."""
    say(mem, "b", BASE, T0)
    mem.fork("b", 3, new_id="c")
    _retract(mem, "b", 0, 1)
    return "b"


# (scenario, the member each copied position 0..3 is recalled from, None: from none)
SCENARIOS: dict[str, tuple[Callable[[Memory], str], list[str | None]]] = {
    "retract": (retract, ["c", "c", "b", "b"]),          # b hid 0, 1: c's copies pass up; 2, 3 stay b's
    "chain": (chain, ["d", "c", "b", "b"]),              # 0 hidden in b and c: d's; 1 hidden in b only: c's
    "correct": (correct, ["b", "b", "b", "b"]),          # superseded, not hidden: b's, labelled
    "asker_retracts": (asker_retracts, [None, None, None, None]),  # the asker's own copies: never c's
}
MEMBERS = ("b", "c", "d")


def _build(mem: Memory, scenario: str, fillers: int) -> str:
    asking = SCENARIOS[scenario][0](mem)
    ask(mem, [asking], fillers)
    return asking


@pytest.mark.parametrize("fillers", FILLERS)  # each search path: the turn cache's tables, the cold tier's indexes
@pytest.mark.parametrize("scenario", [
    "retract",         # the repro: before, '40 EUR' was recalled from no one
    "chain",           # hidden in two members: the third's copy
    "correct",         # a correction hides nothing
    "asker_retracts",  # the asker's retraction is not undone from its fork
])
def test_hidden_copy_passes_to_the_next_member(engine_config: Config, scenario: str, fillers: int) -> None:
    with Memory(engine_config) as mem:
        asking = _build(mem, scenario, fillers)
        names, items = retrieved(mem, asking)
        got = {(names.get(i.conversation_id, "?"), p) for i in items for p in i.positions}
        for position, keeper in enumerate(SCENARIOS[scenario][1]):
            holders = {c for c, p in got if c in MEMBERS and p == position}
            assert holders == ({keeper} if keeper else set()), (position, sorted(got))
        if scenario == "correct":  # b's correction recalled, its superseded copy labelled so
            assert ("b", 4) in got, sorted(got)
            assert any("superseded by #4" in i.reason for i in items if names.get(i.conversation_id) == "b"
                       and 0 in i.positions), [i.reason for i in items]

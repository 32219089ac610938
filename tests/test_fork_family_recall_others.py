"""Namespace recall shows one copy of a turn that forks copied between OTHER members of a family.

Invariants (planner.family `copied_prefixes`, planner.candidates `namespace_hits`):
- The asker's own copies are skipped (tests/test_fork_family_recall.py). Two other members
  holding one text at a position (b#1 and its fork's copy c#1) are not both recalled: the
  member closest to the asker in the fork tree keeps it (its parent before its sibling
  before the sibling's fork; an erased parent still counted as a step), else the original
  (the member the others copied it from).
- What each member added after its fork stays recallable, and unrelated conversations too.
- Both search paths (the turn cache's tables; the cold tier's indexes past
  NAMESPACE_IN_MEMORY_CONVERSATIONS) and both engines (tests/conftest.py `engine_config`).
"""

from __future__ import annotations

import pytest
from fork_family_helpers import BASE, FILLERS, T0, ask, recalled, say

from tiermem import Config, Memory


def third(mem: Memory) -> str:
    """b, its fork c (0..3 copied), and an unrelated asker a."""
    say(mem, "b", BASE, T0)
    mem.fork("b", 3, new_id="c")
    say(mem, "b", ["In b my dinner budget rose to 70 EUR."], T0 + 600)
    say(mem, "c", ["In c my dinner budget fell to 30 EUR."], T0 + 600)
    say(mem, "a", ["Planning a trip to Rome."], T0)
    return "a"


def sibling(mem: Memory, *, erase_parent: bool) -> str:
    """p; its forks a (0 copied) and b (0..3); b's fork c (0..3); a asks. The parent
    erased or not."""
    say(mem, "p", BASE, T0)
    mem.fork("p", 0, new_id="a")
    mem.fork("p", 3, new_id="b")
    mem.fork("b", 3, new_id="c")
    say(mem, "b", ["In b my dinner budget rose to 70 EUR."], T0 + 600)
    say(mem, "c", ["In c my dinner budget fell to 30 EUR."], T0 + 600)
    if erase_parent:
        mem.delete_conversation("p")
    return "a"


# (scenario, the member each copied position 1..3 is recalled from, or None: from none
# but that one; members' own turns after their forks, each recalled)
SCENARIOS = {
    "third": (third, "b", [("b", 4), ("c", 4)]),  # a unrelated: the original b keeps 0..3
    "sibling": (lambda m: sibling(m, erase_parent=False), "p", [("b", 4), ("c", 4)]),  # a's parent keeps 1..3
    "sibling_parent_erased": (lambda m: sibling(m, erase_parent=True), "b", [("b", 4), ("c", 4)]),  # 2 forks, not 3
}
MEMBERS = ("p", "b", "c")


def _build(mem: Memory, scenario: str, fillers: int) -> str:
    asking = SCENARIOS[scenario][0](mem)
    say(mem, "friend", ["My friend's dinner budget is 30 EUR."], T0)
    ask(mem, [asking], fillers)
    return asking


@pytest.mark.parametrize("fillers", FILLERS)  # each search path: the turn cache's tables, the cold tier's indexes
@pytest.mark.parametrize("scenario", [
    "third",                  # b#1 and c#1: a third conversation asks
    "sibling",                # p#1, b#1, c#1: a, b's sibling, asks; its parent p is closest
    "sibling_parent_erased",  # b#1, c#1: p erased, b is one fork nearer a than c
])
def test_one_copy_of_a_turn_forks_copied(engine_config: Config, scenario: str, fillers: int) -> None:
    with Memory(engine_config) as mem:
        asking = _build(mem, scenario, fillers)
        got = recalled(mem, asking)
        _, keeper, own = SCENARIOS[scenario]
        for position in range(len(BASE)):
            holders = {c for c, p in got if c in MEMBERS and p == position}
            assert len(holders) <= 1, (position, sorted(got))  # before: b's and c's copy both
            assert holders <= {keeper}, (position, sorted(got))
        # the budget line, a copy in every member: recalled once, from the keeper (asker
        # a holds its own #0 in the sibling scenarios, so there it is #2)
        assert (keeper, 0 if scenario == "third" else 2) in got, sorted(got)
        for hit in own:  # what each member added after its fork
            assert hit in got, sorted(got)
        assert ("friend", 0) in got  # an unrelated conversation: recalled as before

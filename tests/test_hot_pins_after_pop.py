"""A popped correction is no pin of the hot set, and what it had superseded is one again
(tiermem.hotlink `as_seen`, Memory `_hot_follows_pops`).

9d3ac3a and ca2a0b4 read supersession past popped turns on the cold paths (the pinned
block, retrieved lines, marks, facts, search, the inspector), but the hot set took its
pins from the raw turn rows (`pin_state`): after "Actually I'm allergic to cashews, not
peanuts." was popped, the set kept the popped correction pinned at the correction's
priority (never evicted, its tokens held against the hot budget, counted in the stats'
pins) and left "I'm allergic to peanuts." unpinned, current again though it is, while the
pinned block showed the reverse. A rebuild read the same raw rows, so nothing ever
brought the set back. No context showed it (the planner's pinned block and labels read
the log, and a hot payload is the raw message), so the set's pins are what is checked.

Fails on the code before: every case (the set pinned the popped #2 and not turn 0, after
the pop and after a rebuild).
"""

from __future__ import annotations

import pytest

from tiermem import Memory
from tiermem.consolidation.classify import PRIORITY
from tiermem.tiers.formats import RETRACT_TYPE

CONV = "c"
PEANUTS = "I'm allergic to peanuts."
BOTH = "I'm allergic to peanuts and my budget is 500 euros."
CASHEWS = "Actually I'm allergic to cashews, not peanuts."  # popped: user turn #2
BUDGET = "Actually my budget is 800 euros now."  # user turn #4, kept


def _hot_pins(mem: Memory) -> dict[int, int]:
    hs = mem.hot.read(CONV).hot  # type: ignore[union-attr]
    assert hs is not None
    return {t.position: t.priority for t in hs.turns if t.pinned}


@pytest.mark.parametrize(("users", "want"), [
    # a turn wholly superseded by the popped correction: current again, the classifier's pin
    ([PEANUTS, CASHEWS], {0: PRIORITY["constraint"]}),
    # a statement of it superseded by the popped one, the other by a kept one (9d3ac3a's
    # shape): current in part, pinned; the kept correction stays pinned
    ([BOTH, CASHEWS, BUDGET], {0: PRIORITY["constraint"], 4: PRIORITY["correction"]}),
])
def test_the_hot_set_pins_what_the_log_shows_after_a_pop(memory: Memory, users: list[str],
                                                          want: dict[int, int]) -> None:
    for u in users:
        memory.append_many(CONV, [{"role": "user", "content": u}, {"role": "assistant", "content": "Noted."}])
    memory.catch_up(CONV)
    assert 2 in _hot_pins(memory) and 0 not in _hot_pins(memory)  # the correction's pin, before the pop
    memory.append(CONV, {"type": RETRACT_TYPE, "position": 2})
    assert _hot_pins(memory) == want  # before: {2: 90, ...}, turn 0 unpinned
    # a rebuild from the log gives the same set (before: the raw rows, the popped pin again)
    memory.hot.refresh(CONV)  # type: ignore[union-attr]
    assert _hot_pins(memory) == want

"""A second correction of a turn already marked in part (planner/marks.py).

A review of 1826275 found that when a turn the context showed raw was marked for one
superseded statement and the user then corrected its other statement, the next context
started a new epoch ("a shown turn was superseded in part since: #0", a cache miss): the
mark counted as a line showing the turn, as a retrieved line would. And once the whole
turn was superseded its mark carried the label twice ("[user · SUPERSEDED, not current:
... · SUPERSEDED, not current: ...] My flight lands at 9am").

Invariants:
- A turn the context shows raw and by a mark alone, superseded further since (another
  statement, or the whole turn), gets a new mark appended within the epoch: no new
  epoch, the previous context its prefix; the new mark holds what is new (a statement
  the earlier mark labelled is not labelled again), and a later call appends nothing.
- Every marked line carries one label, whether the turn was superseded in part first and
  whole later or in one step; every superseded statement is marked, and once.
"""

from __future__ import annotations

import pytest

from tiermem import Memory

MARK = "SUPERSEDED, not current"
BUDGET = 2000  # the whole log of every case fits
BOTH = "My flight lands at 9am and my hotel is the Hilton."
HOTEL = "Actually my hotel is the Marriott now."
FLIGHT = "Actually my flight lands at 11am now."


def _say(mem: Memory, users: list[str]) -> None:
    for u in users:
        mem.append_many("c", [{"role": "user", "content": u}, {"role": "assistant", "content": "Noted."}])


def _marked(messages: list[dict[str, object]]) -> list[str]:
    """Every line of the context that carries the mark."""
    return [ln for m in messages if isinstance(m.get("content"), str)
            for ln in str(m["content"]).split("\n") if MARK in ln]


# (the first correction, the second, the statement each one's mark shows)
@pytest.mark.parametrize(("first", "second", "old_first", "old_second"), [
    (HOTEL, FLIGHT, "my hotel is the Hilton", "My flight lands at 9am"),  # the reviewer's (before: new epoch)
    (FLIGHT, HOTEL, "My flight lands at 9am", "my hotel is the Hilton"),  # the other statement first
])
def test_a_second_part_is_marked_within_the_epoch(cold_memory: Memory, first: str, second: str,
                                                  old_first: str, old_second: str) -> None:
    _say(cold_memory, [BOTH, first])
    cold_memory.append("c", {"role": "user", "content": "What should I pack?"})
    one = cold_memory.context("c", "What should I pack?", BUDGET)
    [mark] = _marked(one.messages)
    assert old_first in mark
    cold_memory.append_many("c", [{"role": "assistant", "content": "Light clothes."},
                                  {"role": "user", "content": second}])
    assert cold_memory.cold.turns("c")[0].superseded_by is not None  # the whole turn now
    two = cold_memory.context("c", second, BUDGET)
    # no cache miss: the previous context is the prefix, the new mark appended after it
    assert not two.plan.cache.new_epoch, two.plan.cache.reason
    assert two.messages[:len(one.messages)] == one.messages
    [new] = _marked(two.messages[len(one.messages):])
    assert old_second in new and old_first not in new  # what is new, once
    assert new.count(MARK) == 1
    assert two.tokens <= BUDGET
    # nothing corrected since: nothing appended
    cold_memory.append_many("c", [{"role": "assistant", "content": "Noted."},
                                  {"role": "user", "content": "And the weather?"}])
    three = cold_memory.context("c", "And the weather?", BUDGET)
    assert not three.plan.cache.new_epoch
    assert three.messages[:len(two.messages)] == two.messages
    assert _marked(three.messages) == [mark, new]


# (the corrections in order; the statements the marked lines show, in text order)
@pytest.mark.parametrize("corrections", [
    [HOTEL, FLIGHT],  # the reviewer's: in part, then whole (before: the first line labelled twice)
    [FLIGHT, HOTEL],  # the other order
])
def test_a_context_planned_anew_labels_each_line_once(cold_memory: Memory, corrections: list[str]) -> None:
    _say(cold_memory, [BOTH, *corrections])
    assert cold_memory.cold.turns("c")[0].superseded_by is not None
    cold_memory.append("c", {"role": "user", "content": "When does my flight land and which hotel?"})
    ctx = cold_memory.context("c", "When does my flight land and which hotel?", BUDGET, record=False)
    lines = _marked(ctx.messages)
    assert [ln.count(MARK) for ln in lines] == [1, 1]
    assert sum("My flight lands at 9am" in ln for ln in lines) == 1
    assert sum("my hotel is the Hilton" in ln for ln in lines) == 1
    assert not any("11am" in ln or "Marriott" in ln for ln in lines)

"""A popped correction of one statement makes its turn current in part again, everywhere.

A review found that after "Actually my hotel is the Marriott now." was popped (a
`tiermem.retract` row), the next context still showed "[user · SUPERSEDED, not current:
... then replaced] my hotel is the Hilton." and no Marriott anywhere: the model was told
the Hilton is not current with nothing replacing it. The turn "My flight lands at 9am
and my hotel is the Hilton." had both statements corrected (the hotel by the popped
turn, the flight by a later one), so its whole-turn ``superseded_by`` was set when the
last one went, to the flight's correction, which no pop hides: readers took the whole
turn as superseded and labelled every statement of it.

Invariants (tiers.statements.Hidden, `revived`):
- A turn of which a statement only hidden turns superseded is current in part, whatever
  its ``superseded_by`` says: the statement shows as current, the others keep their
  labels, on every path that labels a turn (a retrieved line, the whole-log mark, a
  pinned line, ``facts()``, a search hit's status, the inspector's Log page).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tiermem import Memory
from tiermem.inspector import data
from tiermem.tiers.formats import RETRACT_TYPE
from tiermem.tiers.models import HIT_SUPERSEDED_IN_PART, message_text

MARK = "SUPERSEDED, not current"
BOTH = "My flight lands at 9am and my hotel is the Hilton."
HOTEL = "Actually my hotel is the Marriott now."  # popped
FLIGHT = "Actually my flight lands at 11am now."
FILLER = ["I had a long day at work.", "The weather was lovely this morning.", "My cat knocked a glass over.",
          "I finally finished that novel.", "We watched a film last night.", "The bus was late again today."]
SMALL_BUDGET = 300  # tokens: the tail leaves turn 0 out, so it is retrieved or pinned
WHOLE_BUDGET = 2000  # tokens: the whole log fits, turn 0 shows raw and by a mark
PIN_BUDGET = 1600  # tokens: the pinned share holds turn 0's line, the tail (24 exchanges after it) does not


def _say(mem: Memory, users: list[str], reply: str = "Noted.") -> None:
    for u in users:
        mem.append_many("c", [{"role": "user", "content": u}, {"role": "assistant", "content": reply}])


def _both_corrected_then_hotel_popped(mem: Memory, filler: int) -> None:
    _say(mem, [BOTH, HOTEL, FLIGHT])  # positions 0, 2, 4 (replies between)
    mem.catch_up("c")
    assert mem.cold.turns("c")[0].superseded_by == 4  # whole, once its last statement went
    mem.append("c", {"type": RETRACT_TYPE, "position": 2})
    _say(mem, (FILLER * 4)[:filler], "I see.")
    mem.catch_up("c")


def _lines(mem: Memory, query: str, budget: int) -> list[str]:
    """The lines of the context for `query` that show turn 0's statements."""
    mem.append("c", {"role": "user", "content": query})
    ctx = mem.context("c", query, budget, namespace_recall=False)
    return [ln for m in ctx.messages for ln in message_text(m).splitlines() if "Hilton" in ln or "9am" in ln]


def _retrieved(mem: Memory) -> list[str]:
    _both_corrected_then_hotel_popped(mem, 12)
    return _lines(mem, "Which hotel am I staying at?", SMALL_BUDGET)


def _whole_log_mark(mem: Memory) -> list[str]:
    _both_corrected_then_hotel_popped(mem, 0)
    return _lines(mem, "What should I pack?", WHOLE_BUDGET)


def _pinned(mem: Memory) -> list[str]:
    _both_corrected_then_hotel_popped(mem, 24)
    mem.pin("c", 0)
    return _lines(mem, "Tell me a joke.", PIN_BUDGET)


def _facts(mem: Memory) -> list[str]:
    _both_corrected_then_hotel_popped(mem, 0)
    # as a context line would say it: labelled when superseded
    return [f"[user{' · ' + MARK if f.status == 'superseded' else ''}] {f.text}"
            for f in mem.facts("c") if f.position == 0]


def _search(mem: Memory) -> list[str]:
    _both_corrected_then_hotel_popped(mem, 0)
    [hit] = [h for h in mem.search("c", "hotel Hilton flight", k=5) if h.position == 0]
    assert hit.status == HIT_SUPERSEDED_IN_PART  # before: "superseded" (whole)
    assert hit.superseded_by is None
    return ["[user] my hotel is the Hilton.", f"[user · {MARK}] My flight lands at 9am"]


def _log_page(mem: Memory) -> list[str]:
    _both_corrected_then_hotel_popped(mem, 0)
    [row] = [r for r in data.turns_page(mem, "default", "c", None).rows if r.position == 0]
    # the template says "superseded in part" only when the row's superseded_by is None
    assert row.superseded_by is None  # before: 4, shown "superseded by #4"
    return [f"[user · {MARK}] {p['text']}" for p in row.superseded_parts] + ["[user] my hotel is the Hilton."]


@pytest.mark.parametrize("path", [
    _retrieved,  # a retrieved line (the reviewer's kind: both statements labelled before)
    _whole_log_mark,  # the tail shows it raw, a mark labels (before: the Hilton marked)
    _pinned,  # an explicit pin's line (before: left out of the pins as superseded)
    _facts,  # what facts() believes (read past the pop already: `_believed`)
    _search,  # a search hit's status (tiers.statements.turn_states)
    _log_page,  # the inspector's Log page row
])
def test_the_popped_statement_is_current_the_other_stays_superseded(
        cold_memory: Memory, path: Callable[[Memory], list[str]]) -> None:
    lines = path(cold_memory)
    hilton = [ln for ln in lines if "Hilton" in ln]
    flight = [ln for ln in lines if "9am" in ln]
    assert hilton and not [ln for ln in hilton if MARK in ln], lines  # current again, unlabelled
    assert [ln for ln in flight if MARK in ln], lines  # the flight's correction still holds
    assert not [ln for ln in lines if MARK in ln and "Hilton" in ln]

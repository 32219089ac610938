"""A caller's checkpoint that a later correction reaches is shown, marked as written before it.

Invariants (planner.candidates `Candidates.summary` and `_written_before`):
- A checkpoint without per-line sources (a caller's summary text) stands in for every turn
  up to its position, so whether a correction reached it is read over all of them, not
  only the last: a turn it covers that a turn past its end superseded.
- Such a checkpoint is never dropped for it (its other facts, the allergy here, would go
  with the old value) nor shown unmarked (the old value as current): it is shown with a
  label naming the correction's time, and the plan names the correcting turn by position.
- A checkpoint written at or after the correction, or one whose correction was popped,
  is shown as it is.
- The correcting turn itself is offered as before: the context shows it.
Both engines (a SQLite file; a fresh PostgreSQL schema: tests/conftest.py `engine_config`).
"""

from __future__ import annotations

import pytest

from tiermem import Config, Memory
from tiermem.tiers.formats import RETRACT_TYPE

T0 = 1.8e9  # 15 Jan 2027 08:00 UTC
STEP_S = 60  # one message a minute: turn #6 is 08:06
LOG = [("user", "I have a peanut allergy."),                  # 0
       ("assistant", "Noted, no peanuts."),                   # 1
       ("user", "My dinner budget is 40 EUR."),               # 2
       ("assistant", "Noted: dinner budget 40 EUR."),         # 3
       ("user", "Let's talk about trams."),                   # 4
       ("assistant", "Sure, trams."),                         # 5
       ("user", "Actually my dinner budget is 60 EUR now."),  # 6: supersedes #2 and #3
       ("assistant", "Updated."),                             # 7
       ("user", "Book me a dinner for Friday.")]              # 8
SUMMARY = "User has a peanut allergy and a dinner budget of 40 EUR."
LABEL = "[written before a correction of 15 Jan 2027 08:06: where they differ, the correction holds]"
QUERY = "Book me a dinner for Friday."
BUDGET = 600


def _context(mem: Memory) -> tuple[str, list[str]]:
    ctx = mem.context("c", QUERY, BUDGET, record=False)
    text = "\n".join(str(m.get("content")) for m in ctx.messages)
    reasons = [i.reason for i in ctx.plan.items if i.slice == "summary"]
    return text, reasons


@pytest.mark.parametrize(("cp_at", "marked"), [
    (3, True),   # ends on a corrected turn (it was dropped whole: the allergy lost)
    (4, True),   # ends past the corrected turns, before the correction (it was shown as current)
    (5, True),   # the same, one turn later
    (6, False),  # covers the correction itself: written knowing it
    (7, False),  # after the correction
])
def test_checkpoint_written_before_a_correction(engine_config: Config, cp_at: int, marked: bool) -> None:
    with Memory(engine_config) as mem:
        for i, (role, text) in enumerate(LOG):
            mem.append("c", {"role": role, "content": text}, created_at=T0 + i * STEP_S)
        mem.checkpoint("c", SUMMARY, cp_at)
        superseded = {r.position: r.superseded_by for r in mem.cold.turns_at(mem._key("c", None)[2], [2, 3])}
        assert superseded == {2: 6, 3: 6}  # the log's supersession, which the rule reads
        text, reasons = _context(mem)
        assert SUMMARY in text  # never dropped: the allergy stays
        assert (LABEL in text) is marked
        assert "Actually my dinner budget is 60 EUR now." in text  # the correction is offered
        summary_reasons = [r for r in reasons if r.startswith("checkpoint summary")]
        assert len(summary_reasons) == 1
        assert ("written before the correction #6 (of #2, #3)" in summary_reasons[0]) is marked


def test_popped_correction_unmarks(engine_config: Config) -> None:
    # the correction retracted (the adapters' pop): 40 EUR is current again, the text too
    with Memory(engine_config) as mem:
        for i, (role, text) in enumerate(LOG):
            mem.append("c", {"role": role, "content": text}, created_at=T0 + i * STEP_S)
        mem.checkpoint("c", SUMMARY, 4)
        assert LABEL in _context(mem)[0]
        mem.append("c", {"type": RETRACT_TYPE, "position": 6}, created_at=T0 + len(LOG) * STEP_S)
        mem.catch_up("c")
        text, _reasons = _context(mem)
        assert SUMMARY in text
        assert LABEL not in text

"""A caller's checkpoint that a later correction reaches is shown, marked as written before it.

Invariants (planner.candidates `Candidates.summary`, `_written_before`, `_chain_ends`):
- A checkpoint without per-line sources (a caller's summary text) stands in for every turn
  up to its position, so whether a correction reached it is read over all of them, not
  only the last: a turn it covers that a turn past its end superseded.
- Such a checkpoint is never dropped for it (its other facts, the allergy here, would go
  with the old value) nor shown unmarked (the old value as current): it is shown with a
  label naming the correction's time, and the plan names the correcting turn by position.
- Whenever the checkpoint was written: one written late (a summariser catching up on turns
  0..4 after the correction #6 was stored) still summarises turns that say the old value,
  and unlabelled it reads as current. One that covers the correction, or whose correction
  was popped, is shown as it is.
- A correction itself replaced later (#6's 60 EUR by #9's 80 EUR) is named by the end of
  the chain, the current value's turn; the plan says which corrections it passed.
- The correcting turn itself is offered as before: the context shows it.
Both engines (a SQLite file; a fresh PostgreSQL schema: tests/conftest.py `engine_config`).

Clock: the messages appended before the checkpoint are dated in the past (2023), those
appended after it in the future (2096), so the checkpoint's write time (the store's clock,
now) falls between them whatever day the test runs, and no test sleeps.
"""

from __future__ import annotations

import pytest

from tiermem import Config, Memory
from tiermem.tiers.formats import RETRACT_TYPE

T_BEFORE = 1.7e9  # 14 Nov 2023 22:13 UTC: messages stored before the checkpoint
T_AFTER = 4.0e9  # 02 Oct 2096 07:06 UTC: messages stored after it (turn #6 is 07:12)
STEP_S = 60  # one message a minute, by position
LOG = [("user", "I have a peanut allergy."),                  # 0
       ("assistant", "Noted, no peanuts."),                   # 1
       ("user", "My dinner budget is 40 EUR."),               # 2
       ("assistant", "Noted: dinner budget 40 EUR."),         # 3
       ("user", "Let's talk about trams."),                   # 4
       ("assistant", "Sure, trams."),                         # 5
       ("user", "Actually my dinner budget is 60 EUR now."),  # 6: supersedes #2 and #3
       ("assistant", "Updated."),                             # 7
       ("user", "Book me a dinner for Friday.")]              # 8
# E: the correction corrected again
AGAIN = [("user", "Actually my dinner budget is 80 EUR."),    # 9: supersedes #6
         ("user", "Book me a dinner for Friday.")]            # 10
SUMMARY = "User has a peanut allergy and a dinner budget of 40 EUR."
LABEL_6 = "[written before a correction of 02 Oct 2096 07:12: where they differ, the correction holds]"
LABEL_9 = "[written before a correction of 02 Oct 2096 07:15: where they differ, the correction holds]"
QUERY = "Book me a dinner for Friday."
BUDGET = 600


def _append(mem: Memory, log: list[tuple[str, str]], stored_before: int, checkpoint_at: int) -> None:
    """`log`'s messages 0..stored_before-1, then a checkpoint at `checkpoint_at`, then the rest."""
    for i, (role, text) in enumerate(log[:stored_before]):
        mem.append("c", {"role": role, "content": text}, created_at=T_BEFORE + i * STEP_S)
    mem.checkpoint("c", SUMMARY, checkpoint_at)
    for i, (role, text) in enumerate(log[stored_before:], start=stored_before):
        mem.append("c", {"role": role, "content": text}, created_at=T_AFTER + i * STEP_S)


def _context(mem: Memory) -> tuple[str, str]:
    ctx = mem.context("c", QUERY, BUDGET, record=False)
    text = "\n".join(str(m.get("content")) for m in ctx.messages)
    reasons = [i.reason for i in ctx.plan.items if i.slice == "summary" and i.reason.startswith("checkpoint summary")]
    assert len(reasons) == 1
    return text, reasons[0]


@pytest.mark.parametrize(("cp_at", "stored_before", "marked"), [
    (3, 6, True),   # ends on a corrected turn, written before #6 (it was dropped whole: the allergy lost)
    (4, 6, True),   # ends past the corrected turns, before the correction (it was shown as current)
    (5, 6, True),   # the same, one turn later
    (6, 7, False),  # covers the correction itself: written knowing it
    (7, 8, False),  # after the correction
    (4, 9, True),   # written after the whole log, of turns 0..4, which say 40 EUR (b5a5bf0 left it unlabelled)
    (4, 7, True),   # written just after the correction was stored (the same)
])
def test_checkpoint_written_before_a_correction(engine_config: Config, cp_at: int, stored_before: int,
                                                marked: bool) -> None:
    with Memory(engine_config) as mem:
        _append(mem, LOG, stored_before, cp_at)
        superseded = {r.position: r.superseded_by for r in mem.cold.turns_at(mem._key("c", None)[2], [2, 3])}
        assert superseded == {2: 6, 3: 6}  # the log's supersession, which the rule reads
        text, reason = _context(mem)
        assert SUMMARY in text  # never dropped: the allergy stays
        assert (LABEL_6 in text) is (marked and stored_before <= 6)  # the correction's own time
        assert ("[written before" in text) is marked
        assert "Actually my dinner budget is 60 EUR now." in text  # the correction is offered
        assert ("written before the correction #6 (of #2, #3)" in reason) is marked


@pytest.mark.parametrize(("stored_before", "marked"), [
    (6, True),   # written before #6 and #9: named by #9, the current value (was #6's 60 EUR)
    (7, True),   # written after #6, before #9: named #9 all the same (was named #6)
    (10, True),  # written after #9, of turns 0..4: named #9 (b5a5bf0 left it unlabelled)
])
def test_correction_corrected_again_names_the_current_value(engine_config: Config, stored_before: int,
                                                            marked: bool) -> None:
    with Memory(engine_config) as mem:
        _append(mem, LOG + AGAIN, stored_before, 4)
        superseded = {r.position: r.superseded_by for r in mem.cold.turns_at(mem._key("c", None)[2], [2, 3, 6])}
        assert superseded == {2: 6, 3: 6, 6: 9}  # a chain: #2, #3 -> #6 -> #9
        text, reason = _context(mem)
        assert SUMMARY in text
        assert (LABEL_9 in text) is (marked and stored_before <= 9)  # the current value's time
        assert ("[written before a correction" in text) is marked
        assert LABEL_6 not in text  # never the replaced correction's time
        assert ("written before the correction #9 (of #2, #3 via #6)" in reason) is marked
        assert "written before the correction #6" not in reason
        assert "Actually my dinner budget is 80 EUR." in text  # the current value is offered


def test_popped_correction_unmarks(engine_config: Config) -> None:
    # the correction retracted (the adapters' pop): 40 EUR is current again, the text too
    with Memory(engine_config) as mem:
        _append(mem, LOG, 6, 4)
        assert LABEL_6 in _context(mem)[0]
        mem.append("c", {"type": RETRACT_TYPE, "position": 6}, created_at=T_AFTER + len(LOG) * STEP_S)
        mem.catch_up("c")
        text, _reason = _context(mem)
        assert SUMMARY in text
        assert "[written before" not in text


LONG_CHAIN = 100  # one budget corrected this many times in a row


def test_a_long_chain_is_named_by_its_end_and_counted(engine_config: Config) -> None:
    # a natural chain longer than the named list: the current value's turn, the rest counted
    log = LOG[:6] + [("user", f"Actually my dinner budget is {60 + i} EUR now.") for i in range(LONG_CHAIN)]
    log += [("user", "Book me a dinner for Friday.")]
    with Memory(engine_config) as mem:
        _append(mem, log, 6, 4)
        last = 6 + LONG_CHAIN - 1
        text, reason = _context(mem)
        assert SUMMARY in text and "[written before a correction" in text
        assert f"written before the correction #{last} (of #2, #3 via #6 ... #{last - 1} ({LONG_CHAIN - 1}))" in reason


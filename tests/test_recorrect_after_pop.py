"""A correction made again after its first making was popped supersedes as a first one would.

Invariants (consolidation.supersede `Superseder._decided`, tiers.statements `Hidden`,
consolidation.classify `correction_cue`):
- A popped correction supersedes nothing: the turns it had superseded (the value and the
  assistant's echo of it) are current again, though their stored ``superseded_by`` still
  names it. A later correction of the same value supersedes them then, as the first
  correction did: their ``superseded_by`` names the new one, `facts()` lists the old value
  superseded by it and the new value alone current, and the context shows the caller's
  checkpoint that says the old value marked as written before the correction.
- Popping the new correction too leaves the old value current again.
- "actually" closing a clause with a value ("my dinner budget is 70 EUR actually") is a
  correction cue as "actually" opening it is; without a value ("Great actually!", "I'm
  not sure actually.") or adding a value ("I also have 2 cats actually.") it is none.
Both engines (a SQLite file; a fresh PostgreSQL schema: tests/conftest.py `engine_config`).
"""

from __future__ import annotations

import pytest

from tiermem import Config, Memory
from tiermem.consolidation.classify import correction_cue, normalize
from tiermem.tiers.formats import RETRACT_TYPE

T0 = 1.8e9  # 15 Jan 2027: the caller's clock, one message a minute by position
STEP_S = 60
LOG = [("user", "I have a peanut allergy."),                  # 0
       ("assistant", "Noted, no peanuts."),                   # 1
       ("user", "My dinner budget is 40 EUR."),               # 2
       ("assistant", "Noted: dinner budget 40 EUR."),         # 3: its echo
       ("user", "Let's talk about trams."),                   # 4
       ("assistant", "Sure, trams."),                         # 5
       ("user", "Actually my dinner budget is 60 EUR now."),  # 6: supersedes #2 and #3, popped at #9
       ("assistant", "Updated."),                             # 7
       ("user", "Book me a dinner for Friday.")]              # 8
POP_AT, AGAIN_AT = 9, 10
SUMMARY = "User has a peanut allergy and a dinner budget of 40 EUR."
QUERY = "Book me a dinner for Friday."
BUDGET = 600


def _append(mem: Memory, position: int, body: dict[str, object]) -> None:
    mem.append("c", body, created_at=T0 + position * STEP_S)


def _popped_then_again(mem: Memory, again: str) -> None:
    for i, (role, text) in enumerate(LOG):
        _append(mem, i, {"role": role, "content": text})
    mem.checkpoint("c", SUMMARY, 4)
    _append(mem, POP_AT, {"type": RETRACT_TYPE, "position": 6})
    _append(mem, AGAIN_AT, {"role": "user", "content": again})
    mem.catch_up("c")


def _superseded(mem: Memory) -> dict[int, int]:
    key = mem._key("c", None)[2]
    return {r.position: r.superseded_by for r in mem.cold.turns_at(key, list(range(AGAIN_AT + 1)))
            if r.superseded_by is not None}


def _budget_facts(mem: Memory) -> dict[int, tuple[str, int | None]]:
    return {f.position: (f.status, f.current_position) for f in mem.facts("c") if "budget" in f.text}


def _context(mem: Memory) -> tuple[str, list[str]]:
    ctx = mem.context("c", QUERY, BUDGET, record=False)
    text = "\n".join(str(m.get("content")) for m in ctx.messages)
    return text, [i.reason for i in ctx.plan.items if i.slice == "summary"]


@pytest.mark.parametrize("again", [
    "Hmm, my dinner budget is 70 EUR actually.",  # "actually" closing it: was no cue, 40 EUR stayed current
    "Actually my dinner budget is 70 EUR now.",   # "actually" opening it
])
def test_a_correction_made_again_after_the_pop_supersedes(engine_config: Config, again: str) -> None:
    with Memory(engine_config) as mem:
        _popped_then_again(mem, again)
        assert _superseded(mem) == {2: AGAIN_AT, 3: AGAIN_AT}  # the pop's stale #6 replaced
        facts = _budget_facts(mem)
        assert 6 not in facts  # the popped correction is not believed
        assert facts[2] == ("superseded", AGAIN_AT) and facts[3] == ("superseded", AGAIN_AT)
        assert facts[AGAIN_AT] == ("current", AGAIN_AT)  # the only current budget
        text, reasons = _context(mem)
        assert "[written before a correction of" in text and SUMMARY in text
        assert [r for r in reasons if f"written before the correction #{AGAIN_AT} (of #2, #3)" in r]
        assert again in text


def test_popping_the_second_correction_too_leaves_the_old_value_current(engine_config: Config) -> None:
    with Memory(engine_config) as mem:
        _popped_then_again(mem, "Hmm, my dinner budget is 70 EUR actually.")
        _append(mem, AGAIN_AT + 1, {"type": RETRACT_TYPE, "position": AGAIN_AT})
        mem.catch_up("c")
        assert _budget_facts(mem) == {2: ("current", 2)}  # the echo #3 is no load-bearing user statement
        text, reasons = _context(mem)
        assert "[written before" not in text and SUMMARY in text
        assert not [r for r in reasons if "written before" in r]


# (text, whether it is a correction cue): "actually" closing a clause
@pytest.mark.parametrize(("text", "cue"), [
    ("My dinner budget is 70 EUR actually.", True),         # a value before it
    ("Hmm, my flight is on the 14th actually.", True),      # an opener, a date
    ("Thanks! Our team meets on Wednesdays actually.", True),  # its own sentence
    ("Great actually!", False),                             # no value: how it went
    ("I'm not sure actually.", False),                      # no value
    ("I also have 2 cats actually.", False),                # adds a value, revises none
    ("Is it 5pm actually?", False),                         # a question
])
def test_actually_closing_a_clause_with_a_value_is_a_correction(text: str, cue: bool) -> None:
    got = correction_cue(normalize(text), "user")
    assert (got is not None) is cue

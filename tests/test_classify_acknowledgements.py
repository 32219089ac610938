"""An assistant's bare acknowledgement is no decision (consolidation.classify).

The assistant-decision rule made any assistant turn that opens with a marker ("booked",
"confirmed", "done", "noted", "added", "set", "got it", ...) load-bearing at the decision
priority (75), so "Noted.", "Done!" and "Got it, thanks." were pinned: each took a line of
the pinned block (a tenth of the budget) that says nothing ("[assistant 10 Dec 2026] Noted
4."), and moved the pin version, a new pinned block and a prompt-cache miss. A marker with
nothing it confirms (only thanks, assent, "it"/"for you", bare numbers) now falls through
to the assistant default; a marker with content is still a decision. A bare "Booked." is
no pin either: what was booked is in the user's request before it, and the pinned block
shows each turn on its own line, so the reply alone would tell the model nothing.

Fails on the code before: every case of the first table was load-bearing at 75, and
tests/zone_helpers.py's conversation's pinned block held one "Noted i." reply at 250 tokens
and two at 500; the other tables pass on it too (they pin what must not change).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from zone_helpers import BUDGET, NOTE_DAYS, QUESTION, seed

from tiermem import Config, Memory
from tiermem.consolidation.classify import PRIORITY, TurnClassifier
from tiermem.tiers.embed import Embedder

CLASSIFY = TurnClassifier()
PINNED_HEADER = "Standing instructions"


@pytest.mark.parametrize("text", [
    # the marker alone
    "Noted.",
    "Done!",
    "Added.",
    "Confirmed.",
    "Cancelled.",
    "Updated.",
    "Decision recorded.",
    # a booking confirmed without what: the user's request holds it
    "Booked.",
    "All set, booked!",
    "Booked it for you.",
    # a number that counts notes, not a value (tests/zone_helpers.py's replies)
    "Noted 4.",
    # with thanks or assent around it
    "Got it, thanks.",
    "Sure, done.",
    "Okay, noted. Thanks!",
    "Perfect. Done.",
    # the marker verbs with only a pronoun pointing back
    "I've updated it.",
    "I'm escalating this.",
    "Reminder set.",
    # evals/pressure.py's acknowledgements of a planted or corrected value
    "Got it, I've noted that.",
    "Thanks for the update, noted.",
    "Okay, updated my notes.",
])
def test_a_bare_acknowledgement_is_not_load_bearing(text: str) -> None:
    label = CLASSIFY.classify(text, "assistant")
    assert not label.load_bearing, label
    assert label.priority < PRIORITY["decision"], label
    assert "assistant-decision" not in label.reason, label


@pytest.mark.parametrize("text", [
    # a standing preference recorded
    "Noted: aisle seats from now on.",
    # what was done, after the marker
    "Done, I moved your flight to Friday.",
    "Thanks. Done, I moved it to Friday.",
    # the value before the marker
    "Lufthansa for Munich, noted.",
    # a name after the marker
    "Added Porto.",
    # an amount with its unit, a time, a dose, a party size, a phone number
    "Got it, 2,000 EUR all-in.",
    "Done: 3:30.",
    "Noted, 10mg.",
    "Booked for 2.",
    "I'll use 555-0123.",
    # an identifier
    "Noted #4417.",
    # content in another script
    "Noted: 予約済み",
])
def test_an_acknowledgement_with_content_is_still_a_decision(text: str) -> None:
    label = CLASSIFY.classify(text, "assistant")
    assert label.load_bearing, label
    assert label.priority == PRIORITY["decision"], label
    assert label.reason.startswith("rule:assistant-decision"), label


@pytest.mark.parametrize("text", [
    # evals/data/intent_labels.jsonl: confirmations that carry what was decided
    "Booked: technician visit Thursday 9am-12pm, confirmation BX-20417.",
    "Cancelled. Your premium add-on ends on April 2.",
    "Reserved: Eem, Friday 7pm, table for 4.",
    "Done: you're on Unlimited Plus from today, same number.",
    "Reminder set for May 1st: renew passport.",
    # evals/data/knowledge_cases.jsonl and knowledge_heldout.jsonl: echoes of the user's value
    "Noted: window seats.",
    "Postgres 14, noted.",
    "Priya Nair, noted.",
    # evals/data/knowledge_fresh.jsonl and knowledge_fourth.jsonl
    "Noted: jane.roe@example.com, Team plan with 12 seats.",
    "Reminder set: dentist on the 12th.",
    "Noted: peanut allergy.",
])
def test_the_eval_sets_confirmations_stay_decisions(text: str) -> None:
    label = CLASSIFY.classify(text, "assistant")
    assert label.load_bearing and label.priority == PRIORITY["decision"], label


@pytest.mark.parametrize("budget", [
    # the time zone tests' budget: the notes push the dentist out of the tail (a pin took a "Noted i.")
    BUDGET,
    # twice that: the tail holds the notes' last days (two pins took "Noted i." lines)
    2 * BUDGET,
])
def test_bare_replies_take_no_line_of_the_pinned_block(tmp_path: Path, embedder: Embedder, budget: int) -> None:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        seed(mem, "c")  # after the dentist, NOTE_DAYS "Note i: I like green tea." / "Noted i." pairs
        ctx = mem.context("c", QUESTION, budget=budget)
        pinned = [str(m["content"]) for m in ctx.messages
                  if m["role"] == "system" and str(m["content"]).startswith(PINNED_HEADER)]
        assert not any(f"Noted {i}." in block for block in pinned for i in range(NOTE_DAYS)), pinned
        assert not [it for it in ctx.plan.items if it.slice == "pinned"], ctx.plan.items

"""A courtesy put as an order is no standing instruction (consolidation.classify `_COURTESY`).

"No need to thank me." read as `_MODAL_DIRECTIVE` (subject "no", modal "need to", verb
"thank") and "Don't mention it." as `_CONSTRAINT` ("don't" + a verb): both were load-bearing
instructions at the constraint priority (85), so the pinned block carried a line that orders
nothing, ahead of real standing orders, and moved the pin version (a new pinned block and a
prompt-cache miss). The formula whole is small talk now; anything more after it (how often,
whom, a real request in the same turn) is judged as before, so a standing wish about the
agent's manners and "No need to cc my manager from now on." still pin.

Fails on the code before: every case of the first table was an instruction at priority 85
(or 65 for the "please" ones), and the end-to-end test's pinned block held "No need to thank
me."; the other tables pass on it too (they pin what must not change).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tiermem import Config, Memory
from tiermem.consolidation.classify import PRIORITY, TurnClassifier
from tiermem.planner.candidates import AUTO_PIN_MIN_PRIORITY  # a load-bearing turn of this priority is pinned
from tiermem.tiers.embed import Embedder

CLASSIFY = TurnClassifier()
PINNED_HEADER = "Standing instructions"
# enough filler exchanges that the first turns leave the recent tail at BUDGET tokens
FILLER_EXCHANGES = 12
BUDGET = 600


@pytest.mark.parametrize("text", [
    # the reported line: an answer to a thanks
    "No need to thank me.",
    "No need to thank me!",
    # an answer to an apology, with what it was for
    "No need to apologise.",
    "No need to apologize for the delay.",
    "No need to say sorry.",
    "No need to be sorry.",
    "There's no need to thank me.",
    # more talk after a comma or in the next sentence
    "No need to thank me, happy to help.",
    "Aw, no need to thank me! Glad it worked out.",
    "No need to apologize, it happens.",
    # softened by "please", which is then no request
    "Oh please, no need to thank me.",
    "Please, no need to apologise!",
    # the idioms for "you're welcome"
    "Don't thank me.",
    "Don't mention it.",
    # reassurance
    "No need to worry.",
    "No need to rush.",
])
def test_a_courtesy_is_not_pinned(text: str) -> None:
    label = CLASSIFY.classify(text, "user")
    assert not label.load_bearing, label
    assert label.intent == "chitchat", label
    assert label.priority < AUTO_PIN_MIN_PRIORITY, label


@pytest.mark.parametrize(("text", "priority"), [
    # the brief's standing instruction: "from now on"
    ("No need to cc my manager from now on.", PRIORITY["constraint"]),
    # "no need to" + a service act, no courtesy verb
    ("No need to cc my manager.", PRIORITY["constraint"]),
    # a retraction of a reminder (fddf11c): the courtesy rule must leave it alone
    ("No need to remind me about the pills twice a day.", PRIORITY["constraint"]),
    # a standing wish about the agent's manners: how often follows the verb
    ("No need to thank me every time.", PRIORITY["constraint"]),
    ("No need to apologise for every little mistake.", PRIORITY["constraint"]),
    ("No need to say thanks in every reply.", PRIORITY["constraint"]),
    ("Don't apologise from now on.", PRIORITY["constraint"]),
    ("Don't apologize in your replies.", PRIORITY["constraint"]),
    # the object is someone else: an errand, not a courtesy
    ("No need to thank the driver.", PRIORITY["constraint"]),
    ("Don't mention it to my wife.", PRIORITY["constraint"]),
    # a courtesy first, then a real order in the same turn
    ("No need to apologise, just send the report from now on.", PRIORITY["constraint"]),
])
def test_a_standing_instruction_is_still_pinned(text: str, priority: int) -> None:
    label = CLASSIFY.classify(text, "user")
    assert label.load_bearing, label
    assert label.intent == "instruction", label
    assert label.priority == priority >= AUTO_PIN_MIN_PRIORITY, label


@pytest.mark.parametrize(("text", "reason"), [
    # what the turn states besides the courtesy is judged without it
    ("No need to thank me, I am allergic to peanuts by the way.", "personal-constraint"),
    ("No need to thank me, I moved to Berlin last year.", "affiliation"),
])
def test_a_fact_beside_a_courtesy_still_counts(text: str, reason: str) -> None:
    label = CLASSIFY.classify(text, "user")
    assert label.load_bearing and reason in label.reason, label


def test_the_pinned_block_holds_the_order_not_the_courtesy(tmp_path: Path, embedder: Embedder) -> None:
    turns = [
        ("user", "No need to cc my manager from now on."),
        ("assistant", "Understood, I will leave your manager off."),
        ("user", "Thanks for sorting the invoices earlier!"),
        ("assistant", "Happy to help."),
        ("user", "No need to thank me."),  # a user playing the helper: the reported line
    ]
    for i in range(FILLER_EXCHANGES):
        turns += [("user", f"Filler {i}: the weather is mild today."), ("assistant", f"Mild weather {i}, nice.")]
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        mem.append_many("c", [{"role": r, "content": t} for r, t in turns])
        ctx = mem.context("c", "Who should be on the email to the supplier?", budget=BUDGET)
        pinned = "\n".join(str(m["content"]) for m in ctx.messages
                           if m["role"] == "system" and str(m["content"]).startswith(PINNED_HEADER))
        assert "No need to cc my manager from now on." in pinned, ctx.messages
        assert "No need to thank me." not in pinned, pinned

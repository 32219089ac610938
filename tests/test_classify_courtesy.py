"""A courtesy put as an order is no standing instruction (consolidation.classify `_COURTESY`).

"No need to thank me." read as `_MODAL_DIRECTIVE` (subject "no", modal "need to", verb
"thank") and "Don't mention it." as `_CONSTRAINT` ("don't" + a verb): both were load-bearing
instructions at the constraint priority (85), so the pinned block carried a line that orders
nothing, ahead of real standing orders, and moved the pin version (a new pinned block and a
prompt-cache miss). The formula is small talk now where it is the whole turn (a "please"
beside "no need" or one lead such as "oh," or "you're welcome!", a closed list after "for":
that, this, it, or the/my/this/that and a delay or slip such as "the mix-up" or "the late
reply", an adverb of emphasis such as "at all" or "really", a closing "." or "!" or
emoticon); anything more is judged as before, so a
standing wish about the agent's manners ("Don't apologize for errors.", "Please don't
mention it.") and "No need to cc my manager from now on." still pin.

Fails on the code before 226c27a: every case of the first table was an instruction at
priority 85 (or none but small talk), and the end-to-end test's pinned block held "No need
to thank me.". Fails on 226c27a: the reviewer's table of orders it un-pinned (it took the
formula out of a longer turn and judged the rest alone: "Don't apologize for errors.",
"Don't thank me, and never use emojis." were small talk) and the longer turns' rows.
Fails on cb43dc9: the reviewer's whole turns with a lead, an adverb, an emoticon or a slip
after "for" ("Oh, no need to thank me!", "No need to thank me at all.", "No need to thank me
:)", "No need to apologize for the mix-up.") were instructions at 85 again.
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
    # softened by "please", which is then no request
    "Please, no need to apologise!",
    "No need to apologise for the trouble, please.",
    # what it was for, from the closed list
    "No need to apologize for that.",
    "Don't apologise for the confusion!",
    "No need to worry about it.",
    "No apologies needed.",
    # the idioms for "you're welcome"
    "Don't thank me.",
    "Don't mention it.",
    # reassurance
    "No need to worry.",
    "No need to rush.",
    # the reviewer's whole turns that cb43dc9 pinned again (modal directive at 85)
    # a lead that answers a thanks or an apology
    "Oh, no need to thank me!",
    "Hey, no need to apologize.",
    "You're welcome! No need to thank me.",
    "Not at all, no need to thank me.",
    # an adverb of emphasis after it
    "No need to thank me at all.",
    "No need to apologize, really.",
    "No need to apologise on my account.",
    # a closing emoticon or emoji
    "No need to thank me :)",
    "No need to thank me \N{SMILING FACE WITH SMILING EYES}",
    # a delay or slip after "for": determiner + one or two words from the closed list
    "No need to apologize for the mix-up.",
    "No need to apologize for the late reply.",
    "No need to apologise for the long wait!",
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
    # the reviewer's table of 226c27a: orders it un-pinned, each pinned before it
    # what not to apologise for: a kind of thing, not the one just done
    ("Don't apologize for errors.", PRIORITY["constraint"]),
    ("Do not apologize for limitations.", PRIORITY["constraint"]),
    ("Don't apologize for being an AI.", PRIORITY["constraint"]),
    ("Don't apologize for not knowing something.", PRIORITY["constraint"]),
    ("No need to apologize for short answers.", PRIORITY["constraint"]),
    ("Don't apologize for the length of your answers.", PRIORITY["constraint"]),
    ("Do not thank me for my questions.", PRIORITY["constraint"]),
    # "please don't" asks; "in future replies" says when
    ("Please don't apologise for delays in future replies.", PRIORITY["constraint"]),
    # "ever" after it, in the clause or a sentence of its own
    ("Don't apologize, ever.", PRIORITY["constraint"]),
    ("Don't apologise. Ever.", PRIORITY["constraint"]),
    # an order after the formula
    ("Don't apologise for mistakes, just fix them.", PRIORITY["constraint"]),
    ("No need to apologize for errors, just correct them.", PRIORITY["constraint"]),
    ("No need to rush, but always double-check the totals.", PRIORITY["constraint"]),
    ("No need to apologize. Always cite sources.", PRIORITY["constraint"]),
    ("Don't apologise and don't use emojis.", PRIORITY["constraint"]),
    ("Don't thank me, and never use emojis.", PRIORITY["constraint"]),
    # "don't mention it" of a secret: an order to keep it
    ("Please don't mention it.", PRIORITY["constraint"]),
    ("Don't mention it, it's a secret.", PRIORITY["constraint"]),
    ("I'm planning a surprise party for Sam on Friday, don't mention it.", PRIORITY["constraint"]),
    ("Don't mention it to anyone.", PRIORITY["constraint"]),
    ("Don't mention it in the report.", PRIORITY["constraint"]),
    # where or how often it is not wanted
    ("No need to thank me in your emails.", PRIORITY["constraint"]),
    ("Don't thank me at the end of every message.", PRIORITY["constraint"]),
    ("Never apologize.", PRIORITY["constraint"]),
    ("Don't apologise in your answers.", PRIORITY["constraint"]),
    # the lead, adverbs and the "for" list of the reviewer's courtesies leave orders alone
    # a plural kind of delay, or when: a standing wish
    ("Don't apologize for the delays in future replies.", PRIORITY["constraint"]),
    ("No need to apologize for the delay in future.", PRIORITY["constraint"]),
    # a thing that is no delay or slip after the determiner
    ("No need to apologize for the length of your answers.", PRIORITY["constraint"]),
    # a lead, then more than the formula
    ("Hey, don't mention it to anyone.", PRIORITY["constraint"]),
    ("Oh, no need to thank me every time.", PRIORITY["constraint"]),
    # "ever" is when, not emphasis
    ("No need to apologize, ever.", PRIORITY["constraint"]),
])
def test_a_standing_instruction_is_still_pinned(text: str, priority: int) -> None:
    label = CLASSIFY.classify(text, "user")
    assert label.load_bearing, label
    assert label.intent == "instruction", label
    assert label.priority == priority >= AUTO_PIN_MIN_PRIORITY, label


# (turn, intent, load-bearing, priority): the label it had before 226c27a, none "rule:courtesy"
@pytest.mark.parametrize(("text", "intent", "load_bearing", "priority"), [
    # more talk after the formula: the whole turn is judged, the modal directive first
    ("No need to thank me, happy to help.", "instruction", True, PRIORITY["constraint"]),
    ("No need to apologize, it happens.", "instruction", True, PRIORITY["constraint"]),
    ("Don't thank me, thank the team.", "instruction", True, PRIORITY["constraint"]),
    ("No need to thank me, I am allergic to peanuts by the way.", "instruction", True, PRIORITY["constraint"]),
    ("No need to thank me, I moved to Berlin last year.", "instruction", True, PRIORITY["constraint"]),
    # more before it: "oh please" is no bare "please"
    ("Oh please, no need to thank me.", "instruction", True, PRIORITY["constraint"]),
    # small talk by its own social words, as before
    ("Aw, no need to thank me! Glad it worked out.", "chitchat", False, PRIORITY["chitchat"]),
    ("No worries, no need to apologise!", "chitchat", False, PRIORITY["chitchat"]),
    ("No thanks needed, happy to help.", "chitchat", False, PRIORITY["chitchat"]),
    # the reviewer's two orders that were not pinned before 226c27a either (left as they were)
    ("Stop apologizing.", "instruction", True, PRIORITY["task"]),
    ("Don't be sorry for asking clarifying questions.", "statement", False, PRIORITY["statement"]),
])
def test_a_longer_turn_is_judged_as_before(text: str, intent: str, load_bearing: bool, priority: int) -> None:
    label = CLASSIFY.classify(text, "user")
    assert (label.intent, label.load_bearing, label.priority) == (intent, load_bearing, priority), label
    assert "courtesy" not in label.reason, label


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

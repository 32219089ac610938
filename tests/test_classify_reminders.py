"""Advice, narration and cheering are no standing orders (consolidation.classify, issue 19).

A pin is forced into every context, so a turn pinned by mistake costs every call its
tokens: at 500 tokens the top pin alone is a tenth of the budget. Three shapes were read
as constraints (priority 85) and one as a decision:
- a reminder whose act is not a service ("don't forget to prepare emotionally", "remember
  to stay positive"): advice to a person; a reminder to do a service act ("don't forget
  to cc my manager") still is an order;
- "never" before a past tense ("never saw this coming"): narration, not "never do X";
- "always" before a participle or a state ("always supporting each other", "always full
  of surprises"): description, not "always do X";
- cheering: "let's keep it up" (not "let's keep it", a decision to keep something), "push
  through" (not "push the branch"), "never say never".
Fails on the code before: nine of the first table's ten cases were load-bearing (the
"never liked" one already was not); three such turns were the top pins of three of the four
LoCoMo dev conversations.
"""

from __future__ import annotations

import pytest

from tiermem.consolidation.classify import TurnClassifier

CLASSIFY = TurnClassifier()


@pytest.mark.parametrize("text", [
    # a reminder to a friend about their own feelings
    "Gather the documents first. Don't forget to prepare emotionally, since the wait can be hard.",
    # a reminder of an attitude
    "Brand identity is key. And don't forget to stay positive and motivate others.",
    "Remember to breathe and enjoy the ride.",
    # narration of the past with "never"
    "I lost my job last week. They shut down and it's been rough. Never saw this coming.",
    "We tried that bakery twice and never liked it much.",
    # description with "always"
    "We're like a family here - always supporting each other.",
    "Road trips are great - always full of surprises!",
    # cheering, not a decision or an order
    "Together we can make a difference. Let's keep it up!",
    "Push through and it'll be worth it.",
    "Maybe I'll go back to acting someday. Never say never!",
])
def test_advice_narration_and_cheering_are_not_pinned(text: str) -> None:
    label = CLASSIFY.classify(text, "user")
    assert not label.load_bearing, label
    assert label.intent != "instruction", label


@pytest.mark.parametrize(("text", "rule"), [
    # a reminder of a service act is an order
    ("Don't forget to cc my manager on the invoice.", "imperative-constraint"),
    ("Remember to attach the receipt when you file it.", "imperative-constraint"),
    ("Remember to use metric units.", "imperative-constraint"),
    # "don't forget" with no "to" names a thing to keep in mind
    ("Don't forget my peanut allergy.", "imperative-constraint"),
    # never / always with a base-form verb, including words that end in -eed or -ing
    ("Never book red-eye flights for me.", "imperative-constraint"),
    ("Never feed the cat after 8pm.", "imperative-constraint"),
    ("Always bring my badge to the site visits.", "imperative-constraint"),
    ("Always verify the account holder's name first.", "imperative-constraint"),
    # "always" before a preposition may still be an order
    ("Always in English, please.", "imperative-constraint"),
    # keeping a thing is a decision
    ("Let's keep it on the Tuesday slot.", "decision"),
])
def test_orders_still_are(text: str, rule: str) -> None:
    label = CLASSIFY.classify(text, "user")
    assert label.intent == "instruction" and label.load_bearing, label
    assert label.reason.startswith(f"rule:{rule}"), label

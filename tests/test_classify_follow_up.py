"""Talk in the flow of a chat is not recall (issue 22, planner.classify): a question
after a remark in the same message, a question that opens with a greeting or an
interjection, a time or a "remind me" named in a remark rather than asked about. These
are `default` (narrow retrieval), so a chat's per-turn part stays small and the context
keeps growing by appends.

Fails on the code before: every question no rule placed was targeted recall (a broad
retrieval that fills the room: one full cache miss, then a new epoch on the next turn),
"remind me" anywhere was a recall cue, and a time named anywhere in a message that
ended with "?" made it temporal."""

from __future__ import annotations

import pytest

from tiermem.planner.classify import QueryClassifier, follows_up, question_text, sentences


@pytest.mark.parametrize(("query", "expected"), [
    ("Love that purple color! For walking or running?", "default"),  # a reaction, then an elliptical question
    ("Cool! What did it look like?", "default"),  # an interjection sentence first
    ("Sounds fun. Did they have a good time?", "default"),  # a remark ending with "."
    ("Hey, how's it going?", "default"),  # a greeting opens it
    ("Wow, did it actually work?", "default"),  # an interjection opens it
    # a time named in the remark, not in the question
    ("Just got back from a road trip yesterday, it was fun! Anything exciting happening?", "default"),
    ("Moments like these remind me why I do it.", "default"),  # 'remind me' as a verb of a statement
    ("I look at it and remember why I started. Is it the same for them?", "default"),  # 'remember' in a remark
    # ... what stays recall
    ("Can you remind me what my budget was?", "targeted_recall"),  # 'remind me' as a request
    ("remind me which hotel we picked", "targeted_recall"),  # an imperative 'remind me'
    ("Thanks! Do you remember my sister's name?", "targeted_recall"),  # a recall cue wins over the remark
    ("Great. What dates did I give you for the hotel?", "targeted_recall"),  # what the asker said before
    ("Nice. What was my budget before I changed it?", "targeted_recall"),  # a recall cue / the past
    ("Sounds good! Which airline did we use last time?", "temporal"),  # the question names a time
    ("What is the name of the hotel?", "targeted_recall"),  # a plain question, no remark: recall
    ("Would Caroline likely have Dr. Seuss books on her bookshelf?", "targeted_recall"),  # 'Dr.' ends no sentence
    ("What areas of the U.S. has John been to?", "targeted_recall"),  # nor does 'U.S.'
    ("Was it a good month for them? Answer yes or no.", "targeted_recall"),  # a remark after the question
])
def test_chat_flow_questions_are_default(query: str, expected: str) -> None:
    assert QueryClassifier().classify(query).name == expected


@pytest.mark.parametrize(("text", "parts"), [
    ("Cool! What did it look like? I bet.", ["Cool!", "What did it look like?", "I bet."]),
    ("Dr. Seuss wrote it. Mr. Smith read it.", ["Dr. Seuss wrote it.", "Mr. Smith read it."]),  # titles stay
    ("see e.g. this one and that", ["see e.g. this one and that"]),  # a one-letter word ends none
    ("Great. What now?", ["Great.", "What now?"]),  # a capitalised word does
    ("  ", []),
])
def test_sentences(text: str, parts: list[str]) -> None:
    assert sentences(text) == parts


@pytest.mark.parametrize(("text", "asked"), [
    ("I went there yesterday. Did you like it?", "Did you like it?"),  # only the asking sentence
    ("who wrote it", "who wrote it"),  # a question without "?"
    ("I went there yesterday.", ""),  # nothing asked
])
def test_question_text(text: str, asked: str) -> None:
    assert question_text(text) == asked


@pytest.mark.parametrize(("query", "tail_answers"), [
    ("Love that purple color! For walking or running?", True),  # a follow-up on what was just said
    ("Hey, how's it going?", True),  # a greeting
    ("How have you been?", False),  # put to "you": may ask what the other knows, keeps its narrow retrieval
    ("What phone number do you have for me?", False),  # the same
    ("What is the name of the hotel?", False),  # a recall
])
def test_talk_about_what_was_just_said_is_answered_by_the_tail(query: str, tail_answers: bool) -> None:
    assert QueryClassifier().classify(query).tail_answers is tail_answers


def test_follows_up_needs_a_remark_before_the_question() -> None:
    assert follows_up("Nice! Where was it?")
    assert not follows_up("Where was it? Nice!")  # the remark comes after
    assert not follows_up("Where was it?")

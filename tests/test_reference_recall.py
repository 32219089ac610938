"""A message that names a thing given earlier by when or how it was given ("the same table
as before", "as last time", "order my usual", "the one I gave you", "the format I
described", "the options you listed") asks for the log (planner/classify.py, the recall
cues): before, an order with such a reference matched no rule and retrieved only clearly
related turns, and a question about what "you" listed or proposed was taken for talk with
the other party. Found by the second query-class set (evals/data/query_lookup_fresh.jsonl),
scored blind: 8 of its 39 lookups missed."""

from __future__ import annotations

import pytest
from recall_helpers import context_after_small_talk

from tiermem import Memory
from tiermem.planner.classify import QueryClassifier, tells_only

BUDGET_TOKENS = 300


@pytest.mark.parametrize(("query", "expected"), [
    ("Same delivery address as last time please.", "targeted_recall"),  # 'as last time'
    ("Book the same table as before.", "targeted_recall"),  # 'as before'
    ("Order my usual coffee.", "targeted_recall"),  # an order for 'my usual'
    ("I'll have the usual, please.", "targeted_recall"),
    ("Go back to what we decided about the colour scheme.", "targeted_recall"),  # 'go back to what'
    ("Send it to my work email, the one I gave you.", "targeted_recall"),  # 'the one I gave you'
    ("Use the API key format I described at the start.", "targeted_recall"),  # 'I described' + when
    ("What were the three options you listed for the database?", "targeted_recall"),  # not talk: 'you listed'
    ("Can we go back to the migration plan you proposed earlier?", "targeted_recall"),
    # lookalikes: the same words pointing at nothing said
    ("I went for my usual run this morning.", "default"),  # 'my usual' in a story
    ("I listed my flat for sale last week.", "default"),  # 'listed' with its own object
    ("I described the painting to my sister.", "default"),
    ("He proposed to me on the beach!", "default"),  # a proposal, not a proposal of yours
    ("I don't know what I gave him for his birthday.", "default"),  # gave someone else
    ("What do you think of the plan?", "default"),  # a question to 'you', now: talk
])
def test_a_reference_to_what_was_given_earlier_is_recall(query: str, expected: str) -> None:
    assert QueryClassifier().classify(query).name == expected


def test_a_story_with_the_same_words_still_retrieves_nothing() -> None:
    assert tells_only("I went for my usual run this morning.")
    assert not tells_only("Order my usual coffee.")


# (what the user said early on, the order many turns later, what the context must hold)
@pytest.mark.parametrize(("fact", "asked", "value"), [
    # the address given once; the order names it only as 'last time'
    ("Please ship it to 14 Larkspur Lane, Bristol BS8 2QT.", "Same delivery address as last time please.",
     "Larkspur"),
    # 'my usual' and the standing order share no word but 'coffee'
    ("My go-to is a flat white with oat milk, extra hot.", "Order my usual coffee.", "flat white"),
    # the API key format described once
    ("Our API keys look like tm_live_ followed by 32 hex characters.",
     "Use the API key format I described at the start.", "tm_live_"),
])
def test_the_context_holds_what_the_reference_points_at(cold_memory: Memory, fact: str, asked: str,
                                                        value: str) -> None:
    ctx = context_after_small_talk(cold_memory, fact, asked, BUDGET_TOKENS)
    assert any(value in str(m["content"]) for m in ctx.messages), ctx.plan.to_json()


# (query, class): the third query-class set (evals/data/query_lookup_third.jsonl), blind
# 17 of 25 lookups: an order or a question that points back at a thing by how it was
# given or used, a request after a greeting, what the other side's colleague said
@pytest.mark.parametrize(("query", "expected"), [
    ("Send the draft to the same people as yesterday.", "targeted_recall"),  # 'same ... as yesterday'
    ("Use the gift budget I set for my nephew.", "targeted_recall"),  # 'the ... I set'
    ("Apply the same fix you did for the login bug.", "targeted_recall"),
    ("Run the migration with the flags we agreed on.", "targeted_recall"),
    ("Can you rebook the restaurant we liked in Porto?", "targeted_recall"),  # was talk: 'you'
    ("Hey, can you pull up the ticket I opened about the broken hinge?", "targeted_recall"),  # was a greeting
    ("What did your colleague promise me on the phone?", "targeted_recall"),  # was talk: 'your'
    # lookalikes: a story, a request pointing at nothing said, talk
    ("I loved the movie we watched last night.", "default"),  # a story, not an order
    ("The cake we baked was a hit.", "default"),
    ("Book a table for two at eight.", "default"),
    ("Hey, how are you doing?", "default"),
    ("What do you think of the plan?", "default"),
])
def test_a_pointer_back_in_an_order_or_a_question_is_recall(query: str, expected: str) -> None:
    assert QueryClassifier().classify(query).name == expected


def test_the_context_holds_what_an_order_points_back_at(cold_memory: Memory) -> None:
    asked = "Use the gift budget I set for my nephew."
    ctx = context_after_small_talk(cold_memory, "For Sam's birthday present, keep it under $40 please.", asked,
                                   BUDGET_TOKENS)
    assert any("$40" in str(m["content"]) for m in ctx.messages), ctx.plan.to_json()

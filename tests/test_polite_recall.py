"""A polite request or an order for what the asker said ("Can you tell me my flight
number?", "Tell me my confirmation code.") is recall of the log, not talk with the other
party (planner/classify.py, `_YOU_REQUEST` and the recall cues): before, the
question-to-"you" rule took the request for conversation and no rule read the order, and
the context held nothing of the fact either asks for."""

from __future__ import annotations

import pytest
from recall_helpers import context_after_small_talk

from tiermem import Memory
from tiermem.planner.classify import QueryClassifier

BUDGET_TOKENS = 300


@pytest.mark.parametrize(("query", "expected"), [
    ("Can you tell me my flight number?", "targeted_recall"),  # a value the asker gave
    ("Could you tell me which hotel I picked?", "targeted_recall"),  # what the asker did
    ("Can you give me my order number again?", "targeted_recall"),  # the asker's value, again
    ("Which hotel are we staying at, can you check?", "targeted_recall"),  # 'we' + a request to check
    ("Could you look up my hotel booking?", "targeted_recall"),  # look up the asker's booking
    ("Can you tell me more about your trip?", "default"),  # about the other party: talk
    ("Could you tell me a joke?", "default"),  # a request that points to nothing said
    ("Can you show me a picture of it?", "default"),  # the asker only as the recipient
    # an order to give back the asker's facts, at the start of a sentence
    ("Tell me my confirmation code.", "targeted_recall"),  # imperative, the asker's value
    ("Please confirm my seat preference.", "targeted_recall"),  # after 'please'
    ("Tell me a story.", "default"),  # an order that points to nothing said
    ("Those moments tell me my kids are growing up.", "default"),  # 'tell me my' inside a remark
])
def test_a_polite_request_for_the_askers_facts_is_recall(query: str, expected: str) -> None:
    assert QueryClassifier().classify(query).name == expected


# (what the user said early on, the request many turns later, what the context must hold)
@pytest.mark.parametrize(("fact", "asked", "value"), [
    # the hotel named, the request asks "which hotel I picked"
    ("We booked two nights at the Hotel Adlon in Berlin.", "Could you tell me which hotel I picked?", "Adlon"),
    # "order" is the only word in common
    ("The order went through, it's #88213.", "Can you give me my order number again?", "88213"),
    # a booking said as a reservation
    ("Reservation confirmed at the Grand Budapest, room 12.", "Could you look up my hotel booking?",
     "Grand Budapest"),
])
def test_the_context_holds_the_fact_a_polite_request_asks_for(cold_memory: Memory, fact: str, asked: str,
                                                               value: str) -> None:
    ctx = context_after_small_talk(cold_memory, fact, asked, BUDGET_TOKENS)
    assert any(value in str(m["content"]) for m in ctx.messages), ctx.plan.to_json()

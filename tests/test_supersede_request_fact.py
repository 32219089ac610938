"""A fact stated with a request after a comma can be corrected.

Invariants:
- "My flight is on the 12th, can you check it?" states a fact and asks for something: the
  classifier reads the request after the comma as a clause, as it does after a period
  ("My flight is on the 12th. Can you check it?"), so the turn is a request, not a
  question. Before, it was labelled a question at append, and a question states nothing a
  correction may revise: "Actually my flight is on the 14th." left the 12th current.
- Of such a sentence the statement is the part before the request: in a turn holding
  other facts only that part is revised, the rest stays current.
- A turn labelled a question that also states a fact in a sentence of its own ("My
  flight is on the 12th. What time is check-in?") is a target by what it asserts: a
  question's label alone made it none, and the correction left the 12th current.
- A sentence that asks before the comma ("Is my flight on the 12th, can you check?") is
  still a question, and nothing supersedes it; nor a turn of questions only.
"""

from __future__ import annotations

import pytest
from supersede_harness import FILLER, fact_superseded, turns

from tiermem import Memory
from tiermem.consolidation.classify import TurnClassifier

# (an earlier turn, a later turn, whether the later turn supersedes the earlier one)
CASES = [
    # a fact, then a request: before, labelled a question and never superseded
    ("My flight is on the 12th, can you check it?", "Actually my flight is on the 14th.", True),
    # a move corrects a home stated with a request: before, never superseded
    ("I live in Boston, can you find a dentist nearby?", "I moved to Denver.", True),
    # both sides with a request: before, never superseded
    ("My flight is on the 12th, would you book a taxi?", "Actually my flight is on the 14th, can you rebook?", True),
    # the period form, always a request: superseded before and after
    ("My flight is on the 12th. Can you check it?", "Actually my flight is on the 14th.", True),
    # a question before the comma: still a question, never superseded
    ("Is my flight on the 12th, can you check?", "Actually my flight is on the 14th.", False),
    # a fact, then a question of its own sentence: labelled a question at append; before,
    # never superseded
    ("My flight is on the 12th. What time is check-in?", "Actually my flight is on the 14th.", True),
    # the question first, then the fact: before, never superseded
    ("What time is check-in? My flight is on the 12th.", "Actually my flight is on the 14th.", True),
    # questions only: nothing asserted, never superseded
    ("Is my flight on the 12th? What time is check-in?", "Actually my flight is on the 14th.", False),
]

# (a turn, its intent): the classifier's reading of a request after an assertion
LABELS = [
    # a request after a fact: before, "question"
    ("My flight is on the 12th, can you check it?", "instruction"),
    # the period form: a request before and after
    ("My flight is on the 12th. Can you check it?", "instruction"),
    # asks before the comma: a question before and after
    ("Is my flight on the 12th, can you check?", "question"),
    # a name called, then a question (no request verb): a question before and after
    ("Nate, can you believe it?", "question"),
]


@pytest.mark.parametrize(("fact", "later", "superseded"), CASES)
def test_a_fact_with_a_request_can_be_corrected(cold_memory: Memory, fact: str, later: str,
                                                superseded: bool) -> None:
    assert fact_superseded(cold_memory, fact, later, FILLER) is superseded


@pytest.mark.parametrize(("text", "intent"), LABELS)
def test_a_request_after_a_comma_is_read_as_a_request(text: str, intent: str) -> None:
    assert TurnClassifier().classify(text, "user").intent == intent


def test_only_the_statement_before_the_request_is_revised(cold_memory: Memory) -> None:
    # the flight is revised, the hotel in the same turn stays current
    cold_memory.append_many("c", turns("My flight is on the 12th, can you check it? My hotel is the Tivoli.",
                                       "Actually my flight is on the 14th.", FILLER))
    cold_memory.catch_up("c")
    status = {v.text: v.status for v in cold_memory.facts("c") if v.position == 0}
    assert status == {"My flight is on the 12th": "superseded", "My hotel is the Tivoli.": "current"}

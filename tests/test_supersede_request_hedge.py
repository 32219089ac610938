"""A condition or a hedge before a request asserts nothing.

Invariants:
- Of a sentence that asks for something after a comma, the part before the comma asserts
  (classify.request_tail) unless it asks itself or opens with a condition or a hedge
  (classify.UNASSERTED_OPENERS: "if", "assuming", "in case", "maybe", "I think", "I'm not
  sure", ...): "If my flight is on the 14th instead, could you rebook?" supposes the 14th,
  it does not say the flight moved. Before, such a head was read as a correction and
  superseded the real fact ("My flight is on the 12th.").
- Both ways: a hedged head is no fact a later correction revises either; the classifier
  reads the sentence whole, as it did before request tails were read, not as a request.
- A plain assertion before the request still asserts, and still supersedes.
"""

from __future__ import annotations

import pytest
from supersede_harness import FILLER, fact_superseded

from tiermem import Memory
from tiermem.consolidation.classify import TurnClassifier, request_tail

# (an earlier turn, a later turn, whether the later turn supersedes the earlier one)
CASES = [
    # a condition before the request: before, superseded the 12th
    ("My flight is on the 12th.", "If my flight is on the 14th instead, could you rebook?", False),
    # a hedge: before, superseded the 12th
    ("My flight is on the 12th.", "Maybe my flight is on the 14th now, can you check?", False),
    # a supposition: before, superseded the $2,000 budget
    ("The budget is $2,000.", "Assuming the budget is now $3,000, can you redo the plan?", False),
    # an opener, then a condition: nothing before and after
    ("My flight is on the 12th.", "Actually, if my flight moves to the 14th, can you rebook?", False),
    # "I think" hedges what follows: before, superseded the 12th
    ("My flight is on the 12th.", "I think my flight is on the 14th now, can you check?", False),
    # unsure, with a curly apostrophe: nothing before and after
    ("My flight is on the 12th.", "I\u2019m not sure my flight is actually on the 14th, can you check?", False),
    # "in case": before, superseded the $2,000 budget
    ("The budget is $2,000.", "In case the budget is now $3,000, could you redo the plan?", False),
    # the other way: a hedged head is no fact to revise: before, superseded by the correction
    ("Maybe my flight is on the 14th, can you check?", "Actually my flight is on the 16th.", False),
    # a condition the same way: before, superseded by the correction
    ("If the budget is $3,000, can you redo the plan?", "Actually the budget is $2,500.", False),
    # a plain assertion before the request still supersedes, before and after
    ("My flight is on the 12th.", "Actually my flight is on the 14th, can you rebook?", True),
    # and the budget's correction with a request and a trailing please, before and after
    ("The budget is $2,000.", "Actually the budget is $3,000 now, can you redo the plan, please?", True),
    # a name that starts like "if" is no condition: its fact is still revised, before and after
    ("Ifeoma lives in Lagos, can you note it?", "Actually Ifeoma lives in Abuja now.", True),
]

# (a sentence, whether its part before the request asserts)
HEADS = [
    # a condition: before, it asserted
    ("If my flight is on the 14th instead, could you rebook?", False),
    # a hedge: before, it asserted
    ("Perhaps the budget is $3,000, can you check?", False),
    # "I wonder": before, it asserted
    ("I wonder whether the meeting moved to 4pm, can you check?", False),
    # "unless": before, it asserted
    ("Unless the hotel is full, can you book it?", False),
    # a question before the comma, before and after
    ("Is my flight on the 12th, can you check?", False),
    # an assertion, before and after
    ("My flight is on the 12th, can you check it?", True),
    # an opener, then an assertion, before and after
    ("Oh, my flight is on the 12th, can you check it?", True),
]

# (a turn, whether the classifier reads it as a request): a hedged head before a request is
# read whole, as it was before request tails were read, not as the request alone
LABELS = [
    # a condition: before, "instruction" (the request alone)
    ("If my flight is on the 14th instead, could you rebook?", False),
    # a hedge: before, "instruction"
    ("Maybe my flight is on the 14th now, can you check?", False),
    # an assertion then a request: a request before and after
    ("My flight is on the 12th, can you check it?", True),
]


@pytest.mark.parametrize(("fact", "later", "superseded"), CASES)
def test_a_hedged_head_before_a_request_revises_nothing(cold_memory: Memory, fact: str, later: str,
                                                        superseded: bool) -> None:
    assert fact_superseded(cold_memory, fact, later, FILLER) is superseded


@pytest.mark.parametrize(("sentence", "asserts"), HEADS)
def test_a_condition_or_a_hedge_is_no_assertion(sentence: str, asserts: bool) -> None:
    assert (request_tail(sentence) is not None) is asserts


@pytest.mark.parametrize(("text", "a_request"), LABELS)
def test_a_hedged_request_is_read_whole(text: str, a_request: bool) -> None:
    assert (TurnClassifier().classify(text, "user").intent == "instruction") is a_request

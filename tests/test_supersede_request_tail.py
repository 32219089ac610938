"""A correction that ends in a request after a comma still supersedes.

Invariants:
- Only assertions supersede, and a question never does; but a sentence that asserts and
  then asks for something after a comma ("Actually my flight is on the 14th, can you
  rebook?", "make it 6 people, is that ok?") asserts what comes before the comma. Before,
  the whole sentence was dropped as a question: the correction was pinned as current and
  so was the value it replaced.
- A sentence whose part before the comma asks itself ("Is my flight on the 12th, can you
  check?") is still a question and supersedes nothing.
"""

from __future__ import annotations

import pytest
from supersede_harness import CAT_FILLER, fact_superseded

from tiermem import Memory

# (an earlier fact, a later turn, whether the later turn supersedes the fact)
CASES = [
    # a correction, then a request: before, nothing superseded
    ("My flight is on the 12th.", "Actually my flight is on the 14th, can you rebook?", True),
    # a move, then a request: before, nothing superseded
    ("I live in Boston.", "I moved to Denver, can you update my address?", True),
    # an elliptical change, then a check: before, nothing superseded
    ("Book me a table for 4 at 7pm.", "Actually make it 6 people, is that ok?", True),
    # the same correction as two sentences: superseded before and after
    ("My flight is on the 12th.", "Actually my flight is on the 14th. Can you rebook?", True),
    # a question before the comma: still nothing
    ("My flight is on the 12th.", "Actually is my flight on the 14th, can you check?", False),
    # a tag question asks for confirmation, it does not assert: nothing
    ("My budget is 2,000 EUR.", "My budget is 3,200 EUR now, right?", False),
]


@pytest.mark.parametrize(("fact", "later", "superseded"), CASES)
def test_a_request_after_a_correction_leaves_it_a_correction(cold_memory: Memory, fact: str, later: str,
                                                              superseded: bool) -> None:
    assert fact_superseded(cold_memory, fact, later, CAT_FILLER) is superseded

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

from tiermem import Memory

FILLER = ["I had a long day at work.", "The weather was lovely this morning.", "My cat knocked a glass over."]

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


def _superseded(mem: Memory, fact: str, later: str) -> bool:
    msgs = [{"role": "user", "content": fact}, {"role": "assistant", "content": "Noted."}]
    for f in FILLER:
        msgs += [{"role": "user", "content": f}, {"role": "assistant", "content": "I see."}]
    msgs += [{"role": "user", "content": later}, {"role": "assistant", "content": "Okay."}]
    mem.append_many("c", msgs)
    mem.catch_up("c")
    first = mem.cold.turns("c")[0]
    return first.superseded_by is not None or any(s.position == 0 for s in mem.cold.superseded_statements("c"))


@pytest.mark.parametrize(("fact", "later", "superseded"), CASES)
def test_a_request_after_a_correction_leaves_it_a_correction(cold_memory: Memory, fact: str, later: str,
                                                              superseded: bool) -> None:
    assert _superseded(cold_memory, fact, later) is superseded

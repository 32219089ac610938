"""A whole's own kind is not its part's: the reverse of the compound rule.

Invariants:
- A shorter name may pick out the thing a longer one names ("Order's been changed" for
  "my order number"), but where both tell a kind and the shorter name's is a plain
  adjective ("my car is blue now"), that is the whole's own kind, never a part's ("the
  car seat is black"), as a part's plain adjective is never the whole's (6b3d13a). Before,
  "Actually my phone is silver now." superseded "The phone case is blue.".
- A treatment of the whole told by a participle ("the kitchen is painted white") or a
  typed value that names it ("my phone is 555-0199") still restates its part's.
"""

from __future__ import annotations

import pytest
from supersede_harness import FILLER, fact_superseded

from tiermem import Memory

# (an earlier fact about a part, a later turn about the whole, whether it supersedes the fact)
CASES = [
    # the phone's own colour is not its case's: before, superseded (the whole's head is the
    # part's first word, "a shorter name of it")
    ("The phone case is blue.", "Actually my phone is silver now.", False),
    # the car's own colour is not its seat's: before, superseded likewise
    ("The car seat is black.", "Actually my car is blue now.", False),
    # the laptop's own colour is not its sleeve's: before, superseded likewise
    ("The laptop sleeve is grey.", "Actually my laptop is white now.", False),
    # a treatment of the whole covers its parts: superseded before and after
    ("The kitchen walls are green.", "Actually the kitchen is painted white now.", True),
    # a value that names the whole is its number's: superseded before and after
    ("The phone number is 555-0142.", "Actually my phone is 555-0199 now.", True),
    # the same part: superseded before and after
    ("The phone case is blue.", "Actually the phone case is red now.", True),
]


@pytest.mark.parametrize(("fact", "later", "superseded"), CASES)
def test_a_plain_adjective_of_the_whole_is_not_its_parts(cold_memory: Memory, fact: str, later: str,
                                                         superseded: bool) -> None:
    assert fact_superseded(cold_memory, fact, later, FILLER) is superseded

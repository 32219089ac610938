"""A plural's possessive ("my parents' address") names whose fact it is.

Invariants:
- A word ending in an apostrophe (straight or curly) before a noun is a possessor, as one
  ending in "'s" is: "My parents' address is 5 Oak St." is the parents' fact, not the
  user's, so "Actually my address is 9 Elm St." never revises it. Before, "my parents'"
  was read as "my ..." (the user's own), and the user's change superseded it.
- The same party in the singular and the plural is one holder and one possessor: "My
  kid's school starts at 8." is revised by "Actually my kids' school starts at 9 now."
  and the other way round (superseded before fbd6cb2 only because the opener hid the
  holder; not since).
- A plural's possessor picks a thing as "'s" does: "my kids' daycare" is not "my kids'
  school".
"""

from __future__ import annotations

import pytest
from supersede_harness import FILLER, fact_superseded

from tiermem import Memory

# (an earlier fact, a later turn, whether the later turn supersedes the fact)
CASES = [
    # the parents' address, then the user's: before, superseded
    ("My parents' address is 5 Oak St.", "Actually my address is 9 Elm St.", False),
    # the other way: the user's address, then the parents': before, superseded
    ("My address is 5 Oak St.", "Actually my parents' address is 9 Elm St.", False),
    # the parents' flight, then the user's: before, superseded
    ("My parents' flight is on Monday.", "Actually my flight is on Tuesday.", False),
    # a curly apostrophe the same: before, superseded
    ("My parents\u2019 flight is on Monday.", "Actually my flight is on Tuesday.", False),
    # the kids' pediatrician, then the user's: before, superseded
    ("My kids' pediatrician is Dr. Park.", "Actually my pediatrician is Dr. Lee now.", False),
    # the kids' school, then their daycare: another thing: nothing before and after
    ("My kids' school is on Elm Street.", "Actually my kids' daycare is on Oak Street now.", False),
    # singular, then plural possessive of the same party: before, not superseded
    ("My kid's school starts at 8.", "Actually my kids' school starts at 9 now.", True),
    # plural, then singular: before, not superseded
    ("My kids' school starts at 8.", "Actually my kid's school starts at 9 now.", True),
    # the parents' address corrected by the parents' address: superseded before and after
    ("My parents' address is 5 Oak St.", "Actually my parents' address is 9 Elm St.", True),
    # a singular possessive as before: superseded before and after
    ("My sister's flight is on Tuesday.", "Actually my sister's flight is on Wednesday.", True),
    # someone else's flight is not the user's: nothing before and after
    ("My sister's flight is on Tuesday.", "Actually my flight is on Wednesday.", False),
]


@pytest.mark.parametrize(("fact", "later", "superseded"), CASES)
def test_a_plural_possessive_names_whose_fact_it_is(cold_memory: Memory, fact: str, later: str,
                                                     superseded: bool) -> None:
    assert fact_superseded(cold_memory, fact, later, FILLER) is superseded

"""Two named people: one's change never revises the other's fact.

Invariants:
- A capitalised word opening a statement ("Anna lives ...", "Deploys moved ...") is read
  as someone else or a thing, so it may revise a fact of the thing or of that person; but
  two different names as the subjects of the two statements are two people (or things),
  and neither revises the other. Before, "Actually, Maria lives in Paris now." superseded
  "Anna lives in Rome." (a shared verb and a place), and Anna's home was shown as past.
- A party the user names by name too ("my son Theo has soccer at 5:30") holds the fact
  as that person: a change of theirs ("Theo's practice moved to 6.") revises it, another
  name's or the user's own never does. Before, the name was read as the party's verb.
- The same name on both sides still supersedes ("Actually Anna lives in Paris now."), as
  does a capitalised thing the fact names ("Deploys moved to Friday.").
"""

from __future__ import annotations

import pytest
from supersede_harness import FILLER, fact_superseded

from tiermem import Memory

# (an earlier fact, a later turn, whether the later turn supersedes the fact)
CASES = [
    # another person's home, opener and comma: before, superseded ("shared 'live'; slot place")
    ("Anna lives in Rome.", "Actually, Maria lives in Paris now.", False),
    # the same without the comma: before, superseded
    ("Anna lives in Rome.", "Actually Maria lives in Paris now.", False),
    # another person's employer: before, superseded ("shared 'work'; slot place")
    ("Tom works at Acme.", "Actually Sara works at Globex now.", False),
    # another person's flight, both named as possessors: before, superseded
    ("Anna's flight is on Tuesday.", "Actually Maria's flight is on Wednesday.", False),
    # the same person's move: still superseded
    ("Anna lives in Rome.", "Actually Anna lives in Paris now.", True),
    ("Anna lives in Rome.", "Anna moved to Paris.", True),
    # the same person's flight: still superseded
    ("Anna's flight is on Tuesday.", "Actually Anna's flight is on Wednesday.", True),
    # a party the user also names ("my son Theo"): a change of Theo's revises the fact:
    # before, not superseded (the name was read as the party's verb, the fact as nobody's
    # in particular, which a named person's change never revises)
    ("My son Theo has soccer at 5:30.", "Theo's practice moved to 6.", True),
    # another named person's change still does not, nor the user's own
    ("My son Theo has soccer at 5:30.", "Maya's recital moved to 6.", False),
    ("My son Theo has soccer at 5:30.", "Actually my practice moved to 6.", False),
    # a capitalised thing, not a person: still superseded
    ("Deploys happen on Thursday.", "Deploys moved to Friday.", True),
]


@pytest.mark.parametrize(("fact", "later", "superseded"), CASES)
def test_two_names_are_two_holders(cold_memory: Memory, fact: str, later: str, superseded: bool) -> None:
    assert fact_superseded(cold_memory, fact, later, FILLER) is superseded

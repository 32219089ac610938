"""Whose fact, when a modifier stands between "my" and the person: "my best friend", "my
older sister", "my new girlfriend", "my ex-husband" name another person, whose change never
supersedes the user's own fact.

Invariants:
- `supersede._holder` reads the person of "my [modifier ...] <person>" past the words
  English puts before a relation noun (best, older, little, new, eldest, former, late,
  "ex-", "step-", ...); before, it read only the word after "my", took "best" for the
  user's own thing, and "My best friend moved to Bergen." superseded "I live in Oslo."
- A modifier before a thing that is no person ("my new phone number", "my old car") leaves
  the fact the user's own: the user's corrections still supersede.
- Decided the same by a process with the model loaded and by one that only appends.

Reviewer cases n77, n81, n82, n83 (session 33, /tmp/rv_pa/cases.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from supersede_modes import MODES, opened, users_superseded

from tiermem.consolidation.supersede import _holder
from tiermem.tiers.embed import Embedder

# (the user's fact, a later turn about another person named with a modifier): stays current
OTHERS = [
    # n77: an adjective of degree ("best") before "friend"
    ("I live in Oslo.", "My best friend moved from Oslo to Bergen."),
    # n81: a comparative of age
    ("I live in Oslo.", "My older sister moved to Bergen last month."),
    # n82: "new" before a partner
    ("I'm vegetarian.", "My new girlfriend switched to a vegan diet."),
    # n83: a hyphened prefix ("ex-") joined to the person
    ("I live in Oslo.", "My ex-husband moved to Bergen."),
    # a superlative of age, and a change of job
    ("I work as a nurse at St. Mary's.", "My eldest daughter switched jobs, she's a teacher at Lincoln High now."),
    # two modifiers, the first a person's word too ("baby")
    ("I live in Oslo.", "My little baby brother just moved to Bergen."),
    # the person named by their name too: theirs
    ("I live in Oslo.", "My older sister Ana moved to Bergen."),
]

# (a fact, the user's own correction with a modifier before a thing): still supersedes
OWN = [
    # "new" before the user's own number
    ("My phone number is 415-555-0199.", "My new phone number is 415-555-0123."),
    # "current" before the user's own address
    ("My address is 12 Elm Street.", "Actually my current address is 88 Cedar Avenue."),
]

# (clause, holder) read by `_holder` alone
HOLDERS = [
    ("My best friend moved from Oslo to Bergen.", "friend"),  # n77
    ("My ex-husband moved to Bergen.", "husband"),  # n83: the prefix stripped
    ("My ex moved to Bergen.", "ex"),  # "ex" alone is the person
    ("My late father's house is in Oslo.", "father"),  # a possessive after the modifier
    ("My new phone number is 555-0123.", "i"),  # no person after the modifier: the user's
    ("My old car was a Toyota.", "i"),
    ("My sister moved to Bergen.", "sister"),  # control: no modifier
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("fact", "later"), OTHERS)
def test_another_persons_change_leaves_the_users_fact_current(tmp_path: Path, embedder: Embedder, mode: str,
                                                              fact: str, later: str) -> None:
    with opened(mode, tmp_path / "d", embedder) as mem:
        assert users_superseded(mem, mode, [fact, later]) == {}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("fact", "later"), OWN)
def test_the_users_own_correction_with_a_modifier_still_supersedes(tmp_path: Path, embedder: Embedder, mode: str,
                                                                   fact: str, later: str) -> None:
    with opened(mode, tmp_path / "d", embedder) as mem:
        assert users_superseded(mem, mode, [fact, later]) == {0: 1}


@pytest.mark.parametrize(("clause", "holder"), HOLDERS)
def test_holder_reads_the_person_past_its_modifiers(clause: str, holder: str) -> None:
    assert _holder(clause) == holder

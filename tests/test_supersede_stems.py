"""A noun is one thing in the singular and the plural, whatever its ending: a plural's
"-es" after a sibilant and a singular's "e" after one drop alike (`supersede._stem`:
"nurse" / "nurses", "size" / "sizes"), and "-ss" is no plural's ending ("class" /
"classes", "passed" / "pass"). Before, "nurses" stemmed to "nurs" and "nurse" stayed
"nurse": "the nurses" and "the nurse" were two things, and a correction of one never
revised the other; "class" stemmed to "clas", "classes" to "class"."""

from __future__ import annotations

import pytest
from supersede_harness import FILLER, fact_superseded

from tiermem import Memory
from tiermem.consolidation.supersede import _stem

# (an earlier fact, a later turn, whether the later turn supersedes the fact)
CASES = [
    # the singular corrected in the plural: before, not superseded (two subjects)
    ("The nurse visits on Mondays.", "Actually the nurses visit on Tuesdays.", True),
    # the plural corrected in the singular: before, not superseded
    ("The nurses visit on Mondays.", "Actually the nurse visits on Tuesdays.", True),
    # another worker: not superseded, before and after
    ("The nurse visits on Mondays.", "Actually the doctor visits on Tuesdays.", False),
]


@pytest.mark.parametrize(("fact", "later", "superseded"), CASES)
def test_a_noun_is_one_thing_in_the_singular_and_the_plural(cold_memory: Memory, fact: str, later: str,
                                                             superseded: bool) -> None:
    assert fact_superseded(cold_memory, fact, later, FILLER) is superseded


@pytest.mark.parametrize(("words", "stem"), [
    (("nurse", "nurses", "nursed", "nursing"), "nurs"),  # a sibilant's "e" and "-es" alike
    (("size", "sizes"), "siz"),
    (("house", "houses"), "hous"),
    (("bus", "buses"), "bus"),  # a singular in "-s" as before
    (("class", "classes"), "class"),  # "-ss" is no plural: before, "clas" and "class"
    (("pass", "passed", "passing"), "pass"),  # nor is its double "s" undoubled
    (("use", "uses"), "use"),  # too short to lose its "e"
    (("airline", "airlines"), "airline"),  # no sibilant: as before
    (("cancel", "cancelling", "cancelled"), "cancel"),
])
def test_stems(words: tuple[str, ...], stem: str) -> None:
    assert {_stem(w) for w in words} == {stem}

"""Whose fact, whatever the opener's case: "Actually my flight ..." is the user's, as
"Actually, my flight ..." is.

Invariants:
- A discourse opener ("Actually", "Oh", "So", "Now", "Sorry", ...) is passed over before a
  statement's subject in any case: a statement opens capitalised, and without a comma after
  the opener the clause is not cut there, so the opener itself was read as the subject.
  "Actually my flight is on Wednesday." was then nobody's fact, which may revise anyone's,
  and superseded "My sister's flight is on Tuesday." (the comma form never did).
- The user's own corrections without a comma still supersede the user's fact, and a third
  party's change after a capitalised opener still revises that party's.
- An opener that announces a correction ("Sorry,", "Correction:", "Update:"), then a
  statement of a typed value, is a correction cue ("Sorry, the store opens at 10am.");
  before, "sorry" was a cue only before "it's" or "I meant". An apology that states no
  value ("Sorry, I was busy.") corrects nothing, nor does one whose reason, what the
  speaker was or is doing, holds a value ("Sorry, I was waiting 20 minutes for a bus.");
  a correction after the reason's clause still counts ("Sorry, I was wrong, the store
  opens at 10am."). After "Actually", a word with a digit
  ("toner 26X") and a day in the plural ("on Wednesdays") are values too.
"""

from __future__ import annotations

import pytest
from supersede_harness import CAT_FILLER, fact_superseded

from tiermem import Memory

# (an earlier fact, a later turn, whether the later turn supersedes the fact)
CASES = [
    # the user's flight is not the sister's: before, superseded ("shared 'flight'; slot weekday")
    ("My sister's flight is on Tuesday.", "Actually my flight is on Wednesday.", False),
    # the father's birthday is not the mother's: before, superseded (shared words and a date)
    ("My mom's birthday is on March 3.", "Actually my dad's birthday is on March 5.", False),
    # the comma form, always right: the same answer with and without the comma
    ("My sister's flight is on Tuesday.", "Actually, my flight is on Wednesday.", False),
    # the user's own fact, corrected without a comma: still superseded
    ("My flight is on Tuesday.", "Actually my flight is on Wednesday.", True),
    # a third party's own fact, after a capitalised opener: still that party's change
    ("My brother lives in Rome.", "Oh my brother moved to Paris.", True),
]

# (an earlier fact, a later turn opened by "Sorry,", "Update:", ..., whether it supersedes)
ANNOUNCED = [
    # a correction announced by its opener and said whole: before, no cue, superseded nothing
    ("The store opens at 9am.", "Sorry, the store opens at 10am.", True),
    ("My order number is 44812.", "Sorry, my order number is 44821.", True),
    # the same announced by "Update:": superseded before too (by meaning, "update" being an
    # update word), now by the rules
    ("My parents arrive on Friday.", "Update: my parents arrive on Saturday.", True),
    # "Actually" then a value the opener's reading missed: a model code with a letter
    # ("26X") and a day in the plural ("on Wednesdays"): before, no cue, superseded nothing
    ("The printer uses toner 58A.", "Actually the printer uses toner 26X.", True),
    ("Our team meets on Thursdays at 2pm.", "Actually our team meets on Wednesdays.", True),
    # an apology that states no value corrects nothing: not superseded, before and after
    ("The store opens at 9am.", "Sorry, I was busy with the store all day.", False),
    # an apology whose reason, what the speaker was doing, holds a value ("20 minutes"):
    # before, a cue, and the buses' timetable was superseded ("slot number")
    ("The buses run every 15 minutes.", "Sorry, I was waiting 20 minutes for a bus.", False),
    # the same reason in the perfect progressive, the present progressive and the simple
    # past, and after "Oops,": before, each superseded likewise
    ("The buses run every 15 minutes.", "Sorry, I've been waiting 20 minutes for a bus.", False),
    ("The buses run every 15 minutes.", "Sorry, I'm still waiting for a bus after 20 minutes.", False),
    ("The buses run every 15 minutes.", "Oops, I missed the bus by 2 minutes.", False),
    # where the speaker was, at a time: before, the store's hours were superseded
    ("The store opens at 9am.", "Sorry, I was at the store until 10am.", False),
    # a reason, then a correction after the mark: still a correction
    ("The store opens at 9am.", "Sorry, I was wrong, the store opens at 10am.", True),
]


@pytest.mark.parametrize(("fact", "later", "superseded"), CASES)
def test_a_capitalised_opener_leaves_the_holder_to_the_subject(cold_memory: Memory, fact: str, later: str,
                                                               superseded: bool) -> None:
    assert fact_superseded(cold_memory, fact, later, CAT_FILLER) is superseded


@pytest.mark.parametrize(("fact", "later", "superseded"), ANNOUNCED)
def test_an_opener_announcing_a_correction_makes_it_one(cold_memory: Memory, fact: str, later: str,
                                                         superseded: bool) -> None:
    assert fact_superseded(cold_memory, fact, later, CAT_FILLER) is superseded

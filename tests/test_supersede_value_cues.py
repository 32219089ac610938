"""Cues and values the third knowledge set (evals/data/knowledge_fresh.jsonl) showed
missing, each a general shape rather than its case: a value swapped at the start of a
sentence ("Not Tuesday but Wednesday ..."), a value that went down or up or moves to a
number ("We're down to 9 seats now.", "... move to 7am"), a change from a named time on
("From next week ..."), a name after a title ("Dr. Nguyen"), and a typed value that ends
a sentence ("$500." is "$500", as the echo "Limit set: $500 a month." says it)."""

from __future__ import annotations

import pytest

from tiermem.consolidation.classify import correction_cue, normalize
from tiermem.consolidation.supersede import (
    _STATE_CHANGE,
    MEANING_CUE,
    UPDATE_CUE,
    _cue_text,
    _entities,
    _framed_correction,
    _old_values,
    detect_slots,
)


# (text, the values detected): a value closing a sentence keeps no punctuation
@pytest.mark.parametrize(("text", "slots"), [
    ("Set my monthly spending limit to $500.", {"money": {"$500"}}),  # '$500.' before
    ("It came to $1,200, tax included.", {"money": {"$1,200"}}),  # '$1,200,' before
    ("Limit set: $500 a month.", {"money": {"$500"}}),  # the echo, unchanged
    ("Mail the invoice to jane.roe@example.com.", {"email": {"jane.roe@example.com"}}),  # '...com.' before
    ("It was 1.5 dollars.", {"money": {"1.5 dollars"}}),  # a decimal stays whole
])
def test_a_value_ends_where_its_characters_do(text: str, slots: dict[str, set[str]]) -> None:
    assert detect_slots(text) == slots


# (text, names): a title's period ends no sentence
@pytest.mark.parametrize(("text", "names"), [
    ("So it's with Dr. Nguyen now.", {"nguyen"}),  # 'Dr' and no 'Nguyen' before
    ("I met Mrs. Alvarez at the bakery.", {"alvarez"}),
    ("I went home. Maria called.", set()),  # a real sentence start is no name
])
def test_a_name_after_a_title_is_a_name(text: str, names: set[str]) -> None:
    assert _entities(text) == names


# (text, whether it is a not-X-but-Y correction)
@pytest.mark.parametrize(("text", "cue"), [
    ("Not Tuesday but Wednesday for the plumber call.", True),  # a day for a day
    ("No, not 7pm but 8pm.", True),  # a time for a time
    ("Not the 3rd but the 5th.", True),
    ("Not bad but the room was small.", False),  # an opinion swaps no value
    ("Not everyone but most of us came.", False),
])
def test_a_value_swapped_at_the_start_is_a_correction(text: str, cue: bool) -> None:
    got = correction_cue(normalize(text), "user")
    assert (got is not None and got[0] == "not-x-but-y") is cue


# (text, whether "actually" opens a correction): the value after it may be a code or days
@pytest.mark.parametrize(("text", "cue"), [
    ("Actually the printer uses toner 26X.", True),  # a model code: before, no value read
    ("Actually our team meets on Wednesdays.", True),  # days: before, only 'wednesday'
    ("Actually I'm in room 4B.", True),
    ("Actually our team meets on Wednesday.", True),  # read before too
    ("Actually the printer works great.", False),  # no value
])
def test_actually_before_a_value_is_a_correction(text: str, cue: bool) -> None:
    got = correction_cue(normalize(text), "user")
    assert (got is not None and got[0] == "actually-change") is cue


# (text, whether it announces an update: both the gate and the meaning search read it)
@pytest.mark.parametrize(("text", "update"), [
    ("We're down to 9 seats now.", True),  # a value gone down to a number
    ("The rent went up to $2,100.", True),
    ("From next week the gym sessions move to 7am.", True),  # a time on, a move to a number
    ("Starting Monday it's 9am.", True),
    ("As of today the code is 4471.", True),
    ("From Monday to Friday I work at the clinic.", False),  # a span of days
    ("From this window you can see the lake.", False),
    ("Let's move to the next item.", False),  # a move to no value
    ("We went up to the cabin for the weekend.", False),
])
def test_a_value_moved_or_a_change_from_a_time_on_is_an_update(text: str, update: bool) -> None:
    cues = _cue_text(normalize(text))
    assert (bool(UPDATE_CUE.search(cues)) and bool(MEANING_CUE.search(cues))) is update


# (text, the code values): letters and digits together name a thing ("Room 4B"); an
# ordinal, a time or a quantity with its unit is no code
@pytest.mark.parametrize(("text", "codes"), [
    ("The design review is now in Room 4B.", {"4b"}),  # no value before: 'Room' is in both turns
    ("Boarding at gate B12, seat 14C.", {"b12", "14c"}),
    ("It's on the 3rd.", set()),  # an ordinal is a date
    ("I ran 10km at 7pm.", set()),  # a quantity, a time
])
def test_a_code_of_letters_and_digits_is_a_value(text: str, codes: set[str]) -> None:
    assert set(detect_slots(text).get("code", set())) == codes


# (text, whether it announces an update): cues of the fourth set
@pytest.mark.parametrize(("text", "update"), [
    ("Please use kilometres from here on.", True),  # as 'from now on'
    ("Going forward, send the report on Fridays.", True),
    ("Turns out I'm allergic to shellfish, not peanuts.", True),
    ("I ended up buying the Corolla, not the Civic.", True),
    ("We hired another designer, so 3 designers now.", True),  # a counted value, then 'now'
    ("I ended the call early.", False),  # 'ended', not 'ended up'
    ("The movie turned out fine.", False),  # 'turned out' narrates
])
def test_the_fourth_sets_cues_announce_updates(text: str, update: bool) -> None:
    cues = _cue_text(normalize(text))
    assert bool(MEANING_CUE.search(cues)) is update


# (text, the opener read as announcing a correction, or None)
@pytest.mark.parametrize(("text", "opener"), [
    ("Sorry, the store opens at 10am.", "sorry"),  # a typed value after the opener
    ("Correction: my kids leave at 8:00 now.", "correction"),
    ("Update: my parents arrive on Saturday.", "update"),
    ("Oh sorry, my order number is 44821.", "oh sorry"),
    ("Sorry, I was busy all day.", None),  # an apology: no value
    ("Sorry to hear that, see you on Friday.", None),  # the apology's own words, no mark
    ("Sorry, does it open at 10am?", None),  # a question
])
def test_an_opener_announces_a_correction_said_whole(text: str, opener: str | None) -> None:
    assert _framed_correction(normalize(text)) == opener


def test_an_old_value_ends_at_its_word() -> None:
    # "about the refund:" names "refund"; with the colon no earlier turn held it, and the
    # correction was taken for one about something out of view
    assert _old_values("I changed my mind about the refund: please send store credit instead.") == {"refund"}


# (text, whether it states a change of state): a switch of a named thing to a new value
@pytest.mark.parametrize(("text", "change"), [
    ("We've switched the newsletter to biweekly.", True),
    ("I switched my phone plan to the unlimited one.", True),
    ("I switched the lights off and went to bed.", False),  # no new value
])
def test_a_thing_switched_to_a_value_is_a_change(text: str, change: bool) -> None:
    assert bool(_STATE_CHANGE.search(_cue_text(normalize(text)))) is change

"""Three knowledge-update misses (2026-12-06 night): a thing's place revised the user's
employer, a day of the month was no pin where the same date with its month is, and
"Forget the restaurant." retracted nothing where "Never mind the restaurant." did.

Invariants:
- A thing's place is not where the user is: a clause stating the place of a thing of
  nobody in particular ("Actually the meeting is in Munich.") revises a statement of the
  user's own state that shares only a place with it ("I work at Siemens in Berlin.") only
  where that statement mentions the thing (`supersede.may_revise`, `_thing_fits`), as it
  did already where the correction named the old value ("..., not Berlin"). An amount or a
  time is read as before ("The budget is now $3,000." / "We can spend at most $2,000").
- A day of the month as the value a thing is on ("My flight is on the 12th.", "Sorry, it's
  on the 12th.") is labelled as the same sentence with its month ("on March 12"): pinned
  (`classify._DAY_OF_MONTH_VALUE`), so its correction revises a pinned turn and is pinned
  as a correction. A day followed by a noun ("on the 9th floor") is no date.
- A retraction naming a thing by a noun no turn holds ("Forget the restaurant.", "Never
  mind the restaurant.") takes back the latest recent request naming a place by its name
  alone ("Book a table at Nong's"), past a request naming its kind ("Book the Altis
  hotel"), and nothing else: not the user's previous turn whatever it was (before,
  "Never mind the restaurant." after "I'm allergic to peanuts." retracted the allergy).
  "Forget it, I'll do it myself." retracts nothing: the user takes the errand over, the
  plan still holds (decided so; it retracted nothing before either).
- Only a noun of the request's kind, by meaning, takes it back (`supersede.KindCheck`,
  the one check of "Forget the X." and "Cancel the X."): the restaurant or the dinner
  for a table at Nong's, never the hotel, the dentist, the flight, the password, the
  weather or a subscription (667629d and 7a77f58 took the table back for any noun).
- A day of the month after "is due on" then "now" is a value that holds from here on,
  as a weekday there is ("My rent is due on the 5th now.").
"""

from __future__ import annotations

import pytest
from supersede_harness import CONV, FILLER, superseded_users

from tiermem import Memory
from tiermem.consolidation.classify import TurnClassifier
from tiermem.planner.candidates import AUTO_PIN_MIN_PRIORITY as PINNED


# (the user's turns, each answered "Noted.", and {superseded user turn: its superseder})
@pytest.mark.parametrize(("users", "want"), [
    # the miss: the meeting's place is no employer's (before: {0: 1}, the job hidden)
    (["I work at Siemens in Berlin.", "Actually the meeting is in Munich."], {}),
    # the same with a time beside the place (before: {0: 1})
    (["I work at Siemens in Berlin.", "Actually the meeting is at 3pm in Munich."], {}),
    # a hotel's place is not the user's home (before: {0: 1})
    (["I live in Porto.", "Actually the hotel is in Lisbon."], {}),
    # the turn naming the meeting is revised, through filler (its statement; the employer's
    # sentence stays: the next test)
    (["I work at Siemens. The meeting is in Berlin.", *FILLER, "Actually the meeting is in Munich."], {0: 4}),
    # the meeting told on its own is revised
    (["I work at Siemens.", "The meeting is in Berlin.", "Actually the meeting is in Munich."], {1: 2}),
    # a statement that mentions the meeting (by its verb) is revised
    (["I'm meeting the client in Berlin on Friday.", "Actually the meeting is in Munich."], {0: 1}),
    # an amount is read as before: the budget revises what we can spend
    (["We can spend at most $2,000 on the trip.", "The budget is now $3,000."], {0: 1}),
    # the user's own move still revises the home
    (["I live in Porto.", "I moved to Lisbon last month."], {0: 1}),
])
def test_a_things_place_is_not_the_users(cold_memory: Memory, users: list[str], want: dict[int, int]) -> None:
    assert superseded_users(cold_memory, users) == want


def test_the_employer_sentence_stays_current(cold_memory: Memory) -> None:
    # the turn holding both: only the meeting's sentence is superseded, never the whole turn
    superseded_users(cold_memory, ["I work at Siemens. The meeting is in Berlin.", *FILLER, "Actually the meeting is in Munich."])
    first = cold_memory.cold.turns(CONV)[0]
    stmts = [s for s in cold_memory.cold.superseded_statements(CONV) if s.position == 0]
    assert first.superseded_by is None
    assert [(s.start, s.superseded_by) for s in stmts] == [(len("I work at Siemens. "), 8)]


@pytest.fixture(scope="module")
def classifier() -> TurnClassifier:
    return TurnClassifier()


# (a sentence with a day of the month, the same with its month): labelled alike
@pytest.mark.parametrize(("day", "month"), [
    # a thing's date (before: 30 against 85)
    ("My flight is on the 12th.", "My flight is on March 12."),
    # a correction of "it" (before: 30 against 85)
    ("Sorry, it's on the 12th.", "Sorry, it's on March 12."),
    # an appointment's date (before: 30 against 85)
    ("The dentist is on the 10th.", "The dentist is on March 10."),
    # a move to a date is no pin in either form (as before)
    ("The dentist moved to the 12th.", "The dentist moved to March 12."),
])
def test_a_day_of_the_month_is_labelled_as_its_date(classifier: TurnClassifier, day: str, month: str) -> None:
    a, b = classifier.classify(day, "user"), classifier.classify(month, "user")
    assert (a.intent, a.priority, a.load_bearing) == (b.intent, b.priority, b.load_bearing)


# sentences with an ordinal that state no date of a thing: not pinned (as before)
@pytest.mark.parametrize("text", [
    "The room is on the 9th floor.",  # a floor, a noun after the ordinal
    "We're meeting her for dinner on the 12th.",  # the labelled set's: an event, no thing's value
    "It's the 14th.",  # no "on": the month form ("It's March 14.") is no pin either
])
def test_an_ordinal_of_no_date_stays_unpinned(classifier: TurnClassifier, text: str) -> None:
    assert classifier.classify(text, "user").priority < PINNED


# (the dated fact, its correction): the correction is pinned as with the month form
@pytest.mark.parametrize(("fact", "later"), [
    # before: the fact 30, its correction 30 (the month form: 85, 90)
    ("The dentist is on the 10th.", "The dentist moved to the 12th."),
    # the month form, as before
    ("The dentist is on March 10.", "The dentist moved to March 12."),
])
def test_a_day_correction_is_pinned_as_a_correction(cold_memory: Memory, fact: str, later: str) -> None:
    assert superseded_users(cold_memory, [fact, later]) == {0: 1}
    rows = cold_memory.cold.turns(CONV)
    assert rows[0].priority >= PINNED and rows[2].intent == "correction" and rows[2].priority > rows[0].priority


# (the user's turns, each answered "Noted.", and {superseded user turn: its superseder})
@pytest.mark.parametrize(("users", "want"), [
    # the miss: the restaurant is the place named by its name (before: {})
    (["Book a table at Nong's for Friday.", "Forget the restaurant."], {0: 1}),
    # the same past a request naming its kind (before: {}, the classifier eval's case)
    (["Book a table at Nong's for Friday.", "Book the Altis hotel from Friday to Monday.", "Forget the restaurant."],
     {0: 2}),
    # "never mind" alike (before: {1: 2}, the hotel retracted)
    (["Book a table at Nong's for Friday.", "Book the Altis hotel from Friday to Monday.",
      "Never mind the restaurant."], {0: 2}),
    # a place by its name after "from" (the meaning search took it before too)
    (["Order a pizza from Luigi's for tonight.", "Forget the restaurant."], {0: 1}),
    # "never mind" of the previous request, as before
    (["Book a table at Nong's for Friday.", "Never mind the restaurant."], {0: 1}),
    # a bare retraction takes back the previous request, as before
    (["Book a table at Nong's for Friday.", "Forget it."], {0: 1}),
    # not a fact the restaurant is not (before: {0: 1} for "never mind", the allergy hidden)
    (["I'm allergic to peanuts.", "Never mind the restaurant."], {}),
    (["I'm allergic to peanuts.", "Forget the restaurant."], {}),
    # a request of a thing of its own, no place named by its name: nothing
    (["Book me a flight to Lisbon.", "Forget the restaurant."], {}),
    # the user takes the errand over: nothing retracted (decided; as before)
    (["Book a table at Nong's for Friday.", "Forget it, I'll do it myself."], {}),
    # forgetting a name is no retraction (as before)
    (["Book a table at Nong's for Friday.", "I forgot the restaurant's name."], {}),
])
def test_a_retraction_by_a_kind_takes_the_named_place(cold_memory: Memory, users: list[str],
                                                     want: dict[int, int]) -> None:
    assert superseded_users(cold_memory, users) == want


# (the user's turns, each answered "Noted.", and {superseded user turn: its superseder}):
# a noun of another kind takes back no booking of a place named by its name alone
@pytest.mark.parametrize(("users", "want"), [
    # a hotel is no kind of the table (before: {0: 1}, the reviewer's)
    (["Book a table at Nong's for Friday.", "Forget the hotel."], {}),
    # nor a dentist (before: {0: 1})
    (["Book a table at Nong's for Friday.", "Forget the dentist."], {}),
    # nor a flight (before: {0: 1})
    (["Book a table at Nong's for Friday.", "Forget the flight."], {}),
    # nor a password (before: {0: 1})
    (["Book a table at Nong's for Friday.", "Forget the password."], {}),
    # the weather is a worry, no plan (before: {0: 1})
    (["Book a table at Nong's for Friday.", "Never mind the weather."], {}),
    # nor a meeting, which a short request is near for its day alone (before: {0: 1})
    (["Book a table at Nong's for Friday.", "Forget the meeting."], {}),
    # a hotel is no kind of a pizza place either (before: {0: 1})
    (["Order a pizza from Luigi's for tonight.", "Forget the hotel."], {}),
    # "Cancel the X." is told the same way (before: {0: 1}, 7a77f58's call-off by kind)
    (["Book a table at Nong's for Friday.", "Cancel the flight."], {}),
    (["Book a table at Nong's for Friday.", "Cancel the subscription."], {}),
    (["Get me a table for four at Chez Marie on Saturday.", "Cancel the flight."], {}),
])
def test_a_noun_of_another_kind_takes_back_no_booking(cold_memory: Memory, users: list[str],
                                                      want: dict[int, int]) -> None:
    assert superseded_users(cold_memory, users) == want


# (the user's turns, and {superseded user turn: its superseder}): the request's own kind
@pytest.mark.parametrize(("users", "want"), [
    # the dinner is the table for four (heldout2's; as before)
    (["Get me a table for four at Chez Marie on Saturday.", "Cancel the dinner."], {0: 1}),
    # the restaurant passes over a massage at Serenity to the table (before: {1: 2}, the massage)
    (["Book a table at Nong's for Friday.", "Book me a 60-minute massage at Serenity on Thursday.",
      "Forget the restaurant."], {0: 2}),
    # the spa is the massage, the latest (as before)
    (["Book a table at Nong's for Friday.", "Book me a 60-minute massage at Serenity on Thursday.",
      "Forget the spa."], {1: 2}),
    # a hotel is the room at the Ritz (as before)
    (["Book a room at the Ritz for Friday.", "Forget the hotel."], {0: 1}),
])
def test_a_noun_of_the_requests_kind_takes_it_back(cold_memory: Memory, users: list[str],
                                                   want: dict[int, int]) -> None:
    assert superseded_users(cold_memory, users) == want


# (the user's turns, and {superseded user turn: its superseder}): a day of the month "now"
@pytest.mark.parametrize(("users", "want"), [
    # the miss: an article in the value hid the "now" (before: {})
    (["My rent is due on the 1st.", "My rent is due on the 5th now."], {0: 1}),
    # a weekday there, as before
    (["My rent is due on Monday.", "My rent is due on Friday now."], {0: 1}),
    # another thing's day is not the rent's (as before)
    (["My rent is due on the 1st.", "The gym class is on the 5th now."], {}),
])
def test_a_day_of_the_month_now_revises_its_day(cold_memory: Memory, users: list[str], want: dict[int, int]) -> None:
    assert superseded_users(cold_memory, users) == want

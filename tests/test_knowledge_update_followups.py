"""Three follow-ups of the knowledge-update misses (667629d): "Never mind the restaurant."
that took back nothing stayed pinned as a standing order, "Cancel the dinner." took back
no table booked at a place named by its name alone, and "on the 12th of May" was no pin
where "on May 12" is one.

Invariants:
- A retraction form ("never mind ...") is no standing order: "never" opens one only when
  an order follows ("Never book me on red-eye flights."), not "never mind"
  (`classify._CONSTRAINT`). Where it takes back nothing, the label it has as an ordinary
  turn (`supersede.Superseder._demote`) is no pin; before, it was "imperative-constraint
  'never'" at 85. One that takes something back keeps its correction's pin.
- A call-off naming its thing by a kind no turn holds a word of ("Cancel the dinner.", the
  whole turn, after "the" or "that") takes back the latest recent request naming a place by
  its name alone ("Get me a table for four at Chez Marie"), as "Forget the restaurant."
  does (`supersede._called_off_by_kind`, `_named_venue`). Not a thing of the user's own
  ("Cancel my gym membership."), not one with a clause after it ("..., I'm moving."), not
  one a turn names (a fact's gym membership), not a question ("Did you cancel the
  dinner?"), nor a request naming no place by its name alone.
- A date with its day first ("on the 12th of May", "on 12 May") is labelled as the same
  sentence with "May 12" (`classify._DAY_MONTH_DATE`): pinned where the month form pins.
"""

from __future__ import annotations

import pytest
from supersede_harness import CONV, superseded_users

from tiermem import Memory
from tiermem.consolidation.classify import TurnClassifier
from tiermem.planner.candidates import AUTO_PIN_MIN_PRIORITY as PINNED

CORRECTION_PRIORITY = 90  # consolidation.classify.PRIORITY["correction"]


@pytest.fixture(scope="module")
def classifier() -> TurnClassifier:
    return TurnClassifier()


# (the user's turns, each answered "Noted."; the last is a "never mind" that takes back nothing)
@pytest.mark.parametrize("users", [
    # the miss: after a question (before: instruction, load-bearing, 85, "never" an order)
    ["What's the weather in Rome?", "Never mind the restaurant."],
    # after a fact it leaves current (before: 85 beside the allergy's 85)
    ["I'm allergic to peanuts.", "Never mind the restaurant."],
    # with a word before it (before: 85)
    ["What's the weather in Rome?", "Oh, never mind the restaurant."],
])
def test_a_never_mind_that_takes_back_nothing_is_no_pin(cold_memory: Memory, users: list[str]) -> None:
    assert superseded_users(cold_memory, users) == {}
    last = cold_memory.cold.turns(CONV)[2 * (len(users) - 1)]
    assert last.priority < PINNED and not last.load_bearing, last
    assert "imperative-constraint" not in (last.label_reason or ""), last


# (the user's turns, {superseded: superseder}): a retraction that takes something back keeps
# its correction's pin (as before)
@pytest.mark.parametrize(("users", "want"), [
    # the request named by its place's name alone
    (["Book a table at Nong's for Friday.", "Never mind the restaurant."], {0: 1}),
])
def test_a_never_mind_that_takes_back_keeps_its_pin(cold_memory: Memory, users: list[str],
                                                    want: dict[int, int]) -> None:
    assert superseded_users(cold_memory, users) == want
    last = cold_memory.cold.turns(CONV)[2 * (len(users) - 1)]
    assert (last.intent, last.load_bearing, last.priority) == ("correction", True, CORRECTION_PRIORITY), last


# (a user turn, whether it is pinned): "never" before an order, not before "mind"
@pytest.mark.parametrize(("text", "pinned"), [
    # a standing order stays one (as before)
    ("Never book me on red-eye flights.", True),
    # "never mind" as an ordinary turn (what `_demote` asks for): no order (before: 85)
    ("Never mind the restaurant.", False),
    # an order after it is still one
    ("Never mind the cost; never book me on red-eye flights.", True),
])
def test_never_mind_is_no_standing_order(classifier: TurnClassifier, text: str, pinned: bool) -> None:
    label = classifier.classify(text, "user", ordinary=True)
    assert (label.priority >= PINNED) is pinned, label


def test_a_standing_never_stays_pinned_in_memory(cold_memory: Memory) -> None:
    # the whole path: appended, caught up, nothing to revise, still the order it was
    assert superseded_users(cold_memory, ["What's the weather in Rome?", "Never book me on red-eye flights."]) == {}
    last = cold_memory.cold.turns(CONV)[2]
    assert last.load_bearing and last.priority >= PINNED, last


# (the user's turns, each answered "Noted.", and {superseded user turn: its superseder})
@pytest.mark.parametrize(("users", "want"), [
    # the miss (supersede_heldout2's): the dinner is the table at the place named by its
    # name, past a hotel booked by its kind (before: {})
    (["Get me a table for four at Chez Marie on Saturday.", "Book the Ibis hotel near the station for Friday night.",
      "Cancel the dinner."], {0: 2}),
    # the request right before, no word shared (before: {})
    (["Book a table at Nong's for Friday at 8.", "Cancel the dinner."], {0: 1}),
    # "call off that", "please" after it (before: {})
    (["Book a table at Nong's for Friday at 8.", "Call off that dinner, please."], {0: 1}),
    # a word the request holds: its own rule (`_called_off`), as before
    (["Book a table at Nong's for Friday at 8 for dinner.", "Cancel the dinner."], {0: 1}),
    # a thing of the user's own, a clause after it: a new request (as before)
    (["Book a table at Nong's for Friday at 8 for dinner.", "Cancel my gym membership, I'm moving."], {}),
    # the user's own without a clause: a new request too
    (["Book a table at Nong's for Friday at 8.", "Cancel my gym membership."], {}),
    # "the" with a clause after it: the clause tells of something else
    (["Book a table at Nong's for Friday at 8.", "Cancel the gym membership, I'm moving."], {}),
    # a thing a turn names (a fact's): not the table (the fact is no request either)
    (["My gym membership is $40 a month.", "Book a table at Nong's for Friday at 8.", "Cancel the gym membership."],
     {}),
    # a question (as before)
    (["Book a table at Nong's for Friday at 8 for dinner.", "Did you cancel the dinner?"], {}),
    # no request names a place by its name alone: nothing (a flight, a hotel by its kind)
    (["Book me a flight to Lisbon on Friday.", "Cancel the dinner."], {}),
    (["Book the Altis hotel from Friday to Monday.", "Cancel the dinner."], {}),
    # a fact is no plan to call off
    (["I'm allergic to peanuts.", "Cancel the dinner."], {}),
])
def test_a_call_off_by_kind_takes_the_named_place(cold_memory: Memory, users: list[str],
                                                 want: dict[int, int]) -> None:
    assert superseded_users(cold_memory, users) == want


# (a sentence with its day first, the same with its month first): labelled alike
@pytest.mark.parametrize(("day", "month"), [
    # the miss (before: "factual 'i was'" at 30 against 85)
    ("I was born on the 12th of May.", "I was born on May 12."),
    # the day without its ordinal (before: 30 against 85)
    ("I was born on 12 May.", "I was born on May 12."),
    # a thing's date, a year after it (before: 30 against 85)
    ("The merger closes on the 14th of March 2027.", "The merger closes on March 14 2027."),
    # after "is" (before: 30 against 85)
    ("My birthday is the 3rd of June.", "My birthday is June 3."),
    # no "on" or "is" before it: no pin in either form (as before)
    ("We'll talk about the 5th of May celebrations.", "We'll talk about May 5 celebrations."),
])
def test_a_day_before_its_month_is_labelled_as_the_month_form(classifier: TurnClassifier, day: str,
                                                             month: str) -> None:
    a, b = classifier.classify(day, "user"), classifier.classify(month, "user")
    assert (a.intent, a.priority, a.load_bearing) == (b.intent, b.priority, b.load_bearing)


# sentences with a day and "may" that hold no date: not pinned (as before)
@pytest.mark.parametrize("text", [
    "The answer on the 2nd of may be wrong.",  # "may" a verb: a verb follows it
    "It's the 14th of March.",  # no "on" or "is": "It's March 14." is no pin either
])
def test_no_date_stays_unpinned(classifier: TurnClassifier, text: str) -> None:
    assert classifier.classify(text, "user").priority < PINNED

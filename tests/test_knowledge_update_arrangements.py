"""Three knowledge-update misses 97ddd98 left: "Forget the groceries." took back a table
booked at Nong's, "Cancel the reservation." / "Never mind the appointment." / "Cancel my
order." took back nothing, and "The report is due on March 5 now." was no update of "due on
March 1".

Invariants:
- A noun whose own kind of business the closed class lacked landed on the nearest kind
  present: "the groceries" on the restaurant, and so on the table. With the grocer's in
  the class (`supersede.VENUE_KINDS`: "supermarket") it is its own kind and takes back no
  table; the request's own kinds still do (the restaurant, the dinner, the meal).
- A noun naming a thing by the act that arranged it (`supersede.ARRANGEMENT_NOUNS`: the
  booking, the reservation, the appointment; the order) names the latest recent request
  of that act, whatever was booked: a flight, a hotel, a haircut, a table ("Book ...",
  "Reserve ...", "Get me a table ... at Chez Marie on Saturday"), or ordered ("Order a
  pizza ..."). "my" / "our" is the user's own booking ("Cancel my order."). Never a
  request of the other act (a pizza ordered is no reservation, a table booked no order),
  never a fact, a question or a request that arranges nothing ("Get me a coffee.", "Pick up
  my prescription from Boots."). A statement of the user's own arrangement that stands
  ("I have a dentist appointment on Friday.") is one too: test_knowledge_update_wrong_kinds.py.
- A date with its month is one value of a "value then now" update (`supersede.MEANING_CUE`):
  "The report is due on March 5 now." revises "due on March 1", as "due on the 5th now"
  revises "due on the 1st"; another thing's date does not.
"""

from __future__ import annotations

import pytest
from supersede_harness import superseded_users

from tiermem import Memory

NONGS = "Book a table at Nong's for Friday."
LUIGIS = "Order a pizza from Luigi's for tonight."


# (the user's turns, each answered "Noted.", and {superseded user turn: its superseder})
@pytest.mark.parametrize(("users", "want"), [
    # the miss: groceries are no restaurant's (before: {0: 1}, the table taken back)
    ([NONGS, "Forget the groceries."], {}),
    # the call-off form alike (before: {0: 1})
    ([NONGS, "Cancel the groceries."], {}),
    # the supermarket itself is no restaurant either
    ([NONGS, "Forget the supermarket."], {}),
    # the request's own kinds still take it back (as before)
    ([NONGS, "Forget the restaurant."], {0: 1}),
    ([NONGS, "Never mind the meal."], {0: 1}),
    (["Get me a table for four at Chez Marie on Saturday.", "Cancel the dinner."], {0: 1}),
])
def test_groceries_are_no_restaurants(cold_memory: Memory, users: list[str], want: dict[int, int]) -> None:
    assert superseded_users(cold_memory, users) == want


# (the user's turns, each answered "Noted.", and {superseded user turn: its superseder})
@pytest.mark.parametrize(("users", "want"), [
    # the miss: a table booked is the reservation (before: {})
    ([NONGS, "Cancel the reservation."], {0: 1}),
    ([NONGS, "Never mind the reservation."], {0: 1}),
    # a haircut booked is the appointment (before: {})
    (["Book me a haircut at Snips for Tuesday.", "Never mind the appointment."], {0: 1}),
    (["Book me a 60-minute massage at Serenity on Thursday.", "Cancel the appointment."], {0: 1}),
    # a hotel booked by its kind is the reservation too (before: {})
    (["Book the Altis hotel from Friday to Monday.", "Cancel the reservation."], {0: 1}),
    # a flight, a thing of no place, is the booking (before: {})
    (["Book me a flight to Lisbon on Friday.", "Cancel the booking."], {0: 1}),
    # "reserve" books, and "that" points at it (before: {})
    (["Reserve a room at the Ritz for Friday.", "Call off that reservation, please."], {0: 1}),
    # a table got at a place named by its name alone on a day is a booking (before: {})
    (["Get me a table for four at Chez Marie on Saturday.", "Cancel the reservation."], {0: 1}),
    # the latest booking of two (before: {})
    ([NONGS, "Book the Altis hotel from Friday to Monday.", "Cancel the reservation."], {1: 2}),
    # the order is the pizza, "my" or "the" (before: {})
    ([LUIGIS, "Cancel my order."], {0: 1}),
    ([LUIGIS, "Cancel the order."], {0: 1}),
    # the reservation passes over an order to the table (before: {})
    ([NONGS, LUIGIS, "Cancel the reservation."], {0: 2}),
    # the order passes over a booking to the pizza (before: {})
    ([LUIGIS, NONGS, "Cancel my order."], {0: 2}),
    # a booking named by its word is taken back as before ("booking" shares "book")
    ([NONGS, "Forget the booking."], {0: 1}),
])
def test_a_booking_noun_names_the_latest_booking(cold_memory: Memory, users: list[str],
                                                 want: dict[int, int]) -> None:
    assert superseded_users(cold_memory, users) == want


# (the user's turns, each answered "Noted."): nothing taken back
@pytest.mark.parametrize("users", [
    # a pizza ordered is no reservation
    [LUIGIS, "Cancel the reservation."],
    # a table booked is no order
    [NONGS, "Cancel my order."],
    # a fact is no booking
    ["I'm allergic to peanuts.", "Never mind the reservation."],
    # a fact naming the appointment, over: nothing to call off (one that stands is taken
    # back: test_knowledge_update_wrong_kinds.py)
    ["I had a dentist appointment on Friday.", "Cancel the appointment."],
    # a question books nothing
    ["What time does Nong's open on Friday?", "Cancel the reservation."],
    # a request that arranges nothing: a coffee got, a prescription picked up
    ["Get me a coffee.", "Cancel the order."],
    ["Pick up my prescription from Boots.", "Cancel the reservation."],
    # the user's own thing of any kind still takes no booking (as before)
    [NONGS, "Cancel my gym membership."],
    # a question about the reservation takes nothing back
    [NONGS, "Did you cancel the reservation?"],
])
def test_a_booking_noun_takes_nothing_else(cold_memory: Memory, users: list[str]) -> None:
    assert superseded_users(cold_memory, users) == {}


# (the user's turns, and {superseded user turn: its superseder}): a dated value "now"
@pytest.mark.parametrize(("users", "want"), [
    # the miss: a date with its month is one value (before: {})
    (["The report is due on March 1.", "The report is due on March 5 now."], {0: 1}),
    # its day first alike (before: {})
    (["The report is due on March 1.", "The report is due on the 5th of March now."], {0: 1}),
    # the day alone, as before (97ddd98)
    (["My rent is due on the 1st.", "My rent is due on the 5th now."], {0: 1}),
    # another thing's date is not the report's (as before)
    (["The report is due on March 1.", "The gym class is on March 5 now."], {}),
    # another thing's date, no "now" (as before)
    (["The report is due on March 1.", "The review is due on March 5."], {}),
])
def test_a_date_now_revises_its_date(cold_memory: Memory, users: list[str], want: dict[int, int]) -> None:
    assert superseded_users(cold_memory, users) == want

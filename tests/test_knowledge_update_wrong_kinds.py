"""Wrong retractions by kind ecd68c0 left, and two readings it missed: "Forget the theatre."
took back a table booked "for Friday at 7pm", "Forget the gym." a table at The Ivy, "Forget
the pharmacy." a session at FitZone; "Cancel the reservations." took back nothing, nor did
"Cancel the appointment." after "I have a dentist appointment on Friday.".

Invariants:
- A request's own noun for what it books decides its kind (`supersede._booked_thing`: "a
  table" the restaurant's, "two seats" the theatre's, "a room" the hotel's), never its
  hour or its name, which this embedder reads as a kind ("for Friday at 7pm" as near the
  theatre as the restaurant, "The Ivy" nearest the gym). That thing's nearest kind of
  business must lead its second (`supersede.KIND_LEAD_COSINE`): "a session" leads by
  nothing (a gym's, a spa's, a therapist's), so no noun of a kind takes it back (a miss,
  never a wrong retraction). The booked thing's own kinds still take it back.
- A noun naming things by the act that arranged them, in the plural ("the reservations",
  "our orders"), takes back each recent one of that act, never one of the other act.
- A statement of the user's own arrangement that stands ("I have a dentist appointment on
  Friday.", "My dentist appointment is on Friday at 3pm.", "We have a reservation at
  Nong's") is called off as a booking asked for is: in a personal assistant "Cancel the
  appointment." means it is off. Never one over ("I had ..."), one not yet made ("I have
  to make ..."), none ("I have no appointments"), another person's ("My wife has ..."), a
  noun naming another thing ("a booking question"), nor by a question.
- A day or an hour after the noun called off ("Never mind the movie tonight.", "Forget the
  pharmacy, I'll go tomorrow.") is the user's own plan: it takes back no booking of another
  kind that shares the day (the reviewer's retract.py: 9 of 150 retracted, 6 of them so),
  and only narrows among the bookings the noun names.
"""

from __future__ import annotations

import pytest
from supersede_harness import superseded_users

from tiermem import Memory
from tiermem.consolidation import supersede
from tiermem.tiers.embed_onnx import FastEmbedder

NONGS_7PM = "Book a table at Nong's for Friday at 7pm."
IVY = "Reserve a table at The Ivy for tomorrow."
FITZONE = "Book me a session at FitZone on Monday."
NONGS = "Book a table at Nong's for Friday."
LUIGIS = "Order a pizza from Luigi's for tonight."
SNIPS = "Book me a haircut at Snips for Tuesday."
DENTIST = "I have a dentist appointment on Friday."


# (a request, its own noun for what it books, or None)
@pytest.mark.parametrize(("request_text", "thing"), [
    (NONGS_7PM, "table"),  # the hour and the place cut off
    ("Get me a table for four at Chez Marie on Saturday.", "table"),  # the party cut off
    ("Get two seats at the Globe for Saturday.", "seats"),  # a number before it
    ("Book me a 60-minute massage at Serenity on Thursday.", "massage"),  # "me" and a measure before it
    ("Pick up my prescription from Boots.", "prescription"),  # a particle and "my" before it
    ("Could you order sushi from Sakura for 8pm?", "sushi"),  # a politeness and no article
    ("Book Nong's for Friday.", None),  # the place alone: a name is no noun of its kind
    ("Make a reservation at Nong's for Friday.", None),  # the act's noun names no kind
])
def test_the_booked_thing_is_the_requests_own_noun(request_text: str, thing: str | None) -> None:
    assert supersede._booked_thing(request_text) == thing


# (a retraction's noun, a request naming a place by its name alone, whether the noun may
# name it by meaning)
@pytest.mark.parametrize(("noun", "request_text", "names"), [
    # the wrong retractions (before: True each): a table's hour is no theatre's
    ("theatre", NONGS_7PM, False),
    ("seats", NONGS_7PM, False),
    ("tickets", NONGS_7PM, False),
    # a table at The Ivy is no gym's (before: True)
    ("gym", IVY, False),
    # a session is of no one kind, the pharmacy's least (before: True)
    ("pharmacy", FITZONE, False),
    # its own kinds still name the 7pm table (True before too)
    ("restaurant", NONGS_7PM, True),
    ("dinner", NONGS_7PM, True),
    # the table at The Ivy is the dinner's (before: False, a miss)
    ("dinner", IVY, True),
    # the theatre's seats are still the theatre's and the tickets' (True before too)
    ("theatre", "Get two seats at the Globe for Saturday.", True),
    ("tickets", "Get two seats at the Globe for Saturday.", True),
    # the booked thing's own word names it
    ("session", FITZONE, True),
])
def test_the_booked_thing_decides_the_kind(embedder: FastEmbedder, noun: str, request_text: str,
                                           names: bool) -> None:
    assert supersede.KindCheck(embedder)(noun, request_text) is names


# (the user's turns, each answered "Noted.", and {superseded user turn: its superseder})
@pytest.mark.parametrize(("users", "want"), [
    # the wrong retractions, in memory (before: {0: 1} each)
    ([NONGS_7PM, "Forget the theatre."], {}),
    ([NONGS_7PM, "Forget the seats."], {}),
    ([NONGS_7PM, "Cancel the tickets."], {}),
    ([IVY, "Forget the gym."], {}),
    ([FITZONE, "Forget the pharmacy."], {}),
    # the booked thing's own kinds still take it back (as before)
    ([NONGS_7PM, "Forget the restaurant."], {0: 1}),
    (["Get two seats at the Globe for Saturday.", "Forget the theatre."], {0: 1}),
    (["Book a room at the Ritz for Friday.", "Forget the hotel."], {0: 1}),
    (["Book me a 60-minute massage at Serenity on Thursday.", "Forget the spa."], {0: 1}),
    ([LUIGIS, "Forget the restaurant."], {0: 1}),
    # passing over a massage to the table (as before)
    ([NONGS, "Book me a 60-minute massage at Serenity on Thursday.", "Forget the restaurant."], {0: 2}),
    # the dinner is the table at The Ivy (before: {}, a miss)
    ([IVY, "Cancel the dinner."], {0: 1}),
    # the session's own word, as before
    ([FITZONE, "Cancel the session."], {0: 1}),
])
def test_a_noun_of_another_kind_takes_no_booking(cold_memory: Memory, users: list[str],
                                                 want: dict[int, int]) -> None:
    assert superseded_users(cold_memory, users) == want


# (the user's turns, each answered "Noted.", and {superseded user turn: its superseder})
@pytest.mark.parametrize(("users", "want"), [
    # the plural takes each booking (before: {})
    ([NONGS, SNIPS, "Cancel the reservations."], {0: 2, 1: 2}),
    ([NONGS, SNIPS, "Forget the reservations."], {0: 2, 1: 2}),
    # of one booking, that one (before: {})
    ([NONGS, "Cancel the reservations."], {0: 1}),
    # each order, "our" (before: {})
    ([LUIGIS, "Order sushi from Sakura for 8pm.", "Cancel our orders."], {0: 2, 1: 2}),
    # the bookings pass over an order (before: {})
    ([NONGS, LUIGIS, "Cancel the reservations."], {0: 2}),
    # no booking of the act: nothing
    ([LUIGIS, "Cancel the reservations."], {}),
    ([NONGS, "Cancel the orders."], {}),
    (["I'm allergic to peanuts.", "Cancel the reservations."], {}),
])
def test_the_plural_takes_each_arrangement(cold_memory: Memory, users: list[str], want: dict[int, int]) -> None:
    assert superseded_users(cold_memory, users) == want


# (the user's turns, each answered "Noted.", and {superseded user turn: its superseder})
@pytest.mark.parametrize(("users", "want"), [
    # the user's own appointment that stands is called off (before: {})
    ([DENTIST, "Cancel the appointment."], {0: 1}),
    # "Forget" took it already (lexically), as before
    ([DENTIST, "Never mind the appointment."], {0: 1}),
    # by its full name (before: {})
    (["I have a dentist appointment on March 12.", "Cancel the dentist appointment."], {0: 1}),
    # "my ... is", and a reservation "we have" (before: {})
    (["My dentist appointment is on Friday at 3pm.", "Cancel the appointment."], {0: 1}),
    (["We have a reservation at Nong's on Saturday.", "Cancel the reservation."], {0: 1}),
    # a question between: still the appointment (before: {})
    ([DENTIST, "What time should I leave?", "Cancel the appointment."], {0: 2}),
    # the latest booking of the act, a request later than the fact (before: {})
    ([SNIPS, DENTIST, "Cancel the appointment."], {1: 2}),
    # the one the noun names, past a later haircut: "appointment" is the dentist's word
    ([DENTIST, SNIPS, "Cancel the appointment."], {0: 2}),
    # an appointment is no order
    ([DENTIST, "Cancel my order."], {}),
    # a question calls off nothing
    ([DENTIST, "Did you cancel the appointment?"], {}),
    # over, not yet made, none, another person's, another thing: nothing taken back
    (["I had a dentist appointment yesterday.", "Cancel the appointment."], {}),
    (["My dentist appointment was on Monday.", "Cancel the appointment."], {}),
    (["I have to make a dentist appointment.", "Cancel the appointment."], {}),
    (["I have no appointments this week.", "Cancel the appointment."], {}),
    (["My wife has a dentist appointment on Friday.", "Cancel the appointment."], {}),
    (["I have a booking question.", "Cancel the booking."], {}),
    # a fact naming no arrangement, as before ("Cancel my subscription." after its price)
    (["My Netflix subscription is $15 a month.", "Cancel my subscription."], {}),
    (["I have a meeting on Friday.", "Cancel the appointment."], {}),
])
def test_a_stated_arrangement_is_called_off(cold_memory: Memory, users: list[str], want: dict[int, int]) -> None:
    assert superseded_users(cold_memory, users) == want


# A time or a clause after the thing called off (the reviewer's retract.py, 9 of 150
# retracted before): the day is the user's own plan, never the thing. Only the noun's
# phrase names what is taken back; the time narrows among bookings of that kind (or of
# the act, for "the reservation"), never makes another kind's booking one it names.
GLOBE = "Reserve two seats at the Globe for Saturday."
HAIRCUT = "I have a haircut appointment on Thursday."
DENTIST_TUE = "I booked a dentist appointment for Tuesday at 10am."
LONG_DAY = "I had a long day at work."
SAKURA_TOMORROW = "Book a table at Sakura for tomorrow."


# (the user's turns, each answered "Noted.", and {superseded user turn: its superseder})
@pytest.mark.parametrize(("users", "want"), [
    # the movie is no table, pizza or theatre seats: "tonight" matched a day (before: {0: 2})
    ([NONGS_7PM, LONG_DAY, "Never mind the movie tonight."], {}),
    ([LUIGIS, LONG_DAY, "Never mind the movie tonight."], {}),
    ([GLOBE, LONG_DAY, "Never mind the movie tonight."], {}),
    # the pharmacy is no pizza, dentist or haircut: "tomorrow" read as a new value (before: {0: 2})
    ([LUIGIS, LONG_DAY, "Forget the pharmacy, I'll go tomorrow."], {}),
    ([DENTIST_TUE, LONG_DAY, "Forget the pharmacy, I'll go tomorrow."], {}),
    ([HAIRCUT, LONG_DAY, "Forget the pharmacy, I'll go tomorrow."], {}),
    # a day the booking holds still names no other kind (before: {0: 1})
    ([NONGS_7PM, "Forget the theatre on Friday."], {}),
    ([SNIPS, "Forget the pharmacy, I'll go on Tuesday."], {}),
    ([DENTIST_TUE, "Never mind the gym on Tuesday."], {}),
    # a call-off by "cancel" likewise: the movie is no pizza (its day alone)
    ([LUIGIS, "Cancel the movie tonight."], {}),
    # the booking's own noun or kind still takes it, with a time after it
    ([LUIGIS, LONG_DAY, "Forget the pizza tonight."], {0: 2}),
    ([LUIGIS, "Cancel the pizza tonight."], {0: 1}),
    ([NONGS, "Forget the restaurant on Friday."], {0: 1}),
    ([SNIPS, "Forget the haircut, I'll go next week."], {0: 1}),
    ([DENTIST_TUE, "Never mind the appointment on Tuesday."], {0: 1}),
    # the time narrows among the kind's bookings: tomorrow's table, not the later one (before: {1: 2})
    ([SAKURA_TOMORROW, NONGS, "Forget the restaurant tomorrow."], {0: 2}),
    # ... and among all bookings for the act's noun ("the reservation")
    ([SAKURA_TOMORROW, "Book a room at the Ritz for Friday.", "Forget the reservation tomorrow."], {0: 2}),
    # no time: the latest of the kind, as before
    ([SAKURA_TOMORROW, NONGS, "Forget the restaurant."], {1: 2}),
    # a time no booking of the kind holds: the kind alone decides (the user's own plan)
    ([NONGS, "Forget the restaurant tomorrow."], {0: 1}),
    # a noun near its target by meaning still takes it with its hour after it (the hour is
    # cut before the meaning search, so it neither helps nor hinders: "the reminder" alone does)
    (["Remind me to call mom at 6pm.", "Never mind the reminder at 6pm."], {0: 1}),
    # a correction's new value after the noun still counts (only days and hours are cut)
    (["My phone number is 555-0000.", "Forget my old number, it's 555-1234 now."], {0: 1}),
])
def test_a_time_after_the_noun_only_narrows(cold_memory: Memory, users: list[str], want: dict[int, int]) -> None:
    assert superseded_users(cold_memory, users) == want

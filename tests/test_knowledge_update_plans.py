"""Plans called off in everyday words that 50880dc still missed (a review's real phrasing,
generalised): "The hike is off." after "We're going hiking on Saturday.", "The restaurant
is off." after a table booked at Nong's, "No need to remind me about mum" after a reminder
about mum, and "tickets at the Odeon" (no film word) for "Never mind the movie tonight.".

Invariants:
- An outing told by "go" and its -ing form ("going hiking", "go skiing") is named by its
  noun ("the hike", "the ski trip"): the -ing form is the outing's own word there, not a
  verb's form counted at half (`supersede._go_outings`); a past outing ("I went fishing")
  or a liking ("I love hiking") is no plan, and nothing is called off.
- A bare "off" said of a kind of business (`supersede.VENUE_KINDS`) calls off a booking
  of that kind whose place is named by its name alone, as "Forget the restaurant." does
  (the kind check by meaning); of a device or a thing ("The light is off.", "The car is
  off.") it stays a state.
- Tickets or a pass at a place named by its name alone admit to a show
  (`supersede.SHOW_NOUNS`, `ADMISSION_NOUNS`): "the movie" or "the concert" names them;
  seats do not (a restaurant has seats), nor does "the restaurant" name tickets.
- "No need to <verb> ..." (`supersede._NO_NEED`) takes back the latest recent request of
  that verb, or one that sets that act ("Remind me to call mum" for "No need to call
  mum."), naming the same thing by a word or another name of it ("my mother" for
  "mum", by meaning); one naming only a person ("No need to remind me.") the latest
  request of that very verb. "No need to thank me." / "No need to apologise." name no
  request and take nothing back, nor does one naming another thing.
"""

from __future__ import annotations

import pytest
from supersede_harness import superseded_users

from tiermem import Memory

LONG_DAY = "I had a long day at work."
HIKE = "We're going hiking on Saturday."
NONGS_7PM = "Book a table at Nong's for Friday at 7pm."
MUM = "Remind me to call mum at 6."
ODEON = "Get two tickets at the Odeon for tonight."


# (the user's turns, each answered "Noted.", and {superseded user turn: its superseder})
@pytest.mark.parametrize(("users", "want"), [
    # an outing told by "go" + -ing, called off by its noun (before: {} for these two)
    ([HIKE, LONG_DAY, "The hike is off."], {0: 2}),  # the reviewer's
    (["Let's go skiing on Sunday.", LONG_DAY, "The ski trip is cancelled."], {0: 2}),
    # the -ing form on both sides was a word shared as such (as before)
    (["I'm going camping with Jo this weekend.", LONG_DAY, "The camping trip is off."], {0: 2}),
    # ... but a past outing or a liking is no plan
    (["I went fishing with Dad on Saturday.", LONG_DAY, "The fishing trip is off."], {}),
    (["I love hiking in the Alps.", LONG_DAY, "The hike is off."], {}),
    # a kind of business told to be off: a booking of that kind named by its place (before: {})
    ([NONGS_7PM, LONG_DAY, "The restaurant is off."], {0: 2}),  # the reviewer's
    (["Book a room at the Pestana for Friday.", LONG_DAY, "The hotel is off."], {0: 2}),
    # ... never a device, nor a booking of another kind
    ([NONGS_7PM, LONG_DAY, "The light is off."], {}),
    ([NONGS_7PM, LONG_DAY, "The hotel is off."], {}),  # a table is no hotel (the kind check)
    ([ODEON, LONG_DAY, "The restaurant is off."], {}),  # tickets are no table
    (["Book a car service for Monday at 9am.", LONG_DAY, "The car is off."], {}),  # as before
    ([HIKE, LONG_DAY, "I took the day off."], {}),
    ([HIKE, LONG_DAY, "The heating is off."], {}),
    # tickets at a place named by its name alone are for a show (before: {} for these two)
    ([ODEON, LONG_DAY, "Never mind the movie tonight."], {0: 2}),  # the reviewer's
    ([ODEON, LONG_DAY, "The movie tonight is off."], {0: 2}),
    # a concert's kind is the theatre's, as the tickets' (the kind check, as before)
    (["Book two tickets at the Roundhouse for Saturday.", LONG_DAY, "The concert is off."], {0: 2}),
    # ... seats are no admission (a restaurant has them), and a table no show
    (["Get two seats at Nong's for Friday at 7pm.", LONG_DAY, "The movie is off."], {}),
    ([NONGS_7PM, LONG_DAY, "Never mind the movie tonight."], {}),
    # a request needed no more (before: {} for each)
    ([MUM, LONG_DAY, "No need to remind me about mum."], {0: 2}),  # the reviewer's
    ([MUM, LONG_DAY, "No need to remind me about my mother."], {0: 2}),  # another name of her, by meaning
    ([MUM, LONG_DAY, "No need to remind me."], {0: 2}),  # that very verb, the latest such request
    ([MUM, LONG_DAY, "No need to call mum, she called me."], {0: 2}),  # the act the reminder sets
    (["Book a taxi to the airport for 6am on Monday.", LONG_DAY, "There's no need to book the taxi."], {0: 2}),
    # ... none names one
    ([MUM, LONG_DAY, "No need to thank me."], {}),  # the reviewer's: no request to thank
    ([MUM, LONG_DAY, "No need to apologise."], {}),
    (["Remind me to call the plumber at 9am.", LONG_DAY, "No need to remind me about mum."], {}),  # another thing
    ([NONGS_7PM, LONG_DAY, "No need to remind me."], {}),  # no reminder asked for
    ([MUM, "What's the weather tomorrow?", "No need to book anything."], {}),  # no booking asked for
])
def test_plans_called_off(cold_memory: Memory, users: list[str], want: dict[int, int]) -> None:
    assert superseded_users(cold_memory, users) == want

""""No need to remind me about ..." takes back only the reminder it names as a whole.

A review of 0308f22 found "No need to remind me about mum's number, I have it saved."
taking back "Remind me to call mum on Sunday.": the cue took the latest reminder sharing
a word with its object, so a thing of the reminder's thing ("mum's number", "mum's
birthday"), a compound holding its word ("the rent increase" for "pay the rent"), or a
complaint about how often ("No need to remind me twice about mum, once is enough.") called
the reminder off, and the context then said it was replaced.

Invariants (`supersede._not_needed`):
- The act's object names the request as a whole: each of its content words is the
  request's, or only its head noun is another name of a word of it, by meaning ("my
  mother" for "mum"). A possessed thing ("mum's number") or a compound ("rent increase")
  whose head the request lacks names another thing and takes nothing back.
- An act told how often ("twice", "again", "so often", "every time"; "once is enough"
  after it) complains about the reminding and takes nothing back; a frequency the
  request itself states ("... pills twice a day") is the request's own words, no
  complaint (a review of 85ebfd6). The phrase is compared whole, with its unit: the
  "twice" of "No need to remind me twice about calling mum." is no "twice a week" of
  "Remind me to call mum twice a week." (a review of fddf11c).
- The object ends where a clause of its own begins ("about mum because I'll see her on
  Sunday"): what follows tells why.
- The cases of 0308f22 hold (tests/test_knowledge_update_plans.py).
"""

from __future__ import annotations

import pytest
from supersede_harness import superseded_users

from tiermem import Memory

LONG_DAY = "I had a long day at work."
MUM = "Remind me to call mum on Sunday."
RENT = "Remind me to pay the rent on the 1st."
PILLS = "Remind me to take my pills twice a day."
MUM_WEEKLY = "Remind me to call mum twice a week."


# (the user's turns, each answered "Noted.", and {superseded user turn: its superseder})
@pytest.mark.parametrize(("users", "want"), [
    # the reviewer's four, right after the reminder (before: {0: 1} for each)
    ([MUM, "No need to remind me about mum's number, I have it saved."], {}),  # her number: another thing
    ([MUM, "No need to remind me twice about mum, once is enough."], {}),  # how often, not whether
    ([MUM, "No need to remind me about mum's birthday, it's in my calendar."], {}),  # her birthday
    ([RENT, "No need to remind me about the rent increase, I read the letter."], {}),  # a compound: the increase
    # ... and with a turn between, as the call-off cases run
    ([MUM, LONG_DAY, "No need to remind me about mum's number, I have it saved."], {}),
    ([RENT, LONG_DAY, "No need to remind me about the rent increase, I read the letter."], {}),
    # more things of the reminder's thing, and compounds whose head it lacks
    ([MUM, LONG_DAY, "No need to remind me about mum's flight."], {}),  # her flight
    ([RENT, LONG_DAY, "No need to remind me about the rent payment app."], {}),  # an app, not the rent
    (["Remind me to renew the car insurance in May.", LONG_DAY,
      "No need to remind me about the car wash."], {}),  # shares "car", names a wash
    # how often, however told
    ([MUM, LONG_DAY, "No need to remind me again."], {}),  # a reminder already given
    ([MUM, LONG_DAY, "No need to remind me about mum again."], {}),
    ([MUM, LONG_DAY, "No need to remind me about mum so often."], {}),
    ([MUM, LONG_DAY, "No need to remind me every single time about mum."], {}),
    ([RENT, LONG_DAY, "No need to remind me about the rent three times."], {}),
    ([MUM, LONG_DAY, "No need to remind me about mum, once is enough."], {}),  # said after the act
    ([MUM, LONG_DAY, "No need to remind me twice about mum."], {}),  # "twice" is not the reminder's
    ([PILLS, LONG_DAY, "No need to remind me about the pills again."], {}),  # "again": not its words
    ([PILLS, LONG_DAY, "No need to remind me so often about the pills twice a day."], {}),  # "so often" is not
    # the reminder named as a whole still takes it back (as 0308f22)
    ([MUM, LONG_DAY, "No need to remind me about mum."], {0: 2}),  # the reviewer's keeper
    ([MUM, "No need to remind me about mum."], {0: 1}),  # right after it
    ([RENT, LONG_DAY, "No need to remind me about the rent."], {0: 2}),  # the rent itself
    ([MUM, LONG_DAY, "No need to remind me about calling mum."], {0: 2}),  # its act and its person
    ([MUM, LONG_DAY, "No need to remind me about mum on Sunday."], {0: 2}),  # every word the reminder's
    # how often the reminder itself says (before 85ebfd6's review: {}, taken for a complaint)
    ([PILLS, LONG_DAY, "No need to remind me about the pills twice a day."], {0: 2}),  # the reviewer's
    ([PILLS, "No need to remind me about the pills twice a day."], {0: 1}),  # right after it
    (["Remind me to stretch every time I stand up.", LONG_DAY,
      "No need to remind me to stretch every time."], {0: 2}),  # "every time" is the reminder's
    ([MUM_WEEKLY, LONG_DAY, "No need to remind me about calling mum twice a week."], {0: 2}),  # its phrase, unit too
    # the phrase is compared whole, with its unit (a review of fddf11c: before {0: 2}, "twice" matched)
    ([MUM_WEEKLY, LONG_DAY, "No need to remind me twice about calling mum."], {}),  # "twice" is not "twice a week"
    ([MUM_WEEKLY, "No need to remind me twice about calling mum."], {}),  # right after it
    # a clause after the object tells why: the object is "mum"
    ([MUM, LONG_DAY, "No need to remind me about mum because I'll see her on Saturday."], {0: 2}),
    # a possessed thing the reminder itself names is the reminder's thing
    (["Remind me to buy mum's birthday present on Friday.", LONG_DAY,
      "No need to remind me about mum's birthday present."], {0: 2}),
])
def test_no_need_names_the_reminder_whole(cold_memory: Memory, users: list[str], want: dict[int, int]) -> None:
    assert superseded_users(cold_memory, users) == want

"""A clause closing with "actually" is a correction cue only where it states a slot.

Invariants (consolidation.classify `correction_cue`, `_CORRECTION_CLOSER`):
- "actually" closing a clause cues a correction only where the clause states a slot of the
  speaker's ("my/our X is/are VALUE", "our team meets on Wednesdays") or a plan's time or
  place ("the meeting is at 3 pm"); "one" is never the value.
- Anything else closing with it narrates ("The iPhone 15 is great actually.", "I only had one
  coffee today actually.") and supersedes no earlier fact, even one sharing a word or a
  number with it: the earlier fact stays current in facts() and is shown unmarked.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tiermem import Config, Memory
from tiermem.consolidation.classify import correction_cue, normalize

T0 = 1.8e9  # 15 Jan 2027: the caller's clock, one message a minute by position
STEP_S = 60
BUDGET = 300


# Ordinary sentences closing with "actually" (review r_c3, r4_actually_cues.py): none revises a
# slot, so none is a correction cue. Each was one at 0c64505 except where noted.
@pytest.mark.parametrize("text", [
    "That was fun actually.",                     # no value (none before either)
    "I'm at home actually.",                      # a place of the moment, no value (none before either)
    "It's 5 pm actually.",                        # telling the time, no slot named
    "I liked the 2nd one actually.",              # an ordinal in an opinion
    "I liked that one actually.",                 # "one" as a pronoun
    "No one came actually.",                      # "one" in "no one"
    "I went there on Monday actually.",           # a day in a story
    "I was sick on Tuesday actually.",            # a day in a story
    "I woke up at 6 am actually.",                # a time in a story
    "My son turned 9 last week actually.",        # possessive, but an event, not "is VALUE"
    "I read three books this month actually.",    # a count in a story
    "We saw two deer on the hike actually.",      # a count in a story
    "I ran 10 km today actually.",                # a distance in a story
    "The movie was 3 hours long actually.",       # a past description
    "I've been to Paris twice actually.",         # no value (none before either)
    "It was built in 1889 actually.",             # a year of trivia
    "I have been coding for 12 years actually.",  # a duration of the speaker's, no slot
    "My brother has been coding for 12 years actually.",  # (r5) someone else's duration
    "We met in 2015 actually.",                   # a year in a story
    "The bus was 20 minutes late actually.",      # a past description
    "I slept until 10 actually.",                 # a time in a story
    "Lunch was 12 EUR actually.",                 # a price paid, no budget named
    "The game starts at 8 pm actually.",          # a broadcast's time, no "is at" slot
    "I finished the 5k in 25 minutes actually.",  # a result
    "She's one of my best friends actually.",     # "one" in "one of"
    "I only had one coffee today actually.",      # "one" as a count of today's
    "Room 4b was nice actually.",                 # a code in an opinion
    "The iPhone 15 is great actually.",           # a model in an opinion
    "It snowed on Friday actually.",              # weather on a day
    "I got a 9 out of 10 actually.",              # a score
    "Python 3 is easy actually.",                 # a version in an opinion
    "Great actually.",                            # no value (none before either)
    "I'm not sure actually.",                     # no value (none before either)
    "I also have 2 cats actually.",               # adds a value (none before either)
    "Thanks, that works actually.",               # no value (none before either)
])
def test_a_closing_actually_that_states_no_slot_is_no_cue(text: str) -> None:
    assert correction_cue(normalize(text), "user") is None


# The speaker's slot, or a plan's time, stated with "actually" closing it: a correction cue.
@pytest.mark.parametrize("text", [
    "My dinner budget is 70 EUR actually.",       # the speaker's budget
    "Hmm, my dinner budget is 70 EUR actually.",  # an interjection before it
    "My flight is on Thursday actually.",         # the speaker's flight, a day
    "The meeting is at 3 pm actually.",           # a plan's time ("is at", as _CORRECTION_CHANGE)
    "My grandma is 94 actually.",                 # the speaker's "my X is VALUE": an age corrected
    "Our team meets on Wednesdays actually.",     # the speaker's team's day
])
def test_a_closing_actually_that_states_a_slot_is_a_cue(text: str) -> None:
    assert correction_cue(normalize(text), "user") is not None


# (earlier fact, later narration): the narration shares a word or a number with the fact, and
# superseded it at 0c64505 (the fact "superseded" in facts(), marked in the context).
PAIRS = [
    ("My phone is an iPhone 13.", "The iPhone 15 is great actually.", "What phone do I have?"),
    ("I drink 3 coffees a day.", "I only had one coffee today actually.", "How much coffee do I drink a day?"),
]


@pytest.mark.parametrize(("fact", "later", "query"), PAIRS)
def test_a_narration_closing_with_actually_supersedes_nothing(
    tmp_path: Path, fact: str, later: str, query: str
) -> None:
    log = [("user", fact), ("assistant", "Noted."), ("user", "Let's talk about trams."),
           ("assistant", "Sure, trams."), ("user", later), ("assistant", "Nice!"), ("user", query)]
    with Memory(Config(data_dir=tmp_path)) as mem:
        for i, (role, text) in enumerate(log):
            mem.append("c", {"role": role, "content": text}, created_at=T0 + i * STEP_S)
        mem.catch_up("c")
        # nothing superseded: the phone is listed current, the coffees (no load-bearing
        # statement) not at all; at 0c64505 each was listed "superseded" by the narration
        assert [(f.position, f.status) for f in mem.facts("c") if f.status != "current"] == []
        text = "\n".join(str(m.get("content")) for m in mem.context("c", query, BUDGET, record=False).messages)
        assert fact in text  # the earlier fact is shown ...
        assert "SUPERSEDED" not in text and "written before a correction" not in text  # ... unmarked

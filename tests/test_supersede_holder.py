"""Whose fact: a change of someone else's state never supersedes the user's own fact.

Invariants:
- Supersession needs the same holder on both sides: a statement whose subject is a third
  party the user names ("my brother", "my mom's", a named person, he/she) revises only
  that party's statements, never the user's own ("I live ...", "my phone number ...").
- A statement about nobody in particular ("Actually the hotel is now ...", "it's Dr.
  Park now") may still revise anyone's, and the user's own corrections keep working
  ("I moved to Munich", "my new number is ...").
- A third party acting on a thing that is not theirs ("they moved my appointment", "my
  boss moved the meeting") states that thing's value, not the party's; a preposition, a
  particle or a value after its verb ("my kids leave for school at 7:30") opens no
  object, and the fact is the party's.
"""

from __future__ import annotations

import pytest

from tiermem import Memory

FILLER = ["I had a long day at work.", "The weather was lovely this morning.", "My cat knocked a glass over."]

# (the user's fact, a later turn about someone else): the fact must stay current
LOOKALIKES = [
    ("I live in Berlin.", "My brother moved to Munich last month."),
    ("I live in Berlin.", "My parents just moved to Hamburg."),
    ("I work at Acme Corp.", "My wife switched jobs, she works at Globex now."),
    ("I use an iPhone.", "My son switched to a Pixel."),
    ("My phone number is 555-1111.", "My mom's number is now 555-7777."),
    ("I drive a Toyota Corolla.", "My neighbour traded his car for a Honda Civic."),
    ("My dentist is Dr. Lee.", "My husband changed his dentist to Dr. Park."),
    ("The project deadline is March 3.", "My friend's thesis deadline moved to March 10."),
    ("I'm vegetarian.", "My daughter is vegan now."),
    ("I live in Berlin.", "Tom moved to Munich last month."),
    ("My flight to Oslo is at 9am.", "Anna moved to Oslo last month."),  # a name, not the fact's word
    ("I live in Berlin.", "He moved to Munich last month."),
    # a person the user's fact names mid-sentence: their change is theirs (review of
    # 4222846: a named word found anywhere in the fact was read as the fact's own thing)
    ("I share a flat in Berlin with Tom.", "Tom moved to Munich last month."),
    ("I'm having lunch with Sarah on Friday at noon.", "Sarah's lunch moved to Thursday."),
    ("My manager is Tom Becker.", "Tom moved to the London office."),
    ("I go climbing with Ben on Tuesdays.", "Ben started going on Wednesdays instead."),
    ("I train at the gym with Mark at 7am.", "Mark is now training at 6am."),
    ("I live in Leeds, two streets from Priya.", "Priya moved to Glasgow in the spring."),
]

# (a fact, the user's correction of it): each must still supersede
CORRECTIONS = [
    ("I live in Berlin.", "I moved to Munich last month."),
    ("My phone number is 555-1111.", "Actually, my new number is 555-2222."),
    ("My brother lives in Munich.", "My brother moved to Hamburg last month."),
    ("My appointment is at 2pm on Friday.", "They moved my appointment to 3pm."),
    ("My dentist is Dr. Lee.", "Actually my dentist is Dr. Park, not Dr. Lee."),
    # a clipped correction opening with the capitalised name of the fact's own thing: the
    # thing's, not a person's (review of 3f12b2c: each was read as someone else's)
    ("My flight is at 9am on Tuesday.", "Flight moved to 11am."),
    ("My rent is $1200 a month.", "Rent is now $1500 a month."),
    ("My dentist appointment is on Monday.", "Dentist moved it to Wednesday."),
    ("I work at Acme Corp.", "Work moved me to the Globex office."),
    ("My team standup is at 9am.", "Standup moved to 10am."),
    ("My budget is $500.", "Budget's now $800."),
    ("My order number is 4411.", "Order's been changed to 4499."),
    ("Our wedding is in May.", "Wedding got moved to June."),
    # the thing named in the other number ("my flights" / "Flight", "my lesson" / "Lessons")
    ("My flights are at 9am and 4pm on Tuesday.", "Flight moved to 11am."),
    ("My piano lesson is on Thursday at 5pm.", "Lessons moved to Friday at 5pm."),
    ("My shift is 9 to 5 on weekdays.", "Shifts moved to 10 to 6."),
    # "I meant" frames the correction: its holder is what follows (the daughter's age)
    ("My daughter is 7 years old.", "Sorry, I meant she is 8 years old."),
    # a party's verb followed by a preposition ("leave for school") acts on no object: the
    # fact is the kids' (before: nobody's, which the kids' own correction never revised)
    ("My kids leave for school at 7:30.", "Correction: my kids leave at 8:00 now."),
]


def _superseded(mem: Memory, conv: str, fact: str, later: str) -> bool:
    msgs = [{"role": "user", "content": fact}, {"role": "assistant", "content": "Noted."}]
    for f in FILLER:
        msgs += [{"role": "user", "content": f}, {"role": "assistant", "content": "I see."}]
    msgs += [{"role": "user", "content": later}, {"role": "assistant", "content": "Okay."}]
    mem.append_many(conv, msgs)
    mem.catch_up(conv)
    # a conversation's first key is its id (docs/design.md, invariant 9)
    first = mem.cold.turns(conv)[0]
    return first.superseded_by is not None or any(s.position == 0 for s in mem.cold.superseded_statements(conv))


@pytest.mark.parametrize(("fact", "later"), LOOKALIKES)
def test_someone_elses_change_leaves_the_users_fact_current(cold_memory: Memory, fact: str, later: str) -> None:
    assert not _superseded(cold_memory, "c", fact, later)


@pytest.mark.parametrize(("fact", "later"), CORRECTIONS)
def test_a_correction_of_the_same_holder_still_supersedes(cold_memory: Memory, fact: str, later: str) -> None:
    assert _superseded(cold_memory, "c", fact, later)


def test_only_the_same_holders_statement_of_a_turn_is_revised(cold_memory: Memory) -> None:
    # a turn holding the user's fact and a brother's: the brother's move revises his
    mem = cold_memory
    mem.append_many("c", [{"role": "user", "content": "I live in Berlin and my brother lives in Munich."},
                          {"role": "assistant", "content": "Noted."},
                          {"role": "user", "content": "My brother moved to Hamburg last month."}])
    mem.catch_up("c")
    text = "I live in Berlin and my brother lives in Munich."
    gone = [text[s.start:s.end] for s in mem.cold.superseded_statements("c") if s.position == 0]
    assert gone == ["my brother lives in Munich."]

"""What a fact is about: a correction about one thing never revises a fact about another.

Invariants:
- A statement that states a value of a thing ("my dog is 3", "the hotel costs $200", "my
  work laptop has 16 GB") revises only a statement about the same thing: the same head
  noun, and where both pick one by words before it, the same one ("work laptop" is not
  "home laptop"). Before, a shared verb or word and a value of the same type were enough:
  "My cat is 5 now." superseded "My dog is 3 years old." (by meaning), "Actually the
  flight costs $350." the hotel's price, and the fact was shown as no longer current.
- A thing's value told by a present-tense verb and a value ("the gym opens at 6", "the
  class starts on Monday") names that thing as a verb of state does: before, the verb was
  not read, the clause named no subject, and "the pool opens at 7" revised the gym's hours.
  So does a plural's verb, which has no -s ("the gym classes start at 6"): before, "the
  pool classes start at 7" revised them; a verb the stop list holds too ("the dog walkers
  come at noon": before, "the cleaners come at 2pm" revised it), and one with a bare
  object, an activity, before its value ("the nurses change shifts at 7pm": before, "the
  doctors change shifts at 8pm" revised it), which tells when the subject does it, no
  event of a thing. So does a verb before a frequency ("my dog eats twice a day at 8am",
  "comes every other Monday": before, "twice" was read as a verb on "a day", the clause
  named no subject and "my cat eats at 7am" revised it). A thing is the same in the
  singular and the plural ("my yoga class" / "my yoga classes").
- A clause in which a thing acts on an object ("my cat knocked a glass over") tells an
  event, not a value of that thing: a statement of the thing's state ("my cat is 5")
  never revises it. Before, such a clause named no subject and so fit any. The verb is
  read by the object after it (an article, a possessive, an object pronoun), whatever its
  form: an irregular past ("my cat broke a glass") has no ending to read it by.
- One thing's head picking out the other ("the kitchen walls" / "the kitchen") is a part
  of it only where both tell a kind ("are green" / "is painted blue") and the whole's is
  a treatment told by a participle ("painted"), which covers its parts, or a typed value
  that names it ("the phone number is wrong" / "my phone is 555-0142"): a place, a time,
  an amount or an identity ("the car seat cost $300", "is in the hallway") is the
  compound's own thing's, never the car's, and so is a kind the whole has of its own, a
  plain adjective ("the car seat is black" after "my car is red"). Before, "the car
  seat" revised "the car" as its part.
- A statement that names no thing keeps matching as before: the user's own ("I moved to
  Denver" after "I live in Boston"), one that acts on a thing ("they moved my appointment"),
  an identity ("Nguyen is my dentist now"); and one thing's own correction still
  supersedes, by the rules or by meaning ("My dog is 4 now.").
"""

from __future__ import annotations

import pytest
from supersede_harness import FILLER, fact_superseded

from tiermem import Memory

# (an earlier fact, a later turn, whether the later turn supersedes the fact)
CASES = [
    # another pet's age, by meaning: before, superseded (cosine and a number)
    ("My dog is 3 years old.", "My cat is 5 now.", False),
    # another pet's age, by the rules: before, superseded ("shared 'old','year'; slot number")
    ("My dog is 3 years old.", "Actually my cat is 5 years old.", False),
    # another room's colour: before, superseded ("shared 'paint'")
    ("The kitchen is painted blue.", "Actually the bedroom is painted green now.", False),
    # another vehicle's price: before, superseded ("shared 'cost'; slot money")
    ("My car cost $12,000.", "Actually my bike cost $800.", False),
    # another vehicle's repair: before, superseded ("shared 'shop','until'; slot weekday")
    ("My car is in the shop until Friday.", "Actually my bike is in the shop until Monday.", False),
    # the home laptop is not the work laptop: before, superseded ("shared 'laptop','ram'")
    ("My work laptop has 16 GB of RAM.", "Actually my home laptop has 32 GB of RAM.", False),
    # the flight's cost is not the hotel's: before, superseded ("shared 'cost'; slot money")
    ("The hotel costs $200 a night.", "Actually the flight costs $350.", False),
    # another facility's hours, told by a present-tense verb ("opens at 6"): before,
    # superseded (the verb was not read, so the clause named no subject and fit any)
    ("The gym opens at 6.", "Actually the pool opens at 7.", False),
    # another shop's closing time: before, superseded
    ("The bakery closes at 6pm.", "Actually the pharmacy closes at 8pm.", False),
    # another class, picked by the word before its head: before, superseded
    ("My yoga class starts at 9am.", "Actually my pottery class starts at 10am.", False),
    # the same facility's and the same class's hours: still superseded
    ("The gym opens at 6.", "Actually the gym opens at 7.", True),
    ("My yoga class starts at 9am.", "Actually my yoga class starts at 10am.", True),
    # other classes, a plural subject whose verb has no -s ("start at 6"): before,
    # superseded (the verb was read as a word of the noun phrase, which named no subject)
    ("The gym classes start at 6.", "Actually the pool classes start at 7.", False),
    # other workers, a plural whose verb is on the stop list ("come at noon"): before,
    # superseded ("shared 'weekday'; slot time": the verb was read as no verb, so the
    # clause named no subject and fit any)
    ("The dog walkers come at noon on weekdays.", "Actually the cleaners come at 2pm on weekdays.", False),
    # the same workers: still superseded
    ("The dog walkers come at noon on weekdays.", "Actually the dog walkers come at 1pm on weekdays.", True),
    # other staff, a plural whose verb takes a bare object before the value ("change shifts
    # at 7pm"): before, superseded (the verb was read as no verb, the clause named no subject)
    ("The nurses change shifts at 7pm.", "Actually the doctors change shifts at 8pm.", False),
    # the same, with no cue but the verb "change" (found by meaning): before, superseded
    ("Nurses change shifts at 7pm.", "Doctors change shifts at 8pm.", False),
    # the same staff: still superseded
    ("The nurses change shifts at 7pm.", "Actually the nurses change shifts at 8pm.", True),
    # the same classes, and the same class in the plural: still superseded
    ("The gym classes start at 6.", "Actually the gym classes start at 7.", True),
    ("My yoga class starts at 9am.", "Actually my yoga classes start at 10am.", True),
    # another pet's routine, told with a frequency before its time ("eats twice a day at
    # 8am"): before, superseded (the verb was read as a word of the noun phrase, "twice"
    # as a verb acting on "a day": an event of nothing in particular)
    ("My dog eats twice a day at 8am and 6pm.", "Actually my cat eats at 7am.", False),
    # another worker's routine, its frequency alone: before, superseded likewise
    ("The cleaner comes every other Monday.", "Actually the gardener comes every Tuesday.", False),
    # the same pet's routine: still superseded
    ("My dog eats twice a day at 8am and 6pm.", "Actually my dog eats at 7am and 5pm.", True),
    # the same pet, by the rules: still superseded
    ("My dog is 3 years old.", "Actually my dog is 4.", True),
    # the same pet, by meaning (the embedding fallback for an update cue): still superseded
    ("My dog is 3 years old.", "My dog is 4 now.", True),
    # the same room: still superseded
    ("The kitchen is painted blue.", "Actually the kitchen is painted green now.", True),
    # the same laptop, and the same one named without its "work": still superseded
    ("My work laptop has 16 GB of RAM.", "Actually my work laptop has 32 GB of RAM.", True),
    ("My work laptop has 16 GB of RAM.", "Actually my laptop has 32 GB of RAM.", True),
    # the same price: still superseded
    ("The hotel costs $200 a night.", "Actually the hotel costs $250 a night.", True),
    # a part of the thing the fact names ("the kitchen walls" of "the kitchen"): superseded
    ("The kitchen is painted blue.", "Actually the kitchen walls are green now.", True),
    # a thing named by a compound is not the thing its first word names: the car seat's
    # price is not the car's: before, superseded (read as a part, "shared 'car','cost'")
    ("My car cost $12,000.", "Actually the car seat cost $300.", False),
    # nor its place: before, superseded (read as a part, "shared 'car'")
    ("The car is in the garage.", "Actually the car seat is in the hallway now.", False),
    # nor its colour, the car's own kind told by a plain adjective, no treatment of the
    # whole: before, superseded (read as a part, both telling a kind)
    ("My car is red.", "Actually the car seat is black now.", False),
    # likewise a phone and its case: before, superseded
    ("My phone is silver.", "Actually the phone case is blue now.", False),
    # a part, the whole's kind a treatment ("is painted"): still superseded, as the kitchen
    ("The house is painted white.", "Actually the house walls are grey now.", True),
    # an event of the pet (it acts on an object) is no value of the pet: before, superseded
    # ("shared 'cat'"; the event named no subject, so it fit any)
    ("My cat knocked a glass over.", "Actually my cat is 5.", False),
    # the same event told by an irregular past ("broke"), read by the object after it:
    # before, superseded (no -ed ending, so the clause named no subject and fit any)
    ("My cat broke a glass.", "Actually my cat is 5.", False),
    # the user's own corrections, no thing named on one side: still superseded
    ("My flight is on the 12th.", "Actually my flight is on the 14th.", True),
    ("I live in Boston.", "I moved to Denver.", True),
    # an update cue found by meaning, the fact naming no thing ("we"): still superseded
    ("We can spend at most $2,000 on the trip.", "The budget is now $3,000.", True),
]


@pytest.mark.parametrize(("fact", "later", "superseded"), CASES)
def test_a_correction_revises_only_a_fact_about_the_same_thing(cold_memory: Memory, fact: str, later: str,
                                                               superseded: bool) -> None:
    assert fact_superseded(cold_memory, fact, later, FILLER) is superseded

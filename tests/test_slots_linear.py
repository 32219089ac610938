"""Reading a turn's slot values takes time linear in its length.

Invariants:
- detect_slots (and through it find_superseded over a stored turn) reads a text in time
  linear in its length, however many values it holds. Before, each value found was
  checked against a list of every value taken before it, and the rest of the text was
  copied after each number to read its unit, both n squared: 16,000 characters of "1 "
  took 7.4 s, of "$1," 7.0 s, of "1:" 5.6 s, and find_superseded over such a stored turn
  3.8-8.4 s. A candidate turn is read whole (no length cap), on every append.
- The money value's number with a unit word is searched in linear time too: tried from each
  run of a long chain of digit runs joined by commas or dots with no unit ("1.1.1...."), it
  read to the chain's end from each, n squared (2 s at 16,000 characters, 40 s at 64,000).
- The e-mail value is searched in linear time too: tried from each position of a long run
  of [\\w.+-] with no "@" ("a-a-a-..."), it read to the run's end, n squared (0.5-1.2 s at
  16,000 characters).
- Nothing here times anything: each input is 200,000 characters or more, read in a child
  process that must finish within linear_child.CHILD_TIMEOUT_S. Linear, each takes well under a second; n
  squared, each takes many minutes.
- The values are the same as before for what is not adversarial (the last table).
"""

from __future__ import annotations

import pytest
from linear_child import finishes

from tiermem.consolidation.supersede import detect_slots

ADVERSARIAL_CHARS = 200_000  # each input's length: n squared on it is minutes, linear is milliseconds

# (an input built in the child as a Python expression, what it exercises)
INPUTS = [
    # numbers, each with no unit: every one was checked against all taken before it
    ("'1 ' * (N // 2)", "numbers"),
    # money with a comma: a money value, then its digits skipped as a plain number
    ("'$1,' * (N // 3)", "money"),
    # hours and colons: times and numbers
    ("'1:' * (N // 2)", "colons"),
    # numbers with a unit word: the rest of the text was copied after each to read it
    ("'4 people ' * (N // 9)", "units"),
    # one long run of word characters and marks with no "@": the e-mail value was searched from
    # each position and read to the run's end (twice N: n squared on N alone is about a minute)
    ("'a-' * N", "hyphens"),
    ("'A1_' * N", "word"),
    # one long chain of digit runs joined by dots, with no unit word: the money value's
    # number-and-unit form was searched from each run and read to the chain's end
    ("'1.' * (N // 2)", "money-chain"),
]

CHILD = """
from tiermem.consolidation.supersede import Candidate, detect_slots, find_superseded
N = {n}
text = {expr}
detect_slots(text)
for correction in ("Actually make it 6 people.", "Actually my budget is $3,000 now.", "Actually make it 9:30."):
    find_superseded(correction, [Candidate(0, text, "statement", True)])
print("ok")
"""


@pytest.mark.parametrize(("expr", "what"), INPUTS)
def test_a_long_turn_of_values_is_read_in_linear_time(expr: str, what: str) -> None:
    code = CHILD.format(n=ADVERSARIAL_CHARS, expr=expr)
    finishes(code, f"{what}: reading {ADVERSARIAL_CHARS} characters")


# (a text, its slot values): what a value claims is still not read again as a number
SLOTS = [
    # a number takes the word after it as its unit
    ("We are 4 people.", {"number": {"4 people"}}),
    # money claims its digits: no plain number "2,000" or "2"
    ("My budget is $2,000 a month.", {"money": {"$2,000"}}),
    # a time claims its hour; a bare number elsewhere keeps its unit
    ("Dinner at 7:30 pm for 6 guests.", {"time": {"7:30 pm"}, "number": {"6 guests"}}),
    # a date's ordinal is claimed; the weekday stands apart
    ("Move it to Tuesday the 14th.", {"weekday": {"tuesday"}, "date": {"14th"}}),
    # a phone number claims its digits
    ("Call me at 555-123-4567.", {"phone": {"555-123-4567"}}),
    # an address right after another, inside the same run: both read, as finditer read them
    ("Mail a@b.c+d@e.f today.", {"email": {"a@b.c", "+d@e.f"}}),
    # an address whose run opens with marks: from the run's start
    ("Write to ..jo+x@mail.example.com.", {"email": {"..jo+x@mail.example.com"}}),
    # a chain of digit runs and its unit: money from the chain's first digit
    ("It costs 1.000.000 euros.", {"money": {"1.000.000 euros"}}),
    # the chain's first digit inside a word: money from its second run
    ("Ref x1,250 dollars.", {"money": {"250 dollars"}, "code": {"x1"}}),
    # two marks break the chain: the money is the second chain, the first a number
    ("About 1,,250 dollars.", {"money": {"250 dollars"}, "number": {"1"}}),
    # a currency sign takes its chain whole; a later number with a unit is money too
    ("It was $1.200.50 then 300 usd.", {"money": {"$1.200.50", "300 usd"}}),
]


@pytest.mark.parametrize(("text", "slots"), SLOTS)
def test_the_values_are_read_as_before(text: str, slots: dict[str, set[str]]) -> None:
    assert detect_slots(text) == slots

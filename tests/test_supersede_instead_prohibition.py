"""An order with "instead" that shares only a prohibition's verb leaves the prohibition
current (`supersede._without_prohibited_verbs`): "In this branch, book Porto instead."
gives a destination, not a change of "Never book me on red-eye flights.". Before, the one
shared word "book" made the rule superseded and the agent was shown it as replaced.

Invariants the table holds:
- a prohibition ("never", "don't", "do not") is revised by an "instead" order only where
  the order names what the rule is about: a word of it besides its verb ("red-eye
  flights"), or a value of the same slot ("after 10pm" for "after 9pm");
- a rule stated as an order to do ("Always seat me by the window.") and a fact ("I booked
  the Hilton.") are revised by the same verb with another complement, as before;
- the verb counts where the turn says it outside a prohibition too."""

from __future__ import annotations

from typing import Any

import pytest
from supersede_harness import superseded_positions

# (the user turns in order, the position the last one supersedes or None); assistants
# reply "Noted." between them, so user turn i is at position 2 * i
CASES: list[tuple[list[str], int | None]] = [
    # the reviewer's repro: a destination, not the rule (before: superseded on "book")
    (["Never book me on red-eye flights. I am allergic to peanuts.", "In this branch, book Porto instead."],
     None),
    # the rule alone, and the opener "actually" (before: superseded on "book")
    (["Never book me on red-eye flights.", "Actually, book the Lisbon hotel instead."], None),
    # "don't ... ; ... instead": the alternative the prohibition leaves open (kept before too)
    (["Don't use tabs for indentation.", "Use four spaces instead."], None),
    # "do not" and another verb (before: superseded on "email")
    (["Please do not email me about invoices.", "Email my accountant instead."], None),
    # the order names what the rule rules out: the rule is revised
    (["Never book me on red-eye flights.", "Actually, book me on red-eye flights instead."], 0),
    # a value of the rule's slot: the rule is revised
    (["Don't call me after 9pm.", "Actually, call me after 10pm instead."], 0),
    # the verb said outside the prohibition too: the booking it tells of is revised
    (["I booked the Hilton. Never book me on red-eye flights.", "Book the Marriott instead."], 0),
    # a fact: one shared verb still finds it (README: "book the Marriott instead")
    (["I booked the Hilton.", "Book the Marriott instead."], 0),
    # a rule stated as an order to do is replaced by the same verb and another complement
    (["Always seat me by the window.", "Actually, seat me on the aisle instead."], 0),
    # a plain request, as before
    (["Book a table at Nong's for Friday.", "Book a table at Chez Marie instead."], 0),
    # an order naming nothing of its own lifts the rule (8a5be46 left "Don't call me." current)
    (["Don't call me.", "Call me instead."], 0),
    # ... with an opener and a "please" (8a5be46: kept current)
    (["Please don't call me.", "On second thought, call me instead."], 0),
    (["Do not email me.", "Please email me instead."], 0),
    # a curly apostrophe's "don't" is a prohibition too (before: superseded on "book")
    (["Don\u2019t book me on red-eye flights.", "In this branch, book Porto instead."], None),
    # "never, ever" (before: superseded on "book")
    (["Please never, ever book me on red-eye flights.", "In this branch, book Porto instead."], None),
]


@pytest.mark.parametrize(("users", "target"), CASES, ids=[c[0][-1][:40] for c in CASES])
def test_instead_revises_a_prohibition_only_by_naming_it(cold_memory: Any, users: list[str],
                                                           target: int | None) -> None:
    last = 2 * (len(users) - 1)
    assert superseded_positions(cold_memory, users) == ({} if target is None else {target: last})

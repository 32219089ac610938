"""A standing order given as a label, as the one thing to avoid, or as the name the speaker
goes by is load-bearing (consolidation.classify): the pinned block carries it however
far eviction has pushed the turn. Fails on the code before: each of the first table's
turns was a plain statement, not load-bearing (priority 30), so only retrieval could bring
it back (evals.pressure's probes of these slots were lost when a question about them was
read as small talk). None of the 2,080 LoCoMo dev turns has these shapes (the golden label
digests are unchanged)."""

from __future__ import annotations

import pytest

from tiermem.consolidation.classify import TurnClassifier
from tiermem.planner.candidates import AUTO_PIN_MIN_PRIORITY  # a load-bearing turn of this priority is pinned

CLASSIFY = TurnClassifier()


@pytest.mark.parametrize("text", [
    "Seat preference: aisle seat, every time.",  # a preference given as a label
    "Travel rule for me: absolutely no basic economy fares.",  # a rule given as a label
    "Meeting rule for us: no calls before 10am.",  # the same, for a team
    "I changed my mind about flights, the only thing to avoid is red-eye flights.",  # the one thing to avoid
    "By the way, I go by Lexi.",  # the name the speaker goes by
])
def test_a_standing_order_is_pinned(text: str) -> None:
    label = CLASSIFY.classify(text, "user")
    assert label.load_bearing, label
    assert label.priority >= AUTO_PIN_MIN_PRIORITY, label


@pytest.mark.parametrize("text", [
    "I go by bus to work most days.",  # "go by" a means of travel, no name
    "The things to avoid are obvious, honestly.",  # no one thing named as the rule
    "My favourite rule of thumb is to smile.",  # a rule, but no label with a colon
])
def test_lookalikes_are_no_orders(text: str) -> None:
    assert not CLASSIFY.classify(text, "user").load_bearing

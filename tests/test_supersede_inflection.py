"""A word shared only as a verb's -ed/-ing form on one side and its bare form on the other
counts half (`supersede.INFLECTION_CROSS_SHARE`): "I watched a documentary" is not what
"let's get him a Garmin watch instead" revises, while one such word beside a real shared
word, or the same form on both sides, still points at its target.

A cosine is weak evidence too: a retraction that shares no word or value with a turn takes
it by meaning only above the cosine unrelated turns reach
(`supersede.RETRACTION_ALONE_MIN_COSINE`). Before, "Forget the restaurant." retracted the hotel booking (cosine 0.32, nearer
than the table at Nong's), and the hotel was shown as no longer current."""

from __future__ import annotations

from typing import Any

import pytest
from supersede_harness import superseded_positions

from tiermem.consolidation.supersede import _inflected

# (the user turns in order, the position the last one supersedes or None); assistants
# reply "Noted." between them, so user turn i is at position 2 * i
CASES: list[tuple[list[str], int | None]] = [
    # the held-out knowledge case: the filler's "watched" is not the gift's "watch"
    (["For Dad's birthday, get him a Kindle Paperwhite.", "I watched a documentary about volcanoes.",
      "Actually let's get him a Garmin watch instead."], 0),
    # a crossing word beside a real shared word still finds its target
    (["I booked the Hilton downtown for Friday.", "The weather is lovely today.",
      "Actually book the Marriott downtown instead."], 0),
    # the same form on both sides is a whole word: the newer mention wins as before
    (["Cancel my gym membership.", "My watch broke on the hike.",
      "Actually the watch is fine, forget the repair, cancel nothing."], 2),
    # a retraction naming a thing no turn names: the hotel, nearest by a weak cosine and
    # sharing no word, is no target (before, superseded); the table at Nong's, a place
    # named by its name alone, is (supersede._named_venue; a miss until then)
    (["Book a table at Nong's for Friday.", "Book the Altis hotel from Friday to Monday.",
      "Forget the restaurant."], 0),
]


@pytest.mark.parametrize(("users", "target"), CASES, ids=[c[0][1][:30] for c in CASES])
def test_a_verb_form_is_weak_evidence_of_a_target(cold_memory: Any, users: list[str], target: int | None) -> None:
    last = 2 * (len(users) - 1)
    assert superseded_positions(cold_memory, users) == ({} if target is None else {target: last})


@pytest.mark.parametrize(("text", "inflected"), [
    ("I watched a documentary", {"watch"}),  # only the -ed form
    ("We are booking it, I booked it", {"book"}),  # -ed and -ing forms are both verbal
    ("I cancelled it, cancel the rest", set()),  # a bare form too: not only verbal
    ("get him a Garmin watch", set()),
    ("a red bed", set()),  # too short to be a suffix
    ("two airlines", set()),  # a plural is no verb form
])
def test_inflected_stems(text: str, inflected: set[str]) -> None:
    assert _inflected(text) == inflected

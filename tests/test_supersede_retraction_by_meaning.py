"""A retraction that names its target by another word ("the spending limit I gave you" for
"my budget") is found by meaning when the cosine is above the unrelated range
(`supersede.RETRACTION_ALONE_MIN_COSINE`). e00913d raised that floor to 0.6, the floor of a
similarity alone, to keep "Forget the restaurant." off the hotel booking (0.32): every such
retraction then superseded nothing, and the pressure eval showed the retracted $3,250
budget as current (tests/test_pressure_retention.py, leakage 1). The hotel stays no target."""

from __future__ import annotations

from typing import Any

import pytest
from supersede_harness import superseded_positions

# (the user turns in order, the position the last one supersedes or None); assistants
# reply "Noted." between them, so user turn i is at position 2 * i
CASES: list[tuple[list[str], int | None]] = [
    # another word for the same thing, cosine 0.40: before, nothing superseded
    (["My budget for the whole trip is $3,250, please plan around that.", "The weather is lovely today.",
      "Forget the spending limit I gave you, my company is paying for everything now."], 0),
    # 'allergy' and 'allergic' are no shared word (their stems differ), cosine 0.44
    (["Please never suggest dishes with sesame, I'm allergic.", "The weather is lovely today.",
      "Forget the allergy thing I mentioned, that was my brother."], 0),
    # a thing no turn names: the hotel, nearest at 0.32, in the unrelated range, is no
    # target; the place named by its name alone is (supersede._named_venue)
    (["Book a table at Nong's for Friday.", "Book the Altis hotel from Friday to Monday.",
      "Forget the restaurant."], 0),
]


@pytest.mark.parametrize(("users", "target"), CASES, ids=[c[0][0][:30] for c in CASES])
def test_a_retraction_by_another_word_finds_its_target(cold_memory: Any, users: list[str],
                                                       target: int | None) -> None:
    last = 2 * (len(users) - 1)
    assert superseded_positions(cold_memory, users) == ({} if target is None else {target: last})

"""A correction carries a value its target does not already hold: "Actually, it's raining
in Oslo now." tells "I live in Oslo." nothing new, and supersedes nothing.

Invariants:
- `find_superseded` passes over a candidate holding every typed value the correction says
  (`_holds_every_value`): the cue ("actually", "now") and the shared value made it a
  correction of that turn before, and the user's home was marked stale.
- A retraction tells no value: one naming its target by the values it holds still takes
  it back ("Forget the table at Nong's on Friday.").
- A correction with a value the target lacks still supersedes, more detail included.
- Decided the same with the model loaded and by a process that only appends.

Reviewer case n43 (session 33, /tmp/rv_pa/cases.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from supersede_modes import MODES, opened, users_superseded

from tiermem.tiers.embed import Embedder

# (user turns, {superseded case turn: superseding case turn})
CASES = [
    # n43: the place the user lives, said again with the weather there
    (["I live in Oslo.", "Actually, it's raining in Oslo now."], {}),
    # a day the appointment is on, said again with the forecast for it
    (["My dentist appointment is on Friday at 2pm.", "Actually, the forecast says Friday will be sunny."], {}),
    # the budget's amount, said again with a feeling about it
    (["My budget for the trip is $2,000.", "Actually, $2,000 is a lot for me these days."], {}),
    # control: a retraction naming what it takes back by the values it holds
    (["Book a table at Nong's for 8pm on Friday.", "Forget the table at Nong's on Friday."], {0: 1}),
    # control: a new time for the flight
    (["My flight to Lisbon leaves at 7:40am on the 3rd.", "No wait, the Lisbon flight is at 9:15am."], {0: 1}),
    # control: a new place
    (["I live in Oslo.", "Actually I moved to Bergen last month."], {0: 1}),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("users", "expected"), CASES)
def test_a_correction_needs_a_value_the_target_lacks(tmp_path: Path, embedder: Embedder, mode: str,
                                                    users: list[str], expected: dict[int, int]) -> None:
    with opened(mode, tmp_path / "d", embedder) as mem:
        assert users_superseded(mem, mode, users) == expected

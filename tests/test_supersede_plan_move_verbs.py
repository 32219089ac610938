"""A plan moved to a new time by any of the verbs people use: "Push tomorrow's call to
Friday.", "Let's move the bank call to Friday.", "Reschedule the bank call to Friday."
supersede "I have a call with the bank tomorrow at 11." as "Move the bank call to Friday."
did.

Invariants:
- classify's change-to cue takes push / reschedule / bump / shift / postpone besides
  change / switch / move / make, an opening "let's" or "please", and an object named by its
  day ("tomorrow's call"); before, each of these was no cue and the old time stayed current.
- A question about such a move ("Should I push tomorrow's call to Friday, ...?") is none.
- Decided the same with the model loaded and by a process that only appends.

Reviewer cases c16, c51, c52, c54, t06 (session 33, /tmp/rv_pa/cases.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from supersede_modes import MODES, opened, users_superseded

from tiermem.tiers.embed import Embedder

CALL = "I have a call with the bank tomorrow at 11."

# (user turns, {superseded case turn: superseding case turn})
CASES = [
    ([CALL, "Push tomorrow's call to Friday."], {0: 1}),  # c16: "push", the call named by its day
    ([CALL, "Let's move the bank call to Friday."], {0: 1}),  # c51: proposed with "let's"
    ([CALL, "Reschedule the bank call to Friday."], {0: 1}),  # c52: "reschedule"
    ([CALL, "Push the call with the bank to Friday."], {0: 1}),  # c54: the call named by its party
    # t06: an unrelated appointment between; the call with Dana moves
    (["The call with Dana is tomorrow at 3pm.", "The dentist is on Friday at 9am.",
      "Move tomorrow's call with Dana to Thursday."], {0: 2}),
    ([CALL, "Move the bank call to Friday."], {0: 1}),  # c55, control: the verb that worked before
    # n18: a question about the move moves nothing
    ([CALL, "Should I push tomorrow's call to Friday, or is that too late?"], {}),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("users", "expected"), CASES)
def test_a_plan_moved_by_any_verb_supersedes_its_old_time(tmp_path: Path, embedder: Embedder, mode: str,
                                                          users: list[str], expected: dict[int, int]) -> None:
    with opened(mode, tmp_path / "d", embedder) as mem:
        assert users_superseded(mem, mode, users) == expected

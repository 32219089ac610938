"""Two guards that held only for weak matches, or only for a subject read whole:

- the orphan guard: a correction naming the value it replaces ("Instead of flowers, ...")
  where no earlier turn holds that value revises nothing, however strong its match by
  meaning or shared words ("... I'll bring my parents wine on Saturday." shares the
  parents and a day with "Dinner with my parents is on Sunday at 6.", and moved the dinner);
- the subject check: a subject followed by a purpose ("my budget for the trip is ...") is
  its head noun; before, `_subject`
  read none, and any thing's amount ("Flights are now $450 each, prices went up.") revised
  the budget. An amount's irregular verb of moving ("prices went up") has its subject too.

Invariants: a correction that does name a value its target holds, or the target's own
thing, still supersedes; decided the same with the model loaded and by a process that
only appends (where the rules decide).

Reviewer cases n79, n72 (session 33, /tmp/rv_pa/cases.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from supersede_modes import MODES, opened, users_superseded

from tiermem.consolidation.supersede import _subject
from tiermem.tiers.embed import Embedder

# (user turns, {superseded case turn: superseding case turn})
CASES = [
    # n79 with the dinner named and a new hour: "flowers" is in no earlier turn, the dinner
    # stays at 6 (matched strongly by three shared words before)
    (["Dinner with my parents is on Sunday at 6.", "Instead of flowers, I'll bring my parents wine to dinner at 7."],
     {}),
    # with a new day
    (["Dinner with my parents is on Sunday at 6.",
      "Instead of flowers, I'll bring my parents wine to dinner on Saturday."], {}),
    # the hotel named by its city, a replaced tour no turn holds
    (["My hotel in Rome is the Hotel Artemide.", "Instead of the tour, I'll relax at the Rome hotel pool on Friday."],
     {}),
    # the user's commute, a replaced ferry no turn holds: where the user lives stays
    (["I live in Oslo.", "Instead of the ferry, I moved my commute to the train."], {}),
    # n72: the flights' price is no budget
    (["My budget for the trip is $2,000.", "Flights are now $450 each, prices went up."], {}),
    # control: the old value named and held
    (["Dinner with my parents is on Sunday at 6.", "Actually dinner with my parents is on Saturday, not Sunday."],
     {0: 1}),
]

# loaded only: the budget itself, a new amount (the append-only process leaves it to the
# meaning search, as before)
LOADED_CASES = [
    (["My budget for the trip is $2,000.", "The budget is now $2,500."], {0: 1}),
    (["My budget for the trip is $2,000.", "It's now $2,500 for the trip."], {0: 1}),
]

# (clause, the subject's head or None)
SUBJECTS = [
    ("My budget for the trip is $2,000.", "budget"),  # a purpose after the head
    ("The wifi password at the cabin is cedar77.", None),  # a place after the head: read as before, none
    ("prices went up.", "price"),  # an irregular verb of moving
    ("I live in Oslo.", None),  # the user, no thing
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("users", "expected"), CASES)
def test_orphan_and_subject_guards(tmp_path: Path, embedder: Embedder, mode: str, users: list[str],
                                   expected: dict[int, int]) -> None:
    with opened(mode, tmp_path / "d", embedder) as mem:
        assert users_superseded(mem, mode, users) == expected


@pytest.mark.parametrize(("users", "expected"), LOADED_CASES)
def test_the_budgets_own_update_still_supersedes(tmp_path: Path, embedder: Embedder, users: list[str],
                                                 expected: dict[int, int]) -> None:
    with opened("loaded", tmp_path / "d", embedder) as mem:
        assert users_superseded(mem, "loaded", users) == expected


@pytest.mark.parametrize(("clause", "head"), SUBJECTS)
def test_subject_head(clause: str, head: str | None) -> None:
    subject = _subject(clause)
    assert (subject.head if subject else None) == head

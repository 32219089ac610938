"""A correction's new value, clause by clause (review r_sup, 0ee9bc4).

A correction that tells no value its target lacks corrects none of it ("Actually, it's
raining in Oslo now." tells "I live in Oslo." nothing new). But a swap ("Emma is 9 and
Liam is 7." after "Emma is 7 and Liam is 9.") or a value moved from one clause to another
("the flight leaves at 2pm now" after "... leaves at 10am and lands at 2pm.") tells a new
value of the clause it is about, though the target holds it elsewhere: each clause of the
correction is compared with the target's clauses about the same thing (its subject's
head, or no subject and the same holder), and supersedes, as it did before 0ee9bc4.

Invariants: decided the same with the model loaded and by a process that only appends.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from supersede_modes import MODES, opened, users_superseded

from tiermem.tiers.embed import Embedder

# (user turns, {superseded case turn: superseding case turn})
CASES = [
    # a swap of two people's ages
    (["Emma is 7 and Liam is 9.", "Sorry, I mixed them up: Emma is 9 and Liam is 7."], {0: 1}),
    # the landing's hour is the departure's now
    (["My flight leaves at 10am and lands at 2pm.", "Correction: the flight leaves at 2pm now."], {0: 1}),
    # the user's room is Sam's number
    (["I'm in room 204 and Sam is in room 210.", "Actually, I'm in room 210, we swapped."], {0: 1}),
    # the user's flight has the wife's hour
    (["My flight is at 10am and my wife's is at noon.", "Sorry, I mixed them up, my flight is at noon."], {0: 1}),
    # a swap of two lessons' days
    (["Swim lessons are on Saturday and piano is on Sunday.",
      "Actually, swim lessons are on Sunday and piano on Saturday."], {0: 1}),
    # the day the target gives the kids' visit is new to the user's own
    (["The kids' dentist visit is on Monday and mine is on Friday.", "Correction: my dentist visit is on Monday."],
     {0: 1}),
    # n43: the weather in the user's city tells the city nothing new
    (["I live in Oslo.", "Actually, it's raining in Oslo now."], {}),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("users", "expected"), CASES)
def test_new_value_by_clause(tmp_path: Path, embedder: Embedder, mode: str, users: list[str],
                             expected: dict[int, int]) -> None:
    with opened(mode, tmp_path / "d", embedder) as mem:
        assert users_superseded(mem, mode, users) == expected

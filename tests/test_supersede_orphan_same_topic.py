"""The orphan guard and a strong match about the same thing (review r_sup, 27390d2).

A correction naming a value it replaces that no earlier turn holds word for word pins no
turn by one shared word, nor by a strong match about another thing ("Instead of flowers,
I'll bring my parents wine on Sunday." is the user's plan, not the dinner's). But a strong
match whose clause and the target's are the same holder's statement about the same thing
(both about no thing: "I live in ..." / "I moved to ..."; both about a thing that fits: "my
budget for the trip") names its old value another way ("NYC", "Google LLC", "2k") and
supersedes, as it did before 27390d2.

Invariants: decided the same with the model loaded and by a process that only appends.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from supersede_modes import MODES, opened, users_superseded

from tiermem.tiers.embed import Embedder

# (user turns, {superseded case turn: superseding case turn})
CASES = [
    # the city by its initials: the user's home, the user's move
    (["I live in New York City.", "I moved to Boston, I don't live in NYC anymore."], {0: 1}),
    # the amount by a short form: the same budget, named the same way
    (["My budget for the trip is $2,000.", "My budget for the trip is $2,500 now, not 2k."], {0: 1}),
    # the employer by its legal name
    (["I work at Google.", "I don't work at Google LLC anymore, I joined Stripe."], {0: 1}),
    # n79: the user's plan, no thing, against the dinner, a thing: flowers are in no turn
    (["Dinner with my parents is on Sunday at 6.", "Instead of flowers, I'll bring my parents wine on Sunday."], {}),
    # the user's commute (a thing) against where the user lives (none): the ferry is in no turn
    (["I live in Oslo.", "Instead of the ferry, I moved my commute to the train."], {}),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("users", "expected"), CASES)
def test_orphan_strong_same_topic(tmp_path: Path, embedder: Embedder, mode: str, users: list[str],
                                  expected: dict[int, int]) -> None:
    with opened(mode, tmp_path / "d", embedder) as mem:
        assert users_superseded(mem, mode, users) == expected

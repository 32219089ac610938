"""A wish asserts nothing; what the sentence says after the wish's clause does (review
r_sup, 3ccdc3f).

"I wish standup were at 10 instead." holds nothing as true and revises nothing; but "I
wish I'd told you sooner, but I moved to Bergen last month." tells a move after its wish
(split at ", but", a colon, a semicolon or a dash), and "I wish to update my address to
..." is a request, no wish: both supersede, as they did before 3ccdc3f (where the rules
decided them then: a process that only appends found no target for two of them before
either).

Invariants: decided the same with the model loaded and by a process that only appends.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from supersede_modes import MODES, opened, users_superseded

from tiermem.consolidation.classify import after_wish
from tiermem.tiers.embed import Embedder

# (user turns, {superseded case turn: superseding case turn})
CASES = [
    # a move after the wish's ", but"
    (["I live in Oslo.", "I wish I'd told you sooner, but I moved to Bergen last month."], {0: 1}),
    # a new time after the wish's ", but"
    (["Standup is at 9:30.", "I wish I could sleep in, but standup moved to 8:30."], {0: 1}),
    # n46/n84: the wish is all of it
    (["Standup is at 9:30.", "I wish standup were at 10 instead."], {}),
    # a wish of another home
    (["I live in Oslo.", "I wish I lived in Bergen."], {}),
    # "if only", all of it
    (["Our team meeting is at 3pm.", "If only the meeting were at 4pm."], {}),
]

# loaded only: the process that only appends missed these before 3ccdc3f too (its rules
# find no target by the words alone; /tmp/rv_sup full2.txt v07, w01 at a14991e)
LOADED_CASES = [
    # after "if only ...:"
    (["Our team meeting is at 3pm.", "If only I'd known earlier: the team meeting is at 4pm now."], {0: 1}),
    # a request
    (["My address is 14 Birch Lane.", "I wish to update my address to 9 Harbor Road."], {0: 1}),
]

# (sentence, what it says after its wish; None: no wish)
AFTER = [
    ("I wish I'd told you sooner, but I moved to Bergen.", "I moved to Bergen."),  # ", but"
    ("If only I'd known: the meeting is at 4pm now.", "the meeting is at 4pm now."),  # a colon
    ("I wish it were sunny; the picnic is on Sunday.", "the picnic is on Sunday."),  # a semicolon
    ("I wish it were sunny \u2014 the picnic is on Sunday.", "the picnic is on Sunday."),  # a dash
    ("I wish standup were at 10 instead.", ""),  # the wish is all of it
    ("I wish to update my address.", None),  # a request
    ("My address is 9 Harbor Road.", None),  # no wish
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("users", "expected"), CASES)
def test_wish_clause(tmp_path: Path, embedder: Embedder, mode: str, users: list[str],
                     expected: dict[int, int]) -> None:
    with opened(mode, tmp_path / "d", embedder) as mem:
        assert users_superseded(mem, mode, users) == expected


@pytest.mark.parametrize(("users", "expected"), LOADED_CASES)
def test_wish_clause_loaded(tmp_path: Path, embedder: Embedder, users: list[str], expected: dict[int, int]) -> None:
    with opened("loaded", tmp_path / "d", embedder) as mem:
        assert users_superseded(mem, "loaded", users) == expected


@pytest.mark.parametrize(("sentence", "rest"), AFTER)
def test_after_wish(sentence: str, rest: str | None) -> None:
    assert after_wish(sentence) == rest

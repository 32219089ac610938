"""The thing the user changes ("I changed my personal email to ...") picks its target as a
subject does: a target picked by another modifier ("my work email"), or another thing of
which the changed one is a part ("my email signature" / "my email"), is not it.

Invariants:
- A clause "I/we changed|switched|updated|set ... my/our/the <noun phrase> to ..." is
  about its object (`supersede._changed_object`), compared with the target's subject by
  `_subjects_fit`: "personal email" never revises "work email"; "email signature" never
  revises "my email". Before, a clause opened by "I" was about nothing, and any fact
  sharing a value type or a word could be its target.
- An object with no modifier, or the same one, still revises ("I changed my email to ..."
  / "My email is ...", "my work email" / "My work email is ...").
- Decided the same with the model loaded and by a process that only appends.

Reviewer cases t04, n69 (session 33, /tmp/rv_pa/cases.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from supersede_modes import MODES, opened, users_superseded

from tiermem.tiers.embed import Embedder

# (user turns, {superseded case turn: superseding case turn})
CASES = [
    # t04: the personal email changed; the work email stays current, the unmodified one goes
    (["My email is kim@gmail.com.", "My work email is kim@acme.com.", "I changed my personal email to kim@proton.me."],
     {0: 2}),
    # the same two facts the other way round: still the unmodified one, never the work one
    (["My work email is kim@acme.com.", "My email is kim@gmail.com.", "I changed my personal email to kim@proton.me."],
     {1: 2}),
    # n69: the signature is a thing of its own, no new email
    (["My email is jo.miller@gmail.com.", "I changed my email signature to include my pronouns."], {}),
    # a home phone changed: the work phone stays
    (["My work phone is 415-555-0100.", "I switched my home phone to 415-555-0177."], {}),
    # control: the object without a modifier revises the fact
    (["My email is kim@gmail.com.", "I changed my email to kim@proton.me."], {0: 1}),
    # control: the same modifier on both sides revises
    (["My work email is kim@acme.com.", "I changed my work email to kim@acme.io."], {0: 1}),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("users", "expected"), CASES)
def test_the_changed_object_picks_its_target(tmp_path: Path, embedder: Embedder, mode: str, users: list[str],
                                             expected: dict[int, int]) -> None:
    with opened(mode, tmp_path / "d", embedder) as mem:
        assert users_superseded(mem, mode, users) == expected

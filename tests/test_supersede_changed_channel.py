"""A changed channel named with its identifier's noun (review r_sup, ce45a80).

"I changed my email address to ..." changes the email a target names "my email", "I
changed my mobile number to ..." the phone a target names "my cell" or "my phone number":
a channel (email, phone, cell, mobile) with no word that picks one of several is compared
as no thing in particular, as before ce45a80, and supersedes. A picked channel ("my
personal email") still revises no other pick ("my work email"), nor does another thing
named after the channel ("my email signature") revise the channel.

Invariants: decided the same with the model loaded and by a process that only appends.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from supersede_modes import MODES, opened, users_superseded

from tiermem.consolidation.supersede import _changed_object
from tiermem.tiers.embed import Embedder

# (user turns, {superseded case turn: superseding case turn})
CASES = [
    # the email by its address
    (["My email is kim.lee@gmail.com.", "I changed my email address to kim.lee@proton.me."], {0: 1}),
    # the email by its account
    (["My email is kim.lee@gmail.com.", "I switched my email account to kim.lee@outlook.com."], {0: 1}),
    # the cell by its number
    (["My cell is 617-555-0142.", "I changed my cell number to 617-555-0177."], {0: 1}),
    # the phone number by the mobile's number
    (["My phone number is 415-555-0199.", "I changed my mobile number to 415-555-0123."], {0: 1}),
    # t04: another pick of the email, its address named
    (["My work email is dana@acme.com.", "I changed my personal email address to dana@proton.me."], {}),
    # t04 as the reviewer wrote it
    (["My work email is dana@acme.com.", "I changed my personal email to dana@proton.me."], {}),
    # n69: the signature is no email
    (["My email is kim.lee@gmail.com.", "I changed my email signature to 'Best, Kim'."], {}),
]

# (clause, (head, modifiers) of the changed object, or None)
OBJECTS = [
    ("I changed my email address to kim@proton.me.", None),  # the channel, unpicked
    ("I changed my personal email address to kim@proton.me.", ("email", {"personal"})),  # picked
    ("I changed my email signature to Best.", ("signature", {"email"})),  # another thing
    ("I changed my home address to 9 Harbor Road.", ("address", {"home"})),  # no channel
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("users", "expected"), CASES)
def test_changed_channel(tmp_path: Path, embedder: Embedder, mode: str, users: list[str],
                         expected: dict[int, int]) -> None:
    with opened(mode, tmp_path / "d", embedder) as mem:
        assert users_superseded(mem, mode, users) == expected


@pytest.mark.parametrize(("clause", "expected"), OBJECTS)
def test_changed_object(clause: str, expected: tuple[str, set[str]] | None) -> None:
    got = _changed_object(clause)
    assert (None if got is None else (got.head, set(got.modifiers))) == expected

"""The classifier's and supersession's rules read a turn's first CLASSIFY_MAX_CHARS
characters: over a whole 900 KB message they took 2.6 s of CPU per append (~6 s at the
2 MB content limit). A label is a function of the head alone; what a person types
before a paste is still read."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiermem.consolidation.classify import CLASSIFY_MAX_CHARS, TurnClassifier
from tiermem.consolidation.supersede import Appended, Superseder
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.tokens import BpeTokenCounter

RULE = "Never book me on red-eye flights."
CORRECTION = "Actually, my budget is 3000 EUR, not 2000."
FILLER = "row 1234 ok; "  # a pasted export: no cue in it


def pasted(before: str, after: str) -> str:
    """`before`, a paste longer than the cap, then `after`."""
    return before + " " + FILLER * (CLASSIFY_MAX_CHARS // len(FILLER) + 10) + " " + after


# (what the message holds, whether the rule is read)
CASES = [
    (pasted(RULE, ""), True),  # typed before the paste: read
    (pasted("", RULE), False),  # after the paste, past the cap: not read (before: read, over all 900 KB)
]


@pytest.mark.parametrize("text,read", CASES, ids=["before-the-paste", "after-the-paste"])
def test_the_label_comes_from_the_head(text: str, read: bool) -> None:
    clf = TurnClassifier()
    label = clf.classify(text, "user")
    assert label == clf.classify(text[:CLASSIFY_MAX_CHARS], "user")
    assert label.load_bearing is read
    assert clf.classify(RULE, "user").load_bearing  # the premise: the rule alone is one


def test_a_correction_past_the_head_supersedes_nothing(tmp_path: Path, counter: BpeTokenCounter) -> None:
    clf = TurnClassifier()
    cold = ColdStore(tmp_path / "tiermem.db", tokens=counter)
    try:
        rules = Superseder(cold, None, clf)
        for text, expected in ((CORRECTION, True), (pasted("", CORRECTION), False)):
            lab = clf.classify(text, "user")
            turn = Appended(1, "user", text, lab.intent, lab.load_bearing)
            assert bool(rules.assertion(turn)) is expected
    finally:
        cold.close()

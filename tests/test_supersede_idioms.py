"""Supersession precision on narration: idioms that hold a cue word ("never forget", "from
scratch", "drop by"), joining something new ("I joined a running group") and an attachment's
bracketed description revise nothing, while a real change ("I joined Globex") still does."""

from __future__ import annotations

from typing import Any

import pytest

from tiermem.consolidation.classify import normalize
from tiermem.consolidation.supersede import MEANING_CUE, UPDATE_CUE, _cue_text

FILLER = ["What a week it has been, honestly.", "The weather is lovely today."]

# (earlier user statement, later user turn, whether the later one supersedes the earlier)
CASES: list[tuple[str, str, bool]] = [
    # a negated "forget" is no retraction
    ("My sister and I took a road trip along the coast last summer.",
     "I'll never forget that road trip along the coast with my sister.", False),
    ("The concert tickets for Saturday night are booked for the two of us.",
     "The concert on Saturday night was amazing and I'm not gonna forget a second of it.", False),
    ("Don't put sugar in my coffee, I take it black.",  # a reminder is no retraction either
     "Don't forget to grab my black coffee on the way.", False),
    # "from scratch" and "drop by" hold "scratch" and "drop"
    ("I bake bread every weekend with my kids.", "This weekend my kids and I baked a sourdough bread from scratch.",
     False),
    ("My neighbor Tom helps me in the garden on Saturdays.", "Tom will drop by the garden on Saturday to help.", False),
    # joining something new adds a membership
    ("I go to a running group on Sundays with my friends.", "I joined a new running group last week.", False),
    # an attachment's description shares its boilerplate ("image", "photo") with every other one
    ("Rex loves the beach. [image: a photo of a dog at the beach]",
     "I switched to a standing desk at work. [image: a photo of a desk in an office]", False),
    # controls: a change of employer, a retraction
    ("I work at Initech as an engineer.", "I don't work at Initech anymore, I joined Globex last month.", True),
    ("Always book me an aisle seat on flights.", "Forget the aisle seat rule, any seat is fine.", True),
]


def _chat(mem: Any, conv: str, users: list[str]) -> None:
    for u in users:
        mem.append_many(conv, [{"role": "user", "content": u}, {"role": "assistant", "content": "Noted."}])


@pytest.mark.parametrize(("earlier", "later", "supersedes"), CASES, ids=[c[1][:40] for c in CASES])
def test_narration_revises_nothing(cold_memory: Any, earlier: str, later: str, supersedes: bool) -> None:
    _chat(cold_memory, "c", [earlier, *FILLER, later])
    last = cold_memory.cold.last_position("c") - 1
    rows = {r.position: r for r in cold_memory.cold.turns("c", start=0, end=last)}
    whole = {p: r.superseded_by for p, r in rows.items() if r.superseded_by is not None}
    parts = {(s.position, s.superseded_by) for s in cold_memory.cold.superseded_statements("c", sorted(rows))}
    if supersedes:
        assert whole == {0: last} or parts == {(0, last)}
    else:
        assert whole == {} and parts == set()


@pytest.mark.parametrize(("text", "cue"), [
    ("I'll never forget that day", False),  # negated "forget"
    ("I'm not gonna forget a second of it", False),
    ("Don't forget to pack the charger", False),  # a reminder
    ("We baked it from scratch", False),
    ("Tom will drop by later", False),
    ("It changed my view on helping others", False),  # an outlook, not a value
    ("My family keeps me striving for change", False),  # change as a cause
    ("Let's eat out for a change", False),
    # real cues stay
    ("Forget the aisle seat rule", True),
    ("I changed my mind, make it Tuesday", True),
    ("Change the budget to $500", True),
    ("Drop the flight rule", True),
    ("Scratch that", True),
])
def test_idioms_hide_their_cue_word(text: str, cue: bool) -> None:
    cues = _cue_text(normalize(text).lower())
    assert bool(UPDATE_CUE.search(cues) or MEANING_CUE.search(cues)) is cue

"""planner.speakers at the shipped weight (SPEAKER_BOOST, chosen leave-one-out, issue 19): a
question that names one participant brings that participant's own turn above the other's
turn on the same topic even when the other's matches the question's words more closely;
at the weight before (0.5) the closer match stayed first."""

from __future__ import annotations

import pytest

from tiermem import Memory
from tiermem.planner import speakers

DAY = 1_700_000_000.0
QUERY = "What does Ann enjoy doing at weekends?"


def _talk(mem: Memory) -> tuple[int, int]:
    """Bob's turn repeats the question's words; Ann's says the same of herself more loosely.
    Returns (Ann's position, Bob's position)."""
    fillers = ["How was your week?", "Busy, lots of meetings.", "Same here, tiring.", "Let's catch up soon."]
    batch: list[dict[str, object]] = [
        {"role": "assistant", "name": "Bob", "content": "At weekends I enjoy doing long hikes in the hills.",
         "created_at": DAY},
        {"role": "user", "name": "Ann", "content": "At weekends I enjoy hiking in the hills.",
         "created_at": DAY + 60},
    ]
    batch += [{"role": "user" if i % 2 == 0 else "assistant", "name": "Ann" if i % 2 == 0 else "Bob",
               "content": f, "created_at": DAY + 120 + i * 60} for i, f in enumerate(fillers * 10)]
    positions = mem.append_many("c", batch, session_id="s1")
    mem.append("c", {"role": "user", "name": "Ann", "content": QUERY, "created_at": DAY + 4000})
    return positions[1], positions[0]


@pytest.mark.parametrize(("weight", "first"), [
    (None, "ann"),  # the shipped weight: the named participant's own turn first
    (0.5, "bob"),  # the weight before: the closer keyword match stayed first
])
def test_named_participants_turn_passes_a_closer_match(cold_memory: Memory, monkeypatch: pytest.MonkeyPatch,
                                                        weight: float | None, first: str) -> None:
    if weight is not None:
        monkeypatch.setattr(speakers, "SPEAKER_BOOST", weight)
    ann, bob = _talk(cold_memory)
    ctx = cold_memory.context("c", QUERY, budget=400, record=False)
    scores = {p: it.score for it in ctx.plan.items if it.slice == "retrieved" for p in it.positions}
    assert ann in scores and bob in scores
    assert (scores[ann] > scores[bob]) == (first == "ann"), scores

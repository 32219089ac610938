"""planner.speakers: a question naming one participant ranks that participant's turns up; a
question naming both, or none, changes nothing."""

from __future__ import annotations

import pytest

from tiermem import Memory
from tiermem.planner.speakers import named_speaker


def _talk(mem: Memory) -> tuple[int, int]:
    """Ann and Bob say nearly the same thing; returns (Ann's position, Bob's position)."""
    day = 1_700_000_000.0
    fillers = ["How was your week?", "Busy, lots of meetings.", "Same here, tiring.", "Let's catch up soon."]
    # the two near-copies first, then enough small talk that they are out of the recent tail
    batch: list[dict[str, object]] = [
        {"role": "assistant", "name": "Bob", "content": "I really enjoy hiking in the hills on weekends.",
         "created_at": day},
        {"role": "user", "name": "Ann", "content": "I really enjoy hiking in the hills at weekends.",
         "created_at": day + 60},
    ]
    batch += [{"role": "user" if i % 2 == 0 else "assistant", "name": "Ann" if i % 2 == 0 else "Bob",
               "content": f, "created_at": day + 120 + i * 60} for i, f in enumerate(fillers * 10)]
    positions = mem.append_many("c", batch, session_id="s1")
    return positions[1], positions[0]


def test_turn_cache_records_each_turns_speaker(cold_memory: Memory) -> None:
    ann, bob = _talk(cold_memory)
    table = cold_memory.turns.get("c")
    assert table.speaker is not None
    names = table.speaker_names
    i, j = table.index_of(ann), table.index_of(bob)
    assert i is not None and j is not None
    assert names[int(table.speaker[i])] == "Ann" and names[int(table.speaker[j])] == "Bob"


@pytest.mark.parametrize(("query", "who"), [
    ("What does Ann enjoy?", "Ann"),  # one participant named
    ("What are Bob's hobbies?", "Bob"),  # possessive
    ("What do Ann and Bob both enjoy?", None),  # both named: about their exchange
    ("What does anyone enjoy?", None),  # none named ("anyone" is not "Ann")
])
def test_named_speaker(cold_memory: Memory, query: str, who: str | None) -> None:
    _talk(cold_memory)
    table = cold_memory.turns.get("c")
    got = named_speaker(table, query)
    assert (None if got is None else table.speaker_names[got]) == who


@pytest.mark.parametrize(("query", "first"), [
    ("What does Ann enjoy doing at weekends?", "ann"),  # Ann's turn above Bob's near-copy
    ("What does Bob enjoy doing at weekends?", "bob"),  # and the other way round
])
def test_the_named_speakers_turn_ranks_first(cold_memory: Memory, query: str, first: str) -> None:
    ann, bob = _talk(cold_memory)
    cold_memory.append("c", {"role": "user", "content": query})
    ctx = cold_memory.context("c", query, budget=300)
    scores = {p: i for i in ctx.plan.items if i.slice == "retrieved" for p in i.positions}
    assert ann in scores and bob in scores
    want, other = (ann, bob) if first == "ann" else (bob, ann)
    assert scores[want].score > scores[other].score
    assert "the named speaker's" in scores[want].reason

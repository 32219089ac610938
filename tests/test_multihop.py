"""planner.multihop: a second retrieval round seeded by the first round's best turns brings
back a turn that shares no word with the question, only an entity with the turn that
answers its first hop."""

from __future__ import annotations

import pytest
from unrelated_turns import FILLERS

from tiermem import Memory
from tiermem.planner import multihop
from tiermem.planner.multihop import salient_terms
from tiermem.tiers.lexical import query_terms

DAY = 1_700_000_000.0
FIRST_HOP = "I moved here from Sweden four years ago, after university."
# shares no word with the question, only the place with the first hop
SECOND_HOP = "My grandma back in Sweden knitted me this scarf for the winter."
QUESTION = "Where did I move from?"


def _talk(mem: Memory) -> tuple[int, int]:
    """Sessions of small talk with the two hops in different sessions, far from the tail;
    returns (first hop's position, second hop's position)."""
    turns: list[tuple[str, str]] = []
    for i, f in enumerate(FILLERS * 3):
        turns.append(("user" if i % 2 == 0 else "assistant", f"{f} (note {i})"))
    turns.insert(7, ("user", FIRST_HOP))
    turns.insert(40, ("user", SECOND_HOP))
    positions: list[int] = []
    per_session = 10
    for s in range(0, len(turns), per_session):
        batch = [{"role": r, "content": t, "created_at": DAY + 86_400 * (s // per_session) + j}
                 for j, (r, t) in enumerate(turns[s:s + per_session])]
        positions += mem.append_many("c", batch, session_id=f"s{s // per_session}")
    first = positions[[t for _r, t in turns].index(FIRST_HOP)]
    second = positions[[t for _r, t in turns].index(SECOND_HOP)]
    mem.append("c", {"role": "user", "content": QUESTION, "created_at": DAY + 86_400 * 30})
    return first, second


def _retrieved(mem: Memory, budget: int) -> dict[int, str]:
    ctx = mem.context("c", QUESTION, budget=budget, record=False)
    return {p: i.reason for i in ctx.plan.items if i.slice == "retrieved" for p in i.positions}


def test_second_hop_is_retrieved_after_and_not_before(cold_memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = _talk(cold_memory)
    assert not set(query_terms(QUESTION)) & set(query_terms(SECOND_HOP))  # no shared word
    budget = 150  # room for about five retrieved lines
    monkeypatch.setattr(multihop, "HOP_WEIGHT", 0.0)  # the first round alone
    monkeypatch.setattr(multihop, "HOP_DENSE_WEIGHT", 0.0)
    before = _retrieved(cold_memory, budget)
    assert first in before  # the first round finds the first hop
    assert second not in before
    monkeypatch.undo()  # the shipped weights
    assert second not in _retrieved(cold_memory, budget)  # too little room for a hop (HOP_MIN_ROOM_TOKENS)
    monkeypatch.setattr(multihop, "HOP_MIN_ROOM_TOKENS", 0)
    after = _retrieved(cold_memory, budget)
    assert first in after and second in after
    assert f"second round via #{first} (sweden" in after[second]


@pytest.mark.parametrize(("text", "want", "not_want"), [
    # the place kept; the question's own word, stopwords and words of every turn not
    (FIRST_HOP + " (note 3)", ["sweden"], ["move", "note", "i", "from"]),
    # a number is entity-like (one only here links nothing); a word at a sentence start is not, nor rare in 3 of 64
    ("Desk 417 had a dinosaur, note 12.", ["417"], ["desk", "dinosaur", "note", "12"]),
    # capitalised inside a sentence: entity-like, so 3 of 64 turns is rare enough
    ("We saw the Dinosaur exhibit.", ["dinosaur"], ["exhibit"]),
    ("", [], []),  # no text, no term
])
def test_salient_terms(cold_memory: Memory, text: str, want: list[str], not_want: list[str]) -> None:
    _talk(cold_memory)
    table = cold_memory.turns.get("c")
    got = salient_terms(text, query_terms(QUESTION), table)
    assert all(w in got for w in want), got
    assert not any(w in got for w in not_want), got

"""planner.feedback: pseudo-relevance feedback lifts a turn that shares no word with the
question, only the words of the first round's best turns (RM3), and none when it is off."""

from __future__ import annotations

import numpy as np
import pytest
from unrelated_turns import FILLERS

from tiermem import Memory
from tiermem.planner import feedback
from tiermem.planner.feedback import expansion_terms
from tiermem.tiers.lexical import query_terms

DAY = 1_700_000_000.0
QUESTION = "Which hobby do I share with my children?"
# the first round's best turns: the question's words, and a topic word (kayaking) of their own
BEST = ["My children and I share one hobby: kayaking on the lake near the cabin.",
        "Our favourite hobby with the children is kayaking, we paddle every Sunday."]
# shares no word with the question, only the feedback turns' topic words
TARGET = "The kayaking trip was wonderful, we paddled past the cabin at dawn."


def _talk(mem: Memory) -> int:
    """Sessions of small talk, the best turns in one session and the target in another,
    far from the tail; returns the target's position."""
    turns = [f"{f} (note {i})" for i, f in enumerate(FILLERS * 3)]
    turns.insert(5, BEST[0])
    turns.insert(6, BEST[1])
    turns.insert(44, TARGET)
    positions: list[int] = []
    per_session = 10
    for s in range(0, len(turns), per_session):
        batch = [{"role": "user" if j % 2 == 0 else "assistant", "content": t,
                  "created_at": DAY + 86_400 * (s // per_session) + j}
                 for j, t in enumerate(turns[s:s + per_session])]
        positions += mem.append_many("c", batch, session_id=f"s{s // per_session}")
    mem.append("c", {"role": "user", "content": QUESTION, "created_at": DAY + 86_400 * 30})
    return positions[turns.index(TARGET)]


def _retrieved(mem: Memory, budget: int) -> dict[int, str]:
    ctx = mem.context("c", QUESTION, budget=budget, record=False)
    return {p: i.reason for i in ctx.plan.items if i.slice == "retrieved" for p in i.positions}


def test_feedback_lifts_a_turn_that_shares_only_the_best_turns_words(
        cold_memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    target = _talk(cold_memory)
    assert not set(query_terms(QUESTION)) & set(query_terms(TARGET))  # no shared word
    budget = 150  # room for about five retrieved lines
    monkeypatch.setattr(feedback, "PRF_WEIGHT", 0.0)
    monkeypatch.setattr(feedback, "ROCCHIO_WEIGHT", 0.0)
    assert target not in _retrieved(cold_memory, budget)  # the first round alone misses it
    monkeypatch.setattr(feedback, "PRF_WEIGHT", 2.0)
    after = _retrieved(cold_memory, budget)
    assert target in after
    assert "feedback words (" in after[target] and "kayak" in after[target]


def test_dense_feedback_gives_credit_only_past_the_seeds(cold_memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    _talk(cold_memory)
    cold_memory.cold.index_pending(conversation_id="c")  # every turn's vector
    table = cold_memory.turns.get("c")
    assert table.has_vec.all()
    total = np.zeros(len(table))
    total[5], total[6] = 5.0, 4.0  # the best turns: the seeds
    monkeypatch.setattr(feedback, "PRF_WEIGHT", 0.0)
    monkeypatch.setattr(feedback, "ROCCHIO_WEIGHT", 1.0)
    monkeypatch.setattr(feedback, "FB_DOCS", 2)
    got = feedback.feedback(table, total, np.ones(len(table), dtype=bool), QUESTION, lambda ps: {})
    assert got is not None
    assert got.dense[5] == 0.0 and got.dense[6] == 0.0  # the seeds are the first round's own
    assert (got.dense >= 0).all() and got.dense.max() <= feedback.MAX_ROCCHIO_Z
    assert not got.lexical.any()  # the words' form is off
    monkeypatch.setattr(feedback, "ROCCHIO_WEIGHT", 0.0)
    assert feedback.feedback(table, total, np.ones(len(table), dtype=bool), QUESTION, lambda ps: {}) is None


@pytest.mark.parametrize(("texts", "want", "not_want"), [
    # the best turns' shared topic words; not the question's, not stopwords, not a word of one turn only
    (BEST, ["kayak", "cabin"], ["hobbi", "children", "share", "the", "and", "lake"]),
    # a word of every other turn (note) says nothing about the topic
    (["note note kayaking"], ["kayak"], ["note"]),
    ([], [], []),  # no feedback turn, no term
])
def test_expansion_terms(cold_memory: Memory, texts: list[str], want: list[str], not_want: list[str]) -> None:
    _talk(cold_memory)
    table = cold_memory.turns.get("c")
    got = expansion_terms(texts, QUESTION, table)
    terms = [t for t, _w in got]
    assert all(w in terms for w in want), got
    assert not any(w in terms for w in not_want), got
    if got:
        assert abs(sum(w for _t, w in got) - 1.0) < 1e-9

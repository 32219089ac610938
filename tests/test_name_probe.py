"""evals.name_probe: the keyword query each mode searches, the broad-query boost, the
wraps left as they were, and the leave-one-out choice."""

from __future__ import annotations

import numpy as np
import pytest

import tiermem.planner.candidates as C
from tiermem import Memory
from tiermem.evals.name_probe import (
    asks_likely,
    broad,
    broad_extra,
    broad_mode,
    folds,
    keyword_query,
    keywords,
    valid_mode,
)


@pytest.fixture
def table(memory: Memory):  # type: ignore[no-untyped-def]
    memory.append_many("c", [{"role": "user" if i % 2 == 0 else "assistant", "name": "Ada" if i % 2 == 0 else "Bo",
                              "content": f"Hey {'Bo' if i % 2 == 0 else 'Ada'}, I like topic {i}"} for i in range(80)])
    return memory.planner.turns.get("c")


@pytest.mark.parametrize(("mode", "query", "expected"), [
    ("shipped", "What does Ada like?", "What does Ada like?"),  # the whole query, as shipped
    ("one", "What does Ada like?", "What does like?"),  # one participant named: left out
    ("one", "What do Ada and Bo like?", "What do Ada and Bo like?"),  # two named: no speaker boost, kept
    ("all", "What do Ada and Bo like?", "What do and like?"),  # every name left out
    ("all", "Ada?", "Ada?"),  # nothing would be left: the words are kept
    ("broad-0.4-2", "What does Ada like?", "What does Ada like?"),  # a boost mode: keywords as shipped
])
def test_keyword_query(table, mode: str, query: str, expected: str) -> None:  # type: ignore[no-untyped-def]
    assert keyword_query(query, table, mode) == expected


@pytest.mark.parametrize(("cosine", "extra"), [
    (np.array([0.2, 0.39]), 2.0),  # best below 0.4: a broad query
    (np.array([0.2, 0.41]), 0.0),  # one turn matches closely
    (np.array([np.nan, 0.3]), 2.0),  # a turn without a vector is skipped
    (np.array([np.nan, np.nan]), 0.0),  # no vectors: no extra
    (None, 0.0),  # no query vector
])
def test_broad_extra(cosine: np.ndarray | None, extra: float) -> None:
    assert broad_extra(cosine, 0.4, 2.0) == extra


@pytest.mark.parametrize(("query", "likely"), [
    ("Would Ada move abroad?", True),  # a modal
    ("What job might Bo pursue?", True),
    ("Is Ada likely to travel?", True),  # a word of likelihood
    ("What did Ada do in May?", True),  # "may" as a month counts too: a known false positive
    ("What does Ada like?", False),  # a plain question
])
def test_asks_likely(query: str, likely: bool) -> None:
    assert asks_likely(query) is likely


@pytest.mark.parametrize(("mode", "ok"), [
    ("shipped", True),  # the base
    ("broad-0.4-2", True),  # threshold 0.4, extra 2
    ("modal-4", True),  # extra 4 on modal questions (threshold -1 marks it)
    ("broad-x-2", False),  # not a number
    ("narrow", False),  # no such mode
])
def test_valid_mode(mode: str, ok: bool) -> None:
    assert valid_mode(mode) is ok
    if ok:
        assert broad_mode(mode) == {"shipped": None, "broad-0.4-2": (0.4, 2.0), "modal-4": (-1.0, 4.0)}[mode]


def test_wraps_restored(memory: Memory, table) -> None:  # type: ignore[no-untyped-def]
    cands = memory.planner.candidates
    before = (C.score_turns, C.speaker_boost)
    with keywords(cands, "one"), broad("broad-0.99-5"):
        assert "lexical" in vars(cands) and C.speaker_boost is not before[1]
        ctx = memory.context("c", "What does Ada like about topic 4?", budget=400, record=False)
        assert any(it.slice == "retrieved" for it in ctx.plan.items)
    assert "lexical" not in vars(cands)  # the class's method again
    assert (C.score_turns, C.speaker_boost) == before


def test_folds_choose_on_the_others() -> None:
    # "b" is better on s1 and s2, worse on s3: held out s3, it is chosen and loses there
    recs = {"a": {"500": [("s1", 1, 0.5), ("s2", 1, 0.5), ("s3", 2, 1.0)]},
            "b": {"500": [("s1", 1, 1.0), ("s2", 1, 1.0), ("s3", 2, 0.0)]}}
    out = folds(recs, ["a", "b"], ["500"])
    assert out["s3"]["chosen"] == "b"
    assert out["s3"]["budgets"]["500"]["chosen"]["all"] == 0.0
    assert out["s3"]["budgets"]["500"]["base"]["2"] == 100.0
    assert out["s1"]["chosen"] == "a"  # on s2 + s3: 0.75 against 0.5

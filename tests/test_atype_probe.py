"""evals.atype_probe: the type a question asks for, the expressions of each type a turn
holds, the boost moving only candidates already scored, and the wrap left as it was."""

from __future__ import annotations

import pytest

from tiermem import Memory
from tiermem.evals.atype_probe import (
    answer_types,
    boosted,
    holds_type,
    question_type,
    type_boost,
    valid_mode,
)
from tiermem.planner.candidates import Candidate


@pytest.mark.parametrize(("query", "kind"), [
    ("Where did Ada go last summer?", "place"),  # wh-word first
    ("In which city does Bo live?", "place"),  # "which city"
    ("Who gave Ada the lamp?", "person"),
    ("Whom does Bo trust most?", "person"),
    ("What did Ada give the friend who moved?", None),  # "who" in a relative clause: no type
    ("How many kids does Bo have?", "number"),
    ("How long has Ada been running?", "number"),  # a duration: a quantity
    ("How long ago did Bo move?", None),  # a time: left to planner.dates / timeline
    ("When did Ada move?", None),  # time
    ("What year did Bo start?", None),  # time
    ("What activities does Ada enjoy?", "activity"),
    ("What does Bo do to relax?", "activity"),  # "what does X do"
    ("Which books has Ada read?", "work"),
    ("What movie did Bo watch?", "work"),
    ("What did Ada say about the weather?", None),  # untyped
])
def test_question_type(query: str, kind: str | None) -> None:
    assert question_type(query) == kind


NAMES = frozenset(["Ada", "Bo"])


@pytest.mark.parametrize(("text", "kind", "holds"), [
    ("We spent a week in Lisbon.", "place", True),  # preposition + capitalised word
    ("I went to the beach with the kids.", "place", True),  # a verb of going + "to the <noun>"
    ("Thanks Bo, I sent it to Ada.", "place", False),  # a participant's name is no place
    ("it was fun", "place", False),
    ("My sister came over.", "person", True),  # "my <kin word>"
    ("Yesterday I met Priya at work.", "person", True),  # a capitalised word past the sentence's first
    ("Hey Bo! Great news.", "person", False),  # a participant addressed; "Great" begins a sentence
    ("We have three dogs.", "number", True),  # a number word
    ("I ran 12 km today.", "number", True),  # a numeral
    ("Sounds lovely!", "number", False),
    ("I went hiking on Sunday.", "activity", True),  # "went <gerund>"
    ("I joined a choir.", "activity", True),
    ("That is amazing news.", "activity", False),  # an -ing adjective, no verb before it
    ('I loved "Night Owls", such a good read.', "work", True),  # quoted
    ("It was by Jane Doe and I cried.", "work", True),  # "by <Capital>"
    ("I read The Silent Sea last week.", "work", True),  # two capitalised words in a row
    ("it was good", "work", False),
])
def test_holds_type(text: str, kind: str, holds: bool) -> None:
    assert holds_type(text, kind, NAMES) is holds


@pytest.mark.parametrize(("mode", "ok", "boost"), [
    ("shipped", True, None),  # the base
    ("type-1.5", True, 1.5),
    ("type-x", False, None),  # not a number
    ("kind-1", False, None),  # no such mode
])
def test_valid_mode(mode: str, ok: bool, boost: float | None) -> None:
    assert valid_mode(mode) is ok
    if ok:
        assert type_boost(mode) == boost


def _cand(pos: int, score: float, text: str, conv: str = "c") -> Candidate:
    return Candidate("retrieved", conv, pos, score, "targeted_recall: x", f"[Ada] {text}", source=text)


def test_boosted_moves_only_scored_candidates() -> None:
    cands = [_cand(1, 5.0, "what a day"), _cand(2, 4.5, "We have two cats."),
             _cand(3, 4.0, "I have 3 dogs.", conv="other")]
    out = boosted(cands, "c", "How many pets does Ada have?", NAMES, 1.0)
    assert [c.position for c in out] == [2, 1, 3]  # the number turn moves up; another conversation's does not
    assert out[0].score == 5.5 and "holds a number" in out[0].reason
    assert len(out) == len(cands)  # nothing added or dropped
    assert [c.position for c in boosted(cands, "c", "What did Ada say?", NAMES, 1.0)] == [1, 2, 3]  # untyped


def test_wrap_restored(memory: Memory) -> None:
    memory.append_many("c", [{"role": "user" if i % 2 == 0 else "assistant", "name": "Ada" if i % 2 == 0 else "Bo",
                              "content": f"I have {i} plants" if i % 7 == 0 else f"I like topic {i}"}
                             for i in range(40)])
    cands = memory.planner.candidates
    with answer_types(cands, "type-3"):
        assert "retrieved" in vars(cands)
        ctx = memory.context("c", "How many plants does Ada have?", budget=400, record=False)
        assert any("holds a number" in it.reason for it in ctx.plan.items if it.slice == "retrieved")
    assert "retrieved" not in vars(cands)  # the class's method again

"""The query-class eval (`evals/query_class_eval.py`) keeps its figures: every message of
its set that asks for something from the log goes to broad retrieval, and talk stays
narrow at least as often as today. Three regressions of 2026-12-01 to 12-03 (questions to
"you" about what "you" should do, hold or look up for the asker, taken for talk) each
cost a fact in an agent's context; this fails on the next one, where LoCoMo (questions
in the third person) cannot."""

from __future__ import annotations

import pytest

from tiermem.evals.query_class_eval import DATA_PATH, load_rows, run
from tiermem.planner.classify import QueryClassifier
from tiermem.tiers.embed import SentenceTransformerEmbedder

# today's talk share kept narrow: 37 of 46 (general questions such as "What's the capital
# of Australia?" retrieve broadly: a cost, not a lost fact)
TALK_KEPT_NARROW = 37 / 46


def test_every_lookup_goes_to_broad_retrieval(embedder: SentenceTransformerEmbedder) -> None:
    res = run(embedder=embedder)
    assert res["lookup_recall"] == 1.0, [e for e in res["errors"] if e["lookup"]]
    assert res["talk_kept_narrow"] >= round(TALK_KEPT_NARROW, 4), [e for e in res["errors"] if not e["lookup"]]


def test_the_set_is_well_formed() -> None:
    rows = load_rows(DATA_PATH)
    assert len(rows) >= 100 and len({r.text for r in rows}) == len(rows)
    assert {r.source for r in rows} == {"support", "assistant", "coding", "chat"}
    assert sum(r.lookup for r in rows) >= 50 and sum(not r.lookup for r in rows) >= 40


# (message, class): an adverb between "I" and the verb, and a thing given "from before"
@pytest.mark.parametrize(("query", "expected"), [
    ("I already told you my account email, why are you asking again?", "targeted_recall"),  # 'already told you'
    ("Could you resend the tracking link from before?", "targeted_recall"),  # 'from before'
    ("I already told him no.", "default"),  # told someone else: no recall cue
])
def test_references_to_what_was_said_before_are_recall(query: str, expected: str) -> None:
    assert QueryClassifier().classify(query).name == expected

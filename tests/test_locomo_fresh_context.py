"""Each LoCoMo question is scored on a context that knows nothing of the other questions:
a budget's figures are the same whether it runs alone or beside other budgets, whatever
the order of the questions, and whichever methods run beside tiermem.

They were not: `Memory.context` keeps each conversation's previous context (its
prompt-cache epoch, planner.epoch), and the eval asked every question of a sample in
turn. With one budget, each question's context extended the previous question's epoch
(showing, or rewinding past, what the earlier questions retrieved); with several, the
budget changed between consecutive calls (it is part of the epoch's key), so every call
started a new epoch. The standard 2,000-token run scored 93.58% alone and 93.78% in the
four-budget run (README). Real SQLite, a real embedder, the embedded Redis where the hot
tier is on (the epoch states are then Redis's); a tiny hand-made file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import eval_memory
from locomo_mini import question, sample, write

from tiermem.evals.locomo import METHODS, run_locomo
from tiermem.tiers.embed_onnx import FastEmbedder

BUDGET = 300  # tokens: room for a few retrieved lines beside the tail (the file holds ~1,700)
OTHER_BUDGET = 200  # tokens: a second budget asked of the same conversation between them

# what a question's context decides (latency aside): the same context gives the same figures
SCORED = ("evidence_recall", "answer_coverage", "mean_context_tokens", "max_context_tokens", "by_category")

TOPICS = [
    ("I adopted a grey cat called Pepper from the shelter.", "What is the name of Ann's cat?", "Pepper"),
    ("My sister moved to Lisbon for a job at a bakery.", "Where did Ann's sister move?", "Lisbon"),
    ("I have been learning the cello since March.", "Which instrument is Ann learning?", "cello"),
    ("We drove to the coast and saw whales near Monterey.", "Where did Ann see whales?", "Monterey"),
    ("My favourite book this year was a novel about lighthouses.", "What was Ann's favourite book about?",
     "lighthouses"),
    ("I signed up for a pottery class on Thursday evenings.", "Which class did Ann sign up for?", "pottery"),
    ("Our team won the regional chess tournament last weekend.", "What tournament did Ann's team win?",
     "chess"),
    ("I planted tomatoes and basil on the balcony.", "What did Ann plant on the balcony?", "tomatoes"),
]
CHATTER = 6  # small-talk turns after each fact, so that the facts are retrieved, not all in the tail


def _conversation(reverse: bool) -> list[dict[str, Any]]:
    texts: list[str] = []
    qa: list[dict[str, Any]] = []
    for fact, q, answer in TOPICS:
        texts.append(fact)
        qa.append(question(q, answer, [f"D1:{len(texts)}"]))
        texts += [f"Day {len(texts) + i}: work, errands and the usual traffic on the way home." for i in range(CHATTER)]
    return [sample("fresh", texts, qa[::-1] if reverse else qa)]


def _scored(tmp_path: Path, embedder: FastEmbedder, name: str, budgets: list[int], *, reverse: bool = False,
            methods: tuple[str, ...] = ("tiermem",), hot: bool = False) -> dict[str, Any]:
    data = write(tmp_path / f"{name}.json", _conversation(reverse))
    with eval_memory(tmp_path / name, embedder, hot=hot) as o:
        res = run_locomo(o.memory, data, budgets, methods=methods, hot=o.hot).result
    entry = res["budgets"][str(BUDGET)]
    assert entry["available"] is True
    return {k: entry[k] for k in SCORED}


@pytest.mark.parametrize(("budgets", "reverse", "methods"), [
    ([OTHER_BUDGET, BUDGET], False, ("tiermem",)),  # a smaller budget asked before each question's
    ([BUDGET, BUDGET * 2], False, ("tiermem",)),  # a larger one asked after it
    ([BUDGET], True, ("tiermem",)),  # alone, the questions in the opposite order
    ([BUDGET], False, tuple(METHODS)),  # alone, with every baseline in the run
])
def test_a_budget_scores_alike_whatever_else_the_run_asks(tmp_path: Path, embedder: FastEmbedder,
                                                          budgets: list[int], reverse: bool,
                                                          methods: tuple[str, ...]) -> None:
    alone = _scored(tmp_path, embedder, "alone", [BUDGET])
    assert _scored(tmp_path, embedder, "other", budgets, reverse=reverse, methods=methods) == alone


def test_with_the_hot_tier_too(tmp_path: Path, embedder: FastEmbedder) -> None:
    # the epoch states are kept in Redis there (planner.epoch.RedisEpochs), not in the process
    alone = _scored(tmp_path, embedder, "alone", [BUDGET], hot=True)
    assert _scored(tmp_path, embedder, "other", [OTHER_BUDGET, BUDGET], hot=True) == alone


def test_an_epoch_left_in_the_data_dir_is_not_extended(tmp_path: Path, embedder: FastEmbedder) -> None:
    # a reused data dir whose Redis still holds the state of an earlier call (an agent's,
    # or a run of the eval before this fix): the first question must not extend it
    fresh = _scored(tmp_path, embedder, "fresh", [BUDGET], hot=True)
    data = write(tmp_path / "reused.json", _conversation(False))
    with eval_memory(tmp_path / "reused", embedder, hot=True) as o:
        cid = run_locomo(o.memory, data, [BUDGET], methods=("tiermem",), hot=o.hot).result["conversation_ids"][0]
        o.memory.context(cid, "How was the traffic on the way home?", BUDGET, namespace=cid)  # recorded
        again = run_locomo(o.memory, data, [BUDGET], methods=("tiermem",), hot=o.hot).result
    assert again["reused_conversations"] == 1
    assert {k: again["budgets"][str(BUDGET)][k] for k in SCORED} == fresh

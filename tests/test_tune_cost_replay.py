"""`tiermem tune`'s billed and cache-stable figures are `tiermem eval cost`'s for the same
data, config and budget: both run one replay (`evals.cost.replay_tiermem`), and tune gives
each budget a copy of the conversation of its own. Before, tune built the contexts of
every budget in turn on one conversation; the planner's epoch key holds the budget, so
every build started a new epoch and never cached (conv-26 at 2,000 tokens: tune said
99.0% of cached full context billed and 9.2% cache-stable, eval cost 29.4% and 91.4%)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import vectors_shared

from tiermem.config import Config
from tiermem.evals.baselines import TIERMEM, close_memory, open_memory
from tiermem.evals.conversations import read_conversations
from tiermem.evals.cost import run_cost
from tiermem.evals.tune import candidates, run_tune
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

BUDGETS = (1200, 2000)  # both past OpenAI's 1,024-token cached minimum once the history is long enough
TURNS_PER_SESSION = 36  # two sessions of ~40-token turns: ~2,900 tokens of history, over both budgets
TOPICS = ("the garden", "a marathon", "the bakery", "my sister's wedding", "a pottery class", "the old car",
          "a trip to Kyoto", "the chess club", "a new puppy", "the book fair", "a job interview", "the roof")


def turn_text(session: int, i: int) -> str:
    """A distinct, plain sentence for turn `i` of `session` (about 40 tokens)."""
    topic = TOPICS[(session * 7 + i) % len(TOPICS)]
    return (f"In session {session}, turn {i}: I keep thinking about {topic}; on day {i * 3 + session} it took "
            f"{i + 2} hours and cost {17 * i + session} dollars, and the neighbour called it number {i * i % 97}.")


def write_locomo(path: Path) -> Path:
    """One LoCoMo sample, two sessions a week apart (past every cache's lifetime)."""
    conv: dict[str, Any] = {"speaker_a": "Ann", "speaker_b": "Bob"}
    for s, date in ((1, "1:56 pm on 8 May, 2023"), (2, "10:15 am on 15 May, 2023")):
        conv[f"session_{s}_date_time"] = date
        conv[f"session_{s}"] = [{"speaker": "Ann" if i % 2 == 0 else "Bob", "dia_id": f"D{s}:{i + 1}",
                                 "text": turn_text(s, i)} for i in range(TURNS_PER_SESSION)]
    qa = [{"question": "How long did the pottery class take?", "answer": "hours", "evidence": ["D1:5"],
           "category": 4}]
    path.write_text(json.dumps([{"sample_id": "tiny", "qa": qa, "conversation": conv}]), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> dict[str, Any]:
    """tune at both budgets in one run (the default candidate), and eval cost at each."""
    d = tmp_path_factory.mktemp("tune_cost")
    data = write_locomo(d / "tiny.json")
    cfg = Config.load(None)
    with vectors_shared(embedder):
        dataset = read_conversations(data, max_content_bytes=cfg.max_content_bytes,
                                     max_metadata_bytes=cfg.max_metadata_bytes, max_id_chars=cfg.max_id_chars)
        tuned = run_tune(dataset, list(BUDGETS), candidates(None, {}), base=None, embedder=embedder)
        cost: dict[int, dict[str, Any]] = {}
        for b in BUDGETS:
            opened = open_memory(d / f"cost-{b}", embedder=embedder)
            try:
                cost[b] = run_cost(opened.memory, data, sample=0, budget=b, methods=(TIERMEM, "full_context"),
                                   hot=opened.hot).result
            finally:
                opened.stop_redis = True
                close_memory(opened)
    return {"tune": tuned, "cost": cost}


# (budget) -- each of tune's budgets against eval cost's replay at that budget alone
@pytest.mark.parametrize("budget", [
    1200,  # the smaller budget: tune built it first at each user turn (each build a new epoch)
    2000,  # the README's budget: tune built it after the 1,200 one at each user turn
])
def test_tune_bills_what_eval_cost_bills(runs: dict[str, Any], budget: int) -> None:
    (cand,) = runs["tune"]["candidates"]
    point = cand["budgets"][str(budget)]
    cost = runs["cost"][budget]["methods"]
    tm, full = cost[TIERMEM], cost["full_context"]
    assert point["contexts"] == runs["cost"][budget]["context_builds"]
    # the same replay: exactly the same figures, not merely close ones
    assert point["total_billed"] == tm["total_billed_openai"]
    assert point["cache_stable_share"] == tm["cache_stable_share"]
    assert point["total_tokens"] == tm["total_tokens"]
    assert point["new_epochs"] == tm["new_epochs"]
    assert cand["full_context"]["total_billed"] == full["total_billed_openai"]
    assert point["billed_vs_full"] == tm["ratio_billed_vs_full_openai"]
    # under both cache-lifetime assumptions (the sessions are a week apart: expiry empties the caches)
    assert set(point["by_ttl"]) == set(tm["by_ttl"]) == {"expire", "inside"}
    for ttl, got in point["by_ttl"].items():
        assert got["total_billed"] == tm["by_ttl"][ttl]["total_billed_openai"]
        assert got["billed_vs_full"] == tm["by_ttl"][ttl]["ratio_billed_vs_full_openai"]
    # and the replay caches: a context that extends the previous one is mostly a prefix of it
    assert tm["cache_stable_share"] > 0.5 and point["budget_violations"] == 0


def test_recall_is_still_measured_per_budget(runs: dict[str, Any]) -> None:
    (cand,) = runs["tune"]["candidates"]
    for b in BUDGETS:
        point = cand["budgets"][str(b)]
        assert point["probes"] == 1 and point["probes_with_evidence"] == 1
        assert point["evidence_recall"] is not None and point["token_mismatches"] == 0

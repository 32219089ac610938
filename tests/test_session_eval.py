"""The long-history QA session eval (evals.session), small: one LoCoMo sample chained,
a few of its questions asked in it. Fails on the code before issue 22 (no such eval)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import eval_memory

from tiermem.evals.baselines import OpenedMemory
from tiermem.evals.plots import recall_vs_cost
from tiermem.evals.session import run_session
from tiermem.tiers.embed_onnx import FastEmbedder

DEV = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "locomo-dev.json"
needs_dev = pytest.mark.skipif(not DEV.is_file(), reason=f"LoCoMo dev file not found at {DEV.resolve()}")


@pytest.fixture
def opened(tmp_path: Path, shared_vectors: FastEmbedder) -> Iterator[OpenedMemory]:
    # LoCoMo's first conversation, embedded once a session (conftest.shared_vectors)
    with eval_memory(tmp_path / "data", shared_vectors, hot=False) as o:
        yield o


@needs_dev
def test_session_small(opened: OpenedMemory, tmp_path: Path) -> None:
    res = run_session(opened.memory, DEV, budgets=(400,), limit_samples=1, limit_questions=4).result
    json.dumps(res)
    entry = res["budgets"]["400"]
    assert entry["questions"] == 4 and res["history_turns"] > 300
    m = entry["methods"]
    full, tm, tail = m["full_context"], m["tiermem"], m["tail"]
    assert full["evidence_recall"] == 1.0  # full context shows every turn
    assert full["total_tokens"] > 4 * res["history_tokens"]  # re-sent whole every question
    assert full["total_billed_openai"] < full["total_tokens"] / 2  # ... but cached
    for method in (tm, tail, m["hybrid_topk"]):
        assert method["max_context_tokens"] <= 400 and method["budget_violations"] == 0
        assert method["token_mismatches"] == 0
    assert tm["ratio_billed_vs_full_openai"] < 1.0 and tm["evidence_recall"] >= tail["evidence_recall"]
    assert "tiermem_recall_ok" in entry["goals"]
    # per conversation: each sample's questions, recall and bill (against full context's for them)
    for method in (tm, full, tail):
        per = method["by_sample"]
        assert list(per) == res["samples"] and sum(v["questions"] for v in per.values()) == 4
        assert sum(v["billed_openai"] for v in per.values()) == pytest.approx(method["total_billed_openai"], abs=1)
    assert full["by_sample"][res["samples"][0]]["ratio_billed_vs_full_openai"] == 1.0
    assert tm["by_sample"][res["samples"][0]]["evidence_recall"] == tm["evidence_recall"]
    png = recall_vs_cost(res, tmp_path / "docs" / "session.png")
    assert png.stat().st_size > 1000

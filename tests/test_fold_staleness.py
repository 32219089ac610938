"""A fold standing in for the summary reports how far behind the log it is, as a warm
view does: turns after it, the seconds the oldest of them has waited, and whether that
is past the freshness budget (`tiers.warm.staleness`), so the plan says so and
`tiermem_warm_stale_reads_total` counts the read."""

from __future__ import annotations

import time
from pathlib import Path

from conftest import full_memory
from prometheus_client import CollectorRegistry

from tiermem import Config
from tiermem.inspector.metrics import PlanMetrics
from tiermem.tiers.embed_onnx import FastEmbedder

MAX_TURNS_BEHIND = 3
MAX_SECONDS_BEHIND = 60.0  # seconds
WAITED_S = 3600.0  # seconds the turns after the fold have waited: far past the budget
BUDGET_TOKENS = 1000


def config(tmp_path: Path) -> Config:
    return Config(data_dir=tmp_path / "data", warm_max_turns_behind=MAX_TURNS_BEHIND,
                  warm_max_seconds_behind=MAX_SECONDS_BEHIND)


def test_a_fold_behind_the_log_reports_its_lag_and_counts_as_a_stale_read(
        tmp_path: Path, embedder: FastEmbedder) -> None:
    then = time.time() - WAITED_S
    with full_memory(config(tmp_path), embedder) as mem:
        mem.append_many("c", [{"role": "user", "content": "I booked the flight to Lisbon.", "created_at": then},
                              {"role": "assistant", "content": "Great.", "created_at": then}])
        mem.checkpoint("c", "The user booked a flight to Lisbon.", 1)  # a fold, no warm view
        mem.append_many("c", [{"role": "user", "content": f"note number {i}", "created_at": then + 1}
                              for i in range(MAX_TURNS_BEHIND)])
        ctx = mem.context("c", "Where am I flying?", BUDGET_TOKENS, namespace_recall=False)
        [view] = ctx.plan.views
        assert view.kind == "checkpoint" and view.covers == (0, 1)
        assert view.turns_behind == MAX_TURNS_BEHIND
        assert view.seconds_behind >= WAITED_S - 1 and view.over_budget
        metrics = PlanMetrics(CollectorRegistry())
        metrics.observe("default", ctx.plan)
        assert metrics.registry.get_sample_value("tiermem_warm_stale_reads_total", {"kind": "checkpoint"}) == 1


def test_a_fold_covering_the_log_is_fresh(tmp_path: Path, embedder: FastEmbedder) -> None:
    # control: nothing after the fold, nothing to wait for
    with full_memory(config(tmp_path), embedder) as mem:
        mem.append_many("c", [{"role": "user", "content": "I booked the flight to Lisbon."},
                              {"role": "assistant", "content": "Great."}])
        mem.checkpoint("c", "The user booked a flight to Lisbon.", 1)
        ctx = mem.context("c", None, BUDGET_TOKENS, namespace_recall=False)
        assert [(v.kind, v.turns_behind, v.seconds_behind, v.over_budget) for v in ctx.plan.views] == [
            ("checkpoint", 0, 0.0, False)]

"""`tiermem eval cost --instances N`: the tiermem contexts of a replay come from N Memory
objects on one data dir and Redis in turn (a deployment's processes behind a load
balancer), the appends from the first; the count is bounded at the CLI's edge."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tiermem.cli import CliState, cli
from tiermem.evals.baselines import TIERMEM, close_memory, open_memory
from tiermem.evals.cost import MAX_COST_INSTANCES, run_cost
from tiermem.memory import Memory
from tiermem.tiers.embed_onnx import FastEmbedder

DEV = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "locomo-dev.json"
needs_dev = pytest.mark.skipif(not DEV.is_file(), reason=f"LoCoMo dev file not found at {DEV.resolve()}")
TURNS = 40  # enough user turns for several contexts on each instance, well under a second each


@needs_dev
def test_contexts_come_from_each_instance_in_turn(tmp_path: Path, shared_vectors: FastEmbedder) -> None:
    opened = open_memory(tmp_path / "data", embedder=shared_vectors)
    second = Memory(opened.memory.config, embedder=shared_vectors, hot=opened.hot, background_indexing=False)
    trace: list[dict[str, Any]] = []
    try:
        run = run_cost(opened.memory, DEV, sample=0, budget=300, turns=TURNS, methods=(TIERMEM,),
                       hot=opened.hot, trace=trace, others=[second])
    finally:
        second.close()
        opened.stop_redis = True
        close_memory(opened)
    res = run.result
    assert res["instances"] == 2 and len(trace) == res["context_builds"] > 4
    # the second context is the second instance's first: both served, in turn
    assert opened.memory._planner is not None and second._planner is not None
    assert trace[1]["new_epoch"] and trace[1]["cache_reason"] == "first context of this conversation in this process"


@pytest.mark.parametrize("count", [
    0,  # no instance at all: nothing would build the contexts
    MAX_COST_INSTANCES + 1,  # past the bound: each one holds a store connection and a turn cache
])
def test_an_instance_count_out_of_range_is_refused_before_anything_is_written(
        tmp_path: Path, count: int) -> None:
    data_dir = tmp_path / "data"
    res = CliRunner().invoke(cli, ["eval", "cost", "--data", str(DEV), "--instances", str(count),
                                   "--data-dir", str(data_dir), "--json", "--quiet"], obj=CliState())
    assert res.exit_code == 2, res.output
    assert "--instances" in res.output and f"1<=x<={MAX_COST_INSTANCES}" in res.output
    assert not data_dir.exists()


@needs_dev
def test_the_cli_replays_on_several_instances(tmp_path: Path, shared_vectors: FastEmbedder) -> None:
    data_dir = tmp_path / "data"
    try:
        res = CliRunner().invoke(cli, ["eval", "cost", "--data", str(DEV), "--turns", "20", "--budget", "300",
                                       "--method", TIERMEM, "--instances", "3", "--data-dir", str(data_dir),
                                       "--json", "--quiet"], obj=CliState(embedder=shared_vectors))
        assert res.exit_code == 0, res.output
        out = json.loads(res.stdout)
        assert out["instances"] == 3 and out["methods"][TIERMEM]["budget_violations"] == 0
    finally:
        from tiermem.tiers.redis_server import EmbeddedRedis

        EmbeddedRedis(data_dir).stop()

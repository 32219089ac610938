"""`tiermem eval cost --instances N`: the tiermem contexts of a replay come from N Memory
objects on one data dir and Redis in turn (a deployment's processes behind a load
balancer), the appends from the first; the count is bounded at the CLI's edge. With the
epoch state shared through Redis (planner.epoch.RedisEpochs), N instances build exactly
the contexts one builds; with per-process state (the code before) the second instance's
first context started a new epoch and the bill rose (conv-26 at 2,000 tokens: 29.4% of
cached full context's OpenAI bill on one instance, 35.8% on two, 42.5% on three)."""

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


def replay(data_dir: Path, embedder: FastEmbedder, instances: int) -> tuple[dict[str, Any], list[dict[str, Any]],
                                                                             list[Memory]]:
    """A short replay on `instances` Memory objects; its result, trace and the Memory objects (closed)."""
    opened = open_memory(data_dir, embedder=embedder)
    others = [Memory(opened.memory.config, embedder=embedder, hot=opened.hot, background_indexing=False)
              for _ in range(instances - 1)]
    trace: list[dict[str, Any]] = []
    try:
        run = run_cost(opened.memory, DEV, sample=0, budget=300, turns=TURNS, methods=(TIERMEM,),
                       hot=opened.hot, trace=trace, others=others)
    finally:
        for m in others:
            m.close()
        opened.stop_redis = True
        close_memory(opened)
    return run.result, trace, [opened.memory, *others]


@needs_dev
def test_several_instances_on_one_redis_build_the_contexts_one_instance_builds(
        tmp_path: Path, shared_vectors: FastEmbedder) -> None:
    one, one_trace, _ = replay(tmp_path / "one", shared_vectors, 1)
    res, trace, served = replay(tmp_path / "three", shared_vectors, 3)
    assert res["instances"] == 3 and len(trace) == res["context_builds"] > 4
    assert all(m._planner is not None for m in served)  # each built contexts: in turn
    # the epoch state is shared through their Redis (planner.epoch): each call extends the
    # previous call's context whichever instance made it, so the bill is one instance's
    for f in ("total_tokens", "total_billed_openai", "total_billed_anthropic", "cache_stable_share", "new_epochs"):
        assert res["methods"][TIERMEM][f] == one["methods"][TIERMEM][f], f
    assert [(t["tokens"], t["stable"], t["cache_reason"]) for t in trace] == \
        [(t["tokens"], t["stable"], t["cache_reason"]) for t in one_trace]


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

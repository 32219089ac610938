"""Issue 20's small items for the people who read plans: `plan.explain()` lists the tail in
position order, and `tiermem context` piped does not wrap the explanation at 80 columns.
On the code before: the tail came out in packing order (newest first here) and every
line past 80 characters was broken in two."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem.cli import CliState, cli
from tiermem.planner.plan import Plan, PlanItem
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.redis_server import EmbeddedRedis

LONG = "My booking reference is QX-7781 and the hotel is the Pensao Amor on Rua do Alecrim, third floor."


def tail_item(pos: int) -> PlanItem:
    return PlanItem("tail", "c", [pos], "hot", "verbatim", 10, 1.0, "recent turn")


def test_tail_items_are_listed_in_position_order() -> None:
    plan = Plan("c", "q", "default", "test", 1000, tokens=30, items=[tail_item(p) for p in (9, 7, 8)])
    labels = [ln.split()[0] for ln in plan.explain().splitlines() if ln.strip().startswith("#")]
    assert labels == ["#7", "#8", "#9"]


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for key in list(os.environ):
        if key.startswith("TIERMEM_"):
            monkeypatch.delenv(key)
    yield tmp_path / "data"
    EmbeddedRedis(tmp_path / "data").stop()


def test_piped_context_keeps_long_lines_whole(data_dir: Path, embedder: FastEmbedder) -> None:
    def tm(*args: str, input: str | None = None) -> str:
        r = CliRunner().invoke(cli, ["--data-dir", str(data_dir), *args], input=input,
                               obj=CliState(embedder=embedder), catch_exceptions=False)
        assert r.exit_code == 0, r.output
        return r.stdout

    msgs = [{"role": "user", "content": LONG}, {"role": "assistant", "content": "Noted."},
            {"role": "user", "content": "What is my booking reference?"}]
    tm("append", "c1", input=json.dumps(msgs))
    out = tm("context", "c1", "-q", "What is my booking reference?", "--budget", "400")
    lines = out.splitlines()
    assert LONG in lines  # the message on one line of its own, not broken at 80 columns
    # the plan's item lines run past 80 columns (label, fidelity, tier, tokens, score, reason) and stay whole
    assert any(len(ln) > 80 and "score=" in ln for ln in lines), out


def test_stage_times_are_durations_beside_the_cumulative_ones() -> None:
    # the example: cumulative stamps read as if retrieval took 1,181.7 ms
    plan = Plan("c", "q", "default", "test", 1000,
                timings_ms={"embed": 2.6, "retrieve": 1181.7, "pack": 1181.9, "total": 1182.4})
    assert plan.stage_ms == {"embed": 2.6, "retrieve": 1179.1, "pack": 0.2, "total": 1182.4}
    d = plan.to_dict()
    assert d["stage_ms"] == plan.stage_ms and d["timings_ms"]["pack"] == 1181.9  # cumulative kept as it was

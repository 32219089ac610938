"""`Plan.timings_ms` times the whole context call, the inline catch-up of pending turns
included (its key: tiermem.memory.EMBED_PENDING_STAGE). Before, the timings started where
the planner starts: the turn table's read, the inline embedding of up to a pool of
turns (seconds after an import) and the hot and warm reads were in no stage, so a slow
first context showed a plan of milliseconds.

The model's own time in the call is measured below the embedder's memo (each run of
`_compute`, one at a time: the catch-up's pipeline has one producer): the inline stage
must hold at least that much, and the plan's total no more than the call's wall time."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from tiermem import Config, Memory
from tiermem.memory import EMBED_PENDING_STAGE
from tiermem.tiers.embed_onnx import FastEmbedder

BATCH = 8  # embedding_batch_size: a pool of 8 x INDEX_POOL_BATCHES = 128 turns
IMPORT_BATCH = 100  # > INLINE_INDEX_ROWS: an import's batch, which append never embeds
MS_PER_S = 1000.0
# the caller's stages, then the planner's, in this order (cumulative ms since the call began)
FIRST_STAGES = ["turns", EMBED_PENDING_STAGE, "views"]


class TimedRuns:
    """`embedder._compute` adding up how long the model ran (ms)."""

    def __init__(self, embedder: FastEmbedder) -> None:
        self.compute = embedder._compute
        self.ms = 0.0
        self._lock = threading.Lock()

    def __call__(self, texts: list[str]) -> np.ndarray:
        t0 = time.perf_counter()
        try:
            return self.compute(texts)
        finally:
            with self._lock:
                self.ms += (time.perf_counter() - t0) * MS_PER_S


@pytest.mark.parametrize(("turns", "caught_up"), [
    (300, False),  # an import's backlog: the context embeds a pool inline, its stage holds it
    (300, True),  # the same turns embedded before: nothing inline, the stage is the table's check
])
def test_the_plan_times_the_inline_embedding(tmp_path: Path, embedder: FastEmbedder, turns: int,
                                             caught_up: bool) -> None:
    cfg = Config(data_dir=tmp_path, embedding_batch_size=BATCH)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        for start in range(0, turns, IMPORT_BATCH):
            mem.append_many("c", [{"role": "user" if i % 2 == 0 else "assistant",
                                   "content": f"turn {i}: the ferry leaves at {i % 24}:{i % 60:02d}."}
                                  for i in range(start, min(turns, start + IMPORT_BATCH))])
        if caught_up:
            mem.catch_up("c")
        runs = TimedRuns(embedder)
        embedder._compute = runs  # type: ignore[method-assign]
        try:
            t0 = time.perf_counter()
            ctx = mem.context("c", None, 2000)  # no query: the model runs for the catch-up only
            wall_ms = (time.perf_counter() - t0) * MS_PER_S
        finally:
            del embedder._compute  # the class's method again
    timings, stages = ctx.plan.timings_ms, ctx.plan.stage_ms
    assert list(timings)[:len(FIRST_STAGES)] == FIRST_STAGES and list(timings)[-1] == "total"
    marks = list(timings.values())
    assert marks == sorted(marks)  # cumulative, in stage order
    # the stages add up to no more than the total (the last ones, after packing, have no
    # key), which the call's own wall time bounds
    assert sum(v for k, v in stages.items() if k != "total") <= timings["total"] + 0.01
    assert timings["total"] <= wall_ms
    if caught_up:
        assert runs.ms == 0.0 and ctx.plan.vectors_pending == 0
    else:
        assert runs.ms > 0.0 and ctx.plan.vectors_pending > 0
        # the model ran inside the inline stage: it holds at least the model's time
        assert stages[EMBED_PENDING_STAGE] >= runs.ms > 0.0

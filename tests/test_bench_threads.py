"""The request-path threads comparison (evals/bench_threads.py): its "pool" side really is
the old path while it runs, everything is put back after (also on an error), and the
comparison reports both sides over every call."""

from __future__ import annotations

import numpy as np
import pytest

from tiermem import Memory
from tiermem.evals import bench_threads
from tiermem.evals.bench_threads import SIDES, compare, pool_side
from tiermem.planner import candidates, classify, feedback, multihop, rank
from tiermem.tiers import embed_onnx, vectors

PLANNER_MODULES = (rank, candidates, classify, multihop, feedback)
bench_threads_others_shipped = embed_onnx.others_cores


def shipped() -> bool:
    return (all(m.row_dots is vectors.row_dots for m in PLANNER_MODULES)
            and embed_onnx.others_cores is bench_threads_others_shipped)


def test_the_pool_side_is_the_old_path_only_while_it_runs() -> None:
    assert shipped()
    with pool_side():
        assert not any(m.row_dots is vectors.row_dots for m in PLANNER_MODULES)
        m = np.eye(3, dtype=np.float32)
        np.testing.assert_array_equal(rank.row_dots(m, np.ones(3, dtype=np.float32)), np.ones(3))
        assert embed_onnx.others_cores is not bench_threads_others_shipped
    assert shipped()


def test_the_pool_side_is_put_back_after_an_error() -> None:
    with pytest.raises(RuntimeError, match="mid-block"), pool_side():
        raise RuntimeError("mid-block")
    assert shipped()


def test_compare_reports_both_sides_over_every_call(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench_threads, "PAUSE_S", 0.0)
    monkeypatch.setattr(bench_threads, "BLOCK_CALLS", 2)  # several blocks, an odd one last
    memory.append_many("c", [{"role": "user", "content": f"we talked about the {w} today"}
                             for w in ("refund", "invoice", "login", "shipping", "warranty")], namespace="n")
    calls = [("what about the refund?", 500), ("and the invoice?", 800), ("login trouble?", 500)]
    got = compare(memory, calls, "c", "n")
    assert set(got) == {*SIDES, "block_calls"}
    for side in SIDES:
        assert got[side]["context_ms"]["n"] == len(calls)
        assert got[side]["cpu_ms_per_call"] > 0
    assert shipped()

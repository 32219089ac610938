"""Every current constraint survives eviction pressure (DESIGN invariant: pins and the
planner keep load-bearing turns; evals.pressure measures it). A probe put to "you" about the
asker's standing orders ("What should you call me?") must retrieve like any recall
question. Fails on the code before: those probes were classed as conversation with the
other party, retrieved nothing, and retention at 1,000 tokens fell to 0.93 (the nickname
given as "By the way, I go by ..." is no pin, so only retrieval brings it back)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import eval_memory

from tiermem.evals import pressure
from tiermem.evals.baselines import OpenedMemory
from tiermem.tiers.embed_onnx import FastEmbedder

BUDGET_TOKENS = 1000
# the generator's first two conversations at its default length: they hold probes of both
# shapes ("What should you call me?", "What kind of flights should you avoid for me?")
CONVERSATIONS = 2
TURNS = pressure.DEFAULT_TURNS


@pytest.fixture
def opened(tmp_path: Path, shared_vectors: FastEmbedder) -> Iterator[OpenedMemory]:
    # the generator's filler recurs across its conversations: embedded once (conftest.shared_vectors)
    with eval_memory(tmp_path / "data", shared_vectors, hot=True) as o:
        yield o


def test_every_current_constraint_is_retained_and_nothing_stale_leaks(opened: OpenedMemory) -> None:
    run = pressure.run_pressure(opened.memory, seed=0, budgets=[BUDGET_TOKENS], turns=TURNS,
                                conversations=CONVERSATIONS, methods=("tiermem",), hot=opened.hot)
    entry = run.result["budgets"][str(BUDGET_TOKENS)]
    assert entry["available"]
    probes = [f"{f['slot']}: {f['probe']} (expected {f['expected']})" for f in entry["failures"]]
    assert entry["retention"] == 1.0, probes
    assert entry["leakage"] == 0
    assert entry["budget_violations"] == 0

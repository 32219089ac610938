"""Each eviction-pressure probe is scored on a fresh context: a budget's contexts, probe by
probe, are the same whether it runs alone or beside other budgets (as the LoCoMo eval's
since 1e7dc5a). The suite's figures are per probe ("the share of probes whose slot's
current state is in the context"). Before, the eval's calls kept the prompt-cache epoch
(planner.epoch): alone, a budget's probes extended one another's epochs, a probe's context
showing, or rewinding past, what the previous probe retrieved; beside a larger budget, a
probe's context was shaped by the previous probe's larger one (seed 0, 500 tokens: mean
466 tokens alone, 487 in the three-budget run, 494 in both now). Real SQLite, a real
embedder, the embedded Redis hot tier (the epoch states are Redis's there)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import eval_memory

from tiermem.evals import pressure
from tiermem.evals.baselines import MethodOutput
from tiermem.memory import Memory
from tiermem.tiers.embed_onnx import FastEmbedder

BUDGET = 300  # tokens: a few retrieved turns beside the tail
OTHER_BUDGET = 200  # tokens: a second budget asked of the same conversation between the probes
TURNS = 160  # messages: both probe rounds, a correction or retraction between them, in seconds
CONVERSATIONS = 1
REAL_CONTEXT = pressure.tiermem_context  # the spies below call it (each test replaces the module's twice)


def _contexts(tmp_path: Path, embedder: FastEmbedder, monkeypatch: pytest.MonkeyPatch, name: str,
              budgets: list[int], *, hot: bool) -> list[tuple[str, list[int], int]]:
    """The probe, positions and tokens of each tiermem context at `BUDGET`, in the order asked."""
    seen: list[tuple[str, list[int], int]] = []

    def recording(memory: Memory, conv: str, question: str, budget: int, **kw: Any) -> MethodOutput:
        # the real context, recorded as the eval scores it (a spy: nothing is replaced)
        out = REAL_CONTEXT(memory, conv, question, budget, **kw)
        if budget == BUDGET:
            seen.append((question, sorted(out.positions), out.tokens))
        return out

    monkeypatch.setattr(pressure, "tiermem_context", recording)
    with eval_memory(tmp_path / name, embedder, hot=hot) as o:
        pressure.run_pressure(o.memory, seed=0, budgets=budgets, turns=TURNS, conversations=CONVERSATIONS,
                              methods=("tiermem",), hot=o.hot)
    assert len(seen) >= 2  # two rounds of probes at least
    return seen


@pytest.mark.parametrize(("budgets", "hot"), [
    ([OTHER_BUDGET, BUDGET], True),  # a smaller budget asked before each probe's, epochs in Redis
    ([BUDGET, BUDGET * 2], True),  # a larger one asked after it
    ([OTHER_BUDGET, BUDGET], False),  # cold-only: the epoch states are the process's
])
def test_a_budget_gets_the_same_contexts_alone_and_beside_others(tmp_path: Path, shared_vectors: FastEmbedder,
                                                                monkeypatch: pytest.MonkeyPatch,
                                                                budgets: list[int], hot: bool) -> None:
    alone = _contexts(tmp_path, shared_vectors, monkeypatch, "alone", [BUDGET], hot=hot)
    beside = _contexts(tmp_path, shared_vectors, monkeypatch, "beside", budgets, hot=hot)
    assert beside == alone

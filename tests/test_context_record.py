"""`Memory.context(record=False)`: a what-if plan (the inspector's "Plan a context")
changes nothing the agent gets next: it neither advances the prompt-cache epoch nor
lands in the plans table. Without the flag, the inspector's plan with another budget
would start a new epoch, and the agent's next call a second one: two cache misses the
agent never caused (the contrast case below shows it on the recording path).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder

CONV = "c"
AGENT_BUDGET = 500  # tokens: what the agent asks for every turn
WHAT_IF_BUDGET = 900  # tokens: what a person tries in the inspector


@pytest.fixture
def mem(tmp_path: Path, embedder: FastEmbedder) -> Memory:
    m = Memory(Config(data_dir=tmp_path / "data", store_plans=True), embedder=embedder, hot=False,
               background_indexing=False)
    for i in range(6):
        m.append(CONV, {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} about trains"})
    return m


# (record the what-if?, is the agent's next call a new epoch?, plans stored)
CASES = [
    (False, False, 2),  # the inspector's what-if: invisible to the agent
    (True, True, 3),  # an ordinary call with another budget: a new epoch, stored
]


@pytest.mark.parametrize(("record", "agent_new_epoch", "stored"), CASES)
def test_a_what_if_plan_leaves_the_agents_epoch_alone(mem: Memory, record: bool, agent_new_epoch: bool,
                                                      stored: int) -> None:
    with mem:
        first = mem.context(CONV, "trains?", AGENT_BUDGET)
        assert first.plan.cache.epoch == 1
        what_if = mem.context(CONV, "trains?", WHAT_IF_BUDGET, record=record)
        # the what-if is still compared with the agent's previous context, and says so
        assert what_if.plan.cache.new_epoch and "budget" in what_if.plan.cache.reason
        mem.append(CONV, {"role": "user", "content": "and buses?"})
        nxt = mem.context(CONV, "and buses?", AGENT_BUDGET)
        assert nxt.plan.cache.new_epoch is agent_new_epoch
        if not agent_new_epoch:
            assert nxt.plan.cache.epoch == 1 and nxt.plan.cache.epoch_calls == 2
            assert nxt.plan.cache.expected_cached_tokens > 0
        assert len(mem.cold.plans(mem.cold.key_of("default", CONV))) == stored  # type: ignore[arg-type]


def test_the_namespaced_view_passes_record(mem: Memory) -> None:
    with mem:
        view = mem.namespaced("default")
        view.context(CONV, "trains?", AGENT_BUDGET)
        view.context(CONV, "trains?", WHAT_IF_BUDGET, record=False)
        assert not view.context(CONV, "trains?", AGENT_BUDGET).plan.cache.new_epoch

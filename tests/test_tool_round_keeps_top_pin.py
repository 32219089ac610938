"""The latest tool round, trimmed to fit, leaves the highest-priority pin its room
(planner.pack `fit_round`): a stored system prompt or a pinned instruction gives way to
the round only where the round does not fit beside it even at ROUND_MIN_RESULT_TOKENS an
output. Before, every pin gave way whenever the round needed any trimming past the usual
one, so an agent's system prompt ("NEVER run rm -rf") was missing from every call of a
loop whose tool outputs were large (review r_loop, 2026-12-07)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder

pytestmark = pytest.mark.usefixtures("shared_vectors")

ASK = "Fix the failing build in the repo"
SYSTEM = "You are a careful coding agent. NEVER run rm -rf. Always answer in French."
CALLS = 3
OUTPUT = " ".join(f"out{j} ok" for j in range(700))  # ~1,400 tokens an output, far past the usual trim


def _loop(mem: Memory, *, stored_system: bool) -> None:
    first = ({"role": "system", "content": SYSTEM} if stored_system
             else {"role": "user", "content": SYSTEM})
    mem.append_many("t", [
        first,
        {"role": "user", "content": ASK},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{k}", "type": "function",
             "function": {"name": "sh", "arguments": json.dumps({"cmd": f"step {k}"})}} for k in range(CALLS)]},
        *[{"role": "tool", "tool_call_id": f"c{k}", "content": OUTPUT} for k in range(CALLS)]])
    if not stored_system:
        mem.pin("t", 0)


# (budget, stored_system): every budget here needs the outputs trimmed past the usual
# trim, and each leaves room for the round at its floor beside the instruction
CASES = [
    (400, True),  # a stored system prompt (auto-pinned), a tight budget
    (800, True),  # a stored system prompt, the budget the review found it lost at
    (1300, True),  # a stored system prompt, just under the round as usually trimmed
    (250, False),  # an explicit pin, a tight budget
    (800, False),  # an explicit pin
]


@pytest.mark.parametrize(("budget", "stored_system"), CASES)
def test_the_top_pin_stays_beside_a_trimmed_round(tmp_path: Path, embedder: Embedder, budget: int,
                                                   stored_system: bool) -> None:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        _loop(mem, stored_system=stored_system)
        ctx = mem.context("t", ASK, budget, record=False)
    sent = json.dumps(ctx.messages)
    assert ctx.tokens <= budget
    assert "rm -rf" in sent, [m["role"] for m in ctx.messages]
    # the round is whole: its call and every output, trimmed
    assert [m["role"] for m in ctx.messages].count("tool") == CALLS
    assert not [x for x in ctx.plan.to_dict()["left_out"] if 0 in x["positions"]]


def test_the_pin_gives_way_only_where_the_round_cannot_fit_beside_it(tmp_path: Path, embedder: Embedder) -> None:
    # at a budget where the round at its floor takes all the room, the pin gives way and
    # the plan names it: the round still goes (never the question alone)
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        _loop(mem, stored_system=False)
        budgets = range(100, 260, 10)
        shown = {}
        for b in budgets:
            try:
                ctx = mem.context("t", ASK, b, record=False)
            except Exception:  # below the round's floor: BudgetTooSmall, another test's concern
                continue
            assert [m["role"] for m in ctx.messages].count("tool") == CALLS
            shown[b] = "rm -rf" in json.dumps(ctx.messages)
            if not shown[b]:
                assert [x for x in ctx.plan.to_dict()["left_out"] if x["slice"] == "pinned" and 0 in x["positions"]]
    # monotone: once the budget holds the pin beside the round, every larger one does
    flags = [shown[b] for b in sorted(shown)]
    assert flags and flags[-1] and flags == sorted(flags)

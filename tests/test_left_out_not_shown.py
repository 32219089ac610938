"""The plan never lists as left out a turn the context shows.

The pin candidates (planner.candidates `pinned`) read the pinned and load-bearing turns up
to the room and name the first past it "pinned, but higher-priority pins fill the
budget"; the latest user message (a question, load-bearing) can be that turn, and it is
always sent, so the plan said a turn was left out while showing it (review r_c8, fuzz3
scenario 107: position 27 both the latest user message and left out). `Planner.build`
now drops from `plan.left_out` every item whose turns the context shows.
Real SQLite, the real tokenizer.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tiermem import Config, Memory

pytestmark = pytest.mark.usefixtures("shared_vectors")

RULE = "Rule: prices ONLY-EUR, never USD. "
METRIC = "Rule: ALWAYS-METRIC units. "
OUTPUT = ("ERROR line 42: connection refused to db-primary:5432; " * 200)[:10000]
QUESTION = "Forget that. What's the capital of France?"


def _run(mem: Memory, calls: int, arg_lines: int) -> None:
    """Two pins, then a run's parallel calls (large arguments) whose results came with a question."""
    mem.append("t", {"role": "user", "content": RULE * 40})
    mem.pin("t", 0, priority=100)
    mem.append("t", {"role": "user", "content": METRIC * 2})
    mem.pin("t", 1, priority=100)
    mem.append("t", {"role": "user", "content": "Check the logs for the outage please"})
    mem.append_many("t", [{"type": "function_call", "call_id": f"fc{i}", "name": "search",
                           "arguments": json.dumps({"q": i, "content": "x = 1\n" * arg_lines})} for i in range(calls)]
                    + [{"type": "function_call_output", "call_id": f"fc{i}", "output": OUTPUT} for i in range(calls)]
                    + [{"role": "user", "content": QUESTION}])


@pytest.mark.parametrize(("calls", "arg_lines", "budget", "fmt", "sysm"), [
    # the review's scenario 107 (twelve calls there, three here): large call arguments, Responses format, merged system messages
    (3, 600, 383, "responses", "merge"),
    # the same log in the stored form
    (3, 600, 383, "as_stored", "as_is"),
])
def test_no_shown_turn_is_left_out(tmp_path: Path, calls: int, arg_lines: int, budget: int, fmt: str,
                                   sysm: str) -> None:
    with Memory(Config(data_dir=tmp_path, context_format=fmt, system_messages=sysm), hot=False,
                background_indexing=False) as mem:
        _run(mem, calls, arg_lines)
        ctx = mem.context("t", None, budget, truncate_latest=True, record=False)
        assert ctx.tokens <= budget
        on_show = {(it.conversation_id, p) for it in ctx.plan.items for p in it.positions}
        assert ("t", 2 + 2 * calls + 1) in on_show  # the question is shown
        lies = [it for it in ctx.plan.left_out if it.positions
                and all((it.conversation_id, p) in on_show for p in it.positions)]
        assert not lies, [(it.positions, it.reason) for it in lies]

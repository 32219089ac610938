"""A round the question came after is trimmed further, not dropped, where the exact count
runs over the estimate it was fitted by.

The round (its calls and results, then the question, no reply between: planner.pack
`loop_after`) is fitted by the stored form's token counts; stored as Anthropic blocks and
sent as Responses items (`context_format="responses"`) it costs a few dozen tokens more,
and the exact count (planner.build `_fit`) dropped it whole, the question sent without the
results it came with (review r_c8: budgets 730 to 1,120 sent 79 tokens, system prompt,
pin and question). `drop_one` now first trims its outputs further by the excess
(`shrink_round`); only where not even ROUND_MIN_RESULT_TOKENS an output frees it is it
dropped. Real SQLite, the real tokenizer, the real adapters.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tiermem import Config, Memory
from tiermem.adapters.anthropic import from_anthropic, to_anthropic
from tiermem.planner.pack import ROUND_UNANSWERED_DROPPED

pytestmark = pytest.mark.usefixtures("shared_vectors")

CHAT = "We talked about the trip itinerary and the hotel near the station. "
OUTPUT = ("ERROR line 42: connection refused to db-primary:5432; " * 3000)[:150000]
SYSTEM = "You are a careful support agent. "


def _abandoned_run(mem: Memory) -> None:
    """A pinned rule, turns, then a run's two calls whose results came with an unrelated question."""
    mem.append("t", {"role": "system", "content": "SYSPIN: be terse. " * 4})
    mem.pin("t", 0, priority=100)
    for i in range(6):
        mem.append_many("t", [{"role": "user", "content": f"turn {i}: " + CHAT * (1 + i % 4)},
                              {"role": "assistant", "content": f"answer {i}: " + CHAT * (1 + (3 * i) % 5)}])
    mem.append("t", {"role": "user", "content": "Check the logs for the outage please"})
    mem.append_many("t", from_anthropic({"role": "assistant", "content": [
        {"type": "tool_use", "id": f"tu{i}", "name": "search", "input": {"q": i, "content": "x = 1\n" * 50}}
        for i in range(2)]}))
    mem.append_many("t", from_anthropic({"role": "user", "content": [
        *({"type": "tool_result", "tool_use_id": f"tu{i}", "content": OUTPUT} for i in range(2)),
        {"type": "text", "text": "Forget that. What's the hotel price?"}]}))


@pytest.mark.parametrize("budget", [
    730,   # the least budget of the review's sweep that dropped it
    850,   # mid-range
    1120,  # the largest: the excess grows with the outputs' allowance
])
def test_trimmed_further_not_dropped(tmp_path: Path, budget: int) -> None:
    with Memory(Config(data_dir=tmp_path, context_format="responses"), hot=False, background_indexing=False) as mem:
        _abandoned_run(mem)
        ctx = mem.context("t", None, budget, system=SYSTEM, truncate_latest=True, record=False)
        assert ctx.tokens <= budget
        assert to_anthropic(ctx, mem).tokens <= budget
        assert not [it for it in ctx.plan.left_out if it.reason == ROUND_UNANSWERED_DROPPED]
        outputs = [m for m in ctx.messages if m.get("type") == "function_call_output"]
        assert len(outputs) == 2  # both results shown, with their calls
        assert len([m for m in ctx.messages if m.get("type") == "function_call"]) == 2
        assert all("connection refused" in m["output"] for m in outputs)
        assert "SYSPIN" in str(ctx.messages)  # the pin stays

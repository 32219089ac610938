"""A round the question came after never costs a pin, nor the budget (review r_c5).

A tool round followed by the latest user message, no reply between (planner.pack
`loop_after`), is shown as the latest round since ac765c3: Anthropic's form sends a
question with the results. It is not the model's pending loop (an agent's run that ended
before its reply was stored leaves the same rows). Invariants checked here:
- the pins never give way to it: it is fitted in the room the pins leave, only older
  tail turns give way (`fit_round`); the top pin is shown as before ac765c3, never named
  as having "gave way to the latest tool round";
- the exact count drops it before any pin or tail turn, and the context is packed again
  as if it had been left out from the start: what gave way to it comes back
  (`drop_one`, `refill`), never the question alone with the pin lost;
- where it opens the context (the older tail gave way), room is kept for the opening
  user message Anthropic's form adds (`to_anthropic`): the request stays in the budget.
Real SQLite, the real tokenizer, the real adapters.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from tiermem import Config, Memory
from tiermem.adapters.anthropic import from_anthropic, to_anthropic
from tiermem.planner.pack import GAVE_WAY

pytestmark = pytest.mark.usefixtures("shared_vectors")

RULE = "Rule: quote prices ONLY-EUR, never USD. "
CHAT = "We talked about the trip itinerary and the hotel near the station. "


def _abandoned_run(mem: Memory, calls: int, pin_words: int) -> None:
    """A standing rule pinned; an agent's run of `calls` parallel calls that ended before
    its reply was stored; then an unrelated question."""
    mem.append("t", {"role": "user", "content": RULE + "Always cite the contract clause. " * pin_words})
    mem.pin("t", 0, priority=100)
    mem.append_many("t", [
        {"role": "user", "content": "Check the status of all orders"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function",
             "function": {"name": "status", "arguments": json.dumps({"order": f"ORD-{i:05d}"})}}
            for i in range(calls)]},
        *({"role": "tool", "tool_call_id": f"c{i}", "content": "shipped via UPS, 3 events, ETA Monday. " * 50}
          for i in range(calls)),
        {"role": "user", "content": "Forget that. How much is the premium plan per month?"}])


@pytest.mark.parametrize(("calls", "budget", "pin_words"), [
    # review r_c5's repro: ten calls, the pin ~140 tokens; HEAD showed the round, not the pin
    (10, 600, 20),
    # a smaller pin, a tighter budget: the pin still stays
    (4, 400, 5),
])
def test_the_pin_never_gives_way_to_an_unanswered_round(tmp_path: Path, calls: int, budget: int,
                                                         pin_words: int) -> None:
    with Memory(Config(data_dir=tmp_path), hot=False, background_indexing=False) as mem:
        _abandoned_run(mem, calls, pin_words)
        ctx = mem.context("t", None, budget, record=False)
    assert "ONLY-EUR" in json.dumps(ctx.messages)
    assert not [i for i in ctx.plan.left_out if i.slice == "pinned"]
    assert not [i for i in ctx.plan.left_out if i.reason == GAVE_WAY]
    assert ctx.tokens <= budget


def test_a_dropped_round_gives_back_what_gave_way(tmp_path: Path) -> None:
    """Review r_c5's fuzz scenario 48 (context_format="responses", budget 700): the pin and
    the older tail gave way to the round, the exact count then dropped the round, and the
    context was the system prompt and the question, 26 tokens of 700, the pin lost."""
    budget = 700
    rnd = random.Random(48)
    with Memory(Config(data_dir=tmp_path, context_format="responses"), hot=False,
                background_indexing=False) as mem:
        mem.append_many("t", [{"role": "user", "content": "Rule: prices ONLY-EUR, never USD. " * 3}])
        mem.pin("t", 0, priority=100)
        for i in range(6):
            mem.append_many("t", [{"role": "user", "content": f"turn {i}: " + CHAT * rnd.randint(1, 8)},
                                  {"role": "assistant", "content": f"answer {i}: " + CHAT * rnd.randint(1, 8)}])
        mem.append("t", {"role": "user", "content": "Check the logs for the outage please"})
        mem.append_many("t", from_anthropic({"role": "assistant", "content": [
            {"type": "tool_use", "id": f"tu{i}", "name": "search", "input": {"q": i, "content": "x = 1\n" * 50}}
            for i in range(2)]}))
        out = ("ERROR line 42: connection refused to db-primary:5432; " * 3000)[:150000]
        mem.append_many("t", from_anthropic({"role": "user", "content": [
            *({"type": "tool_result", "tool_use_id": f"tu{i}", "content": out} for i in range(2)),
            {"type": "text", "text": "Forget that. What's the capital of France?"}]}))
        ctx = mem.context("t", None, budget, system="You are a careful support agent. ",
                          truncate_latest=True, record=False)
    assert "ONLY-EUR" in str(ctx.messages)
    assert ctx.tokens <= budget
    assert not [i for i in ctx.plan.left_out if i.reason == GAVE_WAY]


@pytest.mark.parametrize("budget", [
    # review r_c5's repro: 298 planned, 307 sent (the 9-token opening user message)
    300,
    500,
    800,
])
def test_anthropic_request_keeps_room_for_its_opening(tmp_path: Path, budget: int) -> None:
    with Memory(Config(data_dir=tmp_path), hot=False, background_indexing=False) as mem:
        for i in range(6):
            mem.append_many("t", [{"role": "user", "content": f"turn {i} about the trip " * 20},
                                  {"role": "assistant", "content": f"answer {i} " * 30}])
        mem.append("t", {"role": "user", "content": "What is the weather in Tokyo?"})
        mem.append_many("t", from_anthropic({"role": "assistant", "content": [
            {"type": "text", "text": "Let me check."},
            *({"type": "tool_use", "id": f"tu{i}", "name": "weather", "input": {"d": i}} for i in range(3))]}))
        mem.append_many("t", from_anthropic({"role": "user", "content": [
            *({"type": "tool_result", "tool_use_id": f"tu{i}",
               "content": [{"type": "text", "text": "rain 21C humid " * 200}]} for i in range(3)),
            {"type": "text", "text": "And tomorrow?"}]}))
        ctx = mem.context("t", None, budget, record=False)
        req = to_anthropic(ctx, mem)
    assert req.tokens <= budget, (req.tokens, ctx.tokens)
    # the round is still shown: the question keeps its results
    assert any(isinstance(m["content"], list) and any(b.get("type") == "tool_result" for b in m["content"])
               for m in req.messages)

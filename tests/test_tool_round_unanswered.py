"""A round no reply answered before the latest user message never refuses the question.

Since ac765c3 the round whose results the latest user message came after, no reply
between (planner.pack `loop_after`), is the latest round: Anthropic's form sends a question
in the user message that carries the results. The same rows are left by an agent's run
that ended before its reply was stored (a crash, MaxTurnsExceeded, a recursion limit, a
stopped run), and then the user's next question is unrelated: a round too large for the
budget even with each output trimmed to ROUND_MIN_RESULT_TOKENS (a call's arguments are
never trimmed; many parallel calls) made that question BudgetTooSmall, where the code
before returned a context. Invariants checked here:
- such a round that does not fit even at the least trim is left out, named in
  `plan.left_out` with that reason, and the question is sent as it was before ac765c3;
- the refusal text about calling the same tools again is not used for it;
- `drop_one` (the exact count past the budget) drops such a round first, never refusing
  for it; the model's own pending round it never drops, as before;
- after a clear, the read-back of the round's call reads the rows after the clear only
  (it read the whole log on every call), counted as rows the store returned.
Real SQLite, the real tokenizer, the real adapters.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import pytest

from tiermem import Memory
from tiermem.adapters._common import clear
from tiermem.adapters.anthropic import from_anthropic
from tiermem.planner.candidates import Candidate
from tiermem.planner.pack import ROUND_UNANSWERED, ROUND_UNANSWERED_LEFT_OUT, Packing, loop_after
from tiermem.planner.plan import Plan
from tiermem.tiers.tokens import BpeTokenCounter, messages_tokens

pytestmark = pytest.mark.usefixtures("shared_vectors")

QUESTION = "Unrelated: what's a good name for the repo?"
CODE = "".join(f"def f{i}(x):\n    return x * {i}  # helper\n" for i in range(600))  # ~10k tokens
OUTPUT = "ORD-000001: shipped 2024-03-01, carrier UPS, 3 events. " * 20
CHATTER = "We talked about the trip itinerary and the hotel near the station. " * 10


def _opening(mem: Memory) -> None:
    mem.append_many("t", [{"role": "user", "content": CHATTER}, {"role": "assistant", "content": CHATTER}])


def _big_call(mem: Memory) -> None:
    """A coding agent's run wrote a big file; its reply was never stored."""
    _opening(mem)
    mem.append_many("t", [
        {"role": "user", "content": "Write the helpers module."},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
            "name": "write_file", "arguments": json.dumps({"path": "helpers.py", "content": CODE})}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"}])
    mem.append("t", {"role": "user", "content": QUESTION})


def _big_call_anthropic(mem: Memory) -> None:
    """The same in Anthropic's form: the result and the question in one user message."""
    _opening(mem)
    mem.append("t", {"role": "user", "content": "Write the helpers module."})
    mem.append_many("t", from_anthropic({"role": "assistant", "content": [
        {"type": "tool_use", "id": "tu_0", "name": "write_file", "input": {"path": "helpers.py", "content": CODE}}]}))
    mem.append_many("t", from_anthropic({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "tu_0", "content": "ok"}, {"type": "text", "text": QUESTION}]}))


def _many_calls_agents(mem: Memory) -> None:
    """An Agents SDK run stopped after 60 parallel lookups' outputs (MaxTurnsExceeded):
    no assistant message saved; the user's next run saves its question."""
    from tiermem.adapters.openai_agents import TiermemSession

    async def run() -> None:
        s = TiermemSession(mem, "t")
        await s.add_items([{"role": "user", "content": "Look up all 60 order statuses."}])
        await s.add_items([{"type": "function_call", "call_id": f"call_{i}", "name": "order_status",
                            "arguments": json.dumps({"order_id": f"ORD-{i:06d}", "include_history": True})}
                           for i in range(60)])
        await s.add_items([{"type": "function_call_output", "call_id": f"call_{i}", "output": OUTPUT}
                           for i in range(60)])
        await s.add_items([{"role": "user", "content": QUESTION}])

    pytest.importorskip("agents")
    _opening(mem)
    asyncio.run(run())


SHAPES: dict[str, Callable[[Memory], None]] = {
    "big_call": _big_call, "big_call_anthropic": _big_call_anthropic, "many_calls_agents": _many_calls_agents}


@pytest.mark.parametrize(("shape", "budget", "system"), [
    # a 10k-token write_file argument at a 4,000-token budget: no trim shortens a call
    ("big_call", 4000, None),
    # the same beside a system prompt, which keeps its room
    ("big_call", 4000, "You are a careful coding agent."),
    # Anthropic's form of it (the result and the question in one message)
    ("big_call_anthropic", 4000, None),
    # 60 parallel calls: their call message alone passes a 2,000-token budget
    ("many_calls_agents", 2000, None),
])
def test_a_round_too_large_is_left_out_not_refused(cold_memory: Memory, shape: str, budget: int,
                                                    system: str | None) -> None:
    SHAPES[shape](cold_memory)
    ctx = cold_memory.context("t", None, budget, system=system)
    msgs = ctx.messages
    assert ctx.tokens <= budget and ctx.tokens == messages_tokens(cold_memory.tokens, msgs)
    assert msgs[-1] == {"role": "user", "content": QUESTION}
    # nothing of the round is sent: no call without its results, no result without its call
    assert not [m for m in msgs if m["role"] == "tool" or m.get("tool_calls")]
    if system is not None:
        assert msgs[0] == {"role": "system", "content": system}
    # named in the plan, with the reason it was left out
    assert any(it.reason == ROUND_UNANSWERED_LEFT_OUT for it in ctx.plan.left_out), ctx.plan.left_out


def test_a_round_that_fits_still_goes_with_the_question(cold_memory: Memory) -> None:
    """The round is left out only where it cannot fit: the same run with a small call at
    the same budget still sends the call and its result with the question (ac765c3)."""
    _opening(cold_memory)
    cold_memory.append_many("t", [
        {"role": "user", "content": "Write the helpers module."},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
            "name": "write_file", "arguments": json.dumps({"path": "helpers.py", "content": CODE[:400]})}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"}])
    cold_memory.append("t", {"role": "user", "content": QUESTION})
    ctx = cold_memory.context("t", None, 400)
    assert ctx.tokens <= 400
    assert [m["role"] for m in ctx.messages][-3:] == ["assistant", "tool", "user"]
    assert not any(it.reason == ROUND_UNANSWERED_LEFT_OUT for it in ctx.plan.left_out)


@pytest.mark.parametrize("cleared", [
    True,   # a long log cleared (LangChain history.clear, Agents clear_session): only the rows after it
    False,  # no clear: the read-back stops at the round's call as well
])
def test_the_read_back_stops_at_the_call(cold_memory: Memory, monkeypatch: pytest.MonkeyPatch,
                                         cleared: bool) -> None:
    """An Anthropic round with its question after a long log: `_fixed` reads rows back
    until the round's call is in, and no further (after a clear, nothing before it). The
    rows the store's tail read returns are counted over one context() call."""
    n = 2000
    for b in range(0, n, 500):
        cold_memory.append_many("t", [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{b + i} ok"}
                                      for i in range(500)])
    if cleared:
        clear(cold_memory, "t")
    cold_memory.append("t", {"role": "user", "content": "What is the weather in Tokyo?"})
    cold_memory.append_many("t", from_anthropic({"role": "assistant", "content": [
        {"type": "tool_use", "id": "tu_0", "name": "weather", "input": {}}]}))
    cold_memory.append_many("t", from_anthropic({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "tu_0", "content": "rain"}, {"type": "text", "text": "umbrella?"}]}))
    cold_memory.context("t", None, 4000, record=False)  # the turn table read once, outside the count
    read: list[int] = []
    tail_turns = cold_memory.cold.tail_turns

    def counted(conv: str, limit: int) -> list:  # type: ignore[type-arg]
        rows = tail_turns(conv, limit)
        read.append(len(rows))
        return rows

    monkeypatch.setattr(cold_memory.cold, "tail_turns", counted)
    ctx = cold_memory.context("t", None, 4000, record=False)
    assert [m["role"] for m in ctx.messages][-3:] == ["assistant", "tool", "user"]
    # the budget's scan reads some rows; the read-back adds at most a doubling of it, not
    # the log (n rows and more per call before: the whole log at each doubling)
    assert sum(read) < n // 4, read


def _unit(position: int, *messages: dict[str, object]) -> Candidate:
    return Candidate("tail", "c", position, 0.0, "tail", body={"messages": list(messages)}, tokens=10,
                     group=list(range(position, position + len(messages))))


@pytest.mark.parametrize(("latest_user", "answered_by_question"), [
    # the question (position 3) came after the round's results, no reply between: dropped
    # first, before the pin (review r_c5: the pin went, then the round, leaving the question alone)
    (3, True),
    # the model's pending round after the question (position 0): never dropped, as before
    (0, False),
])
def test_drop_one_drops_an_unanswered_round_before_a_pin(latest_user: int, answered_by_question: bool) -> None:
    """The exact count may still pass the budget after packing estimated a fit: `drop_one`
    then drops a round the question came after before any pin or tail turn (the question
    is sent without it); the model's own pending round is never dropped, the pin goes
    (the call is then BudgetTooSmall naming the round)."""
    call = {"role": "assistant", "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
    result = {"role": "tool", "tool_call_id": "c1", "content": "ok"}
    round_ = _unit(1, call, result)
    pin = Candidate("pinned", "c", 5, 1.0, "pinned", text="a pin", tokens=5)
    pools: dict[str, list[Candidate]] = {"pinned": [], "summary": [], "tail": [round_], "retrieved": []}
    packing = Packing("c", pools, {"pinned": 0, "summary": 0, "retrieved": 0, "tail": 0}, 1000,
                      BpeTokenCounter())
    packing.latest_user = latest_user
    packing.loop_after = loop_after(pools["tail"], latest_user)
    assert (packing.loop_after != latest_user) is answered_by_question
    packing.chosen["tail"], packing.chosen["pinned"] = [pools["tail"].pop()], [pin]
    plan = Plan("c", None, "chat", "", 1000)
    assert packing.drop_one(plan)
    if answered_by_question:  # the round first, the pin kept
        assert packing.chosen["tail"] == [] and plan.left_out[-1].positions == [1, 2]
        assert ROUND_UNANSWERED in plan.left_out[-1].reason and packing.chosen["pinned"] == [pin]
        assert not packing.round_units()
        assert packing.drop_one(plan) and plan.left_out[-1].positions == [5]  # then the pin
        assert not packing.drop_one(plan)  # nothing left to drop
    else:  # the pin, never the round
        assert plan.left_out[-1].positions == [5] and packing.chosen["tail"] == [round_]
        assert not packing.drop_one(plan) and len(plan.left_out) == 1

"""A question sent with the results of the calls before it keeps those results.

Anthropic's Messages API sends tool results in a user message, and lets that message carry
text after them (`tool_result` blocks first, then the user's next question). tiermem stores
it as the `tool` rows, then a user row, so the latest user message comes after the round:
on the code before, the round was an older tail turn, not the latest round, and under
budget pressure it gave way, so the model got the question without the results of the
calls it had made (and called the tools again). The round whose results no assistant
message answered before the latest user message is the latest round (planner.pack
`loop_after`): sent with the question, its outputs trimmed to fit where they must. The same
shape in the chat form (a `tool` message, then a user message) and through LangChain's
history (a `ToolMessage`, then a `HumanMessage`) is kept the same way; a round the model
answered before the question is an older turn, as before. Real SQLite, the real tokenizer.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from tiermem import Memory
from tiermem.adapters.anthropic import from_anthropic, to_anthropic
from tiermem.tiers.tokens import messages_tokens

pytestmark = pytest.mark.usefixtures("shared_vectors")

QUESTION = "And should I bring an umbrella tomorrow?"
OUTPUT = "Tokyo forecast: 21C, light rain in the evening, 80% humidity. " * 150  # ~2,500 tokens
CHATTER = "We talked about the trip itinerary and the hotel near the station. " * 30


def _opening(mem: Memory) -> None:
    mem.append_many("t", [{"role": "user", "content": CHATTER}, {"role": "assistant", "content": CHATTER},
                          {"role": "user", "content": "What is the weather in Tokyo?"}])


def _anthropic(mem: Memory, outputs: int) -> None:
    """The results and the question in one Anthropic user message."""
    _opening(mem)
    mem.append_many("t", from_anthropic({"role": "assistant", "content": [
        {"type": "tool_use", "id": f"tu_{i}", "name": "weather", "input": {"city": "Tokyo", "day": i}}
        for i in range(outputs)]}))
    mem.append_many("t", from_anthropic({"role": "user", "content": [
        *({"type": "tool_result", "tool_use_id": f"tu_{i}", "content": OUTPUT} for i in range(outputs)),
        {"type": "text", "text": QUESTION}]}))


def _chat(mem: Memory, outputs: int) -> None:
    """The chat form: the tool messages, then the user's message."""
    _opening(mem)
    mem.append_many("t", [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"tu_{i}", "type": "function",
             "function": {"name": "weather", "arguments": json.dumps({"city": "Tokyo", "day": i})}}
            for i in range(outputs)]},
        *({"role": "tool", "tool_call_id": f"tu_{i}", "content": OUTPUT} for i in range(outputs)),
        {"role": "user", "content": QUESTION}])


def _langchain(mem: Memory, outputs: int) -> None:
    """LangChain's history: a ToolMessage per result, then a HumanMessage."""
    lc = pytest.importorskip("langchain_core.messages")
    from tiermem.adapters.langchain import TiermemChatMessageHistory

    _opening(mem)
    TiermemChatMessageHistory(mem, "t").add_messages([
        lc.AIMessage("", tool_calls=[{"id": f"tu_{i}", "name": "weather", "args": {"city": "Tokyo", "day": i}}
                                     for i in range(outputs)]),
        *(lc.ToolMessage(OUTPUT, tool_call_id=f"tu_{i}") for i in range(outputs)),
        lc.HumanMessage(QUESTION)])


FORMS: dict[str, Callable[[Memory, int], None]] = {"anthropic": _anthropic, "chat": _chat, "langchain": _langchain}


@pytest.mark.parametrize(("form", "outputs", "budget"), [
    # one result with the question, at a budget that holds it only trimmed below the usual trim
    ("anthropic", 1, 300),
    # the same at a budget where it fits at the usual trim once the older turns give way
    ("anthropic", 1, 700),
    # three parallel results with the question: one allowance shared among them
    ("anthropic", 3, 500),
    # the chat form of the same shape: a tool message, then the user's message
    ("chat", 1, 300),
    ("chat", 3, 500),
    # LangChain's history of the same shape
    ("langchain", 1, 300),
    ("langchain", 3, 500),
])
def test_the_results_go_with_the_question(cold_memory: Memory, form: str, outputs: int, budget: int) -> None:
    FORMS[form](cold_memory, outputs)
    ctx = cold_memory.context("t", QUESTION, budget)
    msgs = ctx.messages
    assert ctx.tokens <= budget and ctx.tokens == messages_tokens(cold_memory.tokens, msgs)
    # the call, each of its results, then the question, in that order and adjacent
    roles = [m["role"] for m in msgs if m["role"] != "system"]
    assert roles[-(outputs + 2):] == ["assistant", *["tool"] * outputs, "user"], roles
    calls = next(m for m in msgs if m["role"] == "assistant" and m.get("tool_calls"))
    assert [c["id"] for c in calls["tool_calls"]] == [f"tu_{i}" for i in range(outputs)]
    assert [m["tool_call_id"] for m in msgs if m["role"] == "tool"] == [f"tu_{i}" for i in range(outputs)]
    assert all("Tokyo forecast" in m["content"] for m in msgs if m["role"] == "tool")
    assert msgs[-1]["content"] == QUESTION
    if form == "anthropic":  # and as sent to Anthropic: the results, then the question, in one message
        req = to_anthropic(ctx, cold_memory)
        last = req.messages[-1]["content"]
        # (a retrieved block placed before the question is a text block of that message too)
        types = [b["type"] for b in last]
        assert types[:outputs] == ["tool_result"] * outputs and set(types[outputs:]) == {"text"}, types
        assert last[-1]["text"] == QUESTION


def test_a_round_it_answered_is_an_older_turn(cold_memory: Memory) -> None:
    """A reply after the results (the model answered them) ends the round: the question
    after that reply is a new turn, and at a small budget the old round gives way, as
    before (only results no reply answered go with the question)."""
    _opening(cold_memory)
    cold_memory.append_many("t", [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "tu_0", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "tu_0", "content": OUTPUT},
        {"role": "assistant", "content": "It will rain lightly in the evening."},
        {"role": "user", "content": QUESTION}])
    ctx = cold_memory.context("t", QUESTION, 150)
    assert ctx.tokens <= 150
    assert not [m for m in ctx.messages if m["role"] == "tool"]
    assert ctx.messages[-1]["content"] == QUESTION


def test_results_past_the_scan_are_read_back(cold_memory: Memory) -> None:
    """Many results with the question: the tail's first read (sized by the budget) ends
    among them, and is read back until the round's call is in, so no result is left out as
    an orphan."""
    _opening(cold_memory)
    n = 40
    cold_memory.append_many("t", from_anthropic({"role": "assistant", "content": [
        {"type": "tool_use", "id": f"tu_{i}", "name": "weather", "input": {"day": i}} for i in range(n)]}))
    cold_memory.append_many("t", from_anthropic({"role": "user", "content": [
        *({"type": "tool_result", "tool_use_id": f"tu_{i}", "content": OUTPUT[:600]} for i in range(n)),
        {"type": "text", "text": QUESTION}]}))
    ctx = cold_memory.context("t", QUESTION, 6000)
    assert ctx.tokens <= 6000
    assert [m["tool_call_id"] for m in ctx.messages if m["role"] == "tool"] == [f"tu_{i}" for i in range(n)]
    assert ctx.messages[-1]["content"] == QUESTION

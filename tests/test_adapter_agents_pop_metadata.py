"""A pop that splits a row keeps the row's metadata on the items it puts back.

`TiermemSession.pop_item` on a chat row of several items (an assistant turn with text
and tool calls) hides the row and appends the items before the popped one again. Those
carried only `tiermem_popped_from`: the row's metadata was lost on them, so an
Anthropic turn's thinking never went back (`to_anthropic` sent a tool-calling turn of
the current loop without it, which the API refuses with extended thinking on), a
LangChain message lost its id, and a caller's own keys were gone. Now (module docstring
of `tiermem.adapters._common.put_back_metadata`): the caller's keys on every item; the
LangChain id and the Anthropic thinking and reply fields on the first item only; the
LangChain content and the Anthropic block order (which hold or index the whole
message's content) left out, and the Anthropic extras re-indexed onto the items whose
blocks they belong to (tests/test_adapter_agents_pop_extras.py). The real Agents SDK
session, LangChain history, Anthropic conversion; real SQLite.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("agents")
pytest.importorskip("langchain_core")
from langchain_core.messages import AIMessage, HumanMessage

from tiermem import Memory
from tiermem.adapters.anthropic import from_anthropic, to_anthropic
from tiermem.adapters.langchain import TiermemChatMessageHistory
from tiermem.adapters.openai_agents import TiermemSession
from tiermem.tiers.formats import RETRACT_TYPE

THINKING = {"type": "thinking", "thinking": "Two lookups.", "signature": "EqQB"}
REPLY = {"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
         "stop_reason": "tool_use", "stop_sequence": None, "usage": {"input_tokens": 4, "output_tokens": 2},
         "content": [THINKING,
                     {"type": "text", "text": "Checking both.", "citations": None},
                     {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Tokyo"}},
                     {"type": "tool_use", "id": "toolu_2", "name": "weather", "input": {"city": "Paris"}}]}
CALLS = [{"name": "weather", "args": {"city": "Tokyo"}, "id": "c1"},
         {"name": "weather", "args": {"city": "Paris"}, "id": "c2"}]


def _pop(mem: Memory, conversation_id: str) -> dict[str, Any]:
    popped: dict[str, Any] = asyncio.run(TiermemSession(mem, conversation_id).pop_item())
    return popped


def _put_back(mem: Memory, conversation_id: str) -> list[dict[str, Any] | None]:
    """The metadata of the rows after the pop's retraction: the items it put back."""
    rows = mem.history(conversation_id)
    retraction = next(m.position for m in rows if m.body.get("type") == RETRACT_TYPE)
    return [m.metadata for m in rows if m.position > retraction]


def test_the_anthropic_thinking_goes_back_after_a_pop(cold_memory: Memory) -> None:
    cold_memory.append_many("a", from_anthropic({"role": "user", "content": "Weather in Tokyo and Paris?"}))
    cold_memory.append_many("a", from_anthropic(REPLY))
    assert _pop(cold_memory, "a")["call_id"] == "toolu_2"
    first, rest = _put_back(cold_memory, "a")
    assert first is not None and set(first) == {"anthropic_thinking", "anthropic_reply", "tiermem_popped_from"}
    assert rest == {"tiermem_popped_from": 1}
    cold_memory.append_many("a", from_anthropic({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}]}))
    req = to_anthropic(cold_memory.context("a", "Weather?", 2000), cold_memory)
    # the current tool loop's turn opens with its thinking, once, and holds the call kept
    assert req.messages[1] == {"role": "assistant", "content": [
        THINKING, {"type": "text", "text": "Checking both."},
        {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Tokyo"}}]}


def test_the_langchain_id_stays_on_one_message_after_a_pop(cold_memory: Memory) -> None:
    history = TiermemChatMessageHistory(cold_memory, "l")
    history.add_messages([HumanMessage("Weather?", id="h1"), AIMessage("Checking.", id="ai-1", tool_calls=CALLS)])
    assert _pop(cold_memory, "l")["call_id"] == "c2"
    ids = [m.id for m in history.messages]
    assert ids.count("ai-1") == 1  # the message keeps its id, on one LangChain message only
    assert _put_back(cold_memory, "l") == [{"langchain_id": "ai-1", "tiermem_popped_from": 1},
                                           {"tiermem_popped_from": 1}]


CHAT_TURN = {"role": "assistant", "content": "Checking both.", "tool_calls": [
    {"id": f"c{i}", "type": "function", "function": {"name": "weather", "arguments": "{}"}} for i in (1, 2, 3)]}

METADATA_CASES: list[tuple[dict[str, Any], list[dict[str, Any]]]] = [
    # a caller's own keys: on every item put back
    ({"source": "email", "score": 0.5},
     [{"source": "email", "score": 0.5, "tiermem_popped_from": 0}] * 3),
    # a message's id and thinking: the first item only, beside the caller's keys
    ({"source": "email", "langchain_id": "ai-1", "anthropic_thinking": [[0, THINKING]]},
     [{"source": "email", "langchain_id": "ai-1", "anthropic_thinking": [[0, THINKING]], "tiermem_popped_from": 0},
      {"source": "email", "tiermem_popped_from": 0}, {"source": "email", "tiermem_popped_from": 0}]),
    # what holds or indexes the whole message's content: left out (the extras are the
    # popped call's, which go with it)
    ({"langchain_content": [{"type": "reasoning", "summary": []}], "anthropic_extra": [[3, {"caller": "x"}]],
      "anthropic_order": "tuuu"},
     [{"tiermem_popped_from": 0}] * 3),
    # a row popped before (its items put back again): the newest row's position
    ({"tiermem_popped_from": 7}, [{"tiermem_popped_from": 0}] * 3),
]


@pytest.mark.parametrize(("metadata", "expected"), METADATA_CASES,
                         ids=["caller's keys", "once per message", "left out", "popped before"])
def test_the_items_put_back_carry_the_rows_metadata(cold_memory: Memory, metadata: dict[str, Any],
                                                    expected: list[dict[str, Any]]) -> None:
    cold_memory.append("m", CHAT_TURN, metadata=metadata)
    assert _pop(cold_memory, "m")["call_id"] == "c3"
    assert _put_back(cold_memory, "m") == expected

"""The LangChain history reads one Responses assistant turn as one `AIMessage`.

The OpenAI Agents SDK stores an assistant turn with text and tool calls as a `message`
item holding the text, then one `function_call` item per call. The history joined a call
item only onto an AI message that already had calls, so the text came back as one
`AIMessage` and the calls as another: a turn a chat model wrote as one message read as two
(and a model given them reads a text reply followed by a second turn). A call item now
joins the AI message before it when that message has text or calls
(`tiers.formats.joins_turn`, the rule `to_chat` groups a round by, which commit 37c1421
made the planner follow too); two chat messages with calls stay two (367941c). Each case
is checked against `tiers.formats.to_chat` of the same rows. Real langchain-core, the
real Agents session adapter writing the items, real SQLite.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("agents")
from langchain_core.messages import AIMessage, BaseMessage

from tiermem import Memory
from tiermem.adapters.langchain import TiermemChatMessageHistory
from tiermem.adapters.openai_agents import TiermemSession
from tiermem.tiers.formats import to_chat

ASK = {"role": "user", "content": "Weather in Oslo and Rome?"}
TEXT = {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
        "content": [{"type": "output_text", "text": "Checking both.", "annotations": []}]}
REASONING = {"type": "reasoning", "id": "rs_1", "summary": []}


def _call(call_id: str, arguments: str = '{"city": "Oslo"}') -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": "weather", "arguments": arguments,
            "id": f"fc_{call_id}", "status": "completed"}


def _output(call_id: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": "sunny"}


def _chat_calls(*ids: str) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": i, "type": "function", "function": {"name": "weather", "arguments": "{}"}} for i in ids]}


CUSTOM = {"type": "custom_tool_call", "call_id": "k1", "name": "shell", "input": "ls", "id": "ctc_1"}

# (rows, each AI message read back as (its text, its call ids, its invalid call ids))
CASES: dict[str, tuple[list[dict[str, Any]], list[tuple[str, list[str], list[str]]]]] = {
    # the Agents SDK's turn: text, then its parallel calls, then their outputs
    "text then calls": ([ASK, TEXT, _call("c1"), _call("c2"), _output("c1"), _output("c2")],
                        [("Checking both.", ["c1", "c2"], [])]),
    # a reasoning model's turn: its reasoning item first (no chat form)
    "reasoning, text, call": ([ASK, REASONING, TEXT, _call("c1"), _output("c1")], [("Checking both.", ["c1"], [])]),
    # a custom tool call after the text
    "text then custom call": ([ASK, TEXT, CUSTOM], [("Checking both.", ["k1"], [])]),
    # a call whose arguments are no JSON object: still the turn's, one of its invalid calls
    "text then invalid call": ([ASK, TEXT, _call("c1", "not json")], [("Checking both.", [], ["c1"])]),
    # a chat client's text reply, then a call item: to_chat joins them too
    "chat text then call": ([ASK, {"role": "assistant", "content": "Checking."}, _call("c1")],
                            [("Checking.", ["c1"], [])]),
    # pins: a call item after a user message is a turn of its own
    "call alone": ([ASK, _call("c1")], [("", ["c1"], [])]),
    # a chat text reply, then a chat message with calls: two messages (only call items join)
    "chat text then chat calls": ([ASK, {"role": "assistant", "content": "Checking."}, _chat_calls("c1")],
                                  [("Checking.", [], []), ("", ["c1"], [])]),
    # two chat messages with calls: two rounds (367941c)
    "chat calls twice": ([ASK, _chat_calls("c1"), _chat_calls("c2")], [("", ["c1"], []), ("", ["c2"], [])]),
    # a call's output ends the turn: a call item after it is a new one
    "call, output, call": ([ASK, TEXT, _call("c1"), _output("c1"), _call("c2")],
                           [("Checking both.", ["c1"], []), ("", ["c2"], [])]),
}


def _ai(msgs: list[BaseMessage]) -> list[tuple[str, list[str], list[str]]]:
    return [(str(m.content), [c["id"] for c in m.tool_calls], [c["id"] for c in m.invalid_tool_calls])
            for m in msgs if isinstance(m, AIMessage)]


def _chat_turns(rows: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    """What `tiers.formats.to_chat` makes of the rows: each assistant message's text and calls."""
    return [(m.get("content") or "", [c["id"] for c in m.get("tool_calls") or ()])
            for m in to_chat(rows) if m["role"] == "assistant"]


@pytest.mark.parametrize(("rows", "turns"), CASES.values(), ids=CASES.keys())
def test_a_turn_reads_as_to_chat_groups_it(cold_memory: Memory, rows: list[dict[str, Any]],
                                           turns: list[tuple[str, list[str], list[str]]]) -> None:
    asyncio.run(TiermemSession(cold_memory, "trip").add_items(rows))  # as the Agents SDK stores them
    got = _ai(TiermemChatMessageHistory(cold_memory, "trip").messages)
    assert got == turns
    assert [(text, [*calls, *bad]) for text, calls, bad in got] == _chat_turns(rows)

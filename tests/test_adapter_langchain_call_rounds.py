"""The LangChain history keeps two tool-calling AI messages apart when they were two.

Reading merges consecutive tool-calling AI messages without text into one, for Responses
`function_call` items, which convert one call at a time and are one turn of parallel
calls. It merged chat rows too: two `AIMessage`s the history was given (the first's
calls abandoned, as a run interrupted before its tools ran leaves them) came back as one,
the second message and its id gone and its calls moved onto the first. Only a Responses
call item joins the AI message before it (as `tiers.formats` reads a `function_call`
after waiting calls: a parallel call of theirs). Real langchain-core, real SQLite.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langchain_core")
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from tiermem import Memory
from tiermem.adapters.langchain import TiermemChatMessageHistory


def _calls(*ids: str) -> list[dict[str, Any]]:
    return [{"id": i, "name": "weather", "args": {"city": i}} for i in ids]


@pytest.mark.parametrize("sent", [
    # a round abandoned before its tool ran, then a new round: two messages
    [HumanMessage("Weather?", id="h1"), AIMessage("", tool_calls=_calls("c1"), id="a1"),
     AIMessage("", tool_calls=_calls("c2"), id="a2"), ToolMessage("sunny", tool_call_id="c2", id="t2")],
    # the same with text on the first one
    [HumanMessage("Weather?", id="h1"), AIMessage("Checking.", tool_calls=_calls("c1"), id="a1"),
     AIMessage("", tool_calls=_calls("c2", "c3"), id="a2")],
], ids=["abandoned_round", "text_then_round"])
def test_chat_messages_come_back_as_given(cold_memory: Memory, sent: list[BaseMessage]) -> None:
    history = TiermemChatMessageHistory(cold_memory, "chat")
    history.add_messages(sent)
    got = history.messages
    assert [(m.id, getattr(m, "tool_calls", None)) for m in got] == [(m.id, getattr(m, "tool_calls", None))
                                                                       for m in sent]


@pytest.mark.parametrize(("rows", "turns"), [
    # Responses parallel calls: one AI message
    ([{"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
      {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{}"}], [["c1", "c2"]]),
    # a Responses call after a chat message's waiting call: a parallel call of it
    ([{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
      {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{}"}], [["c1", "c2"]]),
    # a chat message after a Responses call: a new round, two messages
    ([{"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
      {"role": "assistant", "content": None, "tool_calls": [
          {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "{}"}}]}], [["c1"], ["c2"]]),
], ids=["responses_parallel", "chat_then_responses", "responses_then_chat"])
def test_responses_calls_still_join(cold_memory: Memory, rows: list[dict[str, Any]], turns: list[list[str]]) -> None:
    cold_memory.append_many("mixed", [{"role": "user", "content": "q"}, *rows])
    got = TiermemChatMessageHistory(cold_memory, "mixed").messages
    assert [[c["id"] for c in m.tool_calls] for m in got if isinstance(m, AIMessage)] == turns

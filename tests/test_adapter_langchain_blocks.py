"""LangChain messages with content blocks the OpenAI chat form has no place for are stored.

LangChain's `convert_to_openai_messages` passes through an AI message's reasoning and
thinking blocks (ChatOpenAI's reasoning models, ChatAnthropic's extended thinking) and
server-tool blocks, and a tool message's images (a tool returning a screenshot, as MCP
tools do); the store refuses each (not a content part type of that role). So the chat
history's `add_messages` raised, and an agent with `TiermemMiddleware` failed at the first
such reply, every run after it too. Now those blocks are left out of the stored body
(other clients read its text) and the message's LangChain content is kept in the row's
metadata (`langchain_content`), coming back on read; where it does not fit
`max_metadata_bytes` it is left out, as an artifact is. Real langchain-core and
langchain, the fake chat model, real SQLite.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain")
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_helpers import RecordingFakeModel, weather

from tiermem import Config, Memory
from tiermem.adapters.langchain import METADATA_CONTENT_KEY, TiermemChatMessageHistory
from tiermem.adapters.langchain_agent import TiermemMiddleware
from tiermem.tiers.embed_onnx import FastEmbedder

PNG_URL = "https://example.com/screen.png"
SMALL_METADATA_BYTES = 256  # room for an id, not for a long thinking block

CASES: dict[str, tuple[BaseMessage, object]] = {
    # ChatOpenAI (Responses API, reasoning model): a reasoning block before the text
    "openai_reasoning": (AIMessage([{"type": "reasoning", "id": "rs_1", "summary": [
        {"type": "summary_text", "text": "Check the weather."}]}, {"type": "text", "text": "Sunny."}], id="a1"),
        [{"type": "text", "text": "Sunny."}]),
    # langchain's standard (v1) reasoning block
    "v1_reasoning": (AIMessage([{"type": "reasoning", "reasoning": "Think."}, {"type": "text", "text": "Hi."}],
                               id="a2"), [{"type": "text", "text": "Hi."}]),
    # ChatAnthropic with extended thinking, and a tool call
    "anthropic_thinking": (AIMessage([{"type": "thinking", "thinking": "Use the tool.", "signature": "EqQB"},
                                      {"type": "text", "text": "Checking."}],
                                     tool_calls=[{"id": "c1", "name": "weather", "args": {"city": "Lisbon"}}],
                                     id="a3"), [{"type": "text", "text": "Checking."}]),
    # a server-side tool's call, text after it
    "server_tool_call": (AIMessage([{"type": "server_tool_call", "id": "ws_1", "name": "web_search",
                                     "args": {"query": "Lisbon"}}, {"type": "text", "text": "Found it."}], id="a4"),
                         [{"type": "text", "text": "Found it."}]),
    # a tool result with a screenshot: the text stays in the body
    "tool_image": (ToolMessage([{"type": "text", "text": "Here."}, {"type": "image_url", "image_url": {
        "url": PNG_URL}}], tool_call_id="c1", id="t1"), [{"type": "text", "text": "Here."}]),
    # only blocks the chat form has no place for: the empty text
    "thinking_only": (AIMessage([{"type": "thinking", "thinking": "Hmm.", "signature": "s"}], id="a5"), ""),
}


@pytest.mark.parametrize("name", list(CASES))
def test_history_stores_and_gives_back_the_message(cold_memory: Memory, name: str) -> None:
    msg, stored_content = CASES[name]
    history = TiermemChatMessageHistory(cold_memory, "chat")
    history.add_messages([HumanMessage("Weather?", id="h1"), msg])
    row = cold_memory.history("chat")[-1]
    assert row.body["content"] == stored_content  # what another client reads
    back = history.messages[-1]
    assert (type(back), back.id, back.content) == (type(msg), msg.id, msg.content)
    if isinstance(msg, AIMessage):
        assert isinstance(back, AIMessage) and back.tool_calls == msg.tool_calls


def test_content_over_the_metadata_limit_is_left_out(tmp_path: Path, embedder: FastEmbedder) -> None:
    cfg = Config(data_dir=tmp_path / "data", max_metadata_bytes=SMALL_METADATA_BYTES)
    long_thinking = AIMessage([{"type": "thinking", "thinking": "x" * 2 * SMALL_METADATA_BYTES, "signature": "s"},
                               {"type": "text", "text": "Sunny."}], id="a1")
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        history = TiermemChatMessageHistory(mem, "chat")
        history.add_messages([long_thinking])
        assert METADATA_CONTENT_KEY not in (mem.history("chat")[0].metadata or {})
        back = history.messages[0]
        assert (back.id, back.content) == ("a1", [{"type": "text", "text": "Sunny."}])


def _replies() -> Iterator[AIMessage]:
    yield AIMessage([{"type": "thinking", "thinking": "Use the tool.", "signature": "EqQB"}],
                    tool_calls=[{"id": "call_1", "name": "weather", "args": {"city": "Lisbon"}}])
    yield AIMessage([{"type": "reasoning", "reasoning": "It said sunny."}, {"type": "text", "text": "Sunny."}])
    yield AIMessage("You asked about Lisbon.")


def test_agent_with_a_thinking_model_runs_and_stores_every_turn(cold_memory: Memory) -> None:
    model = RecordingFakeModel(messages=_replies())
    agent = create_agent(model, [weather], middleware=[TiermemMiddleware(cold_memory, "trip", budget=2000)])
    out: list[Any] = [agent.invoke({"messages": [HumanMessage(turn)]})["messages"][-1].content
                      for turn in ["Weather in Lisbon?", "Which city did I ask about?"]]
    assert out[1] == "You asked about Lisbon."
    stored = TiermemChatMessageHistory(cold_memory, "trip").messages
    assert [type(m).__name__ for m in stored] == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage",
                                                   "HumanMessage", "AIMessage"]
    assert stored[1].content[0]["type"] == "thinking" and stored[3].content[0]["type"] == "reasoning"
    # the second run's model input held the first run's turns, their text
    assert any("Lisbon" in str(m.content) for m in model.received[-1][:-1])

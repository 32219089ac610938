"""LangChain chat history and LangGraph hooks against the real packages, with
langchain-core's fake chat model (no network): messages round-trip with their ids, and
a create_react_agent over several turns with a tool sees tiermem's budgeted context,
which stays valid OpenAI input."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("langgraph")
import sdk_corpus as corpus
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_openai_messages,
)
from langchain_helpers import RecordingFakeModel, weather

from tiermem import Memory
from tiermem.adapters.langchain import TiermemChatMessageHistory
from tiermem.adapters.langgraph import TiermemHooks
from tiermem.tiers.tokens import messages_tokens


def test_history_round_trips_messages_with_their_ids(cold_memory: Memory) -> None:
    h = TiermemChatMessageHistory(cold_memory.namespaced("acme"), "chat")
    sent: list[BaseMessage] = [
        SystemMessage("You are terse.", id="m0"),
        HumanMessage("Weather in Tokyo?", id="m1"),
        AIMessage("", tool_calls=[{"id": "c1", "name": "weather", "args": {"city": "Tokyo"}}], id="m2"),
        ToolMessage("sunny", tool_call_id="c1", id="m3"),
        AIMessage("Sunny.", id="m4"),
        HumanMessage(content=[{"type": "text", "text": "And this?"},
                              {"type": "image_url", "image_url": {"url": corpus.PNG}}], id="m5"),
    ]
    h.add_messages(sent)
    got = h.messages
    assert [m.id for m in got] == [m.id for m in sent]
    assert [type(m) for m in got] == [type(m) for m in sent]
    assert convert_to_openai_messages(got) == convert_to_openai_messages(sent)
    h.clear()
    assert h.messages == []
    assert len(cold_memory.history("chat", namespace="acme")) == len(sent) + 1  # nothing deleted


def test_history_reads_what_the_agents_sdk_wrote(cold_memory: Memory) -> None:
    # one conversation, two frameworks: Responses items come back as LangChain messages
    cold_memory.append_many("shared", corpus.responses_conversation())
    msgs = TiermemChatMessageHistory(cold_memory, "shared").messages
    calls = [m for m in msgs if isinstance(m, AIMessage) and m.tool_calls]
    assert [c["id"] for c in calls[0].tool_calls] == ["call_1", "call_2"]  # parallel calls, one turn
    corpus.valid_chat(convert_to_openai_messages(msgs))  # type: ignore[arg-type]


def _agent(model: RecordingFakeModel, hooks: TiermemHooks) -> Any:
    from langgraph.prebuilt import create_react_agent

    return create_react_agent(model, [weather], pre_model_hook=hooks.pre_model_hook,
                              post_model_hook=hooks.post_model_hook)


def _replies() -> Iterator[AIMessage]:
    yield AIMessage("", tool_calls=[{"id": "call_w", "name": "weather", "args": {"city": "Tokyo"}}])
    yield AIMessage("Sunny and 21C in Tokyo.")
    yield AIMessage("Window seat it is.")
    yield AIMessage("You asked about Tokyo.")


def test_react_agent_sees_tiermems_context(cold_memory: Memory) -> None:
    past: list[dict[str, Any]] = []
    for i in range(50):
        past += [{"role": "user", "content": f"Note {i}: row {i} is fine, I like green tea."},
                 {"role": "assistant", "content": f"Noted {i}."}]
    cold_memory.append_many("trip", past)
    budget = 500
    hooks = TiermemHooks(cold_memory, "trip", budget=budget)
    model = RecordingFakeModel(messages=_replies())
    model.received = []
    agent = _agent(model, hooks)
    # no checkpointer: each invocation's state is the new message alone; tiermem has the past
    for turn in ["Weather in Tokyo?", "Book the window seat.", "Which city did I ask about?"]:
        agent.invoke({"messages": [HumanMessage(turn)]})
    assert len(model.received) == 4
    for sent in model.received:
        as_openai = convert_to_openai_messages(sent)
        corpus.valid_chat(as_openai)  # type: ignore[arg-type]
        assert messages_tokens(cold_memory.tokens, as_openai) <= budget  # type: ignore[arg-type]
        assert len(sent) < len(past)
    # the second call (after the tool ran) got the call and its result, then nothing newer
    second = model.received[1]
    assert isinstance(second[-1], ToolMessage) and isinstance(second[-2], AIMessage) and second[-2].tool_calls
    # the third turn's model call remembers the first turn, though the graph state did not
    last = model.received[3]
    assert last[-1].content == "Which city did I ask about?"
    assert any("Tokyo" in str(m.content) for m in last[:-1])
    # every turn is in the log exactly once: the 3 human turns, the call, its result, 3 replies
    new = cold_memory.history("trip")[len(past):]
    assert [m.role for m in new] == ["user", "assistant", "tool", "assistant", "user", "assistant", "user",
                                     "assistant"]

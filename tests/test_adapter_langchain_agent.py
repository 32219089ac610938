"""`TiermemMiddleware` on LangChain v1's `create_agent`, against the real packages with
langchain-core's fake chat model (no network): the model gets tiermem's planned context
within the budget while the agent state keeps every message, a tool call and its result
round-trip, a later turn recalls an earlier one with no checkpointer, several workers on
one checkpointer store each turn once, and `ainvoke` runs the same."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("langchain.agents")
import sdk_corpus as corpus
from langchain.agents import create_agent
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
    convert_to_openai_messages,
)
from langchain_core.tools import tool
from langchain_helpers import RecordingFakeModel, weather
from langgraph.checkpoint.memory import InMemorySaver

from tiermem import Memory
from tiermem.adapters.langchain import TiermemChatMessageHistory
from tiermem.adapters.langchain_agent import TiermemMiddleware
from tiermem.tiers.tokens import messages_tokens

PAST_TURNS = 50  # a past far over the budget: the model must get a planned slice of it
BUDGET_TOKENS = 500


@tool(return_direct=True)
def book(seat: str) -> str:
    """Book a seat; the agent ends on its result."""
    return f"booked {seat}"


def _model(replies: Iterator[AIMessage]) -> RecordingFakeModel:
    model = RecordingFakeModel(messages=replies)
    model.received = []
    return model


def _replies() -> Iterator[AIMessage]:
    yield AIMessage("", tool_calls=[{"id": "call_w", "name": "weather", "args": {"city": "Tokyo"}}])
    yield AIMessage("Sunny and 21C in Tokyo.")
    yield AIMessage("Window seat it is.")
    yield AIMessage("You asked about Tokyo.")


def _seed_past(mem: Memory, conv: str) -> list[dict[str, Any]]:
    past: list[dict[str, Any]] = []
    for i in range(PAST_TURNS):
        past += [{"role": "user", "content": f"Note {i}: row {i} is fine, I like green tea."},
                 {"role": "assistant", "content": f"Noted {i}."}]
    mem.append_many(conv, past)
    return past


def _within_budget(mem: Memory, sent: list[BaseMessage]) -> None:
    as_openai = convert_to_openai_messages(sent)
    corpus.valid_chat(as_openai)  # type: ignore[arg-type]
    assert messages_tokens(mem.tokens, as_openai) <= BUDGET_TOKENS  # type: ignore[arg-type]


def test_agent_sees_tiermems_context_and_recalls_without_a_checkpointer(cold_memory: Memory) -> None:
    past = _seed_past(cold_memory, "trip")
    model = _model(_replies())
    agent = create_agent(model, [weather], middleware=[TiermemMiddleware(cold_memory, "trip", budget=BUDGET_TOKENS)])
    # no checkpointer: each invocation's state is the new message alone; tiermem has the past
    states = [agent.invoke({"messages": [HumanMessage(turn)]})["messages"]
              for turn in ["Weather in Tokyo?", "Book the window seat.", "Which city did I ask about?"]]
    assert len(model.received) == 4
    for sent in model.received:
        _within_budget(cold_memory, sent)
        assert len(sent) < len(past)
    # the second call (after the tool ran) got the call and its result, then nothing newer
    second = model.received[1]
    assert isinstance(second[-1], ToolMessage) and second[-1].tool_call_id == "call_w"
    assert isinstance(second[-2], AIMessage) and [c["id"] for c in second[-2].tool_calls] == ["call_w"]
    # the third turn's model call remembers the first turn, though the graph state did not
    last = model.received[3]
    assert last[-1].content == "Which city did I ask about?"
    assert any("Tokyo" in str(m.content) for m in last[:-1])
    # the state is the graph's own: the run's messages, not tiermem's context
    assert [type(m) for m in states[0]] == [HumanMessage, AIMessage, ToolMessage, AIMessage]
    assert [m.content for m in states[2]] == ["Which city did I ask about?", "You asked about Tokyo."]
    # every turn is in the log exactly once, the last reply included (the run ended on it)
    new = cold_memory.history("trip")[len(past):]
    assert [m.role for m in new] == ["user", "assistant", "tool", "assistant", "user", "assistant", "user",
                                     "assistant"]
    assert new[-1].body["content"] == "You asked about Tokyo."


def test_tool_call_and_result_round_trip_with_their_ids(cold_memory: Memory) -> None:
    agent = create_agent(_model(_replies()), [weather], middleware=[TiermemMiddleware(cold_memory, "w")])
    state = agent.invoke({"messages": [HumanMessage("Weather in Tokyo?")]})["messages"]
    back = TiermemChatMessageHistory(cold_memory, "w").messages
    assert [m.id for m in back] == [m.id for m in state]
    assert convert_to_openai_messages(back) == convert_to_openai_messages(state)
    call, result = back[1], back[2]
    assert isinstance(call, AIMessage) and call.tool_calls[0]["args"] == {"city": "Tokyo"}
    assert isinstance(result, ToolMessage) and result.name == "weather" and result.tool_call_id == "call_w"


def test_state_keeps_everything_while_the_model_gets_the_budgeted_context(cold_memory: Memory) -> None:
    saver = InMemorySaver()
    turns = [f"Question {i}: tell me about row {i}, which I like a lot." for i in range(30)]
    model = _model(iter([AIMessage(f"Row {i} is a fine row, as noted before.") for i in range(len(turns))]))
    agent = create_agent(model, [], middleware=[TiermemMiddleware(cold_memory, "long", budget=BUDGET_TOKENS)],
                         checkpointer=saver)
    cfg = {"configurable": {"thread_id": "long"}}
    for turn in turns:
        state = agent.invoke({"messages": [HumanMessage(turn)]}, cfg)["messages"]
    assert [m.content for m in state[::2]] == turns  # the checkpointed state has every turn
    state_tokens = messages_tokens(cold_memory.tokens, convert_to_openai_messages(state))  # type: ignore[arg-type]
    assert state_tokens > BUDGET_TOKENS  # so the context below is a slice of it
    for sent in model.received:
        _within_budget(cold_memory, sent)
    assert model.received[-1][-1].content == turns[-1]
    # the checkpointed messages already stored are skipped: each turn once in the log
    assert len(cold_memory.history("long")) == len(state)


def test_two_workers_on_one_checkpointer_store_each_turn_once(cold_memory: Memory) -> None:
    saver = InMemorySaver()
    model = _model(iter([AIMessage(f"reply {i}") for i in range(8)]))
    workers = [create_agent(model, [], middleware=[TiermemMiddleware(cold_memory, "thread", budget=2000)],
                            checkpointer=saver) for _ in range(2)]
    cfg = {"configurable": {"thread_id": "thread"}}
    for turn in range(4):
        workers[turn % 2].invoke({"messages": [HumanMessage(f"question {turn}")]}, cfg)
    want = [x for t in range(4) for x in (f"question {t}", f"reply {t}")]
    assert [m.body.get("content") for m in cold_memory.history("thread")] == want
    assert [m.get("content") for m in cold_memory.context("thread", "question 3", 2000).messages] == want


def test_ainvoke_stores_and_plans_as_invoke_does(cold_memory: Memory) -> None:
    model = _model(_replies())
    agent = create_agent(model, [weather], middleware=[TiermemMiddleware(cold_memory, "async", budget=2000)])

    async def run() -> None:
        for turn in ["Weather in Tokyo?", "Book the window seat."]:
            await agent.ainvoke({"messages": [HumanMessage(turn)]})

    asyncio.run(run())
    assert [m.role for m in cold_memory.history("async")] == ["user", "assistant", "tool", "assistant", "user",
                                                              "assistant"]
    assert any("Tokyo" in str(m.content) for m in model.received[2])  # the second turn saw the first


def test_a_run_that_ends_on_a_tool_result_stores_it(cold_memory: Memory) -> None:
    # a return_direct tool ends the run after the tool, with no model call to sync it
    replies = iter([AIMessage("", tool_calls=[{"id": "call_b", "name": "book", "args": {"seat": "12A"}}])])
    agent = create_agent(_model(replies), [book], middleware=[TiermemMiddleware(cold_memory, "direct")])
    agent.invoke({"messages": [HumanMessage("Book 12A.")]})
    rows = cold_memory.history("direct")
    assert [m.role for m in rows] == ["user", "assistant", "tool"]
    assert rows[-1].body["content"] == "booked 12A"


def test_building_the_agent_warns_of_nothing_deprecated(cold_memory: Memory) -> None:
    # what the README's example prints: create_react_agent warned of its move to create_agent
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        create_agent(_model(_replies()), [weather], middleware=[TiermemMiddleware(cold_memory, "w")])
    assert [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)] == []


def test_a_run_interrupted_before_its_tools_has_stored_the_models_call(cold_memory: Memory) -> None:
    # the run stops after the model (as human-in-the-loop review does): the call is in the log already
    agent = create_agent(_model(_replies()), [weather], middleware=[TiermemMiddleware(cold_memory, "paused")],
                         checkpointer=InMemorySaver(), interrupt_before=["tools"])
    agent.invoke({"messages": [HumanMessage("Weather in Tokyo?")]}, {"configurable": {"thread_id": "paused"}})
    rows = cold_memory.history("paused")
    assert [m.role for m in rows] == ["user", "assistant"]
    assert rows[-1].body["tool_calls"][0]["id"] == "call_w"

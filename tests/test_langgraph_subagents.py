"""Sub-agents called as tools by a supervisor, one LangGraph thread, against the real
packages with fake chat models (no network) and `InMemorySaver`.

A nested agent inherits the run's thread id. By default its conversation is that thread
id, as every agent's is (an upgrade never moves an existing conversation: a `create_agent`
added as a node of a parent graph stays in its thread id's). An agent whose adapter is made
with `sub_agent=True` keeps its own conversation, the thread id plus the stable part of its
checkpoint namespace (the nodes it sits in, its agent name:
`tiermem.adapters._threads.run_conversation_key`), the same at every run, so its turns no
longer land in the supervisor's between the supervisor's tool call and its result.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langchain.agents")
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_helpers import RecordingFakeModel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph_helpers import scripted

from tiermem import Memory
from tiermem.adapters._threads import run_conversation_key
from tiermem.adapters.langchain_agent import TiermemMiddleware
from tiermem.adapters.langgraph import TiermemHooks
from tiermem.tiers.errors import ValidationError

BUDGET_TOKENS = 2000
THREAD = {"configurable": {"thread_id": "job-1"}}


def _call(cid: str, name: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"id": cid, "name": name, "args": {"q": "topic"}}])


def _unanswered(messages: list[dict[str, Any]]) -> list[str]:
    """The tool calls no tool result right after their message answers, and the results
    no call before them made (Chat Completions' rule), as stored rows' bodies."""
    problems: list[str] = []
    waiting: set[str] = set()
    for m in messages:
        if m.get("role") == "tool":
            if m.get("tool_call_id") not in waiting:
                problems.append(f"orphan result {m.get('tool_call_id')}")
            waiting.discard(m.get("tool_call_id"))
            continue
        problems += [f"unanswered call {c}" for c in sorted(waiting)]
        waiting = {c["id"] for c in m.get("tool_calls") or []}
    return problems + [f"unanswered call {c}" for c in sorted(waiting)]


def _supervisor(mem: Memory, sub_model: RecordingFakeModel, sup_model: RecordingFakeModel, *,
                sub_agent: bool) -> Any:
    researcher = create_agent(sub_model, [], middleware=[TiermemMiddleware(mem, budget=BUDGET_TOKENS,
                                                                           sub_agent=sub_agent)],
                              name="researcher")
    writer = create_agent(sub_model, [], middleware=[TiermemMiddleware(mem, budget=BUDGET_TOKENS,
                                                                       sub_agent=sub_agent)], name="writer")

    @tool
    def research(q: str) -> str:
        """Research a topic."""
        return str(researcher.invoke({"messages": [HumanMessage(f"research {q}")]})["messages"][-1].content)

    @tool
    def write(q: str) -> str:
        """Write about a topic."""
        return str(writer.invoke({"messages": [HumanMessage(f"write {q}")]})["messages"][-1].content)

    return create_agent(sup_model, [research, write], middleware=[TiermemMiddleware(mem, budget=BUDGET_TOKENS)],
                        checkpointer=InMemorySaver())


def _stored(mem: Memory, conv: str) -> list[str]:
    return [str(m.body.get("content")) for m in mem.history(conv) if m.body.get("role") in ("user", "assistant")]


def test_by_default_sub_agents_stay_in_the_threads_conversation(cold_memory: Memory) -> None:
    # no sub_agent=True: every agent's conversation is the thread id, as before the option
    sub_model = scripted(AIMessage("found X"), AIMessage("wrote Y"))
    sup_model = scripted(_call("c1", "research"), _call("c2", "write"), AIMessage("done"))
    supervisor = _supervisor(cold_memory, sub_model, sup_model, sub_agent=False)
    supervisor.invoke({"messages": [HumanMessage("make a report")]}, THREAD)
    assert list(cold_memory.conversations()) == ["job-1"]
    assert {"research topic", "found X", "write topic", "wrote Y", "done"} <= set(_stored(cold_memory, "job-1"))


def test_an_agent_as_a_node_of_a_parent_graph_keeps_the_thread_id(cold_memory: Memory) -> None:
    # a create_agent added as a node (namespace `assistant:<task>|model:<task>`): its
    # conversation is the thread id, which `delete_conversation(thread_id)` erases
    model = scripted(AIMessage("A0"))
    agent = create_agent(model, [], middleware=[TiermemMiddleware(cold_memory, budget=BUDGET_TOKENS)],
                         name="helper")
    graph = StateGraph(MessagesState)
    graph.add_node("assistant", agent)
    graph.add_edge(START, "assistant")
    graph.add_edge("assistant", END)
    app = graph.compile(checkpointer=InMemorySaver())
    app.invoke({"messages": [HumanMessage("H0 my name is Ann")]}, {"configurable": {"thread_id": "user-42"}})
    assert list(cold_memory.conversations()) == ["user-42"]
    assert _stored(cold_memory, "user-42") == ["H0 my name is Ann", "A0"]


def test_sub_agents_keep_their_own_conversations_and_the_supervisors_calls_stay_answered(
        cold_memory: Memory) -> None:
    sub_model = scripted(AIMessage("found X"), AIMessage("wrote Y"), AIMessage("found Z"))
    sup_model = scripted(_call("c1", "research"), _call("c2", "write"), AIMessage("done"),
                        _call("c3", "research"), AIMessage("done again"))
    supervisor = _supervisor(cold_memory, sub_model, sup_model, sub_agent=True)
    supervisor.invoke({"messages": [HumanMessage("make a report")]}, THREAD)
    # the supervisor's conversation: each call answered right after it (before: the
    # researcher's turns sat between c1 and its result)
    rows = [m.body for m in cold_memory.history("job-1")]
    assert _unanswered(rows) == []
    assert _stored(cold_memory, "job-1") == ["make a report", "", "", "done"]
    # each sub-agent's turns in a conversation of its own: the thread, the node it runs in
    # (create_agent's "tools"), its name
    assert sorted(cold_memory.conversations()) == ["job-1", "job-1:tools:researcher", "job-1:tools:writer"]
    assert _stored(cold_memory, "job-1:tools:writer") == ["write topic", "wrote Y"]
    # the writer's input held none of the researcher's turns (before: the supervisor's
    # request, the researcher's question and answer came first)
    assert [m.content for m in sub_model.received[1]] == ["write topic"]
    # a second run: the researcher's conversation is the same one (the task ids in the
    # namespace are new at every call), and its past comes back
    supervisor.invoke({"messages": [HumanMessage("once more")]}, THREAD)
    assert _stored(cold_memory, "job-1:tools:researcher") == ["research topic", "found X", "research topic",
                                                               "found Z"]
    assert [m.content for m in sub_model.received[-1]] == ["research topic", "found X", "research topic"]
    assert _unanswered([m.body for m in cold_memory.history("job-1")]) == []
    last = sup_model.received[-1]
    assert [m.tool_call_id for m in last if isinstance(m, ToolMessage)] == ["c1", "c2", "c3"]


@pytest.mark.parametrize(("config", "expected"), [
    # a call outside a run's nesting: the thread id as it was (no migration)
    ({"configurable": {"thread_id": "job-1"}}, "job-1"),
    # a top-level node: one namespace segment, the thread id
    ({"configurable": {"thread_id": "job-1", "checkpoint_ns": "model:0f1e"}}, "job-1"),
    # a named agent at the top level: its name (sub_agent=True says it is one of several)
    ({"configurable": {"thread_id": "job-1", "checkpoint_ns": "model:0f1e"},
      "metadata": {"lc_agent_name": "researcher"}}, "job-1:researcher"),
    # an unnamed agent in a tool: the node it sits in, not the one running, nor the task ids
    ({"configurable": {"thread_id": "job-1", "checkpoint_ns": "tools:0f1e|model:2a3b"}}, "job-1:tools"),
    # a named one: its name after the nodes
    ({"configurable": {"thread_id": "job-1", "checkpoint_ns": "tools:0f1e|model:2a3b"},
      "metadata": {"lc_agent_name": "researcher"}}, "job-1:tools:researcher"),
    # two levels deep, a node name with characters an id may not hold: "_" for them
    ({"configurable": {"thread_id": 7, "checkpoint_ns": "plan step:1|tools:2|model:3"}}, "7:plan_step:tools"),
    # no thread id: none (the adapter refuses the run, or uses its conversation_id)
    ({"configurable": {"checkpoint_ns": "tools:1|model:2"}}, None),
])
def test_run_conversation_key(config: dict[str, Any], expected: str | None) -> None:
    assert run_conversation_key(config) == expected  # type: ignore[arg-type]


NESTED = {"checkpoint_ns": "tools:0f1e|model:2a3b"}


@pytest.mark.parametrize("make", [TiermemMiddleware, TiermemHooks])
@pytest.mark.parametrize(("kwargs", "problem"), [
    # not a bool: refused, not taken as truthy
    ({"sub_agent": "yes"}, "must be True or False"),
    # with a fixed conversation: nothing to key per thread
    ({"sub_agent": True, "conversation_id": "c"}, "needs no conversation_id"),
])
def test_sub_agent_checked_when_made(cold_memory: Memory, make: Any, kwargs: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValidationError, match=problem) as caught:
        make(cold_memory, **kwargs)
    assert caught.value.field == "sub_agent"


def test_a_sub_agent_key_over_max_id_chars_is_refused_naming_the_option_and_limit(cold_memory: Memory) -> None:
    limit = cold_memory.config.max_id_chars
    thread = "u" * (limit - 5)  # a thread id that fits; with ":tools:researcher" it does not
    config = {"configurable": {"thread_id": thread, **NESTED}, "metadata": {"lc_agent_name": "researcher"}}
    with pytest.raises(ValidationError, match=f"max_id_chars, {limit}") as caught:
        TiermemMiddleware(cold_memory, sub_agent=True).threads.sync_for(config)  # type: ignore[arg-type]
    assert caught.value.field == "sub_agent"
    assert "sub_agent=True" in str(caught.value)
    # without the option the thread id is the conversation, as before
    sync = TiermemMiddleware(cold_memory).threads.sync_for(config)  # type: ignore[arg-type]
    assert sync.conversation_id == thread
    assert list(cold_memory.conversations()) == []  # nothing written by either

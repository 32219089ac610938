"""Time travel in a LangGraph thread (a run from an earlier checkpoint): tiermem's contexts
follow the branch being run, against the real packages with a fake chat model and
`InMemorySaver`, through both LangGraph adapters.

A fork's state is the log's beginning plus new messages; the log holds the abandoned
branch after that beginning. Before, the fork's new messages were appended after the
abandoned branch and the model saw both (Paris and Rome); now the abandoned rows are
retracted (retraction rows: `history()` keeps them) before the new ones are stored
(`ConversationSync.forks`). A graph without a checkpointer (the state holds only the new
input) and a conversation shared across threads are no fork.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langchain.agents")
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from tiermem import Memory
from tiermem.adapters.langchain_agent import TiermemMiddleware
from tiermem.adapters.langgraph import TiermemHooks

BUDGET_TOKENS = 3000
THREAD = {"configurable": {"thread_id": "tt"}}


class Script(GenericFakeChatModel):
    """A fake chat model answering from its script; records every input."""

    received: list[list[BaseMessage]] = []  # noqa: RUF012 (a pydantic field, set per instance below)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Script:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.received.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def _hooks_agent(model: Script, adapter: Any, saver: InMemorySaver | None) -> Any:
    from langgraph.prebuilt import create_react_agent

    return create_react_agent(model, [], pre_model_hook=adapter.pre_model_hook,
                              post_model_hook=adapter.post_model_hook, checkpointer=saver)


def _middleware_agent(model: Script, adapter: Any, saver: InMemorySaver | None) -> Any:
    return create_agent(model, [], middleware=[adapter], checkpointer=saver)


ADAPTERS = [
    pytest.param(TiermemHooks, _hooks_agent, id="langgraph-hooks"),  # create_react_agent's pre/post hooks
    pytest.param(TiermemMiddleware, _middleware_agent, id="agent-middleware"),  # create_agent's middleware
]


def _model() -> Script:
    model = Script(messages=iter([AIMessage("A1"), AIMessage("A2 Paris"), AIMessage("A2' Rome"),
                                  AIMessage("A3")]))
    model.received = []
    return model


def _visible(mem: Memory, conv: str) -> list[str]:
    return [str(m.get("content")) for m in mem.context(conv, None, BUDGET_TOKENS).messages]


@pytest.mark.parametrize(("adapter", "build"), ADAPTERS)
def test_a_fork_from_an_earlier_checkpoint_leaves_the_abandoned_branch_out(cold_memory: Memory, adapter: type,
                                                                           build: Any) -> None:
    model = _model()
    agent = build(model, adapter(cold_memory, budget=BUDGET_TOKENS), InMemorySaver())
    agent.invoke({"messages": [HumanMessage("H1")]}, THREAD)
    agent.invoke({"messages": [HumanMessage("H2 to Paris")]}, THREAD)
    # the checkpoint the first run ended with: [H1, A1]
    fork = next(s for s in agent.get_state_history(THREAD) if len(s.values.get("messages", [])) == 2 and not s.next)
    agent.invoke({"messages": [HumanMessage("H2' to Rome")]}, fork.config)
    # before: ["H1", "A1", "H2 to Paris", "A2 Paris", "H2' to Rome"]
    assert [m.content for m in model.received[-1]] == ["H1", "A1", "H2' to Rome"]
    assert _visible(cold_memory, "tt") == ["H1", "A1", "H2' to Rome", "A2' Rome"]
    # append-only: the abandoned rows stay in the log, hidden by retraction rows
    assert sum(m.body.get("type") == "tiermem.retract" for m in cold_memory.history("tt")) == 2
    # the branch goes on from there
    agent.invoke({"messages": [HumanMessage("H3")]}, THREAD)
    assert [m.content for m in model.received[-1]] == ["H1", "A1", "H2' to Rome", "A2' Rome", "H3"]


@pytest.mark.parametrize(("adapter", "build"), ADAPTERS)
def test_no_fork_without_a_checkpointer_or_across_threads(cold_memory: Memory, adapter: type, build: Any) -> None:
    # without a checkpointer the state holds only the new input: tiermem supplies the past
    model = _model()
    agent = build(model, adapter(cold_memory, budget=BUDGET_TOKENS), None)
    agent.invoke({"messages": [HumanMessage("H1")]}, THREAD)
    agent.invoke({"messages": [HumanMessage("H2")]}, THREAD)
    assert _visible(cold_memory, "tt") == ["H1", "A1", "H2", "A2 Paris"]
    # one conversation written by two threads: a thread's state is its own turns only
    model = _model()
    agent = build(model, adapter(cold_memory, "shared", budget=BUDGET_TOKENS, shared_across_threads=True),
                  InMemorySaver())
    agent.invoke({"messages": [HumanMessage("alice")]}, {"configurable": {"thread_id": "a"}})
    agent.invoke({"messages": [HumanMessage("bob")]}, {"configurable": {"thread_id": "b"}})
    agent.invoke({"messages": [HumanMessage("alice again")]}, {"configurable": {"thread_id": "a"}})
    assert _visible(cold_memory, "shared") == ["alice", "A1", "bob", "A2 Paris", "alice again", "A2' Rome"]

"""A thread's conversation erased (`Memory.delete_conversation`) while the checkpointer
keeps the thread's state: the thread's next run does not store the erased messages again
(`ConversationSync._erased`), against the real packages with a fake chat model and
`InMemorySaver`, through both LangGraph adapters.

Before, the next sync noticed the erasure, read the (empty) log anew and stored the
checkpointer's whole state as new: the erased SSN came back into tiermem and into the
model's context. Now the ids the log held before the erasure are not stored again; the
messages new since are.
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

BUDGET_TOKENS = 2000
THREAD = {"configurable": {"thread_id": "alice"}}
SECRET = "078-05-1120"


class Script(GenericFakeChatModel):
    """A fake chat model answering from its script; records every input."""

    received: list[list[BaseMessage]] = []  # noqa: RUF012 (a pydantic field, set per instance below)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Script:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.received.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def _hooks_agent(model: Script, mem: Memory) -> Any:
    from langgraph.prebuilt import create_react_agent

    hooks = TiermemHooks(mem, budget=BUDGET_TOKENS)
    return create_react_agent(model, [], pre_model_hook=hooks.pre_model_hook, post_model_hook=hooks.post_model_hook,
                              checkpointer=InMemorySaver())


def _middleware_agent(model: Script, mem: Memory) -> Any:
    return create_agent(model, [], middleware=[TiermemMiddleware(mem, budget=BUDGET_TOKENS)],
                        checkpointer=InMemorySaver())


@pytest.mark.parametrize("build", [
    pytest.param(_hooks_agent, id="langgraph-hooks"),  # create_react_agent's pre/post hooks
    pytest.param(_middleware_agent, id="agent-middleware"),  # create_agent's middleware
])
def test_an_erased_thread_is_not_stored_again_at_its_next_run(cold_memory: Memory, build: Any) -> None:
    model = Script(messages=iter([AIMessage("noted"), AIMessage("hello again"), AIMessage("bye")]))
    model.received = []
    agent = build(model, cold_memory)
    agent.invoke({"messages": [HumanMessage(f"my SSN is {SECRET}")]}, THREAD)
    cold_memory.delete_conversation("alice")
    agent.invoke({"messages": [HumanMessage("hi")]}, THREAD)
    rows = [str(m.body.get("content")) for m in cold_memory.history("alice")]
    # the erased turn stays erased (before: both rows came back); the new turn is stored
    assert rows == ["hi", "hello again"]
    assert not any(SECRET in str(m.content) for m in model.received[-1])
    # and at the run after it too (the state still holds the erased messages)
    agent.invoke({"messages": [HumanMessage("bye?")]}, THREAD)
    assert [str(m.body.get("content")) for m in cold_memory.history("alice")] == ["hi", "hello again", "bye?", "bye"]
    assert [m.content for m in model.received[-1]] == ["hi", "hello again", "bye?"]

"""A tool's error result (`ToolMessage(status="error")`) reaches the model as an error in
tiermem's context, not as the success a ToolMessage defaults to (ChatAnthropic sends
`is_error` from it), through both LangGraph adapters, against the real packages with a
fake chat model. The status was stored (row metadata) and read back by `history()`, but
the context path put back only the message's own metadata (`_restored_fields`).
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langchain.agents")
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import ToolException, tool
from langgraph.checkpoint.memory import InMemorySaver

from tiermem import Memory
from tiermem.adapters.langchain_agent import TiermemMiddleware
from tiermem.adapters.langgraph import TiermemHooks

BUDGET_TOKENS = 3000


class Script(GenericFakeChatModel):
    """A fake chat model answering from its script; records every input."""

    received: list[list[BaseMessage]] = []  # noqa: RUF012 (a pydantic field, set per instance below)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Script:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.received.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


@tool
def transfer(amount: int) -> str:
    """Transfer money."""
    if amount > 10:
        raise ToolException("insufficient funds")
    return "sent"


transfer.handle_tool_error = True


def _hooks_agent(model: Script, mem: Memory) -> Any:
    from langgraph.prebuilt import create_react_agent

    hooks = TiermemHooks(mem, budget=BUDGET_TOKENS)
    return create_react_agent(model, [transfer], pre_model_hook=hooks.pre_model_hook,
                              post_model_hook=hooks.post_model_hook, checkpointer=InMemorySaver())


def _middleware_agent(model: Script, mem: Memory) -> Any:
    return create_agent(model, [transfer], middleware=[TiermemMiddleware(mem, budget=BUDGET_TOKENS)],
                        checkpointer=InMemorySaver())


@pytest.mark.parametrize("build", [
    pytest.param(_hooks_agent, id="langgraph-hooks"),  # create_react_agent's pre/post hooks
    pytest.param(_middleware_agent, id="agent-middleware"),  # create_agent's middleware
])
def test_a_tool_error_reaches_the_model_as_an_error(cold_memory: Memory, build: Any) -> None:
    calls = [{"id": "call_1", "name": "transfer", "args": {"amount": 50}},  # fails
             {"id": "call_2", "name": "transfer", "args": {"amount": 5}}]  # succeeds
    model = Script(messages=iter([AIMessage("", tool_calls=calls), AIMessage("One failed.")]))
    model.received = []
    agent = build(model, cold_memory)
    agent.invoke({"messages": [HumanMessage("send 50 and 5")]}, {"configurable": {"thread_id": "t"}})
    results = {m.tool_call_id: m.status for m in model.received[-1] if isinstance(m, ToolMessage)}
    # before: {"call_1": "success", ...}: the error went to the model as a success
    assert results == {"call_1": "error", "call_2": "success"}

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
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import ToolException, tool
from langgraph_helpers import adapter_agents, scripted

from tiermem import Memory

BUDGET_TOKENS = 3000


@tool
def transfer(amount: int) -> str:
    """Transfer money."""
    if amount > 10:
        raise ToolException("insufficient funds")
    return "sent"


transfer.handle_tool_error = True


@pytest.mark.parametrize("build", adapter_agents([transfer], budget=BUDGET_TOKENS))  # both adapters
def test_a_tool_error_reaches_the_model_as_an_error(cold_memory: Memory, build: Any) -> None:
    calls = [{"id": "call_1", "name": "transfer", "args": {"amount": 50}},  # fails
             {"id": "call_2", "name": "transfer", "args": {"amount": 5}}]  # succeeds
    model = scripted(AIMessage("", tool_calls=calls), AIMessage("One failed."))
    agent = build(model, cold_memory)
    agent.invoke({"messages": [HumanMessage("send 50 and 5")]}, {"configurable": {"thread_id": "t"}})
    results = {m.tool_call_id: m.status for m in model.received[-1] if isinstance(m, ToolMessage)}
    # before: {"call_1": "success", ...}: the error went to the model as a success
    assert results == {"call_1": "error", "call_2": "success"}

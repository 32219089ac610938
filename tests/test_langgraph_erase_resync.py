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
from langchain_core.messages import AIMessage, HumanMessage
from langgraph_helpers import adapter_agents, scripted

from tiermem import Memory

BUDGET_TOKENS = 2000
THREAD = {"configurable": {"thread_id": "alice"}}
SECRET = "078-05-1120"


@pytest.mark.parametrize("build", adapter_agents(budget=BUDGET_TOKENS))  # both adapters
def test_an_erased_thread_is_not_stored_again_at_its_next_run(cold_memory: Memory, build: Any) -> None:
    model = scripted(AIMessage("noted"), AIMessage("hello again"), AIMessage("bye"))
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

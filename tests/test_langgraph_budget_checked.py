"""The LangGraph adapters' `budget` is checked when they are made (an int of 1 to
`MAX_BUDGET_TOKENS`), naming the field and the limit, and `truncate_latest=True`, which
`BudgetTooSmall` advises, is taken: against the real packages with a fake chat model.

Before, `budget=-5`, `0`, `"2000"` or `10**9` made an adapter that failed only at the
first model call, after the turn was stored, and `truncate_latest` was no parameter
(`TypeError`) though the refusal told the caller to pass it.
"""

from __future__ import annotations

import pytest

pytest.importorskip("langchain.agents")
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langgraph_helpers import scripted

from tiermem import Memory
from tiermem.adapters.langchain_agent import TiermemMiddleware
from tiermem.adapters.langgraph import TiermemHooks
from tiermem.errors import BudgetTooSmall, ValidationError
from tiermem.tiers.models import MAX_BUDGET_TOKENS

SMALL_BUDGET_TOKENS = 50  # under a 100-word message


ADAPTERS = [pytest.param(TiermemHooks, id="langgraph-hooks"), pytest.param(TiermemMiddleware, id="agent-middleware")]


@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.parametrize("budget", [
    -5,  # negative
    0,  # no room at all
    "2000",  # a string, not an int
    10**9,  # past MAX_BUDGET_TOKENS
    True,  # a bool is no budget
])
def test_a_bad_budget_is_refused_when_the_adapter_is_made(cold_memory: Memory, adapter: type,
                                                          budget: object) -> None:
    with pytest.raises(ValidationError) as err:
        adapter(cold_memory, budget=budget)
    assert err.value.field == "budget"
    assert f"1..{MAX_BUDGET_TOKENS}" in str(err.value)


@pytest.mark.parametrize("adapter", [pytest.param(TiermemMiddleware, id="agent-middleware")])
def test_truncate_latest_is_taken(cold_memory: Memory, adapter: type) -> None:
    text = "word " * 100
    refused = create_agent(scripted(AIMessage("x")), [],
                           middleware=[adapter(cold_memory, budget=SMALL_BUDGET_TOKENS)])
    with pytest.raises(BudgetTooSmall):  # by default, as before
        refused.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": "a"}})
    model = scripted(AIMessage("ok"))
    agent = create_agent(model, [], middleware=[adapter(cold_memory, budget=SMALL_BUDGET_TOKENS,
                                                        truncate_latest=True)])
    agent.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": "b"}})
    sent = str(model.received[-1][-1].content)
    assert sent and len(sent) < len(text)  # cut to fit the budget

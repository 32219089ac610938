"""A model's tool call whose args hold NaN or Infinity (`json.loads`, as LangChain parses a
provider's args, takes them) in a `create_agent` run with `TiermemMiddleware` and a
checkpointer: the LangGraph adapters store them as null, with one WARNING naming the
message and the field, and the run and every later turn of the thread go on. Before, the
sync refused the message (`ValidationError`), and since the checkpointer keeps it in the
state, every later turn of the thread was refused too. `TiermemChatMessageHistory`, whose
caller can fix the input, still refuses them (`test_langchain_history_bad_input`).

Every form the contexts go out in holds JSON only (`allow_nan=False`): the stored rows,
the chat form, `to_anthropic`'s request.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

pytest.importorskip("langchain.agents")
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph_helpers import middleware_agent, scripted

from tiermem import Memory
from tiermem.adapters.anthropic import to_anthropic

BUDGET_TOKENS = 3000
THREAD = {"configurable": {"thread_id": "t"}}


@tool
def scale(x: Any) -> str:
    """Scale x."""
    return f"scaled {x}"


@pytest.mark.parametrize(("args_text", "field"), [
    ('{"x": NaN}', "tool_calls[0].args.x"),  # NaN, top level
    ('{"x": [1, -Infinity]}', "tool_calls[0].args.x[1]"),  # -Infinity, in a list
])
def test_non_finite_args_stored_as_null_and_the_thread_goes_on(
        cold_memory: Memory, caplog: pytest.LogCaptureFixture, args_text: str, field: str) -> None:
    model = scripted(AIMessage("", tool_calls=[{"id": "c1", "name": "scale", "args": json.loads(args_text)}]),
                     AIMessage("done"), AIMessage("A1"))
    agent = middleware_agent(model, cold_memory, [scale], budget=BUDGET_TOKENS)
    with caplog.at_level(logging.WARNING, logger="tiermem.adapters.langchain"):
        agent.invoke({"messages": [HumanMessage("H0 scale it")]}, THREAD)
        # the next turn (before: refused, as every later one, the state holding the call)
        agent.invoke({"messages": [HumanMessage("H1 hello again")]}, THREAD)
    warned = [r.getMessage() for r in caplog.records if "NaN or Infinity" in r.getMessage()]
    assert len(warned) == 1  # once, when the message is stored; not at every later sync
    assert field in warned[0] and "AIMessage" in warned[0]
    rows = [m.body for m in cold_memory.history("t")]
    assert [r.get("content") for r in rows if r.get("role") in ("user", "assistant")] == [
        "H0 scale it", "", "done", "H1 hello again", "A1"]
    call = next(r for r in rows if r.get("tool_calls"))["tool_calls"][0]
    args = json.loads(call["function"]["arguments"], parse_constant=lambda c: pytest.fail(f"stored {c}"))
    assert None in (args["x"] if isinstance(args["x"], list) else [args["x"]])
    # every form the context goes out in is JSON
    ctx = cold_memory.context("t", "again", BUDGET_TOKENS)
    json.dumps(ctx.messages, allow_nan=False)
    json.dumps(to_anthropic(ctx, cold_memory).messages, allow_nan=False)
    sent = model.received[-1]
    assert [m.content for m in sent if isinstance(m, HumanMessage)] == ["H0 scale it", "H1 hello again"]
    json.dumps([c["args"] for m in sent if isinstance(m, AIMessage) for c in m.tool_calls], allow_nan=False)

"""`model_input_filter` honours a handoff's `input_filter`: what the SDK leaves out of the
receiving agent's input stays out of the planned context.

`handoff(agent, input_filter=handoff_filters.remove_all_tools)` gives the receiving agent
its input without the tool items (calls, outputs, reasoning) of the agent before; the
session saves them all the same, and the filter, which plans from the log, sent them back
(the reviewer's a10_handoff_filter.py: the billing agent got the triage agent's internal
lookup output). Now the typed items the SDK's input does not hold, from the first item it
holds on, are left out of the plan (`openai_agents.left_out_items`): a call with its
output and the reasoning before it. The next turn, whose input holds them again, gets them
back, as over the SDK's own session. Real SQLite, the real `openai-agents` Runner with
its ScriptedModel and its handoff filters.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")
from agents import Agent, RunConfig, Runner, function_tool, handoff
from agents.extensions import handoff_filters
from agents.testing import ScriptedModel, assistant_message, function_call
from agents_helpers import open_memory
from openai.types.responses import ResponseReasoningItem
from openai.types.responses.response_reasoning_item import Summary

from tiermem.adapters.openai_agents import TiermemSession
from tiermem.tiers.embed_onnx import FastEmbedder

CONV = "c"
BUDGET_TOKENS = 3000
SECRET = "SECRET-INTERNAL-NOTE"
BILLING_CALL = 2  # the receiving agent's first model call


@function_tool
def lookup(q: str) -> str:
    """An internal lookup."""
    return SECRET


def script() -> list[list[Any]]:
    reasoning = ResponseReasoningItem(id="rs_1", type="reasoning", encrypted_content="gAAAA",
                                      summary=[Summary(text="Look it up first.", type="summary_text")])
    return [[reasoning, function_call("lookup", {"q": "refund"}, call_id="call_1")],
            [function_call("transfer_to_billing", {}, call_id="call_2")],
            [assistant_message("Billing here.", item_id="msg_1")],
            [assistant_message("Still billing.", item_id="msg_2")]]


def kinds(items: Any) -> list[str]:
    return [str(dict(i).get("type") or dict(i).get("role")) for i in items]


# (the handoff's input_filter; whether the run uses tiermem's filter)
CASES = {
    "remove_all_tools, no filter": (handoff_filters.remove_all_tools, False),
    "remove_all_tools, filter": (handoff_filters.remove_all_tools, True),
    "no input_filter, no filter": (None, False),
    "no input_filter, filter": (None, True),
}


async def run(session: TiermemSession, input_filter: Any, use_filter: bool) -> ScriptedModel:
    """A turn handed off to billing, then a second turn (the triage agent starts again)."""
    model = ScriptedModel(script())
    billing = Agent(name="billing", instructions="Bill.", model=model)
    triage = Agent(name="triage", instructions="Route.", model=model, tools=[lookup],
                   handoffs=[handoff(billing, input_filter=input_filter)])
    config = RunConfig(tracing_disabled=True, call_model_input_filter=(
        session.model_input_filter(BUDGET_TOKENS) if use_filter else None))
    await Runner.run(triage, "Refund please", session=session, run_config=config)
    await Runner.run(triage, "And the receipt?", session=session, run_config=config)
    return model


@pytest.mark.parametrize("case", CASES)
def test_the_receiving_agent_gets_what_the_handoff_filter_left(tmp_path: Path, embedder: FastEmbedder,
                                                               case: str) -> None:
    input_filter, use_filter = CASES[case]
    with open_memory(tmp_path / "d", embedder) as mem:
        model = asyncio.run(run(TiermemSession(mem, CONV), input_filter, use_filter))
        got = kinds(model.calls[BILLING_CALL].input)
        if input_filter is None:  # the SDK gives billing the whole run: so does the filter
            assert got == ["user", "reasoning", "function_call", "function_call_output", "function_call",
                           "function_call_output"]
        else:  # failed before with the filter: the lookup's reasoning, call and output came back
            assert got == ["user"]
            assert SECRET not in str(model.calls[BILLING_CALL].input)
        # the session saved the lookup either way, and the next turn's input holds it again
        assert SECRET in str([m.body for m in mem.history(CONV)])
        assert SECRET in str(model.calls[-1].input)


def test_a_nested_handoff_history_is_planned_from_the_log_once(tmp_path: Path, embedder: FastEmbedder) -> None:
    # nest_handoff_history: the SDK gives billing one assistant message summarizing the
    # conversation, which the log holds nowhere; the filter plans the conversation from
    # the log, and sends that summary of it no second time (the items not saved yet that
    # follow a context are a new turn's user messages only, where the input was rebuilt)
    with open_memory(tmp_path / "d", embedder) as mem:
        session = TiermemSession(mem, CONV)
        model = ScriptedModel(script())
        billing = Agent(name="billing", instructions="Bill.", model=model)
        triage = Agent(name="triage", instructions="Route.", model=model, tools=[lookup], handoffs=[billing])
        config = RunConfig(tracing_disabled=True, nest_handoff_history=True,
                           call_model_input_filter=session.model_input_filter(BUDGET_TOKENS))
        asyncio.run(Runner.run(triage, "Refund please", session=session, run_config=config))
        got = [dict(i) for i in model.calls[BILLING_CALL].input]
        assert "CONVERSATION HISTORY" not in str(got)
        assert kinds(got) == ["user", "reasoning", "function_call", "function_call_output", "function_call",
                              "function_call_output"]

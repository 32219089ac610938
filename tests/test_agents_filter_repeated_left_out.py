"""`model_input_filter` under a session limit: a question asked again keeps the older
tool results.

`left_out_items` (f1a4286) leaves out of the plan the typed items the SDK's input does
not hold from where that input begins (a handoff's `input_filter` removed them); older
items, which a session limit kept from the SDK, are tiermem's to plan. It found where the
input begins by the first view item equal to any input item, so a new question equal to
an old one matched the old row: every call and output between the two, which the limited
input does not hold, was taken for left out by a handoff, and the model lost a tool
result it had had on every turn before (the reviewer's agents_rep.py part B). Now the
input's items are matched to the view from the end, each to the latest row before the
one after it, the new items not saved yet aside (`_input_start`). Real SQLite, the real
`openai-agents` Runner, streamed and not, with its ScriptedModel.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")
from agents import Agent, function_tool, handoff
from agents.extensions import handoff_filters
from agents.testing import ScriptedModel, assistant_message, function_call
from agents_helpers import filter_config, open_memory, run_turn

from tiermem.adapters.openai_agents import TiermemSession
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.formats import message_text

CONV = "c"
BUDGET_TOKENS = 2000
SESSION_LIMIT = 2  # the SDK reads the latest exchange only: the tool round is older
QUESTION = "What is the weather in Lisbon?"
TOOL_ROUND = ["call call_1", "output call_1: sunny in Lisbon"]


@function_tool
def weather(city: str) -> str:
    """The weather."""
    return f"sunny in {city}"


def said(items: Any) -> list[str]:
    out = []
    for raw in items:
        item = dict(raw)
        if item.get("type") == "function_call":
            out.append(f"call {item['call_id']}")
        elif item.get("type") == "function_call_output":
            out.append(f"output {item['call_id']}: {item['output']}")
        elif item.get("role") in ("user", "assistant"):
            out.append(f"{item['role']}: {message_text(item)}")
    return out


async def turn(agent: Agent[Any], session: TiermemSession, text: str, *, streamed: bool) -> None:
    await run_turn(agent, text, session, filter_config(session, BUDGET_TOKENS), streamed=streamed)


# the third turn's question: whether it repeats the first one
THIRD_QUESTIONS = {
    # the new question matched the first one's row: call_1 and its output were left out
    # (failed before, both runners)
    "the first question again": QUESTION,
    # nothing equal to it in the log (passed before too)
    "another question": "Something else entirely?",
}


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("case", THIRD_QUESTIONS)
def test_a_repeated_question_keeps_older_tool_results(tmp_path: Path, embedder: FastEmbedder, case: str,
                                                      streamed: bool) -> None:
    third = THIRD_QUESTIONS[case]
    with open_memory(tmp_path / "d", embedder) as mem:
        session = TiermemSession(mem, CONV, session_settings={"limit": SESSION_LIMIT})
        model = ScriptedModel([[function_call("weather", {"city": "Lisbon"}, call_id="call_1")],
                               [assistant_message("Sunny.")], [assistant_message("ok1")], [assistant_message("ok2")]])
        agent = Agent(name="a", instructions="Be brief.", model=model, tools=[weather])
        asyncio.run(turn(agent, session, QUESTION, streamed=False))
        asyncio.run(turn(agent, session, "Thanks.", streamed=False))
        asyncio.run(turn(agent, session, third, streamed=streamed))
        assert said(model.calls[-1].input) == [f"user: {QUESTION}", *TOOL_ROUND, "assistant: Sunny.",
                                               "user: Thanks.", "assistant: ok1", f"user: {third}"]


def test_a_handoff_filter_still_leaves_out_the_tools_with_a_repeated_question(tmp_path: Path,
                                                                             embedder: FastEmbedder) -> None:
    # the anchor from the end still finds where a handoff-filtered input begins: the
    # triage agent's weather call of this turn stays out of the billing agent's input,
    # the older tool round (before what the limit let the SDK read) stays in; the
    # question repeats the first one (failed before: matched to the first row, the older
    # round was left out too)
    with open_memory(tmp_path / "d", embedder) as mem:
        session = TiermemSession(mem, CONV, session_settings={"limit": SESSION_LIMIT})
        model = ScriptedModel([[function_call("weather", {"city": "Lisbon"}, call_id="call_1")],
                               [assistant_message("Sunny.")],
                               [function_call("weather", {"city": "Porto"}, call_id="call_2")],
                               [function_call("transfer_to_billing", {}, call_id="call_3")],
                               [assistant_message("Billing here.")]])
        billing = Agent(name="billing", instructions="Bill.", model=model)
        triage = Agent(name="triage", instructions="Route.", model=model, tools=[weather],
                       handoffs=[handoff(billing, input_filter=handoff_filters.remove_all_tools)])
        asyncio.run(turn(triage, session, QUESTION, streamed=False))
        asyncio.run(turn(triage, session, QUESTION, streamed=False))
        got = said(model.calls[-1].input)
        assert got[:4] == [f"user: {QUESTION}", *TOOL_ROUND, "assistant: Sunny."]
        assert got[-1] == f"user: {QUESTION}"
        assert not [g for g in got[4:] if g.startswith(("call", "output"))]

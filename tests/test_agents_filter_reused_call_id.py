"""`model_input_filter` keeps a tool round whose call id a left-out call used before.

A server that numbers its calls per reply (`call_0` every round) stores two calls of one
id. Where the earlier one has no output in the view (its output and reply undone with
`pop_item`, or a `needs_approval` tool's run interrupted and the user moving on) the SDK's
input leaves it out, and `left_out_items` leaves it out of the plan too. It did so by its
call id, so the later call of that id and its output, which the input holds (renamed
`call_0_2`), went too: the model lost a tool result it had just had (the reviewer's
repro_reused_callid_dropped.py and repro_reused_callid_approval.py). Now the left-out
items are told by their rows' positions (`_left_out_of_plan`). Real SQLite, the real
`openai-agents` Runner, streamed and not, with its ScriptedModel.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")
from agents import Agent, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from agents_helpers import filter_config, open_memory, run_turn

from tiermem.adapters.openai_agents import TiermemSession
from tiermem.tiers.embed_onnx import FastEmbedder

CONV = "trip"
BUDGET_TOKENS = 4000
REUSED_ID = "call_0"  # the server's id for the first call of every reply
PORTO_RESULT = "sunny in Porto"


@function_tool
def weather(city: str) -> str:
    """The weather."""
    return f"sunny in {city}"


@function_tool(needs_approval=True)
def book(city: str) -> str:
    """Book a flight."""
    return f"booked {city}"


def plain(items: Any) -> list[dict[str, Any]]:
    return [json.loads(json.dumps(i, default=lambda o: o.model_dump(exclude_unset=True))) for i in items]


async def popped_round(session: TiermemSession, agent_model: ScriptedModel, streamed: bool) -> Agent[Any]:
    # a Lisbon round, its reply and output undone: the call_0 call stays without an output
    agent = Agent(name="a", instructions="x", model=agent_model, tools=[weather])
    await run_turn(agent, "Weather in Lisbon?", session, filter_config(session, BUDGET_TOKENS), streamed=streamed)
    await session.pop_item()
    await session.pop_item()
    return agent


async def interrupted_round(session: TiermemSession, agent_model: ScriptedModel, streamed: bool) -> Agent[Any]:
    # a booking call that needs approval interrupts the run: saved without an output
    agent = Agent(name="a", instructions="x", model=agent_model, tools=[book, weather])
    await run_turn(agent, "Book Lisbon", session, filter_config(session, BUDGET_TOKENS), streamed=streamed)
    return agent


# how the earlier call_0 call comes to have no output, and the model's replies for it
FIRST_ROUNDS = {
    # pop_item twice: the reply and the tool output undone (failed before)
    "popped": (popped_round, [[function_call("weather", {"city": "Lisbon"}, call_id=REUSED_ID)],
                              [assistant_message("Sunny")]]),
    # a needs_approval tool interrupts the run; the user moves on (failed before)
    "approval interrupt": (interrupted_round, [[function_call("book", {"city": "Lisbon"}, call_id=REUSED_ID)]]),
}


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("case", FIRST_ROUNDS)
def test_a_round_reusing_a_left_out_call_id_is_sent(tmp_path: Path, embedder: FastEmbedder, case: str,
                                                   streamed: bool) -> None:
    first, replies = FIRST_ROUNDS[case]
    model = ScriptedModel([*replies,
                           [function_call("weather", {"city": "Porto"}, call_id=REUSED_ID)],
                           [assistant_message("Porto: sunny")], [assistant_message("It said sunny.")]])
    with open_memory(tmp_path / "d", embedder) as mem:
        session = TiermemSession(mem, CONV)
        config = filter_config(session, BUDGET_TOKENS)
        agent = asyncio.run(first(session, model, streamed))
        asyncio.run(run_turn(agent, "Weather in Porto?", session, config, streamed=streamed))
        asyncio.run(run_turn(agent, "What did the tool say about Porto?", session, config, streamed=streamed))
        sent = plain(model.calls[-1].input)
    calls = [i["call_id"] for i in sent if i.get("type") == "function_call"]
    outputs = {i["call_id"]: i["output"] for i in sent if i.get("type") == "function_call_output"}
    # the Porto round is sent whole, its call and output under one id; the earlier call,
    # which has no output and the SDK's input left out, is not sent as a call (a 400)
    assert len(calls) == 1
    assert outputs == {calls[0]: PORTO_RESULT}
    assert sent[-1]["content"] == "What did the tool say about Porto?"

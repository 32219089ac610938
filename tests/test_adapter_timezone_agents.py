"""`TiermemSession(..., timezone=)`: the OpenAI Agents SDK's model input (the session's
`model_input_filter`) is planned in the user's zone, through the real `openai-agents`
runner and its ScriptedModel. Before, the session had no zone of its own: every context
was in the memory's zone (UTC), so a multi-user service was back to one zone for all."""

from __future__ import annotations

import asyncio

import pytest

agents = pytest.importorskip("agents")
from agents import Agent, RunConfig, Runner  # noqa: E402
from agents.testing import ScriptedModel, assistant_message  # noqa: E402
from zone_helpers import BAD_ZONE, BUDGET, HEADINGS, LA, QUESTION, headings, seed  # noqa: E402

from tiermem import Memory  # noqa: E402
from tiermem.adapters.openai_agents import TiermemSession  # noqa: E402
from tiermem.tiers.errors import ValidationError  # noqa: E402


@pytest.mark.parametrize("zone", [
    LA,  # the session's user is in Los Angeles: Friday evening, with its offset
    None,  # no zone: the memory's (UTC), as before
])
def test_the_model_input_is_planned_in_the_sessions_zone(cold_memory: Memory, zone: str | None) -> None:
    seed(cold_memory, "c")
    session = TiermemSession(cold_memory, "c", timezone=zone)
    model = ScriptedModel([[assistant_message("On Friday.", item_id="msg_1")]])
    agent = Agent(name="dentist", instructions="Be brief.", model=model)
    asyncio.run(Runner.run(agent, QUESTION, session=session, run_config=RunConfig(
        tracing_disabled=True, call_model_input_filter=session.model_input_filter(BUDGET))))
    items = list(model.calls[0].input)
    assert HEADINGS[zone] in headings(i.get("content") for i in items)
    assert HEADINGS[zone] in headings(m["content"] for m in session.context_items(QUESTION, BUDGET))


def test_a_bad_zone_is_refused_when_the_session_is_made(cold_memory: Memory) -> None:
    with pytest.raises(ValidationError) as e:
        TiermemSession(cold_memory, "c", timezone=BAD_ZONE)
    assert e.value.field == "timezone" and BAD_ZONE in e.value.problem
    assert cold_memory.conversations() == []

"""The OpenAI Agents SDK adapter against the real `openai-agents` package, driven by the
SDK's own ScriptedModel (no network): items round-trip exactly as the SDK's SQLiteSession
keeps them, pop and clear are rows that hide (history keeps everything), and with the
input filter the model receives tiermem's budgeted context, valid Responses input."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

agents = pytest.importorskip("agents")
import sdk_corpus as corpus  # noqa: E402
from agents import Agent, RunConfig, Runner, SQLiteSession, function_tool  # noqa: E402
from agents.testing import ScriptedModel, assistant_message, function_call  # noqa: E402

from tiermem import Memory  # noqa: E402
from tiermem.adapters.openai_agents import TiermemSession  # noqa: E402
from tiermem.tiers.formats import CLEAR_TYPE, RETRACT_TYPE  # noqa: E402
from tiermem.tiers.tokens import messages_tokens  # noqa: E402

TURNS = ["What's the weather in Tokyo?", "Book the window seat, please.", "What city did I ask about?"]


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny and 21C in {city}"


def _script() -> list[Any]:
    return [[function_call("weather", {"city": "Tokyo"}, call_id="call_w1")],
            [assistant_message("Sunny and 21C in Tokyo.", item_id="msg_1")],
            [assistant_message("Window seat booked.", item_id="msg_2")],
            [assistant_message("You asked about Tokyo.", item_id="msg_3")]]


async def _run(session: Any, *, run_config: RunConfig | None = None) -> ScriptedModel:
    model = ScriptedModel(_script())
    agent = Agent(name="travel", instructions="Be brief.", model=model, tools=[weather])
    for turn in TURNS:
        await Runner.run(agent, turn, session=session, run_config=run_config or RunConfig(tracing_disabled=True))
    return model


def test_items_round_trip_like_the_sdks_own_session(cold_memory: Memory) -> None:
    ours = TiermemSession(cold_memory.namespaced("acme"), "trip")
    ref = SQLiteSession("ref")
    asyncio.run(_run(ours))
    asyncio.run(_run(ref))
    got, want = asyncio.run(ours.get_items()), asyncio.run(ref.get_items())
    assert got == want and len(got) == 8  # 3 user turns, the call, its output, 3 replies
    assert asyncio.run(ours.get_items(limit=2)) == want[-2:]
    # stored losslessly in the log, in the SDK's own shapes
    assert [m.body for m in cold_memory.history("trip", namespace="acme")] == want
    # another namespace does not see the session
    assert asyncio.run(TiermemSession(cold_memory.namespaced("other"), "trip").get_items()) == []


def test_pop_and_clear_are_rows_that_hide(cold_memory: Memory) -> None:
    s = TiermemSession(cold_memory, "trip")
    asyncio.run(_run(s))
    before = asyncio.run(s.get_items())
    popped = asyncio.run(s.pop_item())
    assert popped == before[-1]
    assert asyncio.run(s.get_items()) == before[:-1]
    hist = cold_memory.history("trip")
    assert hist[-1].body == {"type": RETRACT_TYPE, "position": len(before) - 1}
    assert [m.body for m in hist[:-1]] == before  # the popped item is still in the log
    ctx = cold_memory.context("trip", "what city?", 4000)
    assert all(m != popped for m in ctx.messages) and all("tiermem" not in str(m.get("type")) for m in ctx.messages)

    asyncio.run(s.clear_session())
    assert asyncio.run(s.get_items()) == []
    assert cold_memory.history("trip")[-1].body == {"type": CLEAR_TYPE}
    assert len(cold_memory.history("trip")) == len(before) + 2
    asyncio.run(s.add_items([{"role": "user", "content": "Fresh start: Paris in May."}]))
    assert asyncio.run(s.get_items()) == [{"role": "user", "content": "Fresh start: Paris in May."}]
    # the recent tail of a context starts after the clear
    ctx = cold_memory.context("trip", None, 4000)
    assert ctx.messages[-1] == {"role": "user", "content": "Fresh start: Paris in May."}
    assert not any(m.get("type") == "function_call" for m in ctx.messages)
    assert asyncio.run(TiermemSession(cold_memory, "empty").pop_item()) is None


def test_the_model_receives_the_budgeted_context(cold_memory: Memory) -> None:
    s = TiermemSession(cold_memory, "long")
    # a long past the agent should not resend whole
    past: list[dict[str, Any]] = []
    for i in range(60):
        past += [{"role": "user", "content": f"Note {i}: my seat preference is row {i}, and I like tea."},
                 {"role": "assistant", "content": f"Noted {i}."}]
    cold_memory.append_many("long", past)
    budget = 600
    model = asyncio.run(_run(s, run_config=RunConfig(tracing_disabled=True,
                                                     call_model_input_filter=s.model_input_filter(budget))))
    assert len(model.calls) == 4
    for call in model.calls:
        items = list(call.input)
        corpus.valid_responses(items)
        assert messages_tokens(cold_memory.tokens, items) <= budget
        assert len(items) < len(past)  # not the whole history
        assert call.system_instructions == "Be brief."
    # the tool call's output reached the model with its call, and the latest user turn is last
    second = list(model.calls[1].input)
    assert [i.get("type") for i in second[-2:]] == ["function_call", "function_call_output"]
    assert list(model.calls[3].input)[-1] == {"role": "user", "content": TURNS[2]}

"""`RunConfig(reasoning_item_id_policy="omit")`: the Agents SDK saves (and sends) its
reasoning items without an `id`, and tiermem stores them so.

The SDK's option (for providers and gateways that refuse a reasoning id they did not
keep) strips the id from the reasoning items it sends and saves; the provider reads the
item's `encrypted_content` or summary instead. tiermem required the id on append
(`messages[0].id: Field required`): the run failed after the model answered, and only
the user turn was stored. Now an item without an id is stored and returned as given,
and the next turn's model input equals what the SDK's own `SQLiteSession` gives it. An
id that is given is still checked (`tests/test_reasoning_id_required.py`). Real SQLite,
the real `openai-agents` Runner with its ScriptedModel.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")
from agents import Agent, RunConfig, Runner, SQLiteSession, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from openai.types.responses import ResponseReasoningItem
from openai.types.responses.response_reasoning_item import Summary

from tiermem.adapters.openai_agents import TiermemSession
from tiermem.config import Config
from tiermem.memory import Memory
from tiermem.tiers.embed_onnx import FastEmbedder

CONV = "c"
TURNS = ["Weather in Lisbon?", "And tomorrow?"]
ENCRYPTED = "gAAAAB-reasoning"
BUDGET_TOKENS = 2000


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def reasoning(**fields: Any) -> ResponseReasoningItem:
    return ResponseReasoningItem(id="rs_1", type="reasoning", **fields)


# what the model's reasoning carries: the provider reads one of these when the id is gone
REASONING: dict[str, dict[str, Any]] = {
    # encrypted content (store=False, include=["reasoning.encrypted_content"])
    "encrypted": {"summary": [], "encrypted_content": ENCRYPTED},
    # a summary only
    "summary": {"summary": [Summary(text="Look it up.", type="summary_text")]},
    # both, as the reviewer's run had it
    "both": {"summary": [Summary(text="Look it up.", type="summary_text")], "encrypted_content": ENCRYPTED},
    # neither (a model asked for no summary, store=True): the SDK saves and sends
    # {"type": "reasoning", "summary": []}, so tiermem stores it too, not refused
    "nothing": {"summary": []},
}


def script(fields: dict[str, Any]) -> list[list[Any]]:
    return [[reasoning(**fields), function_call("weather", {"city": "Lisbon"}, call_id="call_1")],
            [assistant_message("Sunny.", item_id="msg_1")],
            [assistant_message("Sunny again.", item_id="msg_2")]]


async def run(session: Any, fields: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """Both turns with the ids omitted; the input of every model call."""
    model = ScriptedModel(script(fields))
    agent = Agent(name="a", instructions="Be brief.", model=model, tools=[weather])
    config = RunConfig(reasoning_item_id_policy="omit", tracing_disabled=True)
    for turn in TURNS:
        await Runner.run(agent, turn, session=session, run_config=config)
    return [[dict(i) for i in c.input] for c in model.calls]


def _open(data: Path, embedder: FastEmbedder) -> Memory:
    return Memory(Config(data_dir=data), embedder=embedder, hot=False, background_indexing=False)


@pytest.mark.parametrize("fields", REASONING.values(), ids=REASONING.keys())
def test_the_items_are_stored_and_returned_as_the_sdks_own_session(tmp_path: Path, embedder: FastEmbedder,
                                                                   fields: dict[str, Any]) -> None:
    ref = SQLiteSession("ref")
    ref_inputs = asyncio.run(run(ref, fields))
    expected = asyncio.run(ref.get_items())
    (saved,) = [i for i in expected if i.get("type") == "reasoning"]
    assert "id" not in saved  # the SDK saved it without one
    with _open(tmp_path / "d", embedder) as mem:
        session = TiermemSession(mem, CONV)
        inputs = asyncio.run(run(session, fields))  # failed before: "messages[0].id: Field required"
        assert [m.body for m in mem.history(CONV)] == expected
        assert asyncio.run(session.get_items()) == expected
        # the second turn's model got the reasoning back, as over the SDK's own session
        assert inputs == ref_inputs
        assert saved in inputs[-1]


@pytest.mark.parametrize("fields", REASONING.values(), ids=REASONING.keys())
def test_the_filter_plans_the_turn(tmp_path: Path, embedder: FastEmbedder, fields: dict[str, Any]) -> None:
    # the recipe with model_input_filter: the reasoning goes out with its call, without an id
    with _open(tmp_path / "d", embedder) as mem:
        session = TiermemSession(mem, CONV)
        asyncio.run(run(session, fields))
        items = session.context_items(TURNS[-1], BUDGET_TOKENS)
        sent = [i for i in items if i.get("type") == "reasoning"]
        assert len(sent) == 1 and "id" not in sent[0]
        assert items[items.index(sent[0]) + 1]["type"] == "function_call"  # its unit kept whole

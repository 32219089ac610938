"""`model_input_filter` in streamed runs (`Runner.run_streamed`): the model gets the new
question.

The filter plans the model's input from the session's log, relying on the SDK having
saved the run's items before each model call. A non-streamed run saves its new input
before the first model call; a streamed one only after it. So a streamed first turn of a
new conversation failed (`ConversationNotFound`), and a streamed turn of an existing one
silently sent the model the history without the new question. Now the input's items the
log does not hold yet follow the planned context, in order, as the SDK gave them, and a
conversation not stored yet is planned from the input alone. Real SQLite, the real
`openai-agents` Runner (streamed and not) with its ScriptedModel; what each model call
received is read from the model.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")
from agents import Agent, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from agents_helpers import filter_config, open_memory, run_turn

from tiermem.adapters.openai_agents import TiermemSession
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.formats import message_text

CONV = "c"
BUDGET_TOKENS = 2000


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def said(items: list[dict[str, Any]]) -> list[str]:
    """The conversation's turns in `items`: `role: text`, a call by its id, an output by its call's."""
    out = []
    for i in items:
        t = i.get("type")
        if t == "function_call":
            out.append(f"call {i['call_id']}")
        elif t == "function_call_output":
            out.append(f"output {i['call_id']}")
        elif i.get("role") in ("user", "assistant"):
            out.append(f"{i['role']}: {message_text(i)}")
    return out


async def turn(agent: Agent[Any], text: str, session: TiermemSession, *, streamed: bool) -> None:
    await run_turn(agent, text, session, filter_config(session, BUDGET_TOKENS), streamed=streamed)


# (the turns: text and whether streamed; the model's replies; what each model call got)
SCENARIOS: dict[str, tuple[list[tuple[str, bool]], list[list[Any]], list[list[str]]]] = {
    # a new conversation's first turn streamed: failed with ConversationNotFound
    "new conversation": (
        [("I am Ana.", True)],
        [[assistant_message("Hi Ana.")]],
        [["user: I am Ana."]]),
    # the second turn streamed: the model got the history without the question
    "existing conversation": (
        [("I am Ana.", False), ("What is my name?", True)],
        [[assistant_message("Hi Ana.")], [assistant_message("Ana.")]],
        [["user: I am Ana."], ["user: I am Ana.", "assistant: Hi Ana.", "user: What is my name?"]]),
    # a tool round in a streamed turn: the call and its output, each once (saved by then)
    "tool round": (
        [("I am Ana.", True), ("Weather in Lisbon?", True)],
        [[assistant_message("Hi Ana.")], [function_call("weather", {"city": "Lisbon"}, call_id="call_1")],
         [assistant_message("Sunny.")]],
        [["user: I am Ana."], ["user: I am Ana.", "assistant: Hi Ana.", "user: Weather in Lisbon?"],
         ["user: I am Ana.", "assistant: Hi Ana.", "user: Weather in Lisbon?", "call call_1", "output call_1"]]),
    # a question equal to one stored before: the new one is sent too
    "repeated question": (
        [("Yes.", False), ("Yes.", True)],
        [[assistant_message("Sure?")], [assistant_message("Done.")]],
        [["user: Yes."], ["user: Yes.", "assistant: Sure?", "user: Yes."]]),
    # non-streamed turns as before: nothing twice
    "not streamed": (
        [("I am Ana.", False), ("What is my name?", False)],
        [[assistant_message("Hi Ana.")], [assistant_message("Ana.")]],
        [["user: I am Ana."], ["user: I am Ana.", "assistant: Hi Ana.", "user: What is my name?"]]),
}


@pytest.mark.parametrize("name", SCENARIOS)
def test_each_model_call_gets_the_new_question(tmp_path: Path, embedder: FastEmbedder, name: str) -> None:
    turns, replies, expected = SCENARIOS[name]
    with open_memory(tmp_path / "d", embedder) as mem:
        session = TiermemSession(mem, CONV)
        model = ScriptedModel(replies)
        agent = Agent(name="a", instructions="Be brief.", model=model, tools=[weather])
        for text, streamed in turns:
            asyncio.run(turn(agent, text, session, streamed=streamed))
        assert [said([dict(i) for i in c.input]) for c in model.calls] == expected
        # the log holds each turn's question once, and the model's every call and reply
        log = said(asyncio.run(session.get_items()))
        assert [x for x in log if x.startswith("user: ")] == [f"user: {text}" for text, _streamed in turns]
        assert len(log) == len(expected[-1]) + 1  # the last call's input and its reply


def test_a_session_that_reads_no_history_still_sends_the_question(tmp_path: Path, embedder: FastEmbedder) -> None:
    # session_settings limit 0: the SDK's input holds no history; the items after what it
    # read (nothing) are the new ones
    with open_memory(tmp_path / "d", embedder) as mem:
        session = TiermemSession(mem, CONV, session_settings={"limit": 0})
        model = ScriptedModel([[assistant_message("Hi Ana.")], [assistant_message("Ana.")]])
        agent = Agent(name="a", instructions="Be brief.", model=model)
        asyncio.run(turn(agent, "I am Ana.", session, streamed=False))
        asyncio.run(turn(agent, "What is my name?", session, streamed=True))
        assert said([dict(i) for i in model.calls[1].input]) == [
            "user: I am Ana.", "assistant: Hi Ana.", "user: What is my name?"]


def test_a_namespaced_view_plans_a_new_conversation_from_the_input(tmp_path: Path, embedder: FastEmbedder) -> None:
    # the reviewer's case: a namespace's first conversation, its first turn streamed
    with open_memory(tmp_path / "d", embedder) as mem:
        session = TiermemSession(mem.namespaced("A"), CONV)
        model = ScriptedModel([[assistant_message("Hi Ana.")]])
        asyncio.run(turn(Agent(name="a", instructions="x", model=model), "I am Ana.", session, streamed=True))
        assert said([dict(i) for i in model.calls[0].input]) == ["user: I am Ana."]
        assert said(asyncio.run(session.get_items())) == ["user: I am Ana.", "assistant: Hi Ana."]

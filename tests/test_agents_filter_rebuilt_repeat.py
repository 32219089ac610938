"""`model_input_filter` where the SDK rebuilt its input: a question asked again is sent.

The filter tells the input's items the log does not hold yet (a streamed run saves its
new input only after the first model call) by position where the input is the history
the session returned then the new items (4e711e2); where the SDK rebuilt it (a
`session_input_callback`), it matched them by content: a new question equal to one
stored before was taken for the stored one, and the model's first call of a streamed
turn got the old exchange without the question. Now, before the run saved anything,
the new items are told by count (`unsaved_items`, `_unsaved_by_count`): the input's last
item and every item it holds more often than the history read. Real SQLite, the real
`openai-agents` Runner, streamed and not, with its ScriptedModel.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")
from agents import Agent
from agents.testing import ScriptedModel, assistant_message
from agents_helpers import filter_config, open_memory, run_turn

from tiermem.adapters.openai_agents import TiermemSession
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.formats import message_text

CONV = "c"
BUDGET_TOKENS = 2000
QUESTION = "What is the weather in Lisbon?"

Callback = Callable[[list[Any], list[Any]], list[Any]]
# the session_input_callback: how the SDK rebuilds the second turn's input
CALLBACKS: dict[str, Callback] = {
    # the new items alone (the history left to the filter's plan)
    "new items only": lambda history, new: new,
    # the user's messages of the history, then the new ones: the question twice
    "user messages only": lambda history, new: [i for i in history if i.get("role") == "user"] + new,
    # the new items first, then the history
    "new items first": lambda history, new: new + history,
}


def said(items: Any) -> list[str]:
    return [f"{dict(i)['role']}: {message_text(dict(i))}" for i in items if dict(i).get("role")]


async def turn(agent: Agent[Any], session: TiermemSession, callback: Callback | None, *, streamed: bool) -> None:
    config = filter_config(session, BUDGET_TOKENS, session_input_callback=callback)
    await run_turn(agent, QUESTION, session, config, streamed=streamed)


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
@pytest.mark.parametrize("name", CALLBACKS)
def test_the_question_asked_again_is_sent(tmp_path: Path, embedder: FastEmbedder, name: str, streamed: bool) -> None:
    with open_memory(tmp_path / "d", embedder) as mem:
        session = TiermemSession(mem, CONV)
        model = ScriptedModel([[assistant_message("Sunny.")], [assistant_message("Still sunny.")]])
        agent = Agent(name="a", instructions="Be brief.", model=model)
        asyncio.run(turn(agent, session, None, streamed=False))
        asyncio.run(turn(agent, session, CALLBACKS[name], streamed=streamed))
        # the old exchange, planned from the log, then the question (failed before, the
        # streamed runs of the first two callbacks: the question was left out)
        assert said(model.calls[-1].input) == [f"user: {QUESTION}", "assistant: Sunny.", f"user: {QUESTION}"]
        # the log holds each turn's question once
        assert said(asyncio.run(session.get_items())) == [f"user: {QUESTION}", "assistant: Sunny.",
                                                           f"user: {QUESTION}", "assistant: Still sunny."]


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
def test_a_question_the_log_ends_with_is_sent_again(tmp_path: Path, embedder: FastEmbedder, streamed: bool) -> None:
    # a run that failed after saving its question: the log ends with it; asked again with
    # the new items alone, the input is one item equal to the history the SDK read
    # (failed before, streamed: matched to it by position, the question left out)
    with open_memory(tmp_path / "d", embedder) as mem:
        mem.append(CONV, {"role": "user", "content": QUESTION})
        session = TiermemSession(mem, CONV, session_settings={"limit": 1})
        model = ScriptedModel([[assistant_message("Sunny.")]])
        agent = Agent(name="a", instructions="Be brief.", model=model)
        asyncio.run(turn(agent, session, CALLBACKS["new items only"], streamed=streamed))
        sent = said(model.calls[-1].input)
        # streamed: the stored question and the new one (the new one is not saved yet);
        # not streamed: both are saved, and planned from the log
        assert sent == [f"user: {QUESTION}", f"user: {QUESTION}"]

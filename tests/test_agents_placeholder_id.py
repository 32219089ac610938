"""A context sends no item under the Agents SDK's placeholder id (`__fake_id__`).

The SDK writes `FAKE_RESPONSES_ID` as the id of every item it makes from a Chat
Completions reply (reasoning, message, function_call): no provider gave it. tiermem's
Responses context form (`context_format="responses"`, `"as_stored"`, the session's
`context_items`) sent the reasoning and message items with it: the Responses API looks a
given item id up ("Item with id '__fake_id__' not found") and refuses one id on two
items. The SDK strips the placeholder from every item before a Responses request
(`OpenAIResponsesModel._clean_item_for_openai`); a context leaves it out too
(`tiers.formats.wire_body`), the item kept (a reasoning item by its summary, as the
SDK's own `reasoning_item_id_policy="omit"` sends one). History and `get_items` keep it,
as the SDK's `SQLiteSession` does. Real SQLite, the real Runner with its ScriptedModel
answering with the SDK's own Chat Completions converter's items.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")
from agents import Agent, RunConfig, Runner, function_tool
from agents.models.chatcmpl_converter import Converter
from agents.models.fake_id import FAKE_RESPONSES_ID
from agents.testing import ScriptedModel
from openai.types.chat import ChatCompletionMessage, ChatCompletionMessageFunctionToolCall

from tiermem.adapters.openai_agents import TiermemSession
from tiermem.config import Config
from tiermem.memory import Memory
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.formats import wire_body

CONV = "c"
BUDGET_TOKENS = 3000
QUESTION = "Weather in Lisbon?"


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


CALL = ChatCompletionMessageFunctionToolCall(id="call_1", type="function",
                                             function={"name": "weather", "arguments": '{"city":"Lisbon"}'})
# DeepSeek's reasoning_content on both replies: two reasoning items and a message, all
# under the placeholder
REPLIES = [ChatCompletionMessage(role="assistant", content=None, reasoning_content="Look it up.", tool_calls=[CALL]),
           ChatCompletionMessage(role="assistant", content="Sunny.", reasoning_content="Say it.")]


def test_the_constant_is_the_sdks() -> None:
    from tiermem.tiers.formats import SDK_PLACEHOLDER_ID  # tiermem does not import the SDK

    assert SDK_PLACEHOLDER_ID == FAKE_RESPONSES_ID


def _stored(mem: Memory) -> None:
    model = ScriptedModel([Converter.message_to_output_items(m, provider_data={"model": "deepseek-reasoner"})
                           for m in REPLIES])
    agent = Agent(name="a", instructions="Be brief.", model=model, tools=[weather])
    asyncio.run(Runner.run(agent, QUESTION, session=TiermemSession(mem, CONV), run_config=RunConfig(tracing_disabled=True)))


# each Responses form a context takes (chat has no item ids)
FORMATS = ["as_stored", "responses", "context_items"]


@pytest.mark.parametrize("form", FORMATS)
def test_no_context_item_has_the_placeholder_id(tmp_path: Path, embedder: FastEmbedder, form: str) -> None:
    fmt = "responses" if form == "context_items" else form
    with Memory(Config(data_dir=tmp_path / "d", context_format=fmt), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        _stored(mem)
        placeholders = [m.body for m in mem.history(CONV) if m.body.get("id") == FAKE_RESPONSES_ID]
        assert [b["type"] for b in placeholders] == ["reasoning", "function_call", "reasoning", "message"]
        if form == "context_items":
            items = TiermemSession(mem, CONV).context_items(QUESTION, BUDGET_TOKENS)
        else:
            items = mem.context(CONV, QUESTION, BUDGET_TOKENS).messages
        # failed before: both reasoning items and the message went with it
        assert [i for i in items if i.get("id") == FAKE_RESPONSES_ID] == []
        if fmt == "responses":
            # a Responses-form context leaves another provider's reasoning out, as the
            # SDK's OpenAIResponsesModel does (test_responses_foreign_reasoning.py; the
            # planner may show a left-out turn's text in its memory block)
            assert [i.get("type") or i.get("role") for i in items if i.get("role") != "system"] == [
                "user", "function_call", "function_call_output", "message"]
            assert not [i for i in items if i.get("type") == "reasoning"]
        else:
            # every item is still sent, its reasoning by its summary
            assert [i.get("type") or i.get("role") for i in items] == [
                "user", "reasoning", "function_call", "function_call_output", "reasoning", "message"]
            assert [i["summary"][0]["text"] for i in items if i.get("type") == "reasoning"] == ["Look it up.",
                                                                                                  "Say it."]
        # the session returns the items as stored, placeholder and all (as SQLiteSession)
        got = asyncio.run(TiermemSession(mem, CONV).get_items())
        assert [i.get("id") for i in got if i.get("type") in ("reasoning", "message")] == [FAKE_RESPONSES_ID] * 3


# (a stored item, its wire form): the placeholder goes on every item type, a real id stays
WIRE: list[tuple[dict[str, Any], dict[str, Any]]] = [
    # a Chat Completions model's reasoning: id and provider_data out
    ({"type": "reasoning", "id": FAKE_RESPONSES_ID, "summary": [], "provider_data": {"model": "m"}},
     {"type": "reasoning", "summary": []}),
    # its message: its text (output parts and a status without a provider's id are no
    # request type's; the session's filter gives the SDK them back: sdk_input_fields)
    ({"type": "message", "id": FAKE_RESPONSES_ID, "role": "assistant", "status": "completed",
      "content": [{"type": "output_text", "text": "Hi.", "annotations": []}]},
     {"type": "message", "role": "assistant", "content": "Hi."}),
    # its call
    ({"type": "function_call", "id": FAKE_RESPONSES_ID, "call_id": "c1", "name": "f", "arguments": "{}"},
     {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}),
    # a provider's own id: kept
    ({"type": "reasoning", "id": "rs_1", "summary": []}, {"type": "reasoning", "id": "rs_1", "summary": []}),
]


@pytest.mark.parametrize(("stored", "wire"), WIRE, ids=["reasoning", "message", "function_call", "real id"])
def test_wire_form(stored: dict[str, Any], wire: dict[str, Any]) -> None:
    assert wire_body(stored) == wire
    assert stored.get("id") in (FAKE_RESPONSES_ID, "rs_1")  # the caller's body unchanged

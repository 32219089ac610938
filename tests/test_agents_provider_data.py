"""The Agents SDK's `provider_data` on the items of a Chat Completions model's reply is
stored, and returned to the session as the SDK gave it.

With any Chat Completions model (`OpenAIChatCompletionsModel`, LiteLLM, any-llm) the SDK
puts `provider_data` (the model, the response id, and what the provider needs back:
Anthropic thinking blocks, Gemini thought signatures) on every reasoning, message and
function_call item of a reply, and saves them so. tiermem refused the field
(`messages[0].provider_data: is not a field of a Responses message`): the run failed
after the model answered and only the user turn was stored. Now it is kept in history
and returned by `get_items` as given (the SDK reads it when it sends the item to such a
model again), and left out of every context tiermem plans (no OpenAI request type has
it; the SDK strips it itself before a Responses request). Real SQLite, the real
`openai-agents` Runner with its ScriptedModel answering with the items the SDK's own
Chat Completions converter makes of a reply (what `OpenAIChatCompletionsModel` does with
the provider's answer), the SDK's `SQLiteSession` as the reference.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")
from agents import Agent, RunConfig, Runner, SQLiteSession, function_tool
from agents.models.chatcmpl_converter import Converter
from agents.models.fake_id import FAKE_RESPONSES_ID
from agents.testing import ScriptedModel
from openai.types.chat import ChatCompletionMessage, ChatCompletionMessageFunctionToolCall

from tiermem.adapters.openai_agents import TiermemSession
from tiermem.config import Config
from tiermem.errors import ValidationError
from tiermem.memory import Memory
from tiermem.tiers.embed_onnx import FastEmbedder

CONV = "c"
MODEL = "deepseek-reasoner"
TURNS = ["Weather in Lisbon and Porto?", "And Faro?"]
BUDGET_TOKENS = 3000


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def call(cid: str, city: str, **extra: Any) -> ChatCompletionMessageFunctionToolCall:
    return ChatCompletionMessageFunctionToolCall(id=cid, type="function", **extra,
                                                 function={"name": "weather", "arguments": f'{{"city":"{city}"}}'})


def reply(message: ChatCompletionMessage, response_id: str) -> list[Any]:
    """The items OpenAIChatCompletionsModel makes of a provider's reply."""
    return Converter.message_to_output_items(message, provider_data={"model": MODEL, "response_id": response_id})


THINKING = [{"type": "thinking", "thinking": "Two cities: two calls.", "signature": "c2lnLTE="}]
SCRIPTS: dict[str, list[ChatCompletionMessage]] = {
    # a plain text reply: one message item with {"model", "response_id"}
    "plain text": [ChatCompletionMessage(role="assistant", content="Both sunny."),
                   ChatCompletionMessage(role="assistant", content="Faro too.")],
    # DeepSeek's reasoning_content (a reasoning item) with parallel calls
    "reasoning and parallel calls": [
        ChatCompletionMessage(role="assistant", content=None, reasoning_content="Two cities.",
                              tool_calls=[call("call_a", "Lisbon"), call("call_b", "Porto")]),
        ChatCompletionMessage(role="assistant", content="Both sunny.", reasoning_content="Summarize."),
        ChatCompletionMessage(role="assistant", content="Faro too.")],
    # Gemini: the thought signature of a call, which it needs back with the call
    "gemini thought signature": [
        ChatCompletionMessage(role="assistant", content=None, tool_calls=[
            call("call_g", "Lisbon", extra_content={"google": {"thought_signature": "dGhvdWdodA=="}})]),
        ChatCompletionMessage(role="assistant", content="Sunny."),
        ChatCompletionMessage(role="assistant", content="Faro too.")],
    # Anthropic over LiteLLM: thinking blocks (their signatures) in the reasoning's provider_data
    "anthropic thinking blocks": [
        ChatCompletionMessage(role="assistant", content=None, thinking_blocks=THINKING,
                              tool_calls=[call("toolu_1", "Lisbon")]),
        ChatCompletionMessage(role="assistant", content="Sunny."),
        ChatCompletionMessage(role="assistant", content="Faro too.")],
}

# the provider_data key each script's items carry
KEPT = {"plain text": "response_id", "reasoning and parallel calls": "response_id",
        "gemini thought signature": "thought_signature", "anthropic thinking blocks": "thinking_blocks"}


def _open(data: Path, embedder: FastEmbedder, **config: Any) -> Memory:
    return Memory(Config(data_dir=data, **config), embedder=embedder, hot=False, background_indexing=False)


def calls_without_fake_ids(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`items` less the SDK's placeholder id on call items: the SDK writes `__fake_id__` on
    every item of a Chat Completions reply, and a session sends an item id of a call once
    (`tiers.formats`, "Ids sent": a repeat goes without one; the SDK drops the placeholder
    before a Responses request anyway)."""
    return [{k: v for k, v in i.items() if not (k == "id" and v == FAKE_RESPONSES_ID)}
            if i.get("type") == "function_call" else i for i in items]


async def run(session: Any, messages: list[ChatCompletionMessage]) -> list[list[dict[str, Any]]]:
    """Both turns over `session`; the input of every model call."""
    model = ScriptedModel([reply(m, f"chatcmpl-{i}") for i, m in enumerate(messages)])
    agent = Agent(name="a", instructions="Be brief.", model=model, tools=[weather])
    for turn in TURNS:
        await Runner.run(agent, turn, session=session, run_config=RunConfig(tracing_disabled=True))
    return [[dict(i) for i in c.input] for c in model.calls]


@pytest.mark.parametrize("case", SCRIPTS)
def test_the_items_are_stored_and_returned_as_the_sdk_gave_them(tmp_path: Path, embedder: FastEmbedder,
                                                               case: str) -> None:
    messages = SCRIPTS[case]
    ref = SQLiteSession("ref")
    ref_inputs = asyncio.run(run(ref, messages))
    expected = asyncio.run(ref.get_items())
    # the SDK put provider_data on the reply's items, with what the provider needs back
    assert any(KEPT[case] in i.get("provider_data", {}) for i in expected)
    with _open(tmp_path / "d", embedder) as mem:
        session = TiermemSession(mem, CONV)
        inputs = asyncio.run(run(session, messages))  # failed before: the reply's items refused
        assert [m.body for m in mem.history(CONV)] == expected  # stored as given
        got = asyncio.run(session.get_items())
        assert calls_without_fake_ids(got) == calls_without_fake_ids(expected)
        assert [i.get("provider_data") for i in got] == [i.get("provider_data") for i in expected]
        # the model got back what it gets over the SDK's own session (thinking blocks,
        # thought signatures: the SDK reads them from provider_data)
        assert [calls_without_fake_ids(i) for i in inputs] == [calls_without_fake_ids(i) for i in ref_inputs]


# every form a context takes: each leaves the field out
@pytest.mark.parametrize("context_format", ["as_stored", "responses", "chat"])
@pytest.mark.parametrize("messages", SCRIPTS.values(), ids=SCRIPTS.keys())
def test_no_context_sends_it(tmp_path: Path, embedder: FastEmbedder, messages: list[ChatCompletionMessage],
                            context_format: str) -> None:
    with _open(tmp_path / "d", embedder, context_format=context_format) as mem:
        asyncio.run(run(TiermemSession(mem, CONV), messages))
        ctx = mem.context(CONV, TURNS[-1], BUDGET_TOKENS)
        assert len(ctx.messages) >= len(TURNS) + 1  # the turns were planned, replies included
        assert not [m for m in ctx.messages if "provider_data" in m]
        # the filter's items too (what the model gets over model_input_filter)
        items = TiermemSession(mem, CONV).context_items(TURNS[-1], BUDGET_TOKENS)
        assert not [i for i in items if "provider_data" in i]
        assert any(i.get("role") == "assistant" for i in items)


ITEM = {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": "{}"}
REFUSED: list[tuple[object, str]] = [
    # a string: the SDK's provider_data is a dict
    ("deepseek", "must be an object, got str"),
    # a list (of thinking blocks, not the object holding them)
    (THINKING, "must be an object, got list"),
    # a number
    (7, "must be an object, got int"),
]


@pytest.mark.parametrize(("value", "problem"), REFUSED, ids=["str", "list", "int"])
def test_provider_data_that_is_no_object_is_refused(tmp_path: Path, embedder: FastEmbedder, value: object,
                                                    problem: str) -> None:
    with _open(tmp_path / "d", embedder) as mem:
        mem.append(CONV, {"role": "user", "content": "Weather?"})
        with pytest.raises(ValidationError) as info:
            mem.append_many(CONV, [{**ITEM, "provider_data": value}])
        assert str(info.value) == f"messages[0].provider_data: {problem} (the Agents SDK's provider data of the item)"
        assert len(mem.history(CONV)) == 1  # nothing of the batch written


ACCEPTED: list[dict[str, Any]] = [
    # an explicit null (a dump of an item built without one)
    {**ITEM, "provider_data": None},
    # on every kind the SDK writes it on, and the others of the family
    {"type": "function_call_output", "call_id": "call_1", "output": "sunny", "provider_data": {"k": 1}},
    {"type": "custom_tool_call", "call_id": "call_2", "name": "sh", "input": "ls", "provider_data": {"k": 1}},
    {"type": "custom_tool_call_output", "call_id": "call_2", "output": "a", "provider_data": {}},
    {"type": "reasoning", "id": "rs_1", "summary": [], "provider_data": {"model": MODEL}},
    {"role": "assistant", "content": [{"type": "output_text", "text": "Sunny."}], "provider_data": {"model": MODEL}},
]


def test_every_item_kind_keeps_it(tmp_path: Path, embedder: FastEmbedder) -> None:
    with _open(tmp_path / "d", embedder) as mem:
        batch = [{"role": "user", "content": "Weather?"}, *ACCEPTED]
        mem.append_many(CONV, batch)
        assert [m.body for m in mem.history(CONV)] == batch
        assert asyncio.run(TiermemSession(mem, CONV).get_items()) == batch


LONG_THINKING_CHARS = 40_000  # a long extended thinking: past MAX_ENVELOPE_BYTES (32 KiB)


def test_long_thinking_blocks_count_as_payload_not_envelope(tmp_path: Path, embedder: FastEmbedder) -> None:
    # the thinking blocks hold the thinking itself: a payload (max_content_bytes), not an
    # envelope of ids and statuses, whose 32 KiB bound would refuse a long thinking
    blocks = [{"type": "thinking", "thinking": "x" * LONG_THINKING_CHARS, "signature": "c2ln"}]
    item = {"type": "reasoning", "id": FAKE_RESPONSES_ID, "summary": [],
            "provider_data": {"model": MODEL, "thinking_blocks": blocks}}
    with _open(tmp_path / "d", embedder) as mem:
        mem.append_many(CONV, [{"role": "user", "content": "Think."}, item])
        assert mem.history(CONV)[1].body == item

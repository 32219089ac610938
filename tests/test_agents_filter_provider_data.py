"""`model_input_filter` gives the model the log's items with their `provider_data`, as
the SDK's own input does.

With a Chat Completions model (`OpenAIChatCompletionsModel`, LiteLLM, any-llm) the SDK
puts `provider_data` on the items of a reply, and its converter reads it when it sends
them again: a Gemini call's `thought_signature` goes back as the call's
`extra_content` (Gemini refuses a call of the current turn without it), Anthropic
thinking blocks go back with their signatures. The session returns the field
(5365367), but the filter sent the context in wire form, without it: the model got
the calls and reasoning bare. Now each item the log holds carries the field it was
stored with, as over the SDK's own `SQLiteSession`; an OpenAI Responses model strips
it itself (and leaves out another provider's reasoning), so what it sends is the same
too. Real SQLite, the real `openai-agents` Runner, streamed and not, its ScriptedModel
answering with the items the SDK's own Chat Completions converter makes of a reply.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")
from agents import Agent, OpenAIResponsesModel, RunConfig, SQLiteSession, function_tool
from agents.models.chatcmpl_converter import Converter
from agents.testing import ScriptedModel
from agents_helpers import open_memory, run_turn
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletionMessage, ChatCompletionMessageFunctionToolCall

from tiermem.adapters.openai_agents import TiermemSession
from tiermem.tiers.embed_onnx import FastEmbedder

CONV = "c"
BUDGET_TOKENS = 3000  # the whole conversation fits: the context holds every item
TURNS = ["Weather in Lisbon?", "And Porto?"]
SIGNATURE = "dGhvdWdodA=="


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def call(cid: str, city: str, **extra: Any) -> ChatCompletionMessageFunctionToolCall:
    return ChatCompletionMessageFunctionToolCall(id=cid, type="function", **extra,
                                                 function={"name": "weather", "arguments": f'{{"city":"{city}"}}'})


def signed(cid: str, city: str) -> ChatCompletionMessageFunctionToolCall:
    return call(cid, city, extra_content={"google": {"thought_signature": SIGNATURE}})


THINKING = [{"type": "thinking", "thinking": "One call.", "signature": "c2lnLTE="}]
# (the model name, its replies: a call round and a text reply per turn)
SCRIPTS: dict[str, tuple[str, list[ChatCompletionMessage]]] = {
    # Gemini: each call's thought signature, refused without it on the current turn
    "gemini thought signatures": ("gemini-2.5-flash", [
        ChatCompletionMessage(role="assistant", content=None, tool_calls=[signed("call_g1", "Lisbon")]),
        ChatCompletionMessage(role="assistant", content="Sunny."),
        ChatCompletionMessage(role="assistant", content=None, tool_calls=[signed("call_g2", "Porto")]),
        ChatCompletionMessage(role="assistant", content="Sunny too.")]),
    # Anthropic over LiteLLM: thinking blocks in the reasoning item's provider_data
    "anthropic thinking blocks": ("anthropic/claude-sonnet-4-5", [
        ChatCompletionMessage(role="assistant", content=None, thinking_blocks=THINKING,
                              tool_calls=[call("toolu_1", "Lisbon")]),
        ChatCompletionMessage(role="assistant", content="Sunny."),
        ChatCompletionMessage(role="assistant", content=None, thinking_blocks=THINKING,
                              tool_calls=[call("toolu_2", "Porto")]),
        ChatCompletionMessage(role="assistant", content="Sunny too.")]),
    # DeepSeek's reasoning_content: each reply's model and response id, two replies alike
    # but for them ("Sunny." twice: the n-th planned one gets the n-th row's)
    "deepseek reasoning": ("deepseek-reasoner", [
        ChatCompletionMessage(role="assistant", content=None, reasoning_content="Look it up.",
                              tool_calls=[call("call_d1", "Lisbon")]),
        ChatCompletionMessage(role="assistant", content="Sunny."),
        ChatCompletionMessage(role="assistant", content=None, reasoning_content="Look it up.",
                              tool_calls=[call("call_d2", "Porto")]),
        ChatCompletionMessage(role="assistant", content="Sunny.")]),
}


def kind(item: dict[str, Any]) -> str:
    return str(item.get("type") or item.get("role"))


def model_of(name: str) -> ScriptedModel:
    model, messages = SCRIPTS[name]
    return ScriptedModel([Converter.message_to_output_items(m, provider_data={"model": model, "response_id": f"r{i}"})
                          for i, m in enumerate(messages)])


async def run(session: Any, model: ScriptedModel, config: RunConfig, *, streamed: bool) -> list[list[dict[str, Any]]]:
    """Both turns over `session`; the input of every model call."""
    agent = Agent(name="a", instructions="Be brief.", model=model, tools=[weather])
    for text in TURNS:
        await run_turn(agent, text, session, config, streamed=streamed)
    return [[dict(i) for i in c.input] for c in model.calls]


def responses_request(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What an OpenAI Responses model sends of `items` (the SDK's own cleaning: provider
    data and placeholder ids out, another provider's reasoning left out)."""
    model = OpenAIResponsesModel(model="gpt-5", openai_client=AsyncOpenAI(api_key="unused", base_url="http://127.0.0.1:9"))
    return [{k: v for k, v in i.items() if v is not None}
            for i in model._remove_openai_responses_api_incompatible_fields([dict(i) for i in items])]


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
@pytest.mark.parametrize("name", SCRIPTS)
def test_the_filter_sends_the_stored_provider_data(tmp_path: Path, embedder: FastEmbedder, name: str,
                                                   streamed: bool) -> None:
    config = RunConfig(tracing_disabled=True)
    ref_inputs = asyncio.run(run(SQLiteSession("ref"), model_of(name), config, streamed=streamed))
    with open_memory(tmp_path / "d", embedder) as mem:
        session = TiermemSession(mem, CONV)
        config = RunConfig(tracing_disabled=True, call_model_input_filter=session.model_input_filter(BUDGET_TOKENS))
        inputs = asyncio.run(run(session, model_of(name), config, streamed=streamed))
    assert len(inputs) == len(ref_inputs) == 2 * len(TURNS)
    for got, ref in zip(inputs, ref_inputs, strict=True):
        # every item of the SDK's own input, with the provider data it carried there
        # (failed before: the filter's items had none)
        assert [(kind(i), i.get("provider_data")) for i in got] == [(kind(i), i.get("provider_data")) for i in ref]
        # an OpenAI Responses model sends the same either way
        assert responses_request(got) == responses_request(ref)
    model = SCRIPTS[name][0]
    last = Converter.items_to_messages(inputs[-1], model=model, preserve_thinking_blocks=True)
    ref_last = Converter.items_to_messages(ref_inputs[-1], model=model, preserve_thinking_blocks=True)
    # the Chat Completions request the provider gets: the same, signatures and thinking included
    assert last == ref_last
    if name == "gemini thought signatures":
        sent = [c.get("extra_content") for m in last for c in m.get("tool_calls") or []]  # type: ignore[union-attr]
        assert sent == [{"google": {"thought_signature": SIGNATURE}}] * 2
    if name == "anthropic thinking blocks":
        assert [m.get("thinking_blocks") for m in last if m.get("tool_calls")] == [THINKING, THINKING]

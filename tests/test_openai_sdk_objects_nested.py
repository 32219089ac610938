"""The openai SDK's objects inside a dict message append as their `model_dump()` would, at
any depth, through `Memory.append_many` and `Client` / `AsyncClient.append_many`; what is
still no JSON after that is refused naming where.

The OpenAI tool loop builds the assistant turn by hand:
`{"role": "assistant", "content": None, "tool_calls": completion.choices[0].message.tool_calls}`
(a list of `ChatCompletionMessageFunctionToolCall` objects), and a Responses loop keeps an
input list mixing dicts and `response.output` items. Before, both ways in refused the dict
(`messages[1].tool_calls[0]: must be an object, got ChatCompletionMessageFunctionToolCall`):
`parse_message` converted an SDK object only at the top of a message. A value JSON has no
form for inside a message's opaque payload (a date, NaN, any object) was refused as
`message: is not JSON-serializable`, naming no place. The SDK's own classes, built from
JSON with the installed `openai` package (no network); the client against a real
`tiermem serve --no-auth` child.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openai.types.chat import ChatCompletion, ParsedChatCompletionMessage, ParsedFunctionToolCall
from openai.types.chat.parsed_function_tool_call import ParsedFunction
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseReasoningItem,
)
from pydantic import BaseModel
from service_helpers import serve_open

from tiermem import Config, Memory
from tiermem.client import AsyncClient, Client
from tiermem.errors import ConversationNotFound, ValidationError
from tiermem.tiers.embed_onnx import FastEmbedder

NS = "oai"
# a tool call's arguments as a model wrote them: odd spacing, a newline, non-ASCII, escapes
# and a number JSON would reformat; stored and sent byte for byte, never re-encoded
ARGS = '{"city": "T\u014dky\u014d",\n  "note":"caf\\u00e9 \\"x\\""  , "n": 1.50}'
COMPLETION = ChatCompletion.model_validate({
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1765000000, "model": "gpt-4.1",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": None, "message": {
        "role": "assistant", "content": None, "refusal": None,
        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": ARGS}},
                       {"id": "call_2", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}]}}]})
TOOL_CALLS = COMPLETION.choices[0].message.tool_calls
# chat.completions.parse() with pydantic_function_tool: each call carries parsed_arguments
PARSED = ParsedChatCompletionMessage[dict](  # type: ignore[index]
    role="assistant", content=None, parsed=None, tool_calls=[ParsedFunctionToolCall(
        id="call_3", type="function",
        function=ParsedFunction(name="book", arguments='{"seat": "3A"}', parsed_arguments={"seat": "3A"}))])
# response.output of a Responses call: reasoning, a function call, a reply message
REASONING = ResponseReasoningItem.model_validate({
    "type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Needs the forecast."}]})
CALL = ResponseFunctionToolCall.model_validate({
    "type": "function_call", "id": "fc_1", "call_id": "call_9", "name": "get_weather", "arguments": ARGS,
    "status": "completed"})
REPLY = ResponseOutputMessage.model_validate({
    "type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
    "content": [{"type": "output_text", "text": "Sunny, 24 C.", "annotations": []}]})
USER_CHAT = {"role": "user", "content": "Weather in Tokyo?"}
USER_ITEM = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather in Tokyo?"}]}

# (case id, the batch appended): each holds SDK objects inside dicts
BATCHES: list[tuple[str, list[Any]]] = [
    # the chat tool loop: the reply's tool_calls objects in a hand-built assistant dict
    ("chat-tool-calls-in-a-dict", [
        USER_CHAT, {"role": "assistant", "content": None, "tool_calls": TOOL_CALLS},
        {"role": "tool", "tool_call_id": "call_1", "content": "24 C"},
        {"role": "tool", "tool_call_id": "call_2", "content": "14:00"}]),
    # the same from chat.completions.parse(): parsed_arguments dropped as from the whole reply
    ("chat-parsed-tool-calls-in-a-dict", [
        USER_CHAT, {"role": "assistant", "content": None, "tool_calls": PARSED.tool_calls},
        {"role": "tool", "tool_call_id": "call_3", "content": "booked"}]),
    # the Responses loop: output items as objects (reasoning, call), dicts beside them, and
    # dicts holding the SDK's parts (a reasoning summary, a reply's content)
    ("responses-list-mixing-items-and-dicts", [
        USER_ITEM, REASONING, CALL, {"type": "function_call_output", "call_id": "call_9", "output": "24 C"},
        {"type": "reasoning", "id": "rs_2", "summary": REASONING.summary},
        {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed", "content": REPLY.content}]),
]

# (case id, the message appended after a plain user one, the field named, text the problem has)
REFUSED: list[tuple[str, dict[str, Any], str, str]] = [
    # a date in a dict call's opaque function payload, beside an SDK call that converts
    ("date-beside-an-sdk-call", {"role": "assistant", "content": None, "tool_calls": [
        TOOL_CALLS[0], {"id": "call_5", "type": "function",
                        "function": {"name": "f", "arguments": "{}", "when": dt.date(2026, 12, 24)}}]},
     "messages[1].tool_calls[1].function.when", "Object of type date is not JSON serializable"),
    # NaN in a hosted-tool item's payload
    ("nan-in-hosted-tool-item", {"type": "web_search_call", "id": "ws_1", "status": "completed",
                                 "action": {"type": "search", "query": "tokyo", "score": float("nan")}},
     "messages[1].action.score", "Out of range float values are not JSON compliant"),
    # an object that is no SDK object in a part, beside the SDK's parts
    ("object-beside-sdk-parts", {"type": "message", "role": "assistant", "content": [
        *REPLY.content, {"type": "output_text", "text": "x", "annotations": [], "extra": object()}]},
     "messages[1].content[1].extra", "Object of type object is not JSON serializable"),
    # below a key that is no plain name: named as far as the keys are, the rest quoted
    ("under-a-quoted-key", {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_6", "type": "function", "function": {"name": "f", "arguments": "{}",
                                                          "check in": {"at": dt.time(15)}}}]},
     "messages[1].tool_calls[0].function", "at 'check in'.at: cannot be stored as JSON"),
]
KINDS = ["sync", "async"]  # Client, AsyncClient: one request builder, two senders


def _dumped(value: Any) -> Any:
    """`value` with each SDK object in it as the caller's own `model_dump()` of it."""
    if isinstance(value, BaseModel):
        return value.model_dump()
    if isinstance(value, dict):
        return {k: _dumped(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_dumped(v) for v in value]
    return value


@pytest.fixture
def mem(tmp_path: Path, embedder: FastEmbedder) -> Iterator[Memory]:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False,
                background_indexing=False) as m:
        yield m


def _rows(mem: Memory | Client, conv: str) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    return [(m.body, m.metadata) for m in mem.history(conv)]


@pytest.mark.parametrize(("case", "batch"), BATCHES, ids=[c for c, _ in BATCHES])
def test_memory_stores_sdk_objects_in_dicts_as_their_model_dump(mem: Memory, case: str, batch: list[Any]) -> None:
    before = repr(batch)
    assert mem.append_many("objects", batch) == list(range(len(batch)))
    mem.append_many("dumped", _dumped(batch))
    assert _rows(mem, "objects") == _rows(mem, "dumped")
    assert repr(batch) == before  # the caller's dicts and lists still hold its objects
    stored = [r.body for r in mem.history("objects")]
    assert "parsed_arguments" not in repr(stored) and "async_" not in repr(stored)
    if case == "chat-tool-calls-in-a-dict":
        # exactly the wire form: the arguments as the model wrote them, byte for byte
        assert stored[1] == {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": ARGS}},
            {"id": "call_2", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}]}
        sent = mem.context("objects", "Weather in Tokyo?", budget=4000).messages
        assert [c["function"]["arguments"] for m in sent for c in m.get("tool_calls") or []] == [ARGS, "{}"]
    if case == "responses-list-mixing-items-and-dicts":
        assert stored[2]["arguments"] == ARGS
        assert stored[4]["summary"] == [{"type": "summary_text", "text": "Needs the forecast."}]
        assert stored[5]["content"][0]["text"] == "Sunny, 24 C."


@pytest.mark.parametrize(("case", "message", "field", "problem"), REFUSED, ids=[c[0] for c in REFUSED])
def test_memory_refuses_what_is_still_no_json_naming_where(mem: Memory, case: str, message: dict[str, Any],
                                                           field: str, problem: str) -> None:
    with pytest.raises(ValidationError) as refused:
        mem.append_many(case, [USER_CHAT, message])
    assert refused.value.field == field
    assert problem in refused.value.problem
    assert mem.conversations() == []  # nothing written


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serve_open(tmp_path_factory.mktemp("client-openai-sdk")) as served:
        yield served


def _append(url: str, kind: str, conv: str, messages: list[Any]) -> list[int]:
    if kind == "sync":
        with Client(url, namespace=NS) as client:
            return client.append_many(conv, messages)

    async def on_async() -> list[int]:
        async with AsyncClient(url, namespace=NS) as client:
            return await client.append_many(conv, messages)
    return asyncio.run(on_async())


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("case", "batch"), BATCHES, ids=[c for c, _ in BATCHES])
def test_client_sends_sdk_objects_in_dicts_as_their_model_dump(url: str, kind: str, case: str,
                                                               batch: list[Any]) -> None:
    assert _append(url, kind, f"{case}-{kind}", batch) == list(range(len(batch)))
    _append(url, kind, f"{case}-{kind}-dumped", _dumped(batch))
    with Client(url, namespace=NS) as client:
        stored = _rows(client, f"{case}-{kind}")
        assert stored == _rows(client, f"{case}-{kind}-dumped")
    arguments = [c["function"]["arguments"] for b, _ in stored for c in b.get("tool_calls") or []]
    arguments += [b["arguments"] for b, _ in stored if b.get("type") == "function_call"]
    assert ARGS in arguments or case == "chat-parsed-tool-calls-in-a-dict"  # byte for byte through HTTP


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("case", "message", "field", "problem"), REFUSED, ids=[c[0] for c in REFUSED])
def test_client_refuses_what_is_still_no_json_naming_where(url: str, kind: str, case: str, message: dict[str, Any],
                                                           field: str, problem: str) -> None:
    conv = f"{case}-{kind}"
    with pytest.raises(ValidationError) as refused:
        _append(url, kind, conv, [USER_CHAT, message])
    assert refused.value.field == field
    assert problem in refused.value.problem
    with Client(url, namespace=NS) as client, pytest.raises(ConversationNotFound):
        client.history(conv)  # nothing sent

"""An openai SDK reply appends however it is serialized (README "What append takes"), for the
SDK classes whose Python field names differ from the wire's or that carry client-side parse
results. Before: a Responses `function_call` / `custom_tool_call` item, as the object or as
`model_dump()`, was refused ("async_: is not a field of a function_call item": objects were
dumped without by_alias, and a plain model_dump() writes the Python name), and a
`ParsedChatCompletionMessage` from `chat.completions.parse()` was refused for `parsed` in
every form. Now the item is stored under the wire names (`async`), and the parse results
(`parsed`, `parsed_arguments`: the API never sends them, the text they parse is kept) are
dropped; history returns that, and context() sends a valid request param. The SDK's own
classes, built from JSON with the installed `openai` package (no network)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sdk_corpus as corpus
from openai.types.chat import ParsedChatCompletionMessage, ParsedFunctionToolCall
from openai.types.chat.parsed_function_tool_call import ParsedFunction
from openai.types.responses import (
    ParsedResponseFunctionToolCall,
    ParsedResponseOutputMessage,
    ResponseCustomToolCall,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
)
from pydantic import BaseModel

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")

# the ways a caller serializes an SDK object before append (the README's list, and by_alias)
SERIALIZATIONS: dict[str, Callable[[BaseModel], Any]] = {
    "object": lambda o: o,
    "model_dump": lambda o: o.model_dump(),
    "model_dump_exclude_none": lambda o: o.model_dump(exclude_none=True),
    "model_dump_by_alias": lambda o: o.model_dump(by_alias=True),
    "to_dict": lambda o: o.to_dict(),  # type: ignore[attr-defined]
}

# (the SDK object, its family, the wire body it must be stored as (nulls aside)) -- each a reply the SDK returns
CASES: list[tuple[str, BaseModel, str, dict[str, Any]]] = [
    # response.output[i] of a function call; `async` is the field whose Python name is `async_`
    ("function_call", ResponseFunctionToolCall.model_validate({
        "type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
        "arguments": '{"city": "Lisbon"}', "status": "completed", "async": False}), "responses",
     {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
      "arguments": '{"city": "Lisbon"}', "status": "completed", "async": False}),
    # the same without `async` set: a plain model_dump() still writes `async_: None`
    ("function_call_unset", ResponseFunctionToolCall.model_validate({
        "type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{}"}), "responses",
     {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{}"}),
    # a custom tool call (grammar tools)
    ("custom_tool_call", ResponseCustomToolCall.model_validate({
        "type": "custom_tool_call", "id": "ct_1", "call_id": "call_2", "name": "sql", "input": "select 1",
        "async": True}), "responses",
     {"type": "custom_tool_call", "id": "ct_1", "call_id": "call_2", "name": "sql", "input": "select 1",
      "async": True}),
    # responses.parse() with a strict function tool: parsed_arguments dropped
    ("parsed_function_call", ParsedResponseFunctionToolCall.model_validate({
        "type": "function_call", "call_id": "call_3", "name": "book", "arguments": '{"seat": "3A"}',
        "parsed_arguments": {"seat": "3A"}}), "responses",
     {"type": "function_call", "call_id": "call_3", "name": "book", "arguments": '{"seat": "3A"}'}),
    # responses.parse() with a text format: each output_text part's `parsed` dropped
    ("parsed_output_message", ParsedResponseOutputMessage[dict].model_validate({  # type: ignore[index]
        "type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
        # logprobs given: an unset one is a null inside the part, which context() sends as is
        "content": [{"type": "output_text", "text": '{"city": "Lisbon"}', "annotations": [], "logprobs": [],
                     "parsed": {"city": "Lisbon"}}]}), "responses",
     {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
      "content": [{"type": "output_text", "text": '{"city": "Lisbon"}', "annotations": [], "logprobs": []}]}),
    # a plain reply message, logprobs not asked for: model_dump() writes a null inside the
    # part, which context() leaves out (the request type has no null logprobs)
    ("output_message", ResponseOutputMessage.model_validate({
        "type": "message", "id": "msg_2", "role": "assistant", "status": "completed",
        "content": [{"type": "output_text", "text": "Sunny, 24 C.", "annotations": []}]}), "responses",
     {"type": "message", "id": "msg_2", "role": "assistant", "status": "completed",
      "content": [{"type": "output_text", "text": "Sunny, 24 C.", "annotations": []}]}),
    # chat.completions.parse() with a response_format: `parsed` dropped, content kept
    ("parsed_chat_message", ParsedChatCompletionMessage[dict].model_validate({  # type: ignore[index]
        "role": "assistant", "content": '{"city": "Lisbon"}', "parsed": {"city": "Lisbon"}}), "chat",
     {"role": "assistant", "content": '{"city": "Lisbon"}'}),
    # chat.completions.parse() with pydantic_function_tool: `parsed` and each call's parsed_arguments dropped
    ("parsed_chat_tool_call", ParsedChatCompletionMessage[dict](  # type: ignore[index]
        role="assistant", content=None, parsed=None, tool_calls=[ParsedFunctionToolCall(
            id="call_4", type="function",
            function=ParsedFunction(name="book", arguments='{"seat": "3A"}', parsed_arguments={"seat": "3A"}))]),
     "chat",
     {"role": "assistant", "tool_calls": [
         {"id": "call_4", "type": "function", "function": {"name": "book", "arguments": '{"seat": "3A"}'}}]}),
]


def _without_nulls(value: Any) -> Any:
    """`value` without null fields at any level (model_dump() writes every unset one)."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


@pytest.fixture
def mem(tmp_path: Path, embedder: FastEmbedder) -> Iterator[Memory]:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False,
                background_indexing=False) as m:
        yield m


@pytest.mark.parametrize("how", list(SERIALIZATIONS))
@pytest.mark.parametrize(("name", "obj", "family", "wire"), CASES, ids=[c[0] for c in CASES])
def test_an_sdk_reply_appends_however_serialized(mem: Memory, name: str, obj: BaseModel, family: str,
                                                 wire: dict[str, Any], how: str) -> None:
    user: dict[str, Any] = ({"role": "user", "content": "Weather in Lisbon?"} if family == "chat" else
                            {"type": "message", "role": "user", "content": [{"type": "input_text",
                                                                            "text": "Weather in Lisbon?"}]})
    mem.append(name, user)
    mem.append(name, SERIALIZATIONS[how](obj))
    stored = mem.history(name)[-1].body
    # the wire names, no parse results; explicit nulls stay when the serialization wrote them
    assert _without_nulls(stored) == wire
    assert "async_" not in stored and "parsed" not in stored and "parsed_arguments" not in stored
    ctx = mem.context(name, "Weather in Lisbon?", budget=4000)
    # sent: the item itself (a chat reply without its reply-only nulls)
    assert wire in [_without_nulls(m) for m in ctx.messages], ctx.messages
    # a valid request param of the SDK's own types, unknown keys forbidden
    (corpus.valid_chat if family == "chat" else corpus.valid_responses)(ctx.messages)

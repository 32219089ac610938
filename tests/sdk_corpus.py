"""A corpus of messages built with the real `openai` SDK (no network): replies parsed from
JSON into `ChatCompletion` / `Response` objects and serialized the ways callers do, and
request params of every role and part type. Plus validators that check a context
against the SDK's own request types, with unknown keys forbidden, and the set-up of the
tests that run them: `sdk_output` (items as the SDK parses a reply holding them) and
`format_memory` (a Memory sending contexts in one `context_format`)."""

from __future__ import annotations

import base64
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from hash_embedder import HashEmbedder
from openai.types.chat import ChatCompletion, ChatCompletionMessageParam
from openai.types.responses import Response, ResponseInputItemParam
from pydantic import ConfigDict, TypeAdapter

from tiermem import Config, Memory

PNG = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64).decode()
WAV = base64.b64encode(b"RIFF" + b"\x00" * 400).decode()
PDF = "data:application/pdf;base64," + base64.b64encode(b"%PDF-1.4 hello").decode()


def _completion(message: dict[str, Any], **extra: Any) -> ChatCompletion:
    return ChatCompletion.model_validate({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1_700_000_000, "model": "gpt-4o",
        "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None, "message": message}],
        **extra,
    })


def _call(cid: str, name: str, args: str) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


# Replies as an OpenAI(-compatible) server sends them, by the feature they exercise.
REPLIES: dict[str, dict[str, Any]] = {
    "plain": {"role": "assistant", "content": "Lisbon to Tokyo, noted."},
    "refusal": {"role": "assistant", "content": None, "refusal": "I can't help with that."},
    "annotations": {"role": "assistant", "content": "The fare is listed on the airline's site.",
                    "annotations": [{"type": "url_citation", "url_citation": {
                        "start_index": 0, "end_index": 8, "title": "Fares", "url": "https://example.com/f"}}]},
    "audio": {"role": "assistant", "content": None, "audio": {
        "id": "audio_1", "data": WAV, "expires_at": 1_700_003_600, "transcript": "Your flight leaves at nine."}},
    "parallel_tool_calls": {"role": "assistant", "content": None, "tool_calls": [
        _call("call_a", "search_flights", '{"from":"LIS","to":"HND"}'),
        _call("call_b", "get_weather", '{"city":"Tokyo"}')]},
    "custom_tool_call": {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_c", "type": "custom", "custom": {"name": "sql", "input": "SELECT 1"}}]},
    "legacy_function_call": {"role": "assistant", "content": None,
                             "function_call": {"name": "get_time", "arguments": "{}"}},
    # vLLM / DeepSeek put the model's reasoning on the message: the SDK keeps extra fields
    "vendor_reasoning": {"role": "assistant", "content": "Nine o'clock.", "reasoning_content": "The user asked..."},
}


def reply(kind: str) -> ChatCompletion:
    return _completion(REPLIES[kind])


def serializations(c: ChatCompletion) -> dict[str, dict[str, Any]]:
    """The three ways callers serialize `choices[0].message`."""
    m = c.choices[0].message
    return {"model_dump": m.model_dump(), "model_dump_exclude_none": m.model_dump(exclude_none=True),
            "to_dict": m.to_dict()}


# Request params of every role and content part type (ChatCompletionMessageParam).
PARAMS: dict[str, dict[str, Any]] = {
    "system": {"role": "system", "content": "You are a travel agent."},
    "system_parts": {"role": "system", "content": [{"type": "text", "text": "Prefer trains in Europe."}]},
    "developer": {"role": "developer", "content": "Answer in under 50 words.", "name": "ops"},
    "user_text": {"role": "user", "content": "Find me a flight to Tokyo.", "name": "ana"},
    "user_image": {"role": "user", "content": [
        {"type": "text", "text": "This is my passport photo page."},
        {"type": "image_url", "image_url": {"url": PNG, "detail": "low"}}]},
    "user_image_url": {"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "https://example.com/seat-map.png"}}]},
    "user_audio": {"role": "user", "content": [
        {"type": "input_audio", "input_audio": {"data": WAV, "format": "wav"}}]},
    "user_file": {"role": "user", "content": [
        {"type": "file", "file": {"file_data": PDF, "filename": "itinerary.pdf"}},
        {"type": "file", "file": {"file_id": "file-abc123"}},
        {"type": "text", "text": "Here is the itinerary.", "prompt_cache_breakpoint": {"mode": "explicit"}}]},
    "assistant_param_refusal_part": {"role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]},
    "tool_a": {"role": "tool", "tool_call_id": "call_a", "content": '{"flights": ["TP123", "NH210"]}'},
    "tool_b": {"role": "tool", "tool_call_id": "call_b", "content": [{"type": "text", "text": "18C, clear"}]},
    "tool_c": {"role": "tool", "tool_call_id": "call_c", "content": "1"},
    "function": {"role": "function", "name": "get_time", "content": "09:00"},
}


def chat_conversation() -> list[dict[str, Any]]:
    """A coherent conversation mixing every chat variant (calls answered in order)."""
    r = {k: serializations(reply(k)) for k in REPLIES}
    p = PARAMS
    return [
        p["system"], p["developer"], p["user_text"], r["plain"]["model_dump"], p["user_image"],
        r["parallel_tool_calls"]["model_dump"], p["tool_a"], p["tool_b"], r["annotations"]["to_dict"],
        p["system_parts"], p["user_audio"], r["audio"]["model_dump"], p["user_file"],
        r["refusal"]["model_dump_exclude_none"], p["user_image_url"], r["custom_tool_call"]["to_dict"],
        p["tool_c"], r["legacy_function_call"]["model_dump"], p["function"],
        p["assistant_param_refusal_part"], r["vendor_reasoning"]["model_dump"],
        {"role": "user", "content": "So which flight should I take?"},
    ]


def chat_corpus() -> Iterator[tuple[str, dict[str, Any]]]:
    """Every chat message variant, named: each reply in each serialization, each param."""
    for kind in REPLIES:
        for how, body in serializations(reply(kind)).items():
            yield f"{kind}/{how}", body
    yield from PARAMS.items()


def _response(output: list[dict[str, Any]]) -> Response:
    return Response.model_validate({
        "id": "resp_1", "object": "response", "created_at": 1_700_000_000, "model": "gpt-4.1",
        "output": output, "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "status": "completed",
    })


def sdk_output(items: list[dict[str, Any]]) -> list[Any]:
    """The items as the SDK parses a reply holding them: its pydantic objects, which a
    caller appends as they are."""
    return list(_response(items).output)


def format_memory(tmp_path: Path, context_format: str) -> Memory:
    """A Memory on a real SQLite file under tmp_path whose contexts go out in
    `context_format`: the hash embedder (no model), no hot tier, indexing inline."""
    return Memory(Config(data_dir=tmp_path / "m", context_format=context_format), embedder=HashEmbedder(), hot=False,
                  background_indexing=False)


RESPONSE_OUTPUT: list[dict[str, Any]] = [
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Check fares first."}],
     "encrypted_content": base64.b64encode(b"opaque-state").decode()},
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "search_flights",
     "arguments": '{"to":"HND"}', "status": "completed"},
    {"type": "function_call", "id": "fc_2", "call_id": "call_2", "name": "get_weather",
     "arguments": '{"city":"Tokyo"}', "status": "completed"},
]
RESPONSE_FINAL: list[dict[str, Any]] = [
    {"type": "web_search_call", "id": "ws_1", "status": "completed",
     "action": {"type": "search", "query": "Tokyo fares October"}},
    {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": [
        {"type": "output_text", "text": "Take NH210; it is 9C and clear.", "logprobs": [],
         "annotations": [{"type": "url_citation", "start_index": 0, "end_index": 4, "title": "ANA",
                          "url": "https://example.com/nh210"}]}]},
]


def response_items(output: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Output items as the Agents SDK stores them (`to_input_item`: exclude_unset)."""
    return [item.model_dump(exclude_unset=True) for item in _response(output).output]


def responses_conversation() -> list[dict[str, Any]]:
    return [
        {"role": "developer", "content": "You are a travel agent."},
        {"role": "user", "content": "Find a flight to Tokyo and check the weather."},
        {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "My seat map:"},
            {"type": "input_image", "image_url": PNG, "detail": "low"},
            {"type": "input_file", "file_data": PDF, "filename": "itinerary.pdf"}]},
        *response_items(RESPONSE_OUTPUT),
        {"type": "function_call_output", "call_id": "call_1", "output": '{"flights":["NH210"]}'},
        {"type": "function_call_output", "call_id": "call_2",
         "output": [{"type": "input_text", "text": "9C, clear"}]},
        *response_items(RESPONSE_FINAL),
        {"type": "custom_tool_call", "call_id": "call_3", "name": "sql", "input": "SELECT 1"},
        {"type": "custom_tool_call_output", "call_id": "call_3", "output": "1"},
        {"type": "mcp_approval_request", "id": "mcpr_1", "server_label": "fares", "name": "book",
         "arguments": "{}"},
        {"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": True},
        {"role": "user", "content": [{"type": "input_text", "text": "Book it."}]},
    ]


_CHAT = TypeAdapter(ChatCompletionMessageParam, config=ConfigDict(extra="forbid"))
_ITEM = TypeAdapter(ResponseInputItemParam, config=ConfigDict(extra="forbid"))


def _materialize(v: Any) -> Any:
    """TypedDict `Iterable` fields validate lazily: walk them so every part is checked."""
    if isinstance(v, dict):
        return {k: _materialize(x) for k, x in v.items()}
    if isinstance(v, str | bytes | int | float | bool) or v is None:
        return v
    if isinstance(v, Iterable):
        return [_materialize(x) for x in v]
    return v


def valid_chat(messages: list[dict[str, Any]]) -> None:
    """Raises pydantic's error unless every message is a ChatCompletionMessageParam with
    no key the SDK's types do not define, and every tool result follows its call."""
    called: set[str] = set()
    for m in messages:
        _materialize(_CHAT.validate_python(m))
        for c in m.get("tool_calls") or ():
            called.add(c["id"])
        if m.get("function_call"):
            called.add("fn:" + m["function_call"]["name"])
        if m["role"] == "tool":
            assert m["tool_call_id"] in called, f"orphaned tool result {m['tool_call_id']}"
        if m["role"] == "function":
            assert "fn:" + m["name"] in called, f"orphaned function result {m['name']}"


def valid_responses(items: list[dict[str, Any]]) -> None:
    """Raises unless every item is a ResponseInputItemParam with no undefined key, every
    output follows its call, and every reasoning item is followed by another item."""
    called: set[str] = set()
    for i, m in enumerate(items):
        _materialize(_ITEM.validate_python(m))
        t = m.get("type")
        if t in ("function_call", "custom_tool_call"):
            called.add(m["call_id"])
        if t == "mcp_approval_request":
            called.add(m["id"])
        if t in ("function_call_output", "custom_tool_call_output"):
            assert m["call_id"] in called, f"orphaned output {m['call_id']}"
        if t == "mcp_approval_response":
            assert m["approval_request_id"] in called
        if t == "reasoning":
            assert i + 1 < len(items), "a reasoning item must be followed by the item it produced"

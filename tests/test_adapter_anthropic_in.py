"""`from_anthropic`: Anthropic messages (params and SDK replies) stored as OpenAI chat
messages, what that form has no field for in `anthropic_*` metadata, and back through a
real planned context (`to_anthropic`) equal to what was sent, thinking signatures
included; unknown blocks and oversized metadata refused naming the block, nothing written.

Fails on the code before: there was no Anthropic adapter; `append` refuses an Anthropic
message (`tool_use` blocks, a `tool_result` in a user message, thinking blocks)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from tiermem import Memory
from tiermem.adapters.anthropic import (
    CONTENT_KEY,
    EXTRA_KEY,
    REPLY_KEY,
    THINKING_KEY,
    from_anthropic,
    to_anthropic,
)
from tiermem.tiers.errors import ConversationNotFound, ValidationError

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64).decode()
SIGNATURE = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxDYXJlZnVsbHkgdGhpbmsiMHNpZ25lZA=="


def _use(cid: str, name: str = "weather", **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": cid, "name": name, "input": args or {"city": "Tokyo"}}


def _result(cid: str, content: Any = "sunny, 21C", **extra: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": cid, "content": content, **extra}


THINKING = {"type": "thinking", "thinking": "The user wants weather: call the tool.", "signature": SIGNATURE}
REDACTED = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"}
USER = {"role": "user", "content": "What's the weather in Tokyo?"}
DONE = {"role": "assistant", "content": [{"type": "text", "text": "Sunny and 21C."}]}

# each case: a conversation as an Anthropic agent sends it, stored with from_anthropic and
# read back through a planned context
ROUND_TRIPS: list[tuple[str, list[dict[str, Any]]]] = [
    # plain text both ways, the user's as a string
    ("text", [USER, DONE]),
    # several text blocks, one with citations (a reply's)
    ("text blocks, citations", [
        {"role": "user", "content": [{"type": "text", "text": "Two questions."}, {"type": "text", "text": "First?"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Per the doc,", "citations": [
            {"type": "char_location", "cited_text": "21C", "document_index": 0, "document_title": "w",
             "start_char_index": 0, "end_char_index": 3}]}, {"type": "text", "text": " 21C."}]}]),
    # images: base64 (a data URL in the store) and url
    ("images", [
        {"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                                 "data": PNG}},
                                     {"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}},
                                     {"type": "text", "text": "What is in these?"}]}, DONE]),
    # a tool loop with a thinking block (and its signature) before the tool_use
    ("thinking tool loop", [USER, {"role": "assistant", "content": [THINKING, _use("toolu_01")]},
                            {"role": "user", "content": [_result("toolu_01")]}, DONE]),
    # text after the tool_use, redacted thinking, parallel calls, an error result and text after results
    ("parallel calls, order, is_error", [
        USER,
        {"role": "assistant", "content": [REDACTED, THINKING, _use("toolu_a"), {"type": "text", "text": "Also:"},
                                          _use("toolu_b", "clock", tz="JST")]},
        {"role": "user", "content": [_result("toolu_a"), _result("toolu_b", "no such tz", is_error=True),
                                     {"type": "text", "text": "Go on."}]},
        DONE]),
    # a tool_result holding an image and text blocks: the image is kept in metadata
    ("tool result with an image", [
        USER, {"role": "assistant", "content": [_use("toolu_s", "screenshot", url="x")]},
        {"role": "user", "content": [_result("toolu_s", [
            {"type": "text", "text": "the page"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}])]},
        DONE]),
    # a tool_result whose content is text blocks
    ("tool result text blocks", [
        USER, {"role": "assistant", "content": [_use("toolu_t")]},
        {"role": "user", "content": [_result("toolu_t", [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])]},
        DONE]),
]


def _blocks(content: Any) -> list[dict[str, Any]]:
    """A message's content as the blocks the API reads (a string is one text block)."""
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def _unmarked(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"role": m["role"], "content": [{k: v for k, v in b.items() if k != "cache_control"}
                                           for b in m["content"]]} for m in messages]


@pytest.mark.parametrize("conversation", [c for _n, c in ROUND_TRIPS], ids=[n for n, _c in ROUND_TRIPS])
def test_round_trip_through_a_planned_context(cold_memory: Memory, conversation: list[dict[str, Any]]) -> None:
    for m in conversation:
        cold_memory.append_many("c", from_anthropic(m))
    ctx = cold_memory.context("c", "weather?", 8000)
    req = to_anthropic(ctx, cold_memory)
    assert req.system == []
    want = [{"role": m["role"], "content": _blocks(m["content"])} for m in conversation]
    assert _unmarked(req.messages) == want


def test_without_the_memory_thinking_is_not_restored(cold_memory: Memory) -> None:
    conversation = ROUND_TRIPS[3][1]
    for m in conversation:
        cold_memory.append_many("c", from_anthropic(m))
    req = to_anthropic(cold_memory.context("c", "weather?", 8000))
    assert req.messages[1]["content"] == [_use("toolu_01")]


def test_a_reply_keeps_its_fields_in_metadata() -> None:
    reply = {"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
             "content": [THINKING, {"type": "text", "text": "Checking.", "citations": None}, _use("toolu_01")],
             "stop_reason": "tool_use", "stop_sequence": None, "container": None,
             "usage": {"input_tokens": 12, "output_tokens": 30, "cache_read_input_tokens": 0}}
    [stored] = from_anthropic(reply)
    assert stored["content"] == "Checking."
    assert stored["tool_calls"] == [{"id": "toolu_01", "type": "function",
                                     "function": {"name": "weather", "arguments": '{"city": "Tokyo"}'}}]
    assert stored["metadata"][THINKING_KEY] == [[0, THINKING]]
    assert stored["metadata"][REPLY_KEY] == {"id": "msg_01", "model": "claude-sonnet-4-5", "stop_reason": "tool_use",
                                             "usage": reply["usage"]}


def test_a_user_message_splits_into_tool_messages_then_the_text() -> None:
    stored = from_anthropic({"role": "user", "content": [
        _result("toolu_a", "ok", cache_control={"type": "ephemeral"}),
        _result("toolu_b", [{"type": "image", "source": {"type": "url", "url": "https://x.test/i.png"}}]),
        {"type": "text", "text": "next"}]})
    assert stored == [
        {"role": "tool", "tool_call_id": "toolu_a", "content": "ok",
         "metadata": {EXTRA_KEY: [[0, {"cache_control": {"type": "ephemeral"}}]]}},
        {"role": "tool", "tool_call_id": "toolu_b", "content": "",
         "metadata": {CONTENT_KEY: [{"type": "image", "source": {"type": "url", "url": "https://x.test/i.png"}}]}},
        {"role": "user", "content": "next"}]


def test_cache_control_is_kept_but_not_sent_back(cold_memory: Memory) -> None:
    marked = {"role": "user", "content": [{"type": "text", "text": "hello", "cache_control": {"type": "ephemeral"}}]}
    [stored] = from_anthropic(marked)
    assert stored["metadata"] == {EXTRA_KEY: [[0, {"cache_control": {"type": "ephemeral"}}]]}
    cold_memory.append_many("c", [stored, *from_anthropic(DONE), *from_anthropic(USER)])
    req = to_anthropic(cold_memory.context("c", "weather?", 8000), cold_memory, max_breakpoints=0)
    assert all("cache_control" not in b for m in req.messages for b in m["content"])


# each case: (message, the field the error names)
REFUSALS: list[tuple[dict[str, Any], str]] = [
    # a block type tiermem does not convert (the beta MCP connector's), in a user message and in a reply
    ({"role": "user", "content": [{"type": "text", "text": "read"}, {"type": "mcp_tool_result", "tool_use_id": "m",
                                                                     "content": []}]}, "content[1].type"),
    ({"type": "message", "role": "assistant", "content": [{"type": "mcp_tool_use", "id": "m", "name": "search",
                                                           "server_name": "s", "input": {}}]}, "content[0].type"),
    # a document kept whole needs its source's type (test_anthropic_kept_blocks.py has the rest)
    ({"role": "user", "content": [{"type": "text", "text": "read"}, {"type": "document", "source": {}}]},
     "content[1].source.type"),
    # a block the role cannot hold
    ({"role": "user", "content": [_use("toolu_x")]}, "content[0].type"),
    ({"role": "assistant", "content": [_result("toolu_x")]}, "content[0].type"),
    # a thinking block without its signature (it could not be sent back)
    ({"role": "assistant", "content": [{"type": "thinking", "thinking": "hm"}]}, "content[0].signature"),
    # tool input that is not an object
    ({"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "n", "input": "x"}]}, "content[0].input"),
    # an image by file id has no OpenAI chat form
    ({"role": "user", "content": [{"type": "image", "source": {"type": "file", "file_id": "file_1"}}]},
     "content[0].source.type"),
    # a field a MessageParam does not have
    ({"role": "user", "content": "hi", "name": "bob"}, "name"),
    # no role, or one the API does not have
    ({"role": "tool", "content": "x"}, "role"),
    # content neither a string nor blocks
    ({"role": "user", "content": 3}, "content"),
]


@pytest.mark.parametrize(("message", "field"), REFUSALS, ids=[f for _m, f in REFUSALS])
def test_refusals_name_the_block(message: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as err:
        from_anthropic(message)
    assert err.value.field == field, err.value


def test_metadata_over_the_limit_names_the_block_and_writes_nothing(cold_memory: Memory) -> None:
    big = {**THINKING, "thinking": "x" * 20_000}
    message = {"role": "assistant", "content": [{"type": "text", "text": "ok"}, big, _use("toolu_1")]}
    with pytest.raises(ValidationError) as err:
        cold_memory.append_many("c", from_anthropic(message, max_metadata_bytes=cold_memory.config.max_metadata_bytes))
    assert err.value.field == "content[1]" and "max_metadata_bytes" in str(err.value)
    with pytest.raises(ConversationNotFound):  # nothing was written
        cold_memory.history("c")
    # within a larger limit it is stored, and restored
    [stored] = from_anthropic(message, max_metadata_bytes=64 * 1024)
    assert stored["metadata"][THINKING_KEY] == [[1, big]]

"""`to_anthropic` against rules of Anthropic's documented Messages API that the first
tests did not check: a base64 image's `media_type` is one of the four the API takes, no
text block is empty (inside a `tool_result` either), a final assistant message does not
end in whitespace, and an assistant turn with thinking blocks comes back exactly as the
API returned it (its citations and `caller` on the blocks they came on).

Fails on the code before: an image of another type went out as a base64 source the API
refuses; an empty text part of a tool output went out as an empty text block in the
`tool_result`; a final assistant message kept its trailing whitespace; the fields kept
in `anthropic_extra` were put back by their index before the thinking blocks were, so a
message with thinking lost its citations or gave a `tool_use`'s `caller` to a text block."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from tiermem import Config, Memory
from tiermem.adapters.anthropic import IMAGE_MEDIA_TYPES, from_anthropic, to_anthropic
from tiermem.tiers.embed_onnx import FastEmbedder

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64).decode()
SIGNATURE = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxDYXJlZnVsbHkgdGhpbmsiMHNpZ25lZA=="
THINKING = {"type": "thinking", "thinking": "Cite the document, then call the tool.", "signature": SIGNATURE}
REDACTED = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"}
CITED = {"type": "text", "text": "Per the doc, 21C.", "citations": [
    {"type": "char_location", "cited_text": "21C", "document_index": 0, "document_title": "w",
     "start_char_index": 0, "end_char_index": 3}]}
USER = {"role": "user", "content": "What's the weather in Tokyo?"}


def _blocks(mem: Memory, query: str | None = "weather?") -> list[dict[str, Any]]:
    req = to_anthropic(mem.context("c", query, 8000), mem)
    return [b for m in req.messages for b in m["content"]]


def _image(media_type: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": f"data:{media_type};base64,{PNG}"}}


# each case: an image part as an OpenAI agent stores it, and the block it must become.
# https://platform.claude.com/docs/en/build-with-claude/vision ("Supported image
# formats": JPEG, PNG, GIF, WebP) and the SDK's Base64ImageSourceParam.media_type
# (Literal["image/jpeg", "image/png", "image/gif", "image/webp"]): any other media_type
# is a 400, so the image cannot go as a base64 source
IMAGES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    # a type the API takes: a base64 source, as before
    ("png", _image("image/png"), {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                               "data": PNG}}),
    # a data URL's media type is case-insensitive (RFC 2397); the API's literal is lower case
    ("upper case", _image("IMAGE/WEBP"), {"type": "image", "source": {"type": "base64", "media_type": "image/webp",
                                                                       "data": PNG}}),
    # types the API refuses: a short text reference, as for audio and non-PDF files
    ("svg", _image("image/svg+xml"), {"type": "text", "text": "[image image/svg+xml]"}),
    ("bmp", _image("image/bmp"), {"type": "text", "text": "[image image/bmp]"}),
    # a data URL that is not base64 is no http(s) URL either
    ("data url, not base64", {"type": "image_url", "image_url": {"url": "data:image/png,%89PNG"}},
     {"type": "text", "text": "[image image/png]"}),
    # an http(s) URL: a url source, as before
    ("url", {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}},
     {"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}}),
]


@pytest.mark.parametrize(("part", "want"), [(p, w) for _n, p, w in IMAGES], ids=[n for n, _p, _w in IMAGES])
def test_an_image_goes_as_a_source_the_api_takes(cold_memory: Memory, part: dict[str, Any],
                                                 want: dict[str, Any]) -> None:
    cold_memory.append_many("c", [{"role": "user", "content": [part, {"type": "text", "text": "What is this?"}]},
                                  {"role": "assistant", "content": "A picture."},
                                  {"role": "user", "content": "Thanks."}])
    first = _blocks(cold_memory)[0]
    assert {k: v for k, v in first.items() if k != "cache_control"} == want
    if first["type"] == "image" and first["source"]["type"] == "base64":
        assert first["source"]["media_type"] in IMAGE_MEDIA_TYPES


# https://platform.claude.com/docs/en/build-with-claude/prompt-caching ("Empty text
# blocks cannot be cached") and the API's 400 "messages: text content blocks must be
# non-empty", which holds inside a tool_result's content as at the top level
def test_no_empty_text_block_inside_a_tool_result(cold_memory: Memory) -> None:
    cold_memory.append_many("c", [
        USER, {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}},
            {"id": "call_2", "type": "function", "function": {"name": "clock", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": ""},
                                                               {"type": "text", "text": "sunny"}]},
        {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": " "}]}])
    results = {b["tool_use_id"]: b["content"] for b in _blocks(cold_memory) if b["type"] == "tool_result"}
    assert results == {"call_1": [{"type": "text", "text": "sunny"}], "call_2": ""}


# https://platform.claude.com/docs/en/api/messages (messages: a final assistant message
# is prefill, continued by the response) and the API's 400 "final assistant content
# cannot end with trailing whitespace"
@pytest.mark.parametrize("reply", [
    "Sunny and 21C. ",  # a trailing space
    "Sunny and 21C.\n\n",  # trailing newlines, as models often end a reply
    [{"type": "text", "text": "Sunny."}, {"type": "text", "text": "And 21C.\n"}],  # the last of several parts
])
def test_a_final_assistant_message_does_not_end_in_whitespace(cold_memory: Memory, reply: Any) -> None:
    cold_memory.append_many("c", [{"role": "user", "content": "Weather? "},
                                  {"role": "assistant", "content": "Let me see.\n"},
                                  {"role": "user", "content": "Tokyo."},
                                  {"role": "assistant", "content": reply}])
    req = to_anthropic(cold_memory.context("c", None, 8000), cold_memory)
    final = req.messages[-1]
    assert final["role"] == "assistant" and final["content"][-1]["text"] == final["content"][-1]["text"].rstrip()
    # only the final message: an earlier one keeps its bytes (the next request's prefix)
    assert req.messages[0]["content"][0]["text"] == "Weather? "
    assert req.messages[1]["content"][0]["text"] == "Let me see.\n"


# https://platform.claude.com/docs/build-with-claude/thinking-tool-workflows ("Echo the
# assistant message exactly as received"; thinking blocks "complete and unmodified") and
# https://platform.claude.com/docs/build-with-claude/preserved-thinking (a change to the
# messages before a thinking block invalidates it and every later one): a message with
# thinking blocks comes back with each field on the block it came on
ECHOES: list[tuple[str, list[dict[str, Any]]]] = [
    # citations on a text block after a thinking block
    ("citations after thinking", [THINKING, CITED]),
    # a tool_use's caller after redacted and plain thinking, text after the call
    ("caller after thinking", [REDACTED, THINKING,
                               {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Tokyo"},
                                "caller": {"type": "direct"}}, CITED]),
]


@pytest.mark.parametrize("content", [c for _n, c in ECHOES], ids=[n for n, _c in ECHOES])
def test_a_message_with_thinking_comes_back_as_received(cold_memory: Memory, content: list[dict[str, Any]]) -> None:
    conversation = [USER, {"role": "assistant", "content": content}]
    if any(b["type"] == "tool_use" for b in content):
        conversation.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}]})
    for m in conversation:
        cold_memory.append_many("c", from_anthropic(m))
    req = to_anthropic(cold_memory.context("c", "weather?", 8000), cold_memory)
    sent = [{k: v for k, v in b.items() if k != "cache_control"} for b in req.messages[1]["content"]]
    assert sent == content


# https://platform.claude.com/docs/build-with-claude/extended-thinking (with tool use,
# the API's 400 "a final assistant message must start with a thinking block") and the
# SDK's ThinkingBlockParam.signature ("passed back unmodified and in their original
# order"): a context returned as Responses items converts the reply back as several
# chat messages, merged into one assistant message whose thinking must still lead
def test_thinking_leads_an_assistant_message_merged_from_several(tmp_path: Path, embedder: FastEmbedder) -> None:
    reply = [REDACTED, THINKING, {"type": "text", "text": "Checking both."},
             {"type": "tool_use", "id": "toolu_a", "name": "weather", "input": {"city": "Tokyo"}},
             {"type": "tool_use", "id": "toolu_b", "name": "clock", "input": {"tz": "JST"}}]
    with Memory(Config(data_dir=tmp_path / "d", context_format="responses"), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        for m in [USER, {"role": "assistant", "content": reply}, {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "sunny"},
                {"type": "tool_result", "tool_use_id": "toolu_b", "content": "09:00"}]}]:
            mem.append_many("c", from_anthropic(m))
        req = to_anthropic(mem.context("c", "weather?", 8000), mem)
    assert [m["role"] for m in req.messages] == ["user", "assistant", "user"]
    sent = [{k: v for k, v in b.items() if k != "cache_control"} for b in req.messages[1]["content"]]
    assert sent[:2] == [REDACTED, THINKING]
    assert sorted(sent[2:], key=str) == sorted(reply[2:], key=str)

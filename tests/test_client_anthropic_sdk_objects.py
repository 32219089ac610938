"""`Client` and `AsyncClient` `.append_many(..., format="anthropic")` take the anthropic
SDK's own objects as `from_anthropic` takes them, and refuse what JSON cannot carry with
the library's `ValidationError` naming where, before sending.

A review (2026-12-06) sent a real `tiermem serve` the reply of `messages.create` (an
`anthropic.types.Message`) and the tool loop's `{"role": "assistant", "content":
reply.content}`: both clients raised a bare `TypeError: Object of type TextBlock is not
JSON serializable` from inside httpx (`_anthropic_wire` sent `dict(message)`, its blocks
still the SDK's objects), while the library's `from_anthropic` stores both. A value JSON
has no form for (a date in a tool's input, NaN, a lone surrogate) was httpx's bare
TypeError or ValueError too. Here a real `tiermem serve` child (`--no-auth`), the history
it stores held equal to what `from_anthropic` makes of the same input.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest
from anthropic.types import CitationCharLocation, Message, TextBlock
from service_helpers import serve_open

from tiermem.adapters.anthropic import from_anthropic
from tiermem.client import AsyncClient, Client
from tiermem.errors import ConversationNotFound, ValidationError

NS = "sdk"
QUESTION = {"role": "user", "content": "Weather in Tokyo?"}  # a plain first message of each batch
REPLY = Message.model_validate({
    "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
    "stop_reason": "tool_use", "stop_sequence": None, "usage": {"input_tokens": 12, "output_tokens": 7},
    "content": [{"type": "text", "text": "Checking the forecast."},
                {"type": "tool_use", "id": "toolu_01", "name": "weather", "input": {"city": "Tokyo"}}]})
CITATION = CitationCharLocation.model_validate({
    "type": "char_location", "cited_text": "21C", "document_index": 0, "document_title": "forecast",
    "start_char_index": 0, "end_char_index": 3})

# (case id, the Anthropic message sent after QUESTION)
SDK_SHAPES: list[tuple[str, Any]] = [
    # the reply object itself: its fields besides content go to metadata (anthropic_reply)
    ("reply-object", REPLY),
    # the SDK docs' tool loop: the reply's blocks (TextBlock, ToolUseBlock) in a plain dict
    ("param-with-reply-blocks", {"role": "assistant", "content": REPLY.content}),
    # a tool_result (a dict) whose content is the SDK's block objects
    ("tool-result-holding-blocks", {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_01",
         "content": [TextBlock(type="text", text="21C and sunny"), TextBlock(type="text", text="wind 3 m/s")]}]}),
    # an SDK object deeper than a block: a dict text block citing with the SDK's citation
    # objects (the library refused it before too: 'is not storable as JSON')
    ("citation-objects-in-a-dict-block", {"role": "assistant", "content": [
        {"type": "text", "text": "It is 21C.", "citations": [CITATION]}]}),
]

# (case id, the Anthropic message sent after QUESTION, the field named, text the problem has)
UNSENDABLE: list[tuple[str, Any, str, str]] = [
    # a date in a tool's input: TypeError inside httpx before
    ("date-in-tool-input", {"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_02", "name": "book", "input": {"when": dt.date(2026, 12, 24)}}]},
     "messages[1].content[0].input.when", "Object of type date is not JSON serializable"),
    # NaN in a tool's input: httpx's ValueError before
    ("nan-in-tool-input", {"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_03", "name": "scale", "input": {"factor": float("nan")}}]},
     "messages[1].content[0].input.factor", "Out of range float values are not JSON compliant"),
    # an object inside a tool_result's block, beside an SDK block that converts
    ("object-in-tool-result-block", {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_01",
         "content": [TextBlock(type="text", text="ok"), {"type": "text", "text": object()}]}]},
     "messages[1].content[0].content[1].text", "Object of type object is not JSON serializable"),
    # a lone surrogate in a text block: httpx's UnicodeEncodeError before
    ("lone-surrogate-text", {"role": "user", "content": [{"type": "text", "text": "a\ud800b"}]},
     "messages[1].content[0].text", "surrogates not allowed"),
    # below a key that is no plain name: named as far as the keys are, the rest quoted
    ("under-a-quoted-key", {"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_04", "name": "book", "input": {"check in": {"at": dt.time(15)}}}]},
     "messages[1].content[0].input", "at 'check in'.at: cannot be stored as JSON"),
]

KINDS = ["sync", "async"]  # Client, AsyncClient: one request builder, two senders


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serve_open(tmp_path_factory.mktemp("client-anthropic-sdk")) as served:
        yield served


def _append(url: str, kind: str, conv: str, messages: list[Any]) -> list[int]:
    if kind == "sync":
        with Client(url, namespace=NS) as client:
            return client.append_many(conv, messages, format="anthropic")

    async def on_async() -> list[int]:
        async with AsyncClient(url, namespace=NS) as client:
            return await client.append_many(conv, messages, format="anthropic")
    return asyncio.run(on_async())


def _stored(url: str, conv: str) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    with Client(url, namespace=NS) as client:
        return [(m.body, m.metadata) for m in client.history(conv)]


def _converted(message: Any) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """What the library's `from_anthropic` makes of `message`: (body, metadata) per row."""
    return [({k: v for k, v in c.items() if k != "metadata"}, c.get("metadata")) for c in from_anthropic(message)]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("case", "message"), SDK_SHAPES, ids=[c for c, _ in SDK_SHAPES])
def test_sdk_objects_are_stored_as_from_anthropic_converts_them(url: str, kind: str, case: str,
                                                                 message: Any) -> None:
    conv = f"{case}-{kind}"
    positions = _append(url, kind, conv, [QUESTION, message])
    expected = _converted(QUESTION) + _converted(message)
    assert positions == list(range(len(expected)))  # a new conversation: from 0
    assert _stored(url, conv) == expected


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("case", "message", "field", "problem"), UNSENDABLE, ids=[c[0] for c in UNSENDABLE])
def test_a_value_json_cannot_carry_is_refused_naming_where(url: str, kind: str, case: str, message: Any,
                                                           field: str, problem: str) -> None:
    conv = f"{case}-{kind}"
    with pytest.raises(ValidationError) as refused:
        _append(url, kind, conv, [QUESTION, message])
    assert refused.value.field == field
    assert problem in refused.value.problem
    with Client(url, namespace=NS) as client, pytest.raises(ConversationNotFound):
        client.history(conv)  # nothing written: the batch was refused whole, before sending


def test_the_library_refuses_them_too() -> None:
    """The same values through the library's own conversion: refused as ValidationError
    (named by their block), so the client refuses nothing the library would store."""
    for _case, message, field, _problem in UNSENDABLE:
        with pytest.raises(ValidationError) as refused:
            from_anthropic(message)
        assert field.removeprefix("messages[1].").startswith(refused.value.field)


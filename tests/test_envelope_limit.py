"""Bytes of a message that are neither text nor payload (ids, statuses, annotations,
fields stored without reading) are sent with it but counted neither as tokens nor against
`max_content_bytes`: they have their own bound (`MAX_ENVELOPE_BYTES`). On the code
before, each refused case below was stored (a megabyte in an `id` or a `status`), and a
20,000-word `id` went out in a context counted at 32 tokens for a budget of 500 (an
audit, 2026-12-03)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tiermem import Config, Memory, ValidationError
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.models import MAX_ENVELOPE_BYTES

BIG = "x" * (MAX_ENVELOPE_BYTES + 1)


@pytest.fixture
def mem(tmp_path: Path, embedder: FastEmbedder) -> Iterator[Memory]:
    with Memory(Config(data_dir=tmp_path / "data", max_content_bytes=2_000_000), embedder=embedder, hot=False,
                background_indexing=False) as m:
        yield m


REFUSED: list[tuple[dict[str, Any], str]] = [
    # a Responses message item's id
    ({"type": "message", "role": "user", "content": "Book Lisbon", "id": BIG}, "id"),
    # its status
    ({"type": "message", "role": "assistant", "status": BIG,
      "content": [{"type": "output_text", "text": "ok", "annotations": []}]}, "status"),
    # a function call's namespace
    ({"type": "function_call", "call_id": "c1", "name": "search", "arguments": "{}", "namespace": BIG}, "namespace"),
    # a chat assistant message's annotations (a reply-only field)
    ({"role": "assistant", "content": "ok", "annotations": [{"type": "url_citation", "title": BIG}]}, "annotations"),
    # a field tiermem does not read, inside a content part
    ({"role": "user", "content": [{"type": "text", "text": "hi", "cache_hint": BIG}]}, "content"),
    # and inside a tool call
    ({"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}, "trace": BIG}]}, "tool_calls"),
]


@pytest.mark.parametrize(("body", "field"), REFUSED, ids=[f for _, f in REFUSED])
def test_bytes_besides_text_and_payload_are_bounded(mem: Memory, body: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as err:
        mem.append("c", body)
    assert err.value.field == field and str(MAX_ENVELOPE_BYTES) in str(err.value)
    assert mem.conversations() == []


ACCEPTED: list[dict[str, Any]] = [
    # text whose JSON escapes double it (newlines, quotes, tabs) counts as text, not envelope
    {"role": "user", "content": 'line "quoted"\n\t' * 20_000},
    # control characters: six bytes each in JSON
    {"role": "user", "content": "\x01" * 50_000},
    # 128 parallel tool calls with their ids
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"call_{i:024d}", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "x"}'}}
        for i in range(128)]},
    # a Responses item as the Agents SDK stores it
    {"type": "message", "role": "assistant", "id": "msg_68a0c0ffee", "status": "completed",
     "content": [{"type": "output_text", "text": "Done.", "annotations": []}]},
]


@pytest.mark.parametrize("body", ACCEPTED, ids=["escapes", "control characters", "128 tool calls", "agents item"])
def test_ordinary_messages_pass(mem: Memory, body: dict[str, Any]) -> None:
    mem.append("c", body)
    assert len(mem.history("c")) == 1

"""Invariant 8, first half: bad input gets an error that names the field (and the limit,
where there is one) and writes nothing, one message or a whole batch."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tiermem
from tiermem import Config, Memory, Message
from tiermem.tiers.embed_onnx import FastEmbedder

MAX_CONTENT = 100
MAX_METADATA = 64
MAX_ID = 128  # the default
GOOD = {"role": "user", "content": "fine"}
CALL = {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}


@pytest.fixture
def mem(tmp_path: Path, embedder: FastEmbedder) -> Iterator[Memory]:
    config = Config(data_dir=tmp_path / "d", max_content_bytes=MAX_CONTENT, max_metadata_bytes=MAX_METADATA)
    with Memory(config, embedder=embedder, hot=False, background_indexing=False) as m:
        m.append("existing", GOOD)  # something to leave alone
        yield m


def _rows(mem: Memory) -> dict[str, int]:
    counts = mem.cold.integrity()
    counts["conversations"] = mem.cold.stats()["conversations"]
    return counts


# (conversation id, message, keyword arguments, words the error must contain)
CASES: list[tuple[str, Any, dict[str, Any], tuple[str, ...]]] = [
    # empty id
    ("", GOOD, {}, ("conversation_id", "empty")),
    # one character over the id limit
    ("a" * (MAX_ID + 1), GOOD, {}, ("conversation_id", str(MAX_ID))),
    # NUL byte in the id
    ("conv\x00", GOOD, {}, ("conversation_id",)),
    # newline in the id (log injection)
    ("conv\nINFO fake line", GOOD, {}, ("conversation_id",)),
    # ANSI escape in the id
    ("conv\x1b[31m", GOOD, {}, ("conversation_id",)),
    # path traversal
    ("../x", GOOD, {}, ("conversation_id",)),
    # path separator further in
    ("a/../../etc/passwd", GOOD, {}, ("conversation_id",)),
    # Redis hash-tag braces would break key slotting
    ("conv{x}", GOOD, {}, ("conversation_id",)),
    # Unicode look-alike: Cyrillic "с" and "о" in "соnv"
    ("соnv", GOOD, {}, ("conversation_id",)),
    # not a string at all
    (123, GOOD, {}, ("conversation_id", "string")),
    # a bad namespace is refused like a bad conversation id
    ("conv", GOOD, {"namespace": "../other"}, ("namespace",)),
    # control characters in the session id
    ("conv", GOOD, {"session_id": "s1\r\nx"}, ("session_id",)),
    # unknown role (developer is a real one since the message formats issue)
    ("conv", {"role": "moderator", "content": "x"}, {}, ("role", "moderator")),
    # a Responses item of a type no OpenAI API defines
    ("conv", {"type": "telepathy_call", "call_id": "c1"}, {}, ("type", "telepathy_call")),
    # neither a role nor a type: not a message of either family
    ("conv", {"content": "x"}, {}, ("role",)),
    # a tool result without the call it answers
    ("conv", {"role": "tool", "content": "42"}, {}, ("tool_call_id",)),
    # tool calls on a user message
    ("conv", {"role": "user", "content": "x", "tool_calls": [CALL]}, {}, ("tool_calls",)),
    # tool_call_id on a user message
    ("conv", {"role": "user", "content": "x", "tool_call_id": "call_1"}, {}, ("tool_call_id",)),
    # content null on a user message
    ("conv", {"role": "user", "content": None}, {}, ("content",)),
    # content null on an assistant message without tool calls
    ("conv", {"role": "assistant", "content": None}, {}, ("content",)),
    # content of the wrong type
    ("conv", {"role": "user", "content": 42}, {}, ("content",)),
    # content one byte over the limit
    ("conv", {"role": "user", "content": "x" * (MAX_CONTENT + 1)}, {}, ("content", str(MAX_CONTENT))),
    # the limit is in bytes, not characters: 51 "é" are 102 bytes
    ("conv", {"role": "user", "content": "é" * 51}, {}, ("content", str(MAX_CONTENT))),
    # list content counts all its parts
    ("conv", {"role": "user", "content": [{"type": "text", "text": "x" * 60}] * 2}, {},
     ("content", str(MAX_CONTENT))),
    # a lone surrogate cannot be stored as UTF-8
    ("conv", {"role": "user", "content": "bad \ud800 text"}, {}, ("content",)),
    # metadata that is a list, passed as a keyword
    ("conv", GOOD, {"metadata": [1, 2]}, ("metadata", "object")),
    # metadata that is a string, inside the message
    ("conv", {**GOOD, "metadata": "tag"}, {}, ("metadata", "object")),
    # metadata over the limit
    ("conv", GOOD, {"metadata": {"note": "v" * MAX_METADATA}}, ("metadata", str(MAX_METADATA))),
    # metadata that JSON cannot hold
    ("conv", GOOD, {"metadata": {"when": float("nan")}}, ("metadata",)),
    # an unknown field is refused, not dropped
    ("conv", {**GOOD, "colour": "red"}, {}, ("colour",)),
    # not a message at all
    ("conv", ["user", "hi"], {}, ("message",)),
]


@pytest.mark.parametrize(("conv", "message", "kwargs", "words"), CASES)
def test_append_refuses_and_writes_nothing(
    mem: Memory, conv: Any, message: Any, kwargs: dict[str, Any], words: tuple[str, ...]
) -> None:
    before = _rows(mem)
    with pytest.raises(tiermem.ValidationError) as info:
        mem.append(conv, message, **kwargs)
    for word in words:
        assert word in str(info.value), (word, str(info.value))
    assert _rows(mem) == before
    assert mem.conversations() == ["existing"]


@pytest.mark.parametrize(("conv", "message", "kwargs", "words"),
                         [c for c in CASES if c[2].keys() <= {"namespace", "session_id"}])
def test_append_many_refuses_the_same(
    mem: Memory, conv: Any, message: Any, kwargs: dict[str, Any], words: tuple[str, ...]
) -> None:
    before = _rows(mem)
    with pytest.raises(tiermem.ValidationError) as info:
        mem.append_many(conv, [GOOD, message], **kwargs)
    for word in words:
        assert word in str(info.value), (word, str(info.value))
    assert _rows(mem) == before


@pytest.mark.parametrize("bad_at", [0, 2, 4])
def test_a_batch_with_one_bad_message_writes_none(mem: Memory, bad_at: int) -> None:
    batch: list[Any] = [{"role": "user", "content": f"ok {i}"} for i in range(5)]
    batch[bad_at] = {"role": "user", "content": None}
    before = _rows(mem)
    with pytest.raises(tiermem.ValidationError) as info:
        mem.append_many("batch", batch)
    # the error points at the message in the batch, and at its field
    assert f"messages[{bad_at}]" in str(info.value) and "content" in str(info.value)
    assert _rows(mem) == before
    with pytest.raises(tiermem.ConversationNotFound):
        mem.history("batch")


def test_message_objects_meet_the_same_limits(mem: Memory) -> None:
    # a Message built by the caller passed pydantic, but not the configured limits
    big = Message(role="user", content="x" * (MAX_CONTENT + 1))
    heavy = Message(role="user", content="x", metadata={"note": "v" * MAX_METADATA})
    before = _rows(mem)
    for msg, field in ((big, "content"), (heavy, "metadata")):
        with pytest.raises(tiermem.LimitExceeded, match=field):
            mem.append("conv", msg)
        with pytest.raises(tiermem.LimitExceeded, match=field):
            mem.append_many("conv", [Message(role="user", content="fine"), msg])
    assert _rows(mem) == before


def test_limit_errors_carry_the_numbers(mem: Memory) -> None:
    with pytest.raises(tiermem.LimitExceeded) as info:
        mem.append("conv", {"role": "user", "content": "x" * 150})
    assert (info.value.field, info.value.value, info.value.limit) == ("content", 150, MAX_CONTENT)


def test_valid_edge_cases_are_accepted(mem: Memory) -> None:
    # exactly at the limits, and the shapes the rules allow
    ok: list[tuple[str, Any, dict[str, Any]]] = [
        ("a" * MAX_ID, GOOD, {}),
        ("user@example.com:thread-1.v2", GOOD, {}),
        ("conv", {"role": "user", "content": "x" * MAX_CONTENT}, {}),
        ("conv", {"role": "assistant", "content": None, "tool_calls": [CALL]}, {}),
        ("conv", {"role": "tool", "content": "42", "tool_call_id": "call_1"}, {}),
        ("conv", GOOD, {"metadata": {}, "session_id": "2024-05-01 visit"}),
    ]
    for conv, message, kwargs in ok:
        mem.append(conv, message, **kwargs)
    assert len(mem.history("conv")) == 4

"""A chat reply from the openai SDK's streaming helper (`client.chat.completions.stream(...)
.get_final_completion().choices[0].message`) is stored without the `index` its
accumulator leaves on each tool call (the chunk's `ChoiceDeltaToolCall.index`, the call's
place in the reply, which the list's order already says). Before, tiermem stored it and
every context sent it back, `as_stored` and `chat` alike (`{"id": "call_a", ...,
"index": 0}`): not a field of `ChatCompletionMessageParam`, so the SDK's own request type
with extra keys forbidden refused the context, against the README's "contexts are valid
request params". Now append drops it as it drops the `.parse()` helpers' `parsed_arguments`
(`tiers.models._sdk_wire_form`), and a row stored with it before is read without it
(`tiers.formats.as_appended`: contexts and exports; history keeps the row as stored).

The replies are the real SDK's: `ChatCompletionStreamState`, the accumulator behind
`chat.completions.stream()`, fed the chunks a server streams (no network)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sdk_corpus as corpus
from cold_helpers import rewrite_stored
from openai import pydantic_function_tool
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk, ChatCompletionMessage
from pydantic import BaseModel

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")

QUESTION = "Weather in Lisbon and Porto?"
CALL_AT = 1  # the reply's position in the conversation (after the question)


class Weather(BaseModel):
    city: str


def _chunk(delta: dict[str, Any], finish: str | None = None) -> ChatCompletionChunk:
    return ChatCompletionChunk.model_validate({
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "gpt-4o",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def _call_start(index: int, cid: str) -> dict[str, Any]:
    return {"tool_calls": [{"index": index, "id": cid, "type": "function",
                            "function": {"name": "weather", "arguments": ""}}]}


def _args(index: int, piece: str) -> dict[str, Any]:
    return {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}


# the chunks a server streams for two parallel calls, arguments in pieces
TWO_CALLS = [
    _chunk({"role": "assistant", "content": None}),
    _chunk(_call_start(0, "call_a")), _chunk(_args(0, '{"city": ')), _chunk(_args(0, '"Lisbon"}')),
    _chunk(_call_start(1, "call_b")), _chunk(_args(1, '{"city": "Porto"}')),
    _chunk({}, "tool_calls"),
]
# text before the call (streamed content, then one call)
TEXT_THEN_CALL = [
    _chunk({"role": "assistant", "content": "Checking. "}), _chunk({"content": "One moment."}),
    _chunk(_call_start(0, "call_a")), _chunk(_args(0, '{"city": "Lisbon"}')),
    _chunk({}, "tool_calls"),
]
WIRE_CALLS = {
    "two_calls": [{"id": "call_a", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Lisbon"}'}},
                  {"id": "call_b", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Porto"}'}}],
    "text_then_call": [{"id": "call_a", "type": "function",
                        "function": {"name": "weather", "arguments": '{"city": "Lisbon"}'}}],
}


def streamed(chunks: list[ChatCompletionChunk], *, strict_tool: bool) -> ChatCompletionMessage:
    """The message `get_final_completion()` returns for these chunks; with a strict
    pydantic tool each call also carries the helper's `parsed_arguments`."""
    state: ChatCompletionStreamState[Any] = ChatCompletionStreamState(
        input_tools=[pydantic_function_tool(Weather, name="weather")] if strict_tool else [])
    for c in chunks:
        state.handle_chunk(c)
    return state.get_final_completion().choices[0].message


# (reply name, chunks, strict tool): each a stream the helper accumulates
REPLIES = [
    # two parallel calls: index 0 and 1
    ("two_calls", TWO_CALLS, False),
    # the same with a strict pydantic tool: parsed_arguments beside index
    ("two_calls_strict", TWO_CALLS, True),
    # text and a call in one reply
    ("text_then_call", TEXT_THEN_CALL, False),
]
# the ways a caller serializes the reply before append (the README's list)
SERIALIZATIONS: dict[str, Callable[[ChatCompletionMessage], Any]] = {
    "object": lambda o: o,
    "model_dump": lambda o: o.model_dump(),
    "model_dump_exclude_none": lambda o: o.model_dump(exclude_none=True),
    "to_dict": lambda o: o.to_dict(),
    # the tool loop's dict holding the SDK's call objects
    "dict_with_call_objects": lambda o: {"role": "assistant", "content": o.content, "tool_calls": o.tool_calls},
}
FORMATS = ("as_stored", "chat")  # the context formats that send the chat rows as stored


def _results(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"role": "tool", "tool_call_id": c["id"], "content": "21C"} for c in calls]


def test_the_helper_leaves_index_on_each_call() -> None:
    # the premise: what the real SDK's accumulator returns carries `index` per call
    msg = streamed(TWO_CALLS, strict_tool=False)
    assert [c.model_dump()["index"] for c in msg.tool_calls or ()] == [0, 1]


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return tmp_path / "data"


def _open(data: Path, embedder: FastEmbedder, fmt: str) -> Memory:
    return Memory(Config(data_dir=data, context_format=fmt), embedder=embedder, hot=False,
                  background_indexing=False)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("how", list(SERIALIZATIONS))
@pytest.mark.parametrize(("name", "chunks", "strict"), REPLIES, ids=[r[0] for r in REPLIES])
def test_a_streamed_reply_is_stored_and_sent_without_index(data: Path, embedder: FastEmbedder, name: str,
                                                           chunks: list[ChatCompletionChunk], strict: bool,
                                                           how: str, fmt: str) -> None:
    wire_calls = WIRE_CALLS[name.removesuffix("_strict")]
    with _open(data, embedder, fmt) as mem:
        mem.append("c", {"role": "user", "content": QUESTION})
        mem.append("c", SERIALIZATIONS[how](streamed(chunks, strict_tool=strict)))
        mem.append_many("c", _results(wire_calls))
        stored = mem.history("c")[CALL_AT].body
        # stored without index (nor parsed_arguments), each call otherwise as streamed
        assert [{k: v for k, v in c.items() if v is not None} for c in stored["tool_calls"]] == wire_calls
        ctx = mem.context("c", QUESTION, 4000)
        sent = next(m for m in ctx.messages if m.get("tool_calls"))
        assert sent["tool_calls"] == wire_calls
        corpus.valid_chat(ctx.messages)  # the SDK's request type, extra keys forbidden


# (case, the reply row as a release before this stored it)
STORED_BEFORE = {
    # the streaming helper's reply as to_dict() wrote it: index on each call
    "index_on_each_call": {"role": "assistant", "content": None, "tool_calls": [
        {**c, "index": i} for i, c in enumerate(WIRE_CALLS["two_calls"])]},
    # model_dump(): the explicit nulls too
    "with_nulls": {"role": "assistant", "content": None, "refusal": None, "audio": None, "function_call": None,
                   "annotations": None, "tool_calls": [{**c, "index": i} for i, c in enumerate(WIRE_CALLS["two_calls"])]},
}


@pytest.fixture
def old_store(data: Path, embedder: FastEmbedder, request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """A store whose reply row holds the tool calls' `index`, written behind tiermem's back."""
    before = STORED_BEFORE[request.param]
    with _open(data, embedder, "chat") as mem:
        mem.append_many("c", [{"role": "user", "content": QUESTION},
                              {"role": "assistant", "content": None, "tool_calls": WIRE_CALLS["two_calls"]},
                              *_results(WIRE_CALLS["two_calls"])])
        key = mem.cold.key_of("default", "c")
        assert key is not None
    rewrite_stored(Config(data_dir=data).db_path, key, [(CALL_AT, "body", json.dumps(before))])
    yield before


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("old_store", list(STORED_BEFORE), indirect=True)
def test_a_row_stored_with_index_before_is_sent_without_it(data: Path, embedder: FastEmbedder,
                                                           old_store: dict[str, Any], fmt: str) -> None:
    with _open(data, embedder, fmt) as mem:
        assert mem.history("c")[CALL_AT].body == old_store  # the row stays as stored
        ctx = mem.context("c", QUESTION, 4000)
        sent = next(m for m in ctx.messages if m.get("tool_calls"))
        assert sent["tool_calls"] == WIRE_CALLS["two_calls"]
        corpus.valid_chat(ctx.messages)

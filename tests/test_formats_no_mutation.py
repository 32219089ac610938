"""Converting between the two message families (tiers.formats `to_chat`, `to_responses`,
`wire_body`) never changes its input: the bodies converted are the stored ones and the
planner's cached copies. A chat assistant's tool calls followed by a Responses
`function_call` once grew the stored body's own `tool_calls` list on every conversion, so
contexts repeated a call id and counted fewer tokens than they sent."""

from __future__ import annotations

import contextlib
import copy
from pathlib import Path
from typing import Any

import pytest
import sdk_corpus as corpus
from conftest import full_memory

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.formats import to_chat, to_responses, wire_body
from tiermem.tiers.tokens import messages_tokens


def _mixed() -> list[dict[str, Any]]:
    """A chat tool-calling reply whose parallel call arrived as a Responses item."""
    return [
        {"role": "user", "content": "do A and B"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "A", "type": "function", "function": {"name": "search_flights_in_database",
                                                          "arguments": '{"from": "LIS", "to": "HND"}'}}]},
        {"type": "function_call", "call_id": "B", "name": "get_weather_for_city", "arguments": '{"city": "Tokyo"}'},
        {"role": "tool", "tool_call_id": "A", "content": "a done"},
        {"type": "function_call_output", "call_id": "B", "output": "b done"},
        {"role": "assistant", "content": "Both done."},
        {"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}]},
        {"role": "user", "content": "thanks"},
    ]


@pytest.mark.parametrize("convert", [to_chat, to_responses, lambda bs: [wire_body(b) for b in bs]],
                         ids=["to_chat", "to_responses", "wire_body"])
def test_conversions_leave_their_input_unchanged(convert: Any) -> None:
    for bodies in (_mixed(), corpus.responses_conversation(), [b for _name, b in corpus.chat_corpus()]):
        before = copy.deepcopy(bodies)
        first = convert(bodies)
        assert bodies == before
        assert convert(bodies) == first  # and converting again gives the same


def test_to_chat_merges_a_call_into_a_new_list() -> None:
    bodies = _mixed()
    out = to_chat(bodies)
    assert [c["id"] for c in out[1]["tool_calls"]] == ["A", "B"]
    assert [c["id"] for c in bodies[1]["tool_calls"]] == ["A"]
    out[1]["tool_calls"].append({"id": "C"})  # what a caller does with its output stays there
    assert [c["id"] for c in bodies[1]["tool_calls"]] == ["A"]


@pytest.mark.parametrize("hot", [False, True], ids=["cold", "hot"])
def test_chat_contexts_keep_each_call_once_and_count_what_they_send(
        tmp_path: Path, embedder: FastEmbedder, hot: bool) -> None:
    with contextlib.ExitStack() as stack:
        cfg = Config(data_dir=tmp_path / "d", context_format="chat")
        mem = stack.enter_context(full_memory(cfg, embedder) if hot else
                                  Memory(cfg, embedder=embedder, hot=False, background_indexing=False))
        mem.append_many("mix", _mixed())
        for _ in range(3):  # every call: the planner's cached bodies must not have grown
            ctx = mem.context("mix", "thanks", 2000)
            ids = [c["id"] for m in ctx.messages for c in m.get("tool_calls") or ()]
            assert ids == ["A", "B"]
            corpus.valid_chat(ctx.messages)
            assert messages_tokens(mem.tokens, ctx.messages) <= ctx.tokens <= 2000
        assert len(mem.history("mix")[1].body["tool_calls"]) == 1

"""The thinking blocks a request sends back are counted where the API counts them.

The plan counts a stored message's body, which holds no thinking block (`anthropic_thinking`
is metadata); `to_anthropic(ctx, memory)` put back the current tool loop's thinking, which
the API requires there and counts in the context window, without counting it: a kept block
(a web search's result) went whole in room the thinking already took, and the request
passed the budget by the thinking's size. Now the request counts the current loop's
thinking (its text; a redacted block's data by its decoded bytes), the kept blocks go whole
only in the room left, and `AnthropicRequest.tokens` is the plan's tokens with both. The
thinking of earlier turns, which `thinking="all"` sends, is not counted: the API strips it
from the context window (Anthropic's "Context windows": context_window = (input_tokens -
previous_thinking_tokens) + current_turn_tokens). Real Memory, real anthropic SDK types."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from anthropic.types import MessageParam
from pydantic import ConfigDict, TypeAdapter

from tiermem import Config, Memory
from tiermem.adapters.anthropic import from_anthropic, kept_block_tokens, thinking_tokens, to_anthropic
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")

_PARAM = TypeAdapter(MessageParam, config=ConfigDict(extra="forbid"))
META_BYTES = 256 * 1024
RESULT = "web_search_tool_result"
QUESTION = "Now book a table for two at eight."
LOOP_THINKING = {"type": "thinking", "signature": "EqQBCkgIARABGAIiQL",
                 "thinking": " ".join(f"Option {i}: the harbour terrace or the old town cellar." for i in range(60))}
OLD_THINKING = {"type": "thinking", "signature": "EqQBCkgIARABGAIiQM",
                "thinking": " ".join(f"Source {i} looks reliable for the forecast." for i in range(60))}
REDACTED = {"type": "redacted_thinking", "data": base64.b64encode(bytes(range(255)) * 8).decode()}  # 2,040 bytes


def _reply(content: list[dict[str, Any]], stop: str) -> dict[str, Any]:
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "stop_reason": stop,
            "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}, "content": content}


def _conversation(loop_thinking: dict[str, Any]) -> list[dict[str, Any]]:
    search = [{"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "lisbon"}},
              {"type": RESULT, "tool_use_id": "srvtoolu_1", "content": [
                  {"type": "web_search_result", "url": "https://w.test/lisbon", "title": "Lisbon forecast",
                   "encrypted_content": base64.b64encode(bytes(range(256)) * 6).decode()}]},
              {"type": "text", "text": "Sunny all week."}]
    return [{"role": "user", "content": "What is the Lisbon forecast?"},
            _reply([OLD_THINKING, *search], "end_turn"),
            {"role": "user", "content": QUESTION},  # the current tool loop opens here
            _reply([loop_thinking, {"type": "tool_use", "id": "toolu_1", "name": "book",
                                    "input": {"people": 2, "at": "20:00"}}], "tool_use"),
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "booked"}]}]


def _open(tmp_path: Any, embedder: FastEmbedder) -> Memory:
    return Memory(Config(data_dir=tmp_path / "data", max_metadata_bytes=META_BYTES), embedder=embedder, hot=False,
                  background_indexing=False)


# (the loop's thinking block, the thinking scope, the room past the plan's tokens and the
# search sent whole, in the loop thinking's tokens, whether the search goes whole)
CASES: list[tuple[dict[str, Any], str, float, bool]] = [
    # room for the search whole, not for the thinking too: before, sent whole all the same,
    # the request past the budget by half the thinking
    (LOOP_THINKING, "current_loop", 0.5, False),
    (LOOP_THINKING, "current_loop", 1.0, True),  # room for both: the search whole
    (REDACTED, "current_loop", 0.5, False),  # a redacted block: its 2,040 bytes of data, 510 tokens
    # every turn's thinking sent: the earlier turn's uncounted (the API strips it), the loop's counted
    (LOOP_THINKING, "all", 0.5, False),
]


@pytest.mark.parametrize(("loop_thinking", "scope", "room", "whole"), CASES,
                         ids=["thinking takes the room", "room for both", "redacted", "all turns"])
def test_the_current_loops_thinking_is_counted_as_sent(tmp_path: Any, embedder: FastEmbedder,
                                                       loop_thinking: dict[str, Any], scope: str, room: float,
                                                       whole: bool) -> None:
    with _open(tmp_path, embedder) as mem:
        for m in _conversation(loop_thinking):
            mem.append_many("c", from_anthropic(m, max_metadata_bytes=META_BYTES))
        big = mem.context("c", QUESTION, 20_000)
        full = to_anthropic(big, mem, thinking=scope)
        thought = thinking_tokens(mem.tokens, loop_thinking)
        assert thought == (510 if loop_thinking is REDACTED else mem.tokens.count(loop_thinking["thinking"]))
        search = [b for m in full.messages for b in m["content"] if b["type"] in ("server_tool_use", RESULT)]
        assert len(search) == 2  # whole at 20,000
        extra = full.tokens - big.tokens - thought  # what the search whole adds to its words
        words = sum(mem.tokens.count(t["text"]) for t in mem.history("c")[1].body["content"][:2])
        assert extra >= sum(kept_block_tokens(mem.tokens, b) for b in search) - words > 0
        budget = big.tokens + extra + int(thought * room)
        ctx = mem.context("c", QUESTION, budget)
        assert ctx.tokens == big.tokens  # the same turns planned
        req = to_anthropic(ctx, mem, thinking=scope)
        for m in req.messages:
            _PARAM.validate_python(m)
        sent = [b["type"] for m in req.messages for b in m["content"]]
        assert (RESULT in sent) is whole
        # the loop's thinking goes back (the API requires it), the earlier turn's with "all" only
        assert sent.count(loop_thinking["type"]) >= 1
        assert sent.count("thinking") + sent.count("redacted_thinking") == (2 if scope == "all" else 1)
        assert req.tokens == ctx.tokens + thought + (extra if whole else 0)
        assert req.tokens <= budget  # before: past it by half the thinking where the search went whole
        # a note where the search goes as its words, none where it goes whole (no estimate here)
        assert [n.split(": ")[0] for n in req.notes] == ([] if whole else [
            f"messages[1].content[{1 if scope == 'all' else 0}]"])  # after the earlier turn's thinking, sent

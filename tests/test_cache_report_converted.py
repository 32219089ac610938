"""`plan.cache` (prefix_messages, expected_cached_tokens, boundary) describes the messages
the caller receives, after any conversion (context_format) or fold (system_messages=
"merge"), as the breakpoints do: each case plans two contexts in a row and compares the
report with the prefix the two returned message lists actually share.

Before, the report compared the planned segments, before conversion: under "merge" it
claimed the system and pinned segments shared (2 messages, 86 tokens) while the first
message sent had changed (the retrieved block folds into it), so nothing was shared;
under "chat" an assistant text and its Responses call, two planned segments, are one
message sent (claimed 7 messages, 61 tokens; 6 sent, 56); under "responses" a chat
assistant message with text and a call is two items sent (claimed 6 of the 7 shared).
Real SQLite, the real model and tokenizer, no hot tier.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tiermem import Config, Memory
from tiermem.evals.cost import common_prefix_messages
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.tokens import message_tokens

BUDGET = 2000  # tokens: room for every turn of these conversations
SYSTEM = "Be brief."
PINNED = 3  # a turn of TALK: the pinned block is a system message the fold moves

# a Responses-form round: the assistant's text and its call are one chat message
RESPONSES_ROUND: list[dict[str, Any]] = [
    {"role": "user", "content": "Find my booking."},
    {"role": "assistant", "content": "Let me look."},
    {"type": "function_call", "call_id": "fc1", "name": "lookup", "arguments": "{\"q\": \"booking\"}"},
    {"type": "function_call_output", "call_id": "fc1", "output": "Hotel Sakura, Tokyo, 3 nights"},
    {"role": "assistant", "content": "You are at Hotel Sakura."},
]
# a chat-form round: the assistant's text and its call are two Responses items
CHAT_ROUND: list[dict[str, Any]] = [
    {"role": "user", "content": "Find my booking."},
    {"role": "assistant", "content": "Let me look.", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\": \"booking\"}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "Hotel Sakura, Tokyo, 3 nights"},
    {"role": "assistant", "content": "You are at Hotel Sakura."},
]
TALK: list[dict[str, Any]] = [
    {"role": "user" if i % 2 == 0 else "assistant",
     "content": f"turn {i}: we talked about the hotel in Tokyo number {i} and a Delta flight " * 3}
    for i in range(40)]


@pytest.mark.parametrize(("settings", "turns", "pin", "queries", "shares_all"), [
    # a call without a retrieved block, then a recall whose block folds into the first
    # message: the first message sent changes, nothing is shared (claimed 2 / 86 before;
    # the other way round, the epoch now keeps the block and the next call shares it all)
    ({"system_messages": "merge"}, TALK, PINNED, [None, "which hotel in Tokyo?"], False),
    # Responses items converted to chat: text and call merge (claimed 7 / 61, sent 6 / 56)
    ({"context_format": "chat"}, RESPONSES_ROUND, None, [None, None], True),
    # chat messages converted to Responses items: text and call split (claimed 6 / 56, sent 7 / 61)
    ({"context_format": "responses"}, CHAT_ROUND, None, [None, None], True),
    # no conversion: the report was right before and stays so
    ({}, TALK, PINNED, ["which hotel in Tokyo?", None], True),
])
def test_the_cache_report_counts_the_messages_sent(tmp_path: Path, embedder: FastEmbedder, settings: dict[str, Any],
                                                   turns: list[dict[str, Any]], pin: int | None,
                                                   queries: list[str | None], shares_all: bool) -> None:
    with Memory(Config(data_dir=tmp_path / "d", **settings), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        mem.append_many("c", turns)
        if pin is not None:
            mem.pin("c", pin)
        sent: list[list[dict[str, Any]]] = []
        for i, query in enumerate(queries):
            mem.append("c", {"role": "user", "content": f"question {i}: {query or 'go on'}"})
            ctx = mem.context("c", query, BUDGET, system=SYSTEM)
            sent.append(ctx.messages)
            mem.append("c", {"role": "assistant", "content": f"answer {i}"})
        prev, now = sent
        k = common_prefix_messages(prev, now)
        cache = ctx.plan.cache
        assert (cache.prefix_messages, cache.expected_cached_tokens) == (
            k, sum(message_tokens(mem.tokens, m) for m in now[:k])), (cache, k)
        # the premise of each case: the whole previous context sent again, or (the fold) none of it
        assert k == (len(prev) if shares_all else 0), (k, len(prev))
        # the layer where reuse stops: none when all of it is; the first message's when none is
        assert cache.boundary == ("" if shares_all else "system"), cache
        if k:
            assert f"{k} message(s), {cache.expected_cached_tokens} tokens shared" in ctx.plan.explain()

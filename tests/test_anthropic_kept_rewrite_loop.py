"""A tool loop's thinking turns the kept blocks into their words once an epoch, never back.

`to_anthropic(ctx, memory)` sends kept blocks (fetched documents, a web search's call and
result) whole while the budget has room, and once a call of the epoch must turn one it sent
whole into its words it turns every one, for the rest of the epoch: one rewrite of the
cached prefix an epoch. The current tool loop's thinking takes room from them too. Which
call had turned them was found by replaying the earlier calls without the thinking each of
them reserved: the loop's tool-result call turned every block into its words (its thinking
took the room), the next question (no loop, no thinking) found no earlier call that had to
and sent them whole again, and the next loop turned them again: at 12,000 tokens, three
rewrites of the prefix from its first message in one epoch. Now the replay counts each
earlier call's loop thinking, and a block an earlier call sent as its words stays so.

A conversation of questions with a URL document and a web search reply, client tool loops
with thinking, and small talk, through real Memory and planner epochs; each request checked
against the SDK's MessageParam and the budget."""

from __future__ import annotations

import base64
import re
from typing import Any

import pytest
from anthropic.types import MessageParam
from pydantic import ConfigDict, TypeAdapter

from tiermem import Config, Memory
from tiermem.adapters.anthropic import from_anthropic, to_anthropic
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")

_PARAM = TypeAdapter(MessageParam, config=ConfigDict(extra="forbid"))
META_BYTES = 256 * 1024
PAGE_BYTES = 1_500  # each search result's encrypted page, decoded: ~375 tokens whole
RESULTS = 2  # search results a reply
THINKING = "I should call the tool. " * 20  # a loop's thinking, ~120 tokens
ROUNDS = 40  # three kinds of round, in turn: document and search, tool loop, small talk
ASKED = re.compile(r"^Q(\d+): summarise")
ANSWERED = re.compile(r"^Answer (\d+)\.")
DOCUMENT = "document"
SEARCH = "web_search_tool_result"


def _b64(n: int, seed: int) -> str:
    return base64.b64encode(bytes((seed + 7 * i) % 256 for i in range(n))).decode()


def _reply(i: int, content: list[dict[str, Any]], stop: str = "end_turn") -> dict[str, Any]:
    return {"id": f"msg_{i}_{stop}", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "stop_reason": stop, "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1},
            "content": content}


def _forms(req: Any) -> tuple[set[tuple[str, int]], set[tuple[str, int]]]:
    """The kept blocks the request holds (each round's document and search result) and
    those of them it sends whole (else as their words)."""
    held: set[tuple[str, int]] = set()
    whole: set[tuple[str, int]] = set()
    for m in req.messages:
        for b in m["content"]:
            asked = ASKED.match(b["text"]) if b["type"] == "text" else None
            answered = ANSWERED.match(b["text"]) if b["type"] == "text" else None
            if asked:  # the round's question: its document, whole or as words, is in the request
                held.add((DOCUMENT, int(asked.group(1))))
            if answered:  # the reply's text: its search too
                held.add((SEARCH, int(answered.group(1))))
            if b["type"] == DOCUMENT:
                whole.add((DOCUMENT, int(b["source"]["url"].rsplit("/", 1)[1].split(".")[0])))
            if b["type"] == SEARCH:
                whole.add((SEARCH, int(b["tool_use_id"].split("_")[1])))
    return held, whole


# (budget in tokens, the calls whose request changed the form of a kept block the previous
# call of the epoch sent, each (call, epoch, rounds turned into words, rounds turned whole))
CASES: list[tuple[int, list[tuple[int, int, int, int]]]] = [
    # rounds 0 and 3's documents and searches go whole; round 22's tool-result call (call
    # 30) needs its loop's thinking room: all four into their words, to the epoch's end.
    # Before: call 31 (the next question) sent the four whole again and call 33 (the next
    # loop's first call) turned them again: [(30, 1, 4, 0), (31, 1, 0, 4), (33, 1, 4, 0)]
    (12_000, [(30, 1, 4, 0)]),
    # room for round 0's document alone: round 7's tool-result call (call 10) turns it, the
    # one rewrite, and nothing goes whole after (as before)
    (5_000, [(10, 1, 1, 0)]),
]


@pytest.mark.parametrize(("budget", "changes"), CASES, ids=[str(c[0]) for c in CASES])
def test_a_loops_thinking_rewrites_the_kept_blocks_once(tmp_path: Any, embedder: FastEmbedder, budget: int,
                                                        changes: list[tuple[int, int, int, int]]) -> None:
    with Memory(Config(data_dir=tmp_path / "data", max_metadata_bytes=META_BYTES), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        calls: list[tuple[int, set[tuple[str, int]], set[tuple[str, int]]]] = []  # per call: epoch, held, whole

        def call(question: str) -> None:
            ctx = mem.context("c", question, budget)
            req = to_anthropic(ctx, mem)
            for m in req.messages:
                _PARAM.validate_python(m)
            assert req.tokens <= budget
            calls.append((ctx.plan.cache.epoch, *_forms(req)))

        for i in range(ROUNDS):
            if i % 3 == 0:  # a URL document, then a web search reply
                question = f"Q{i}: summarise this and search topic {i}."
                mem.append_many("c", from_anthropic({"role": "user", "content": [
                    {"type": "document", "source": {"type": "url", "url": f"https://ex.test/{i}.pdf"}},
                    {"type": "text", "text": question}]}))
                call(question)
                found = [{"type": "web_search_result", "url": f"https://s{i}-{k}.test", "title": f"R{i}.{k}",
                          "encrypted_content": _b64(PAGE_BYTES, i + k)} for k in range(RESULTS)]
                mem.append_many("c", from_anthropic(_reply(i, [
                    {"type": "server_tool_use", "id": f"srvtoolu_{i}", "name": "web_search",
                     "input": {"query": f"t{i}"}},
                    {"type": "web_search_tool_result", "tool_use_id": f"srvtoolu_{i}", "content": found},
                    {"type": "text", "text": f"Answer {i}."}]), max_metadata_bytes=META_BYTES))
            elif i % 3 == 1:  # a client tool loop with thinking: the question, then the result
                question = f"Q{i}: what's the weather in city {i}?"
                mem.append_many("c", from_anthropic({"role": "user", "content": question}))
                call(question)
                mem.append_many("c", from_anthropic(_reply(i, [
                    {"type": "thinking", "thinking": THINKING, "signature": _b64(64, i)},
                    {"type": "tool_use", "id": f"toolu_{i}", "name": "weather", "input": {"city": f"c{i}"}}],
                    "tool_use")))
                mem.append_many("c", from_anthropic({"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": f"sunny {i}"}]}))
                call(question)
                mem.append_many("c", from_anthropic(_reply(i, [{"type": "text", "text": f"Sunny in c{i}."}])))
            else:
                question = f"Q{i}: thanks, and one more thing about {i}."
                mem.append_many("c", from_anthropic({"role": "user", "content": question}))
                call(question)
                mem.append_many("c", from_anthropic(_reply(i, [{"type": "text", "text": f"Sure {i}."}])))

    seen: list[tuple[int, int, int, int]] = []
    for n in range(1, len(calls)):
        (epoch, held, whole), (was_epoch, was_held, was_whole) = calls[n], calls[n - 1]
        if epoch != was_epoch:
            continue
        both = held & was_held  # the blocks the previous request sent too
        to_words, to_whole = len(both & (was_whole - whole)), len(both & (whole - was_whole))
        if to_words or to_whole:
            seen.append((n, epoch, to_words, to_whole))
    assert seen == changes
    epochs = [e for _n, e, _w, _h in seen]
    assert len(epochs) == len(set(epochs))  # one rewrite of the cached prefix an epoch at most
    assert all(to_whole == 0 for _n, _e, _w, to_whole in seen)  # never back to whole

"""Kept blocks sent whole turn into their words at most once an epoch.

Within a planner epoch the context only grows, and the prompt cache serves the previous
request as the next one's prefix. `to_anthropic(ctx, memory)` sends kept blocks (a web
search's call and result) whole while the budget has room, the newer ones as their words
once one does not fit. The plan counted their words and its budget is hard, so once the
context grows past the room the whole ones took, one must turn into its words: a rewrite of
an earlier message, a cache miss. It turned the newest whole one only, so each later call
that outgrew the next one's room rewrote again: at 2,000 tokens, calls 11, 14 and 18 of one
epoch rewrote from messages 13, 11 and 9. Now the first call that must turn one turns every
kept block into its words, and every later call of the epoch sends them so: one rewrite an
epoch, from the first kept block, and the request's `notes` say so from that call on. A
context with room for the blocks whole it sent keeps sending them (no rewrite at all).
Real Memory and planner epochs; requests checked against the SDK's MessageParam."""

from __future__ import annotations

import base64
import json
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
RESULT = "web_search_tool_result"
ONCE = "once an epoch"


def _b64(n: int, seed: int) -> str:
    return base64.b64encode(bytes((seed + 7 * i) % 256 for i in range(n))).decode()


def _reply(i: int, results: int, page_bytes: int) -> dict[str, Any]:
    found = [{"type": "web_search_result", "url": f"https://s{i}-{k}.test/p", "title": f"Result {i}.{k}",
              "encrypted_content": _b64(page_bytes, i * 10 + k)} for k in range(results)]
    return {"id": f"msg_{i}", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "stop_reason": "end_turn", "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1},
            "content": [{"type": "server_tool_use", "id": f"srvtoolu_{i}", "name": "web_search",
                         "input": {"query": f"topic {i}"}},
                        {"type": RESULT, "tool_use_id": f"srvtoolu_{i}", "content": found},
                        {"type": "text", "text": f"Answer number {i} about topic {i}."}]}


def _plain(req: Any) -> list[str]:
    """The request's messages without the breakpoint marks (they move to the new end)."""
    return [json.dumps({"role": m["role"], "content": [{k: v for k, v in b.items() if k != "cache_control"}
                                                       for b in m["content"]]}, sort_keys=True)
            for m in req.messages]


# (budget in tokens, calls, results a reply, decoded bytes of each result's page, the calls
# whose request rewrote a message of the previous one with that message's index, results
# sent whole at the last call)
CASES: list[tuple[int, int, int, int, list[tuple[int, int]], int]] = [
    # one result of ~380 tokens a reply: six whole, then the context outgrows their room at
    # call 8: every one into its words from message 1. Before: [(8, 11), (15, 9)]
    (3_000, 16, 1, 1_500, [(8, 1)], 0),
    # smaller pages, a smaller budget, more calls. Before: [(11, 13), (14, 11), (18, 9)]
    (2_000, 20, 1, 600, [(11, 1)], 0),
    # three results a reply: four whole, the later ones as their words, and the four keep
    # their room to the end: no rewrite at all (as before)
    (6_000, 12, 3, 1_500, [], 4 * 3),
]


@pytest.mark.parametrize(("budget", "calls", "results", "page_bytes", "rewrites", "whole"), CASES,
                         ids=[str(c[0]) for c in CASES])
def test_an_epoch_rewrites_its_kept_blocks_at_most_once(tmp_path: Any, embedder: FastEmbedder, budget: int,
                                                        calls: int, results: int, page_bytes: int,
                                                        rewrites: list[tuple[int, int]], whole: int) -> None:
    with Memory(Config(data_dir=tmp_path / "data", max_metadata_bytes=META_BYTES), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        previous: list[str] | None = None
        seen: list[tuple[int, int]] = []
        sent: list[Any] = []
        for i in range(calls):
            question = f"Question {i}: please search topic {i}."
            mem.append_many("c", from_anthropic({"role": "user", "content": question}))
            ctx = mem.context("c", question, budget)
            assert ctx.plan.cache.epoch == 1  # one epoch throughout: each call extends the last
            req = to_anthropic(ctx, mem)
            for m in req.messages:
                _PARAM.validate_python(m)
            assert req.tokens <= budget
            sent = [b for m in req.messages for b in m["content"] if b["type"] == RESULT]
            plain = _plain(req)
            if previous is not None:
                assert len(plain) == len(previous) + 2  # the reply and the new question
                differ = next((k for k in range(len(previous)) if previous[k] != plain[k]), None)
                if differ is not None:
                    seen.append((i, differ))
            # the request says it rewrote, from the call that did to the epoch's end
            assert any(ONCE in n for n in req.notes) is bool(rewrites and i >= rewrites[0][0])
            previous = plain
            mem.append_many("c", from_anthropic(_reply(i, results, page_bytes), max_metadata_bytes=META_BYTES))
        assert seen == rewrites
        assert sum(len(b["content"]) for b in sent) == whole

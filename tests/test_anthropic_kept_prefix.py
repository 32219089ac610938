"""Within a planner epoch the context only grows (the previous call's messages, then the new
turn), and a provider's prompt cache serves the request's prefix that the previous request
wrote. `to_anthropic(ctx, memory)` sends kept blocks (`anthropic_blocks`: a web search's
call and result) whole while the budget has room for them, else as their words; it turned
the OLDEST into words first, with no memory between calls, so once the blocks reached the
budget every call rewrote an earlier message (the first differing message: 1, then 3, then
5 over calls 5 to 7 at 6,000 tokens) and nearly the whole request missed the cache while the
plan's cache report said the epoch extends. Now the newest go as words first: a block sent
whole stays whole while the context has room for it, and where the context grows past that
room every kept block turns into its words, once an epoch (the oldest onward: the first
call that must turn one turns all, and every later call of the epoch sends them so).
A request that ends with a paused server call (`pause_turn`) keeps that turn whole first.
Real Memory and planner epochs; requests checked against the SDK's MessageParam."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from anthropic.types import MessageParam
from pydantic import ConfigDict, TypeAdapter

from tiermem import Config, Memory
from tiermem.adapters.anthropic import from_anthropic, kept_block_tokens, to_anthropic
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")

_PARAM = TypeAdapter(MessageParam, config=ConfigDict(extra="forbid"))
META_BYTES = 256 * 1024  # three 1.5 KB encrypted results a reply pass the default 16 KiB
ENCRYPTED_BYTES = 1500  # decoded bytes of one result's encrypted page: about 375 tokens sent
RESULTS_PER_REPLY = 3
CALLS = 8
RESULT = "web_search_tool_result"


def _b64(n: int, seed: int) -> str:
    return base64.b64encode(bytes((seed + 7 * i) % 256 for i in range(n))).decode()


def _reply(i: int, *, stop: str = "end_turn", paused: bool = False) -> dict[str, Any]:
    results = [{"type": "web_search_result", "url": f"https://s{i}-{k}.test/p", "title": f"Result {i}.{k}",
                "encrypted_content": _b64(ENCRYPTED_BYTES, i * 10 + k)} for k in range(RESULTS_PER_REPLY)]
    content: list[dict[str, Any]] = [
        {"type": "server_tool_use", "id": f"srvtoolu_{i}", "name": "web_search", "input": {"query": f"topic {i}"}},
        {"type": RESULT, "tool_use_id": f"srvtoolu_{i}", "content": results}]
    if paused:  # the reply stopped before the next search ran: sent back for the API to go on
        content.append({"type": "server_tool_use", "id": f"srvtoolu_{i}b", "name": "web_search",
                        "input": {"query": f"more on topic {i}"}})
    else:
        content.append({"type": "text", "text": f"Answer number {i} about topic {i}."})
    return {"id": f"msg_{i}", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "stop_reason": stop, "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1},
            "content": content}


def _plain(req: Any) -> list[str]:
    """The request's messages without the breakpoint marks (they move to the new end)."""
    return [json.dumps({"role": m["role"], "content": [{k: v for k, v in b.items() if k != "cache_control"}
                                                       for b in m["content"]]}, sort_keys=True)
            for m in req.messages]


def _open(tmp_path: Any, embedder: FastEmbedder) -> Memory:
    return Memory(Config(data_dir=tmp_path / "data", max_metadata_bytes=META_BYTES), embedder=embedder, hot=False,
                  background_indexing=False)


# (budget in tokens, results sent whole at the last call, the calls whose request rewrote
# a message of the previous request, with that message's index). Each reply sent whole adds
# about 1,200 tokens to a context of about 90 a turn
CASES: list[tuple[int, int, list[tuple[int, int]]]] = [
    (10_000, CALLS - 1, []),  # room for every reply whole: nothing to turn into words
    # four replies whole, the later ones as words from the first: before, calls 5, 6 and 7
    # each rewrote an older message (1, 3, 5)
    (6_000, 4, []),
    # three whole fit until the context grows past their room at call 5: one of them must turn
    # into its words, so every one does, the request rewritten from the first (message 1), once:
    # turning the newest only (message 5, as before) rewrote again at each later call that
    # outgrew the next one's room (tests/test_anthropic_kept_rewrite_once.py)
    (4_000, 0, [(5, 1)]),
]


@pytest.mark.parametrize(("budget", "whole", "rewrites"), CASES, ids=[str(c[0]) for c in CASES])
def test_each_call_of_an_epoch_sends_the_previous_request_as_its_prefix(
        tmp_path: Any, embedder: FastEmbedder, budget: int, whole: int, rewrites: list[tuple[int, int]]) -> None:
    with _open(tmp_path, embedder) as mem:
        previous: list[str] | None = None
        seen: list[tuple[int, int]] = []
        for i in range(CALLS):
            question = f"Question {i}: please search topic {i}."
            mem.append_many("c", from_anthropic({"role": "user", "content": question}))
            ctx = mem.context("c", question, budget)
            assert ctx.plan.cache.epoch == 1  # one epoch throughout: each call extends the last
            req = to_anthropic(ctx, mem)
            for m in req.messages:
                _PARAM.validate_python(m)
            sent = [b for m in req.messages for b in m["content"] if b["type"] == RESULT]
            # the plan counted each block's words (the stored reply's text parts); sent whole,
            # it costs kept_block_tokens instead (test_anthropic_kept_budget checks that rule)
            words: dict[tuple[str, str], int] = {}
            for row in mem.history("c"):
                for at, block in (row.metadata or {}).get("anthropic_blocks", []):
                    cid = block.get("id") or block["tool_use_id"]
                    words[(block["type"], cid)] = mem.tokens.count(row.body["content"][at]["text"])
            extra = sum(kept_block_tokens(mem.tokens, b) - words[(b["type"], b.get("id") or b.get("tool_use_id"))]
                        for m in req.messages for b in m["content"] if b["type"] in (RESULT, "server_tool_use"))
            assert ctx.tokens + extra <= budget
            plain = _plain(req)
            if previous is not None:
                assert len(plain) == len(previous) + 2  # the reply and the new question
                differ = next((k for k in range(len(previous)) if previous[k] != plain[k]), None)
                if differ is not None:
                    seen.append((i, differ))
            previous = plain
            mem.append_many("c", from_anthropic(_reply(i), max_metadata_bytes=META_BYTES))
        assert seen == rewrites  # before, at 6,000: [(5, 1), (6, 3), (7, 5)]
        assert len(sent) == whole


def test_a_paused_server_call_at_the_end_goes_back_whole_first(tmp_path: Any, embedder: FastEmbedder) -> None:
    """A request ending with a `pause_turn` reply: its server calls go back whole (the API
    goes on with them) before any older reply's, which goes as its words."""
    with _open(tmp_path, embedder) as mem:
        mem.append_many("c", from_anthropic({"role": "user", "content": "Search topic 0."}))
        mem.append_many("c", from_anthropic(_reply(0), max_metadata_bytes=META_BYTES))
        mem.append_many("c", from_anthropic({"role": "user", "content": "Now search topic 1 in depth."}))
        mem.append_many("c", from_anthropic(_reply(1, stop="pause_turn", paused=True), max_metadata_bytes=META_BYTES))
        # room for one reply's results whole (about 1,200 tokens), not two
        ctx = mem.context("c", "Now search topic 1 in depth.", 1_700)
        req = to_anthropic(ctx, mem)
        for m in req.messages:
            _PARAM.validate_python(m)
        last = req.messages[-1]
        assert last["role"] == "assistant"
        assert [b["type"] for b in last["content"]] == ["server_tool_use", RESULT, "server_tool_use"]
        older = [b for m in req.messages[:-1] for b in m["content"]]
        assert all(b["type"] == "text" for b in older)
        assert any(b["text"].startswith(f"[{RESULT}]") for b in older)  # the older reply as its words

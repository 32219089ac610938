"""`to_anthropic` says where the plan's breakpoints are in the request it builds
(`AnthropicRequest.breakpoints`: a message of `messages` or "system", a block of it),
so that a caller who places its own marks (`max_breakpoints=0`) marks the right
blocks: the plan's `breakpoints` index the OpenAI form, whose system messages
Anthropic's request moves into `system` and whose same-role messages it merges. And a
prefill turn's text, sent trimmed (the API refuses trailing whitespace there), carries
no mark: the next call sends it untrimmed, so a mark on it wrote a prefix no request
reads; the block before it takes the mark.

Fails on the code before: an `AnthropicRequest` had no `breakpoints` (the client's
`AnthropicContext.breakpoints` were the plan's, OpenAI-form indexes: past the end of
`messages` or on a message the request did not mark); the trimmed prefill block carried
the context's mark."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tiermem import Memory
from tiermem.adapters.anthropic import AnthropicRequest, to_anthropic

SYSTEM = "You are a travel agent."
BUDGET = 2000
EPHEMERAL = {"type": "ephemeral"}
CALLS = [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]
# same-role runs (two user messages, a tool result then a user message) merge into one
# Anthropic turn each: the OpenAI-form indexes run ahead of the request's
LOG: list[dict[str, Any]] = [
    {"role": "user", "content": "I want to fly to Lisbon."},
    {"role": "user", "content": "No red-eyes, please."},
    {"role": "assistant", "content": "Noted: daytime flights only."},
    {"role": "user", "content": "Weather there?"},
    {"role": "assistant", "content": None, "tool_calls": CALLS},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 24C"},
    {"role": "user", "content": "Good. Book the 9am one."},
    {"role": "assistant", "content": "Booked TP1351 at 9:05."},
]
NEXT = [{"role": "user", "content": "And a hotel near the river?"},
        {"role": "assistant", "content": "Three options by the Tagus."}]
LATEST = {"role": "user", "content": "Which is cheapest?"}


def _block(req: AnthropicRequest, message: int | str, block: int) -> dict[str, Any]:
    return req.system[block] if message == "system" else req.messages[int(message)]["content"][block]


def _plain(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in b.items() if k != "cache_control"} for b in blocks]


def _flat(req: AnthropicRequest) -> list[tuple[str, dict[str, Any]]]:
    """The request's blocks in order, each with where it is, marks left out."""
    return ([("system", b) for b in _plain(req.system)]
            + [(m["role"], b) for m in req.messages for b in _plain(m["content"])])


def test_breakpoints_index_the_request(cold_memory: Memory) -> None:
    mem = cold_memory
    mem.append_many("c", LOG)
    for extra in ([], NEXT, [LATEST]):
        mem.append_many("c", extra)
        ctx = mem.context("c", None, BUDGET, system=SYSTEM)
        own = to_anthropic(ctx, mem, max_breakpoints=0)
        marked = to_anthropic(ctx, mem)
        assert ctx.plan.breakpoints and own.breakpoints
        assert own.breakpoints == marked.breakpoints  # where they are does not depend on the marks
        assert not any("cache_control" in b for _r, b in _flat(own))
        for bp in own.breakpoints:
            # in range, and the block ends the prefix through the plan's message: the
            # system layer in `system`, every other on the block the OpenAI message it
            # names ends with (its text, or a tool message's result, which merges with
            # the user's text after it: not the turn's last block)
            src = ctx.messages[next(b.index for b in ctx.plan.breakpoints if b.layer == bp.layer)]
            block = _block(own, bp.message, bp.block)
            if src["role"] == "system":
                assert bp.message == "system" and block["text"] == src["content"]
            else:
                assert isinstance(bp.message, int) and 0 <= bp.message < len(own.messages)
                assert block.get("text", block.get("content")) == src["content"]
        # a caller marking every breakpoint itself (at most 4 here) sends what the adapter marks
        assert len(own.breakpoints) <= 4
        mine = copy.deepcopy(own)
        for bp in own.breakpoints:
            _block(mine, bp.message, bp.block)["cache_control"] = dict(EPHEMERAL)
        assert (mine.system, mine.messages) == (marked.system, marked.messages)
        # and every mark the adapter placed is at one of them
        where = {(bp.message, bp.block) for bp in own.breakpoints}
        assert {("system", i) for i, b in enumerate(marked.system) if "cache_control" in b} | {
            (m, i) for m, msg in enumerate(marked.messages) for i, b in enumerate(msg["content"])
            if "cache_control" in b} <= where


# (the prefill reply as stored) -- each ends the first call's context; the next call sends it as stored
PREFILLS = [
    "Sure:\n1. Dune\n2. Emma\n3. Ulysses\n",  # a trailing newline: trimmed in the first request
    "Sure: Dune, Emma, Ulysses.   ",  # trailing spaces: trimmed
]


@pytest.mark.parametrize("reply", PREFILLS)
def test_a_trimmed_prefill_block_is_not_marked(cold_memory: Memory, reply: str) -> None:
    mem = cold_memory
    mem.append_many("c", LOG)
    mem.append_many("c", [{"role": "user", "content": "List three books?"}, {"role": "assistant", "content": reply}])
    first = to_anthropic(mem.context("c", None, BUDGET, system=SYSTEM), mem)
    assert first.messages[-1]["role"] == "assistant"
    assert first.messages[-1]["content"][-1]["text"] == reply.rstrip()  # sent trimmed
    mem.append_many("c", [{"role": "user", "content": "Which is the shortest?"}])
    ctx2 = mem.context("c", "Which is the shortest?", BUDGET, system=SYSTEM)
    assert not ctx2.plan.cache.new_epoch  # the plan reuses the whole previous context
    second = to_anthropic(ctx2, mem)
    a, b = _flat(first), _flat(second)
    marks = [i for i, (_r, blk) in enumerate(
        [("system", x) for x in first.system] + [(m["role"], x) for m in first.messages for x in m["content"]])
        if "cache_control" in blk]
    assert marks
    for i in marks:  # every prefix the first request wrote is one the second sends: read back
        assert a[:i + 1] == b[:i + 1], f"mark on block {i} ({a[i]}) is not a prefix of the next request"
    # the block before the trimmed one took its mark (the end of the whole context)
    assert len(a) - 2 in marks and len(a) - 1 not in marks
    positions = {(bp.message, bp.block) for bp in first.breakpoints}
    assert (len(first.messages) - 1, len(first.messages[-1]["content"]) - 1) not in positions

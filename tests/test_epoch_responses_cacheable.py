"""A Responses-format context keeps the cache as the chat form does (issue 22): within an
epoch each request is the append-only extension of the previous one as sent (or, after a
middle eviction, keeps its head), and the prefix it shares is past the providers'
1,024-token minimum cacheable prefix, as under `as_stored` and `"chat"`.

A Responses input message carries no `name` (the `openai` package's
`EasyInputMessageParam`: content, role, phase, type), so `to_responses` drops it and a
named turn is a few tokens shorter sent than stored. The planner sized an epoch's start
(EPOCH_START_FILL_SHARE) and a middle eviction's kept head (MIDDLE_MIN_KEPT_TOKENS) on the
stored form (the head is now counted as rendered: planner.middle). Fails on the code before: under "responses" the epoch start sent under 1,024
tokens and the kept head too (963 sent of 1,040 stored on the reviewer's LoCoMo calls), so
the next call shared a prefix no provider caches (billed 59.5% / 64.4% of uncached against
chat's 36.5% / 38.1%). Real SQLite, the real model and tokenizer, no hot tier.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tiermem import Config, Memory
from tiermem.planner.build import EPOCH_START_FILL_SHARE
from tiermem.planner.cache_rules import PROVIDERS
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.tokens import messages_tokens

SYSTEM = "You are a helpful companion. Be brief."
BUDGET = 2000  # tokens: the eval's budget, where the epoch start fill is ~1,080 tokens
CALLS = 14  # enough rounds for the extension to pass MIDDLE_CAP_SHARE and evict at least twice
MIN_PREFIX = PROVIDERS["openai"].min_prefix  # tokens: 1,024, Anthropic's too
# two named speakers, as LoCoMo's turns are stored: the name costs tokens as stored and in
# chat form, none in Responses form
NAMES = ("Caroline", "Melanie")
TALK: list[dict[str, Any]] = [
    {"role": "user" if i % 2 == 0 else "assistant", "name": NAMES[i % 2],
     "content": f"Day {i}: I walked the dog along the river and then painted part of the fence green."}
    for i in range(60)]


def _said(i: int) -> str:
    # a remark that asks nothing: a plain chat, answered by the tail (no retrieved block)
    return f"Round {i}: I fixed the gate hinge and planted {i + 2} tomato seedlings this afternoon."


@pytest.mark.parametrize("fmt", [
    "responses",  # the name dropped on conversion: sized on what is sent, the case fixed
    "chat",  # the name kept: the control the responses figures now match
    "as_stored",  # no conversion at all
])
def test_each_call_shares_a_cacheable_prefix_with_the_previous_one(
        tmp_path: Path, embedder: FastEmbedder, fmt: str) -> None:
    with Memory(Config(data_dir=tmp_path / "d", context_format=fmt), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        mem.append_many("c", TALK)
        prev: list[dict[str, Any]] | None = None
        shared: list[int] = []
        # (call, tokens sent) of each epoch start under the fill; (call, how, tokens) of
        # each extension whose shared prefix is under the minimum
        short_starts: list[tuple[int, int]] = []
        short_prefixes: list[tuple[int, str, int]] = []
        evictions = 0
        for i in range(CALLS):
            mem.append("c", {"role": "user", "name": NAMES[0], "content": _said(i)})
            ctx = mem.context("c", _said(i), BUDGET, system=SYSTEM)
            cache = ctx.plan.cache
            assert ctx.tokens <= BUDGET
            assert ctx.tokens == messages_tokens(mem.tokens, ctx.messages)  # counted as sent
            assert not any(it.slice == "retrieved" for it in ctx.plan.items)  # the premise: a plain chat
            if fmt == "responses":  # the premise: the Responses form carries no name
                assert not any("name" in m for m in ctx.messages if "role" in m)
            if cache.new_epoch:
                # an epoch start is filled as sent, so its next call is cached at once
                if ctx.tokens < max(int(EPOCH_START_FILL_SHARE * BUDGET) - 40, MIN_PREFIX):
                    short_starts.append((i, ctx.tokens))
            else:
                assert prev is not None
                k = cache.prefix_messages
                # the previous request's leading messages, as sent, start this one: all of
                # them on an append, the kept head after a middle eviction
                assert ctx.messages[:k] == prev[:k] and k > 0, (i, cache)
                evicted = k < len(prev)
                evictions += evicted
                # and that shared prefix is one a provider caches: counted as the provider
                # does, on the rendered request (the plan's openai_cached_tokens, by
                # planner.cache_rules), since the kept head is sized that way (a head of
                # 1,024 rendered tokens is 1,000 or so stored: its role tokens are not stored)
                got = cache.openai_cached_tokens or 0
                if got < MIN_PREFIX:
                    short_prefixes.append((i, "evicted" if evicted else "appended", got))
                shared.append(got)
            prev = ctx.messages
            mem.append("c", {"role": "assistant", "name": NAMES[1],
                             "content": f"Lovely, {i + 2} seedlings is a good start."})
        assert not short_starts and not short_prefixes, (short_starts, short_prefixes, shared)
        # the premises: most calls extend an epoch, and some evict from the middle
        assert len(shared) >= CALLS // 2, shared
        assert evictions >= 1, shared

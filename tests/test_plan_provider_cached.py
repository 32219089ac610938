"""`plan.cache` says what each provider is expected to serve from its prompt cache for a
call's request (`openai_cached_tokens`, `anthropic_cached_tokens`), by the rules the
cost replay bills by (planner.cache_rules, imported by both): rendered tokens, none under
the 1,024-token minimum or past the provider's TTL, OpenAI in 128-token steps, Anthropic
up to a breakpoint the previous request marked. `expected_cached_tokens` stays what it
was: the tokens of the messages shared with the previous call (message accounting).

Fails on the code before: the plan had only `expected_cached_tokens`, which the
reviewer's replay found equal to the OpenAI-rule cached count in 2 of 20 calls (12 on a
new epoch where both providers cache 0, under the minimum; 1,124 where OpenAI caches
1,152 and Anthropic 1,154). Real SQLite, the real tokenizer, no hot tier.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tiermem import Config, Memory
from tiermem.evals.cost import PROVIDERS, AnthropicCache, OpenAICache, Renderer, common_prefix_ids
from tiermem.planner.cache_rules import request_lcp
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.tokens import BpeTokenCounter

SYSTEM = "You are a helpful companion. Be brief."
BUDGET = 2000
T0 = 1_700_000_000.0  # seconds: the first message's created_at
TURN_S = 30.0  # seconds between two turns of a session
ANTHROPIC_GAP_S = 600.0  # past Anthropic's 5-minute TTL, inside OpenAI's hour
BOTH_GAP_S = 7200.0  # past both (and the planner's cache_ttl_s: a new epoch)
# message index -> the gap before it; the context evicts from the middle at message 24,
# keeping a head an earlier call wrote (read back by Anthropic, inside its TTL)
GAPS = {34: ANTHROPIC_GAP_S, 44: BOTH_GAP_S}
FIRST_CALL = 8  # the first user message a context is built for (index)


def _talk() -> list[dict[str, Any]]:
    out, at = [], T0
    for i in range(64):
        at += GAPS.get(i, TURN_S)
        user = i % 2 == 0
        out.append({"role": "user" if user else "assistant", "created_at": at,
                    **({"name": "Ada"} if user else {}),  # a name is rendered too
                    "content": f"Turn {i}: we talked about the garden, the {i}th tomato plant and "
                               f"what to cook with {i % 7 + 2} courgettes tonight. " * (1 + i % 3)})
    return out


@pytest.mark.parametrize("settings", [
    {},  # the default: messages as stored
    {"context_format": "chat"},  # converted: the previous request's marks as they landed in it
])
def test_provider_cached_is_what_the_cost_replay_bills(tmp_path: Path, embedder: FastEmbedder,
                                                       settings: dict[str, Any]) -> None:
    talk = _talk()
    with Memory(Config(data_dir=tmp_path / "d", **settings), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        renderer = Renderer(mem.tokens)
        openai, anthropic = OpenAICache(PROVIDERS["openai"]), AnthropicCache(PROVIDERS["anthropic"])
        seen: list[tuple[int, int, int]] = []
        for i, m in enumerate(talk):
            mem.append("c", m)
            if i < FIRST_CALL or m["role"] != "user":
                continue
            ctx = mem.context("c", m["content"], BUDGET, system=SYSTEM)
            ids, ends = renderer.render(ctx.messages)
            o = openai.request(ids, at=m["created_at"])
            a = anthropic.request(ids, ends, [b.index for b in ctx.breakpoints], at=m["created_at"])
            c = ctx.plan.cache
            assert (c.openai_cached_tokens, c.anthropic_cached_tokens) == (o.read, a.read), (i, c)
            seen.append((c.expected_cached_tokens, c.openai_cached_tokens, c.anthropic_cached_tokens))
    if settings:
        return  # converted: the same rules, whatever the epochs kept
    # the cases the rules tell apart all came up: a provider cache past the minimum, in
    # OpenAI's steps and not; a prefix shared under the minimum (no provider caches it);
    # Anthropic's cache expired where OpenAI's was still warm
    assert any(oa >= PROVIDERS["openai"].min_prefix and oa % 128 == 0 for _e, oa, _a in seen)
    assert any(shared and not oa and not an for shared, oa, an in seen)
    assert any(oa and not an for _e, oa, an in seen)
    assert any(shared != oa for shared, oa, _a in seen)  # the old figure is not a provider's


def _m(role: str, text: str, name: str | None = None) -> dict[str, Any]:
    return {"role": role, "content": text, **({"name": name} if name else {})}


A, B, C = _m("system", "Be brief."), _m("user", "Weather in Tokyo today?", "Ada"), _m("assistant", "Sunny.")
# (previous request, this request) -- the common token prefix counted from the first
# message that differs, as both whole renderings give it
PAIRS = [
    ([A, B], [A, B]),  # the same request: all of it, the priming too
    ([A, B], [A, B, C]),  # appended to
    ([A, B, C], [A, B]),  # cut short
    ([A, B], [A, _m("user", "Weather in Tokyo tomorrow?", "Ada")]),  # the last message edited: its start is shared
    ([A, B], [A, _m("user", "Weather in Tokyo today?", "Bob")]),  # another name: up to the name
    ([A, B], [A, B | {"metadata": 1}]),  # unequal messages, equal rendering: on past them
    ([A], [A, C]),  # an assistant message after: the priming's ids are its header's
    ([], [A]),  # nothing before
]


@pytest.mark.parametrize(("prev", "cur"), PAIRS)
def test_request_lcp_is_the_renderings(prev: list[dict[str, Any]], cur: list[dict[str, Any]]) -> None:
    counter = BpeTokenCounter()
    r = Renderer(counter)
    want = common_prefix_ids(r.render(prev)[0], r.render(cur)[0])
    assert request_lcp(counter, prev, cur) == want

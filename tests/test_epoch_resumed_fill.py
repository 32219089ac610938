"""A session resumed after the provider's prompt cache expired (a call more than
`cache_ttl_s` after the previous one) starts an epoch whose first call is billed in full
whatever it holds: it is filled only past the providers' minimum cacheable prefix
(planner.cache_rules.CACHEABLE_MIN_TOKENS, counted as rendered), by the one tail unit that
crosses it, not to EPOCH_START_FILL_SHARE of the budget (where that minimum is configured,
Config.pricing.min_prefix_tokens); a recall there fills the layers
before its retrieved turns that far first, so they can be a middle eviction's kept head.
A conversation's first call (nothing expired) still fills to the share.

Fails on the code before: the resumed small talk filled to the share (about 1,080
stored tokens, one or more whole turns past the minimum), and the resumed recall's
retrieved turns took the room first, leaving a few hundred tokens of tail before them.
"""

from __future__ import annotations

import calendar
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tiermem import Config, Memory
from tiermem.planner.build import EPOCH_START_FILL_SHARE, NEEDS_ROOM_CLASSES
from tiermem.planner.cache_rules import CACHEABLE_MIN_TOKENS, rendered_length
from tiermem.planner.plan import Context
from tiermem.tiers.embed import Embedder
from tiermem.tiers.redis_server import EmbeddedRedis
from tiermem.tiers.tokens import messages_tokens


@pytest.fixture
def memory(tmp_path: Path, embedder: Embedder) -> Iterator[Memory]:
    """conftest's Memory, on a provider whose minimum cacheable prefix is configured as the
    default rules' (Config.pricing.min_prefix_tokens, the default): None, a resumed session fills to
    the share as any epoch start (tests/test_epoch_resumed_limits.py)."""
    data = tmp_path / "data"
    mem = Memory(Config(data_dir=data, hot_budget_tokens=600, pricing={"min_prefix_tokens": CACHEABLE_MIN_TOKENS}),
                 embedder=embedder, background_indexing=False)
    try:
        yield mem
    finally:
        mem.close()
        EmbeddedRedis(data).stop()


# the same seeded histories in several tests: their vectors are computed once a session
# (conftest.shared_vectors)
pytestmark = pytest.mark.usefixtures("shared_vectors")

WORDS = ["garden", "violin", "harbour", "pancake", "glacier", "lantern", "marathon", "orchid", "pottery",
         "satellite", "tunnel", "umbrella", "volcano", "walrus", "yoga", "zeppelin", "bakery", "canyon"]
BUDGET = 2000  # tokens
TURNS = 300  # history before the first call, one second apart
START = float(calendar.timegm((2026, 12, 4, 10, 0, 0)))  # the first turn's created_at
DAY_S = 86_400.0  # a gap past the default cache_ttl_s (an hour)
RECALL = "what did we say about the violin and the glacier?"  # a broad recall (test_epoch_start)


def history(memory: Memory) -> float:
    """TURNS turns ending in a user message; the newest one's created_at."""
    rnd = random.Random(7)
    memory.append_many("c", [{"role": "user" if i % 2 == 0 else "assistant",
                              "content": " ".join(rnd.sample(WORDS, 6)) + f" and so on ({i})",
                              "created_at": START + i} for i in range(TURNS - 1)])
    memory.append("c", {"role": "user", "content": "ok cool", "created_at": START + TURNS - 1})
    return START + TURNS - 1


def rendered(memory: Memory, messages: list[dict[str, Any]]) -> int:
    """The messages as a provider caches them (the reply priming apart)."""
    return sum(rendered_length(memory.tokens, m) for m in messages)


def resume(memory: Memory, query: str) -> Context:
    """A first call, the reply a second later, then `query` a day later (cache expired)."""
    last = history(memory)
    first = memory.context("c", "ok cool", budget=BUDGET)
    assert first.plan.cache.new_epoch  # the conversation's first call
    memory.append("c", {"role": "assistant", "content": "sure", "created_at": last + 1})
    memory.append("c", {"role": "user", "content": query, "created_at": last + DAY_S})
    ctx = memory.context("c", query, budget=BUDGET)
    assert ctx.plan.cache.new_epoch and "cache has expired" in ctx.plan.cache.reason, ctx.plan.cache
    assert messages_tokens(memory.tokens, ctx.messages) == ctx.tokens <= BUDGET
    return ctx


def test_a_first_call_still_fills_to_the_share(memory: Memory) -> None:
    # nothing expired (no previous call): the epoch start fill as before
    history(memory)
    ctx = memory.context("c", "ok cool", budget=BUDGET)
    assert ctx.plan.cache.new_epoch
    assert EPOCH_START_FILL_SHARE * BUDGET - 40 <= ctx.tokens <= BUDGET, ctx.tokens


def test_a_resumed_session_fills_just_past_the_cacheable_minimum(memory: Memory) -> None:
    ctx = resume(memory, "haha ok")
    assert not [it for it in ctx.plan.items if it.slice == "retrieved"]  # small talk: nothing retrieved
    msgs = ctx.messages
    # cacheable at once: its next call reads it back ...
    assert rendered(memory, msgs) >= CACHEABLE_MIN_TOKENS
    # ... and no larger than that takes: without its oldest turn it would not be
    assert rendered(memory, msgs[1:]) < CACHEABLE_MIN_TOKENS, [m["content"][:20] for m in msgs[:2]]
    assert ctx.tokens < EPOCH_START_FILL_SHARE * BUDGET  # smaller than a start filled to the share
    tail = sorted(p for it in ctx.plan.items if it.slice == "tail" for p in it.positions)
    assert tail == list(range(tail[0], tail[-1] + 1))  # the grown tail is still contiguous


def test_a_recall_in_a_resumed_session_keeps_a_cacheable_head_before_its_turns(memory: Memory) -> None:
    ctx = resume(memory, RECALL)
    assert ctx.plan.query_class in NEEDS_ROOM_CLASSES, ctx.plan.query_class
    assert [it for it in ctx.plan.items if it.slice == "retrieved"]  # it still retrieves
    stable = next(b for b in ctx.plan.breakpoints if b.layer == "stable")
    assert ctx.messages[stable.index + 1]["content"] != RECALL  # its retrieved block follows
    # what comes before its retrieved turns is cacheable on its own: a middle eviction
    # can keep it as the head instead of starting a new epoch
    assert rendered(memory, ctx.messages[:stable.index + 1]) >= CACHEABLE_MIN_TOKENS
    assert rendered(memory, ctx.messages[1:stable.index + 1]) < CACHEABLE_MIN_TOKENS

"""Where a session resumed after the provider's cache expired is filled only past the
minimum cacheable prefix (planner.build `_resumed`, 0ae9f97), and what it must not break:

- a recall there keeps its retrieved turns on the follow-up call: an epoch's first call
  past middle.MIDDLE_CAP_SHARE (its tail grown to the minimum before the retrieved block)
  is extended while it fits, not evicted to the head before those turns at once;
- the minimum is the configured one (Config.pricing.min_prefix_tokens: Claude Haiku's is
  2,048; 1,024 by default, OpenAI's and most Claude models'): filled past a guessed 1,024,
  a 2,048-token model caches nothing; None, the session resumes filled to
  EPOCH_START_FILL_SHARE as any epoch start;
- a budget that cannot hold the minimum and a new epoch's reserve resumes as before:
  filled to the whole room, its next call would start another epoch.

Fails on the code before (0ae9f97): the follow-up kept 0 of the recall's retrieved turns
(0/46 at 2,000, 0/158 at 4,000); the resumed start filled to ~1,030 tokens with no minimum
configured (and `min_prefix_tokens` did not exist); at 500 and 1,000 the call after the
resume started a new epoch. Real SQLite, embedded Redis, the real model and tokenizer.
"""

from __future__ import annotations

import calendar
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tiermem import Config, Memory
from tiermem.planner.build import EPOCH_START_FILL_SHARE, NEEDS_ROOM_CLASSES
from tiermem.planner.cache_rules import rendered_length, request_lcp
from tiermem.tiers.embed import Embedder
from tiermem.tiers.redis_server import EmbeddedRedis

pytestmark = pytest.mark.usefixtures("shared_vectors")

WORDS = ["garden", "violin", "harbour", "pancake", "glacier", "lantern", "marathon", "orchid", "pottery",
         "satellite", "tunnel", "umbrella", "volcano", "walrus", "yoga", "zeppelin", "bakery", "canyon"]
START = float(calendar.timegm((2026, 12, 4, 10, 0, 0)))  # the first turn's created_at
DAY_S = 86_400.0  # a gap past the default cache_ttl_s (an hour)
OPENAI_MIN = 1024  # OpenAI's / most Claude models' minimum cacheable prefix, tokens
HAIKU_MIN = 2048  # Claude Haiku's, tokens
RECALL = "what did we say about the violin and the glacier?"
CROSSING_TOKENS = 100  # more than the one short turn that crosses the minimum
FOLLOW_UP = "thanks, and which of those came first?"


@pytest.fixture
def make(tmp_path: Path, embedder: Embedder) -> Iterator[Any]:
    """Memories with a configured minimum cacheable prefix (None: none), closed afterwards."""
    made: list[tuple[Memory, Path]] = []

    def build(min_prefix: int | None) -> Memory:
        data = tmp_path / f"data{len(made)}"
        pricing = {"min_prefix_tokens": min_prefix}
        mem = Memory(Config(data_dir=data, hot_budget_tokens=600, pricing=pricing), embedder=embedder,
                     background_indexing=False)
        made.append((mem, data))
        return mem

    yield build
    for mem, data in made:
        mem.close()
        EmbeddedRedis(data).stop()


def resume(memory: Memory, budget: int, turns: int = 300) -> float:
    """`turns` turns, a first call, its reply; the time a day later (the cache expired)."""
    rnd = random.Random(7)
    memory.append_many("c", [{"role": "user" if i % 2 == 0 else "assistant",
                              "content": " ".join(rnd.sample(WORDS, 6)) + f" and so on ({i})",
                              "created_at": START + i} for i in range(turns - 1)])
    last = START + turns - 1
    memory.append("c", {"role": "user", "content": "ok cool", "created_at": last})
    memory.context("c", "ok cool", budget=budget)
    memory.append("c", {"role": "assistant", "content": "sure", "created_at": last + 1})
    return last + DAY_S


def ask(memory: Memory, query: str, at: float, budget: int) -> Any:
    memory.append("c", {"role": "user", "content": query, "created_at": at})
    ctx = memory.context("c", query, budget=budget)
    memory.append("c", {"role": "assistant", "content": "ok", "created_at": at + 5})
    return ctx


@pytest.mark.parametrize("budget", [
    2000,  # the recall's retrieved block after a 1,024-token tail passes the 1,400-token cap
    4000,  # the same at 2,800
])
def test_the_follow_up_to_a_resumed_recall_keeps_its_retrieved_turns(make: Any, budget: int) -> None:
    memory = make(OPENAI_MIN)
    at = resume(memory, budget)
    first = ask(memory, RECALL, at, budget)
    assert first.plan.cache.new_epoch and first.plan.query_class in NEEDS_ROOM_CLASSES, first.plan.cache
    retrieved = sorted(p for it in first.plan.items if it.slice == "retrieved" for p in it.positions)
    assert len(retrieved) >= 10, retrieved  # a broad recall: many turns
    follow = ask(memory, FOLLOW_UP, at + 10, budget)
    text = json.dumps(follow.messages)
    kept = [p for p in retrieved if f"and so on ({p})" in text]
    assert kept == retrieved, (len(kept), len(retrieved), follow.plan.cache.reason)
    # extended, not rebuilt: the resumed context is read back whole
    assert not follow.plan.cache.new_epoch
    assert follow.messages[:len(first.messages) - 1] == first.messages[:-1]


@pytest.mark.parametrize(("min_prefix", "budget"), [
    (None, 2000),  # None configured: filled to the share, as any epoch start
    (None, 4000),  # the same at 4,000 (2,160 stored: past Haiku's 2,048 too)
    (HAIKU_MIN, 4000),  # Haiku's 2,048 configured: filled past it, not past 1,024
    (OPENAI_MIN, 4000),  # 1,024 configured: just past it
])
def test_a_resumed_session_fills_to_the_configured_minimum(make: Any, min_prefix: int | None,
                                                           budget: int) -> None:
    memory = make(min_prefix)
    at = resume(memory, budget, turns=600)
    start = ask(memory, "haha nice", at, budget)
    assert start.plan.cache.new_epoch and "cache has expired" in start.plan.cache.reason
    shown = sum(rendered_length(memory.tokens, m) for m in start.messages)
    if min_prefix is None:
        assert start.tokens >= EPOCH_START_FILL_SHARE * budget - 40, start.tokens
    else:
        assert min_prefix <= shown < min_prefix + CROSSING_TOKENS, shown  # just past it
        assert sum(rendered_length(memory.tokens, m) for m in start.messages[1:]) < min_prefix
    # the next call reads back at least the minimum of the provider configured (Haiku's
    # where none is: the share at 4,000 passes it)
    after = ask(memory, "haha nice again", at + 10, budget)
    assert not after.plan.cache.new_epoch
    need = min_prefix or (HAIKU_MIN if budget >= 4000 else OPENAI_MIN)
    assert request_lcp(memory.tokens, start.messages, after.messages) >= need


@pytest.mark.parametrize("budget", [
    500,  # under the minimum itself: the whole room was filled
    1000,  # 1,024 + the 150-token reserve does not fit either
])
def test_a_small_budget_resumes_as_before(make: Any, budget: int) -> None:
    memory = make(OPENAI_MIN)
    at = resume(memory, budget)
    start = ask(memory, "haha ok", at, budget)
    assert start.plan.cache.new_epoch and "cache has expired" in start.plan.cache.reason
    # filled to the share, leaving the reserve for appends: the next calls extend it
    assert start.tokens <= budget - int(budget * 0.15), start.tokens
    for k in range(3):
        nxt = ask(memory, f"user says {k} okay", at + 20 * (k + 1), budget)
        assert not nxt.plan.cache.new_epoch, (k, nxt.plan.cache.reason)


def test_the_default_minimum_is_the_providers_rules_one() -> None:
    # config.py keeps its own copy (no planner import at start-up): the two must agree, and
    # the default configuration resumes past it (issue 22's figures are the default's)
    from tiermem.config import DEFAULT_MIN_PREFIX_TOKENS
    from tiermem.planner.cache_rules import CACHEABLE_MIN_TOKENS
    assert DEFAULT_MIN_PREFIX_TOKENS == CACHEABLE_MIN_TOKENS
    assert Config().pricing.min_prefix_tokens == CACHEABLE_MIN_TOKENS

"""A middle eviction's kept head reaches the configured minimum cacheable prefix
(`pricing.min_prefix_tokens`, planner.middle.head_cut's `min_kept`), as a resumed
session's fill already did.

Fails on the code before: the head was the fewest messages that reach a fixed 1,024
rendered tokens (MIDDLE_MIN_KEPT_TOKENS = CACHEABLE_MIN_TOKENS) whatever the model's
minimum, so under Claude Haiku's 2,048 every restart kept and marked a head its cache
never takes, and billed the rebuilt part in full.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from tiermem import Config, Memory
from tiermem.planner.cache_rules import rendered_length
from tiermem.planner.middle import MIDDLE_KEEP_SHARE
from tiermem.tiers.embed import Embedder
from tiermem.tiers.redis_server import EmbeddedRedis
from tiermem.tiers.tokens import messages_tokens

pytestmark = pytest.mark.usefixtures("shared_vectors")

WORDS = ["garden", "violin", "harbour", "pancake", "glacier", "lantern", "marathon", "orchid", "pottery",
         "satellite", "tunnel", "umbrella", "volcano", "walrus", "yoga", "zeppelin", "bakery", "canyon"]
SMALL_TALK = ["ok cool", "haha nice", "sounds good", "great, thanks", "lovely"]
# a head of 2,048 rendered tokens ends within MIDDLE_KEEP_SHARE (0.6) of it: 2,400
BUDGET = 4000
ROUNDS = 60  # chat rounds: enough for two middle evictions at this budget


@pytest.fixture
def make(tmp_path: Path, embedder: Embedder) -> Iterator[object]:
    made: list[tuple[Memory, Path]] = []

    def build(min_prefix: int) -> Memory:
        data = tmp_path / f"data{len(made)}"
        mem = Memory(Config(data_dir=data, hot_budget_tokens=600, pricing={"min_prefix_tokens": min_prefix}),
                     embedder=embedder, background_indexing=False)
        made.append((mem, data))
        return mem

    yield build
    for mem, data in made:
        mem.close()
        EmbeddedRedis(data).stop()


@pytest.mark.parametrize("min_prefix", [
    1024,  # the default (OpenAI's, most Claude models'): as before
    2048,  # Claude Haiku's: the head reached 1,024 before, under it
])
def test_the_kept_head_reaches_the_configured_minimum(make: object, min_prefix: int) -> None:
    memory = make(min_prefix)  # type: ignore[operator]
    rnd = random.Random(11)
    memory.append_many("c", [{"role": "user" if i % 2 == 0 else "assistant",
                              "content": " ".join(rnd.sample(WORDS, 6)) + f" and so on ({i})"} for i in range(300)])
    chat = random.Random(3)
    prev: list[dict[str, object]] = []
    heads = 0
    for i in range(ROUNDS):
        memory.append("c", {"role": "assistant", "content": " ".join(chat.choices(WORDS, k=30)) + f" ({i})"})
        text = f"{SMALL_TALK[i % len(SMALL_TALK)]} ({i})"
        memory.append("c", {"role": "user", "content": text})
        ctx = memory.context("c", text, budget=BUDGET)
        assert ctx.tokens <= BUDGET
        if "evicts from the middle" in ctx.plan.cache.reason:
            heads += 1
            k = next(b.index for b in ctx.plan.breakpoints if b.layer == "head") + 1
            assert ctx.messages[:k] == prev[:k]  # the head stays byte for byte
            # the fewest leading messages that reach the configured minimum as rendered
            assert sum(rendered_length(memory.tokens, m) for m in ctx.messages[:k]) >= min_prefix
            assert sum(rendered_length(memory.tokens, m) for m in ctx.messages[:k - 1]) < min_prefix
            assert messages_tokens(memory.tokens, ctx.messages[:k]) <= MIDDLE_KEEP_SHARE * BUDGET
        prev = ctx.messages
    assert heads >= 1

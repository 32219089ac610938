"""A middle eviction's reason names the prefix the previous context sent as it is: "the
first N message(s) (T tokens) stay as the cached prefix" is the N leading messages both
contexts share and their tokens as plan.cache counts them (each message's, no reply
priming), the plan's own `prefix_messages` / `expected_cached_tokens`.

Before, N counted a late-pin block placed anew after the kept head (a pin made while
its turn sat in the tail, which the eviction drops), so N was one more than the
messages shared, and T added its tokens and the 3 of reply priming (the review's case:
"the first 9 message(s) (1116 tokens)" where 8 (1045 tokens) were shared). Real SQLite,
the real model and tokenizer, no hot tier (process-only epoch state).
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import pytest

from tiermem import Config, Memory
from tiermem.evals.cost import common_prefix_messages
from tiermem.planner import late_pins
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.tokens import message_tokens, messages_tokens

# both cases write the same seeded turns: each text's vector computed once (conftest's
# shared_vectors); the subject is the plan's prefix count, not the model's vectors
pytestmark = pytest.mark.usefixtures("shared_vectors")

WORDS = ["garden", "violin", "harbour", "pancake", "glacier", "lantern", "marathon", "orchid", "pottery",
         "satellite", "tunnel", "umbrella", "volcano", "walrus", "yoga", "zeppelin", "bakery", "canyon"]
BUDGET = 2000  # tokens: evictions within 40 rounds of ~50 tokens
HISTORY_TURNS = 300
ROUNDS = 40  # enough for two evictions at this budget
PIN_ROUND = 3  # after the first context, before the first eviction (round 7)
SMALL_TALK = ["ok cool", "haha nice", "sounds good", "great, thanks", "lovely"]
REASON = re.compile(r"evicts from the middle: the first (\d+) message\(s\) \((\d+) tokens\) stay as the cached prefix")


def _round(mem: Memory, rnd: random.Random, i: int) -> Any:
    mem.append("c", {"role": "assistant", "content": " ".join(rnd.choices(WORDS, k=30)) + f" ({i})"})
    text = f"{SMALL_TALK[i % len(SMALL_TALK)]} ({i})"
    mem.append("c", {"role": "user", "content": text})
    return mem.context("c", text, budget=BUDGET)


@pytest.mark.parametrize(("pin_in_tail", "late_anew"), [
    # no late pins: the head alone is kept (its tokens were counted with reply priming
    # before: 1064 for the 1061 shared)
    (False, False),
    # a pin made while its turn sat in the tail: the first eviction drops that turn and
    # places a late-pin block after the head, which the previous context did not send
    # (its count was in N before); the next eviction keeps that block byte for byte
    (True, True),
])
def test_the_eviction_reason_names_the_shared_prefix(tmp_path: Path, embedder: FastEmbedder, pin_in_tail: bool,
                                                     late_anew: bool) -> None:
    rnd = random.Random(11)
    with Memory(Config(data_dir=tmp_path / "d"), embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append_many("c", [{"role": "user" if i % 2 == 0 else "assistant",
                               "content": " ".join(rnd.sample(WORDS, 6)) + f" and so on ({i})"}
                              for i in range(HISTORY_TURNS)])
        talk = random.Random(3)
        prev: list[dict[str, Any]] = []
        evictions = 0
        new_late = 0
        for i in range(ROUNDS):
            ctx = _round(mem, talk, i)
            if pin_in_tail and i == PIN_ROUND:
                mem.pin("c", HISTORY_TURNS + 2 * i)  # this round's reply, in the tail after the head
            found = REASON.match(ctx.plan.cache.reason)
            if found:
                evictions += 1
                k = common_prefix_messages(prev, ctx.messages)
                tokens = sum(message_tokens(mem.tokens, m) for m in ctx.messages[:k])
                assert (int(found[1]), int(found[2])) == (k, tokens), (ctx.plan.cache.reason, k, tokens)
                assert (ctx.plan.cache.prefix_messages, ctx.plan.cache.expected_cached_tokens) == (k, tokens)
                late = [j for j, m in enumerate(ctx.messages)
                        if str(m.get("content", "")).startswith(late_pins.HEADER)]
                if late and ctx.messages[late[0]] not in prev:
                    new_late += 1
                    assert late == [k], (late, k)  # the block placed anew right after the shared head
                    # what the reason said before: one message more, counted with reply priming
                    assert messages_tokens(mem.tokens, ctx.messages[:k + 1]) > tokens
            prev = ctx.messages
    assert evictions >= 2  # the premise: the rounds evict
    assert (new_late > 0) == late_anew, new_late

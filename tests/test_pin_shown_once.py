"""A pinned turn shown twice in one context: in the pinned block and in the tail grown at
an epoch's start (open; planner.pack's "shown verbatim once" invariant).

A context that starts an epoch fills the room nothing else wanted with the turns just
before the tail (planner.pack.Packing.grow_tail, up to EPOCH_START_FILL_SHARE of the
budget). On the default layout a pin the grown tail reaches stays in the pinned block too
(pack.py's comment on `pins_once`): the turn is sent twice, and every call of the epoch
reads both back. On the LoCoMo cost replays at 2,000 tokens (da2dc86) 85 of conv-41's
335 contexts and 255 of conv-42's 313 did (28 and up to 74 tokens each, 2,380 and 15,295
in all); conv-26, conv-30 and the QA session none.

The fix tried (the pinned block leaves out a pin its epoch's grown tail shows, the tail
refilling that room or not; the extension and middle eviction checking those pins as
the block's) billed more on conv-41 and conv-42 (OpenAI 20.32 -> 20.38 / 20.51%, 24.28
-> 24.49 / 24.42% of cached full context): the context's size is set by the fill share
and the middle eviction's minimum head, so the duplicate displaces other turns rather
than adding tokens, and moving it shifts the head and the cache's 128-token steps. So
it is not shipped; this test documents the duplication and fails (strict) until it is
removed at no extra cost.
"""

from __future__ import annotations

import random

import pytest

from tiermem import Memory
from tiermem.tiers.tokens import messages_tokens

# the same seeded histories in several tests: their vectors are computed once a session
# (conftest.shared_vectors)
pytestmark = pytest.mark.usefixtures("shared_vectors")

BUDGET = 2000
SYSTEM = "You are a helpful travel assistant."
PIN = "Never book me on red-eye flights."
WORDS = ["garden", "violin", "harbour", "pancake", "glacier", "lantern", "marathon", "orchid", "pottery",
         "satellite", "tunnel", "umbrella", "volcano", "walrus", "yoga", "zeppelin", "bakery", "canyon"]
# small talk after the pin: more than the tail's own share (a tenth of the budget), so
# only the tail grown at the epoch's start reaches the pin, and less than it grows to
SMALL_TALK_TURNS = 40


def small_talk(memory: Memory, n: int, seed: int) -> None:
    rnd = random.Random(seed)
    memory.append_many("c", [{"role": "user" if i % 2 == 0 else "assistant",
                              "content": " ".join(rnd.sample(WORDS, 4)) + f" ({seed}.{i})"} for i in range(n)])


@pytest.mark.xfail(strict=True, reason="a pin the tail grown at an epoch's start shows stays in the pinned "
                                       "block too (the fix tried billed more on conv-41/42)")
@pytest.mark.parametrize("pinned_by", [
    "caller",  # Memory.pin on a turn
    "label",  # a standing instruction the hot tier labels load-bearing and pins itself
])
def test_a_pin_the_grown_tail_shows_is_sent_once(memory: Memory, pinned_by: str) -> None:
    memory.append("c", {"role": "user", "content": PIN})
    if pinned_by == "caller":
        memory.pin("c", 0)
    small_talk(memory, SMALL_TALK_TURNS, seed=1)
    memory.append("c", {"role": "user", "content": "ok cool, thanks"})
    ctx = memory.context("c", "ok cool, thanks", budget=BUDGET, system=SYSTEM)
    assert ctx.tokens <= BUDGET and messages_tokens(memory.tokens, ctx.messages) == ctx.tokens
    assert ctx.plan.cache.new_epoch
    assert [it.slice for it in ctx.plan.items if 0 in it.positions] == ["tail"]  # once, in the grown tail
    assert sum(str(m.get("content") or "").count(PIN) for m in ctx.messages) == 1

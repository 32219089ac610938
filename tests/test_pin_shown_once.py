"""A pinned turn is shown once at an epoch's start: in the pinned block, and the tail
grown then passes over it (planner.pack's "shown verbatim once" invariant).

A context that starts an epoch fills the room nothing else wanted with the turns just
before the tail (planner.pack.Packing.grow_tail, up to EPOCH_START_FILL_SHARE of the
budget). On the default layout the grown tail used to show a pin the pinned block also
holds: the turn was sent twice, and every call of the epoch read both back. On the LoCoMo
cost replays at 2,000 tokens (da2dc86) 85 of conv-41's 335 contexts and 255 of conv-42's
313 did (28 and up to 74 tokens each, 2,380 and 15,295 in all); conv-26, conv-30 and the
QA session none.

Now the grown tail passes over a unit holding a pin of the pinned block and grows on
with the older turns (its only gap: the pin, shown earlier in the context). Leaving the
pin out of the block instead, or stopping the tail at it, billed more (the block moved
the kept head; stopping left the context short of its fill target); passing over it
billed OpenAI 20.32 -> 20.41% on conv-41 and 24.28 -> 24.43% on conv-42 of cached full
context (the 128-token cache steps landing on a slightly longer head, not text sent
twice), conv-26/30 unchanged.

Both tests fail on the code before (the pin was in the pinned block and the grown tail).
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
# small talk before the pin (the second test): a few short turns, well within the room
# the grown tail has left when it reaches the pin
OLDER_TURNS = 6

PINNED_BY = [
    "caller",  # Memory.pin on a turn
    "label",  # a standing instruction the hot tier labels load-bearing and pins itself
]


def small_talk(memory: Memory, n: int, seed: int) -> None:
    rnd = random.Random(seed)
    memory.append_many("c", [{"role": "user" if i % 2 == 0 else "assistant",
                              "content": " ".join(rnd.sample(WORDS, 4)) + f" ({seed}.{i})"} for i in range(n)])


def epoch_start(memory: Memory, pinned_by: str, older: int) -> tuple[int, list[int], object]:
    """`older` small-talk turns, the pin, SMALL_TALK_TURNS more and a short user message;
    the context of that message (a new epoch), the pin's position and the tail's
    positions (sorted)."""
    if older:
        small_talk(memory, older, seed=2)
    pin_at = memory.append("c", {"role": "user", "content": PIN})
    assert pin_at == older
    if pinned_by == "caller":
        memory.pin("c", pin_at)
    small_talk(memory, SMALL_TALK_TURNS, seed=1)
    memory.append("c", {"role": "user", "content": "ok cool, thanks"})
    ctx = memory.context("c", "ok cool, thanks", budget=BUDGET, system=SYSTEM)
    assert ctx.tokens <= BUDGET and messages_tokens(memory.tokens, ctx.messages) == ctx.tokens
    assert ctx.plan.cache.new_epoch
    # once, in the pinned block: not in the grown tail too
    assert [it.slice for it in ctx.plan.items if pin_at in it.positions] == ["pinned"], ctx.plan.items
    assert sum(str(m.get("content") or "").count(PIN) for m in ctx.messages) == 1
    tail = sorted(p for it in ctx.plan.items if it.slice == "tail" for p in it.positions)
    return pin_at, tail, ctx


@pytest.mark.parametrize("pinned_by", PINNED_BY)
def test_a_pin_the_grown_tail_reaches_is_sent_once_in_the_pinned_block(memory: Memory, pinned_by: str) -> None:
    pin_at, tail, _ctx = epoch_start(memory, pinned_by, older=0)
    # the grown tail reached the pin's turn (so it would have shown it) and is contiguous
    # up to it
    assert tail and tail[0] == pin_at + 1, tail
    assert tail == list(range(tail[0], tail[-1] + 1))


@pytest.mark.parametrize("pinned_by", PINNED_BY)
def test_the_grown_tail_passes_over_the_pin_to_older_turns(memory: Memory, pinned_by: str) -> None:
    pin_at, tail, ctx = epoch_start(memory, pinned_by, older=OLDER_TURNS)
    # the turns older than the pin are grown into as room allows (here all of them: the
    # whole conversation is under the fill target): the pin's turn is the tail's only gap
    # (shown in the pinned block)
    assert tail[0] == 0, tail
    assert tail == [p for p in range(tail[0], tail[-1] + 1) if p != pin_at], tail
    # and in log order around the gap: the turn before the pin, then the one after it
    contents = [str(m.get("content") or "") for m in ctx.messages]
    before = next(i for i, c in enumerate(contents) if c.endswith(f"(2.{pin_at - 1})"))
    assert contents[before + 1].endswith("(1.0)"), contents[before:before + 2]

"""A context that starts an epoch is cacheable at once (issue 22): on a turn that
retrieves little it fills the room nothing else wanted with the turns just before the
tail (planner.pack.Packing.grow_tail) up to EPOCH_START_FILL_SHARE of the budget, and a
rewind on a new user message that would keep a prefix under REWIND_MIN_KEPT_SHARE of the
budget starts a new, filled epoch instead.

Both fail on the code before: a new epoch on small talk was the stable layers alone (a
few hundred tokens, under the providers' 1,024-token minimum cacheable prefix, so every
call of the epoch paid in full), and a rewind kept whatever short prefix was left.
"""

from __future__ import annotations

import random

import pytest

from tiermem import Memory
from tiermem.planner.build import EPOCH_START_FILL_SHARE, REWIND_MIN_KEPT_SHARE
from tiermem.tiers.tokens import messages_tokens

# the same seeded histories in several tests: their vectors are computed once a session
# (conftest.shared_vectors)
pytestmark = pytest.mark.usefixtures("shared_vectors")

WORDS = ["garden", "violin", "harbour", "pancake", "glacier", "lantern", "marathon", "orchid", "pottery",
         "satellite", "tunnel", "umbrella", "volcano", "walrus", "yoga", "zeppelin", "bakery", "canyon"]
BUDGET = 2000


def history(memory: Memory, n: int) -> None:
    rnd = random.Random(7)
    memory.append_many("c", [{"role": "user" if i % 2 == 0 else "assistant",
                              "content": " ".join(rnd.sample(WORDS, 6)) + f" and so on ({i})"} for i in range(n)])


def test_a_new_epoch_on_small_talk_is_filled_with_older_tail_turns(memory: Memory) -> None:
    history(memory, 300)
    memory.append("c", {"role": "user", "content": "ok cool"})
    ctx = memory.context("c", "ok cool", budget=BUDGET)
    assert ctx.plan.cache.new_epoch
    assert not [it for it in ctx.plan.items if it.slice == "retrieved"]  # nothing wanted the room
    # filled up to the share (less at most one turn that did not fit), never past the budget
    assert EPOCH_START_FILL_SHARE * BUDGET - 40 <= ctx.tokens <= BUDGET, ctx.tokens
    tail = sorted(p for it in ctx.plan.items if it.slice == "tail" for p in it.positions)
    assert tail == list(range(tail[0], tail[-1] + 1))  # the grown tail is still contiguous
    assert messages_tokens(memory.tokens, ctx.messages) == ctx.tokens


def test_a_short_rewind_on_a_new_message_starts_a_filled_epoch(memory: Memory) -> None:
    history(memory, 300)
    memory.append("c", {"role": "user", "content": "what did we say about the violin and the glacier?"})
    broad = memory.context("c", "what did we say about the violin and the glacier?", budget=BUDGET)
    assert sum(it.tokens for it in broad.plan.items if it.slice == "retrieved") > BUDGET // 2  # a broad recall
    # a reply long enough that the recall's context cannot simply grow by it
    memory.append("c", {"role": "assistant", "content": "we said a lot: " + " ".join(WORDS * 20)})
    memory.append("c", {"role": "user", "content": "haha ok"})
    ctx = memory.context("c", "haha ok", budget=BUDGET)
    c = ctx.plan.cache
    if c.new_epoch:  # the recall's block must give way; what stays before it is short
        assert "rewind" in c.reason and "would keep only" in c.reason, c
        assert ctx.tokens >= EPOCH_START_FILL_SHARE * BUDGET - 40, ctx.tokens
    else:  # or the rewind kept a prefix long enough to cache
        assert c.expected_cached_tokens >= REWIND_MIN_KEPT_SHARE * BUDGET, c
    # either way the context is long enough to cache (a short rewind left ~200 tokens)
    assert REWIND_MIN_KEPT_SHARE * BUDGET <= ctx.tokens <= BUDGET, ctx.tokens

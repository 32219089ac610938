"""What a middle eviction rebuilds after the kept head (planner.middle, issue 22): what
arrived since, then older turns only up to MIDDLE_TAIL_SHARE (0.05) of the budget, and
evictions fire past MIDDLE_CAP_SHARE (0.7). Fails on the code before: the rebuilt tail
took up to a tenth of the budget of older turns, billed in full at every eviction, and
contexts grew to 0.8 of the budget."""

from __future__ import annotations

import random

import pytest

from tiermem import Memory
from tiermem.planner import middle
from tiermem.tiers.tokens import messages_tokens

# the same seeded history and chat texts in every test (and module): their vectors are
# computed once a session (conftest.shared_vectors)
pytestmark = pytest.mark.usefixtures("shared_vectors")

WORDS = ["garden", "violin", "harbour", "pancake", "glacier", "lantern", "marathon", "orchid", "pottery",
         "satellite", "tunnel", "umbrella", "volcano", "walrus", "yoga", "zeppelin", "bakery", "canyon"]
BUDGET = 2000


def history(memory: Memory, n: int) -> None:
    rnd = random.Random(5)
    memory.append_many("c", [{"role": "user" if i % 2 == 0 else "assistant",
                              "content": " ".join(rnd.sample(WORDS, 6)) + f" and so on ({i})"} for i in range(n)])


def chat(memory: Memory, turns: int, user_words: int) -> list[tuple[list[dict[str, object]], object]]:
    """`turns` rounds of a short reply and a user message of `user_words` words."""
    rnd = random.Random(9)
    out = []
    for i in range(turns):
        memory.append("c", {"role": "assistant", "content": " ".join(rnd.choices(WORDS, k=12)) + f" ({i})"})
        text = " ".join(rnd.choices(WORDS, k=user_words)) + f" ({i})"
        memory.append("c", {"role": "user", "content": text})
        ctx = memory.context("c", text, budget=BUDGET)
        assert ctx.tokens <= BUDGET and messages_tokens(memory.tokens, ctx.messages) == ctx.tokens
        out.append((ctx.messages, ctx.plan))
    return out


def evictions(calls: list[tuple[list[dict[str, object]], object]]) -> list[int]:
    return [i for i, (_, plan) in enumerate(calls) if "evicts from the middle" in plan.cache.reason]  # type: ignore[attr-defined]


def test_the_rebuilt_tail_holds_a_small_share_of_older_turns(memory: Memory) -> None:
    history(memory, 300)
    calls = chat(memory, 40, user_words=8)
    got = evictions(calls)
    assert len(got) >= 2
    for i in got:
        msgs, plan = calls[i]
        k = next(b.index for b in plan.breakpoints if b.layer == "head") + 1  # type: ignore[attr-defined]
        rebuilt = msgs[k:-1]  # after the head, before the latest user message
        older = rebuilt[:-1]  # less the reply that arrived since
        assert messages_tokens(memory.tokens, older) - messages_tokens(memory.tokens, []) \
            <= middle.MIDDLE_TAIL_SHARE * BUDGET
        # older turns fill the share as far as the next one would pass it: a tenth of
        # the budget (the old share) is never reached
        assert messages_tokens(memory.tokens, rebuilt) < 0.1 * BUDGET
    # an extension that would pass MIDDLE_CAP_SHARE (0.7) of the budget evicts instead:
    # from the first eviction on, no context passes three quarters of it (0.8 before)
    assert max(messages_tokens(memory.tokens, m) for m, _ in calls[got[0]:]) <= 0.75 * BUDGET

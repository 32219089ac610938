"""Evicting from the middle (planner.middle, issue 22): when an epoch's room is used up on
a new user message, the previous context's head (the stable layers and the turns after
them, the fewest that reach MIDDLE_MIN_KEPT_TOKENS as rendered) stays byte for byte, and only the newest
turns are rebuilt after it; the head is marked as a breakpoint and kept by later
restarts. Fails on the code before: a used-up epoch started a new one, rebuilding all
but the stable layers (the plan said new_epoch, and only the layers were a shared prefix).
"""

from __future__ import annotations

import random

import pytest

from tiermem import Memory
from tiermem.planner.cache_rules import rendered_length
from tiermem.planner.candidates import Candidate
from tiermem.planner.middle import MIDDLE_KEEP_SHARE, MIDDLE_MIN_KEPT_TOKENS, rebuilt_tail
from tiermem.tiers.tokens import messages_tokens

# the same seeded history and chat texts in every test (and module): their vectors are
# computed once a session (conftest.shared_vectors)
pytestmark = pytest.mark.usefixtures("shared_vectors")

WORDS = ["garden", "violin", "harbour", "pancake", "glacier", "lantern", "marathon", "orchid", "pottery",
         "satellite", "tunnel", "umbrella", "volcano", "walrus", "yoga", "zeppelin", "bakery", "canyon"]
BUDGET = 2000
SMALL_TALK = ["ok cool", "haha nice", "sounds good", "great, thanks", "lovely"]


def history(memory: Memory, n: int) -> None:
    rnd = random.Random(11)
    memory.append_many("c", [{"role": "user" if i % 2 == 0 else "assistant",
                              "content": " ".join(rnd.sample(WORDS, 6)) + f" and so on ({i})"} for i in range(n)])


def chat(memory: Memory, turns: int) -> list[tuple[list[dict[str, object]], object]]:
    """`turns` rounds of an assistant reply and a small-talk user message, each answered
    from context(): the messages and the plan of every call."""
    out = []
    rnd = random.Random(3)
    for i in range(turns):
        memory.append("c", {"role": "assistant", "content": " ".join(rnd.choices(WORDS, k=30)) + f" ({i})"})
        text = f"{SMALL_TALK[i % len(SMALL_TALK)]} ({i})"
        memory.append("c", {"role": "user", "content": text})
        ctx = memory.context("c", text, budget=BUDGET)
        assert ctx.tokens <= BUDGET and messages_tokens(memory.tokens, ctx.messages) == ctx.tokens
        assert ctx.messages[-1]["content"] == text  # the latest user message last
        out.append((ctx.messages, ctx.plan))
    return out


def test_a_used_up_epoch_keeps_its_head_and_rebuilds_the_newest_turns(memory: Memory) -> None:
    history(memory, 300)
    calls = chat(memory, 40)
    evictions = [i for i, (_, plan) in enumerate(calls) if "evicts from the middle" in plan.cache.reason]
    assert len(evictions) >= 2, [p.cache.reason for _, p in calls]
    for i in evictions:
        prev, (msgs, plan) = calls[i - 1][0], calls[i]
        assert not plan.cache.new_epoch
        head = [b for b in plan.breakpoints if b.layer == "head"]
        assert len(head) == 1, plan.breakpoints
        k = head[0].index + 1
        assert msgs[:k] == prev[:k]  # the head stays byte for byte: the cache serves it
        assert plan.cache.expected_cached_tokens >= head[0].tokens
        # the fewest leading messages that reach the minimum as a provider caches them (rendered)
        assert sum(rendered_length(memory.tokens, m) for m in msgs[:k]) >= MIDDLE_MIN_KEPT_TOKENS
        assert sum(rendered_length(memory.tokens, m) for m in msgs[:k - 1]) < MIDDLE_MIN_KEPT_TOKENS
        assert messages_tokens(memory.tokens, msgs[:k]) <= MIDDLE_KEEP_SHARE * BUDGET
        # after the head: the newest turns, the previous user message and the reply just made
        assert msgs[-2] == prev[-1] or msgs[-3] == prev[-1]
        assert msgs[-2]["role"] == "assistant"
        assert len(msgs) < len(prev)  # the middle left
    # a later restart keeps the same head: it reads back what the first one wrote
    first, second = calls[evictions[0]], calls[evictions[1]]
    k = next(b.index for b in first[1].breakpoints if b.layer == "head") + 1
    assert second[0][:k] == first[0][:k]
    # between restarts the head stays marked on every append
    for i in range(evictions[0], evictions[1]):
        assert any(b.layer == "head" and b.index == k - 1 for b in calls[i][1].breakpoints)


def test_without_middle_eviction_a_used_up_epoch_starts_anew(memory: Memory) -> None:
    memory.planner.settings.evict_middle = False
    history(memory, 300)
    calls = chat(memory, 40)
    assert not [p for _, p in calls if "evicts from the middle" in p.cache.reason]
    assert any(p.cache.new_epoch and "room used up" in p.cache.reason for _, p in calls[1:])


def test_the_rebuilt_tail_stops_before_a_superseded_turn() -> None:
    # rebuilt newest first: what arrived since always, older units while they fit, never
    # past one the head shows or one superseded since (it would read as current)

    def unit(p: int) -> Candidate:
        c = Candidate("tail", "c", p, 1.0, "recent turn", tokens=30)
        c.body = {"messages": [{"role": "user" if p % 2 == 0 else "assistant", "content": f"turn {p}"}]}
        return c

    recent = [unit(p) for p in range(20, 10, -1)]  # 20 (newest) .. 11

    def got(held_back: frozenset[int] = frozenset()) -> list[int]:
        return [g.items[0].positions[0] for g in rebuilt_tail(recent, {20, 19}, {12}, BUDGET, "r", held_back)]

    assert got() == [18, 19, 20]  # 100 tokens (0.05 of 2,000): 3 units of 30 (the head shows 12)
    assert got(held_back=frozenset({18})) == [19, 20]  # stops before the superseded turn
    assert got(held_back=frozenset({20})) == [18, 19, 20]  # what arrived since stays


def test_a_pin_made_in_the_tail_stays_shown_across_a_middle_eviction(memory: Memory) -> None:
    # a turn pinned while the tail shows it is not in the pinned block of that epoch; the
    # eviction drops the tail's middle, so the pin comes back after the head (pins are
    # always in the context). Fails on the code before: the evicted context left the pin
    # out, and the next call started a new epoch ("pin changed: ... pinned now and not shown").
    history(memory, 300)
    calls = chat(memory, 3)
    pinned = max(it.positions[0] for it in calls[-1][1].items if it.slice == "tail") - 4
    memory.pin("c", pinned)
    rnd = random.Random(5)
    plans = []
    for i in range(40):
        memory.append("c", {"role": "assistant", "content": " ".join(rnd.choices(WORDS, k=30)) + f" ({i})"})
        text = f"{SMALL_TALK[i % len(SMALL_TALK)]} [{i}]"
        memory.append("c", {"role": "user", "content": text})
        ctx = memory.context("c", text, budget=BUDGET)
        assert ctx.tokens <= BUDGET
        on = {p for it in ctx.plan.items if it.fidelity in ("verbatim", "trimmed") for p in it.positions}
        assert pinned in on, (i, ctx.plan.cache.reason)
        plans.append(ctx.plan)
    evicted = [i for i, p in enumerate(plans) if "evicts from the middle" in p.cache.reason]
    assert evicted, [p.cache.reason for p in plans]
    assert not [p.cache.reason for p in plans[evicted[0]:] if "pin changed" in p.cache.reason]

"""The cache-aware layout (DESIGN invariant 6) through Memory.context(): within an epoch
the previous context is a byte-identical prefix of the next one; a pin change moves the
prefix boundary to the pinned block and no earlier; an epoch change is reported in the
plan; breakpoints say where the stable layers end.

Each of these fails on the code before issue 22: plans had no cache report and no
breakpoints, and retrieved turns were rebuilt every call just before the latest message.
"""

from __future__ import annotations

import random

import pytest

from tiermem import Config, Memory
from tiermem.planner.plan import MAX_BREAKPOINTS
from tiermem.tiers.tokens import messages_tokens

# the same seeded histories in several tests: their vectors are computed once a session
# (conftest.shared_vectors)
pytestmark = pytest.mark.usefixtures("shared_vectors")

SYSTEM = "You are a helpful travel assistant."
FILLER = ["haha that's funny", "the weather is nice today", "I watched a movie last night", "ok cool",
          "I had pasta for lunch", "my cat knocked over a plant", "traffic was terrible this morning"]


WORDS = ["garden", "violin", "harbour", "pancake", "glacier", "lantern", "marathon", "orchid", "pottery",
         "satellite", "tunnel", "umbrella", "volcano", "walrus", "yoga", "zeppelin", "bakery", "canyon",
         "dolphin", "easel", "falcon", "gondola", "hammock", "igloo", "jigsaw", "kayak", "lagoon"]


def chitchat(n: int, seed: int) -> list[dict[str, str]]:
    rnd = random.Random(seed)
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"{rnd.choice(FILLER)} ({seed}.{i})"}
            for i in range(n)]


def turn(memory: Memory, i: int, budget: int, *, system: str | None = SYSTEM):  # type: ignore[no-untyped-def]
    """One agent turn: the assistant's reply to the last turn, then the user's message."""
    memory.append("c", {"role": "assistant", "content": f"sure, noted ({i})"})
    # distinct small talk: turns that repeat each other would all be retrieved as related
    text = " ".join(random.Random(i).sample(WORDS, 5)) + f" (turn {i})"
    memory.append("c", {"role": "user", "content": text})
    ctx = memory.context("c", text, budget=budget, system=system)
    assert ctx.tokens <= budget and messages_tokens(memory.tokens, ctx.messages) == ctx.tokens
    return ctx


def test_consecutive_ordinary_turns_extend_the_previous_context(memory: Memory) -> None:
    memory.append("c", {"role": "user", "content": "Never book me on red-eye flights."})
    memory.append_many("c", chitchat(60, seed=1))
    prev = turn(memory, 0, 1500)
    assert prev.plan.cache.new_epoch and prev.plan.cache.epoch == 1
    for i in range(1, 6):
        ctx = turn(memory, i, 1500)
        c = ctx.plan.cache
        # nothing load-bearing changed: the whole previous context is the prefix
        assert not c.new_epoch and c.epoch == 1 and c.epoch_calls == i + 1, c
        assert ctx.messages[:len(prev.messages)] == prev.messages
        assert c.prefix_messages == len(prev.messages) and c.expected_cached_tokens >= prev.tokens - 3
        assert ctx.messages[-1]["content"].endswith(f"(turn {i})")  # the latest user message stays last
        prev = ctx


def test_a_pin_change_moves_the_boundary_to_the_pinned_block_and_no_earlier(memory: Memory) -> None:
    memory.append("c", {"role": "user", "content": "My budget for the trip is $2,000."})
    memory.append_many("c", chitchat(40, seed=2))
    first = turn(memory, 0, 1200)
    assert first.messages[0] == {"role": "system", "content": SYSTEM}
    assert "$2,000" in first.messages[1]["content"]  # the pinned block follows the system prompt
    assert [b.layer for b in first.plan.breakpoints][:2] == ["system", "pinned"]
    memory.append("c", {"role": "assistant", "content": "noted"})
    memory.append("c", {"role": "user", "content": "Actually, my budget is $1,500 now."})
    ctx = memory.context("c", "Actually, my budget is $1,500 now.", budget=1200, system=SYSTEM)
    c = ctx.plan.cache
    assert c.new_epoch and c.epoch == 2 and c.reason.startswith("pin changed"), c
    assert c.prefix_messages == 1 and c.boundary == "pinned", c  # the system prompt stays cached
    for m in ctx.messages:  # the retracted value is not presented as current
        for line in str(m.get("content") or "").splitlines():
            assert "$2,000" not in line or "SUPERSEDED" in line, line


def test_running_out_of_room_starts_a_reported_epoch_and_the_budget_holds(memory: Memory) -> None:
    memory.append_many("c", chitchat(30, seed=3))
    epochs = []
    for i in range(40):
        ctx = turn(memory, i, 300, system=None)
        epochs.append((ctx.plan.cache.epoch, ctx.plan.cache.new_epoch, ctx.plan.cache.reason))
    new = [e for e in epochs[1:] if e[1]]
    assert new, epochs  # 40 turns of ~15 tokens each cannot all fit 300 tokens
    assert all(r.startswith("room used up") for _e, _n, r in new), new
    assert [e for e, _n, _r in epochs] == sorted(e for e, _n, _r in epochs)  # epochs only count up
    assert sum(1 for e in epochs if not e[1]) > 2 * len(new)  # most turns extend their epoch


@pytest.mark.parametrize(("change", "reason"), [
    ({"budget": 900}, "budget changed"),  # another budget: another layout
    ({"system": "You are terse."}, "system prompt changed"),  # the first layer moved
])
def test_what_the_caller_changes_starts_an_epoch(memory: Memory, change: dict, reason: str) -> None:
    memory.append_many("c", chitchat(20, seed=4))
    turn(memory, 0, 800)
    memory.append("c", {"role": "user", "content": "and another thing"})
    ctx = memory.context("c", "and another thing", **{"budget": 800, "system": SYSTEM, **change})
    assert ctx.plan.cache.new_epoch and ctx.plan.cache.reason.startswith(reason)


def test_another_query_on_the_same_log_keeps_the_stable_part(memory: Memory) -> None:
    # an independent question on an unchanged log (the standard LoCoMo eval): the per-turn
    # part of the previous question gives way when this one needs the room
    memory.append_many("c", chitchat(30, seed=5))
    memory.append("c", {"role": "user", "content": "I adopted a dog called Biscuit last spring."})
    memory.append_many("c", chitchat(30, seed=6))
    memory.append("c", {"role": "user", "content": "My sister lives in Porto and teaches piano."})
    memory.append_many("c", chitchat(30, seed=7))
    a = memory.context("c", "what is the name of my dog?", budget=600, system=SYSTEM)
    b = memory.context("c", "where does my sister live and what does she teach?", budget=600, system=SYSTEM)
    assert "Porto" in "\n".join(str(m["content"]) for m in b.messages)
    assert b.messages[-1] == a.messages[-1]  # the latest user message stays last
    assert not b.plan.cache.new_epoch
    assert b.plan.cache.prefix_messages >= 1 and b.messages[0] == a.messages[0]


def test_breakpoints_mark_layer_ends_and_cache_control_follows_them(memory: Memory) -> None:
    memory.append("c", {"role": "user", "content": "Always answer in British English."})
    memory.append_many("c", chitchat(30, seed=8))
    ctx = turn(memory, 0, 1000)
    bps = ctx.plan.breakpoints
    assert 1 <= len(bps) <= MAX_BREAKPOINTS
    assert [b.index for b in bps] == sorted({b.index for b in bps})
    assert bps[-1].layer == "context" and bps[-1].index == len(ctx.messages) - 1
    assert bps[-1].tokens == ctx.tokens - 3  # everything but the reply priming
    marked = ctx.with_cache_control()
    flagged = [i for i, m in enumerate(marked) if isinstance(m["content"], list)
               and m["content"][-1].get("cache_control") == {"type": "ephemeral"}]
    assert flagged == [b.index for b in bps]
    assert [m["content"][0]["text"] if isinstance(m["content"], list) else m["content"] for m in marked] == \
        [m["content"] for m in ctx.messages]  # same text, only the markers added
    assert "breakpoints:" in ctx.plan.explain() and "stable prefix" in ctx.plan.explain()


def test_epochs_off_rebuilds_every_call(tmp_path, embedder) -> None:  # type: ignore[no-untyped-def]
    with Memory(Config(data_dir=tmp_path / "d", context_epochs=False), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        mem.append_many("c", chitchat(20, seed=9))
        turn(mem, 0, 800)
        ctx = turn(mem, 1, 800)
        assert ctx.plan.cache.new_epoch and "epochs are off" in ctx.plan.cache.reason

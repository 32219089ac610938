"""Late pins (planner.late_pins, issue 22): a pin whose turn the context no longer shows
is shown in a late-pin block instead of rebuilding the pinned block: appended after the
kept context within an epoch, carried right after the head by a middle eviction (and
read back there by later restarts), folded into the pinned block by the next new epoch.

Each test but the last fails on the code before: a pin made after its turn left the
context started a new epoch ("pin changed: #N is pinned now and not shown"), and a
middle eviction that would drop a pin's only showing turn did not happen, so the context
grew to the budget.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from tiermem import Memory
from tiermem.planner import late_pins
from tiermem.planner.middle import MIDDLE_CAP_SHARE
from tiermem.tiers.tokens import messages_tokens

# the same seeded history and chat texts in every test (and module): their vectors are
# computed once a session (conftest.shared_vectors)
pytestmark = pytest.mark.usefixtures("shared_vectors")

WORDS = ["garden", "violin", "harbour", "pancake", "glacier", "lantern", "marathon", "orchid", "pottery",
         "satellite", "tunnel", "umbrella", "volcano", "walrus", "yoga", "zeppelin", "bakery", "canyon"]
BUDGET = 2000
SMALL_TALK = ["ok cool", "haha nice", "sounds good", "great, thanks", "lovely"]
PINNED = 10  # a turn of the early history: no context of these tests shows it unpinned


def history(memory: Memory, n: int = 300) -> None:
    rnd = random.Random(11)
    memory.append_many("c", [{"role": "user" if i % 2 == 0 else "assistant",
                              "content": " ".join(rnd.sample(WORDS, 6)) + f" and so on ({i})"} for i in range(n)])


class Chat:
    """Rounds of an assistant reply and a small-talk user message, each answered from
    context(); every call's messages and plan are kept."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory
        self.rnd = random.Random(3)
        self.calls: list[tuple[list[dict[str, Any]], Any]] = []

    def turns(self, n: int) -> list[tuple[list[dict[str, Any]], Any]]:
        for _ in range(n):
            i = len(self.calls)
            self.memory.append("c", {"role": "assistant", "content": " ".join(self.rnd.choices(WORDS, k=30)) + f" ({i})"})
            text = f"{SMALL_TALK[i % len(SMALL_TALK)]} ({i})"
            self.memory.append("c", {"role": "user", "content": text})
            ctx = self.memory.context("c", text, budget=BUDGET)
            assert ctx.tokens <= BUDGET and messages_tokens(self.memory.tokens, ctx.messages) == ctx.tokens
            assert ctx.messages[-1]["content"] == text  # the latest user message last
            self.calls.append((ctx.messages, ctx.plan))
        return self.calls[-n:]


def shows(plan: Any, position: int) -> bool:
    return any(position in it.positions for it in plan.items if it.fidelity in ("verbatim", "trimmed"))


def late_blocks(messages: list[dict[str, Any]]) -> list[int]:
    return [i for i, m in enumerate(messages) if str(m.get("content", "")).startswith(late_pins.HEADER)]


def pinned_line(memory: Memory, position: int) -> str:
    text = memory.history("c")[position].body["content"]
    assert isinstance(text, str)
    return text


def test_a_pin_made_after_its_turn_left_is_appended_not_rebuilt(memory: Memory) -> None:
    history(memory)
    chat = Chat(memory)
    prev, plan = chat.turns(3)[-1]
    assert not shows(plan, PINNED)
    memory.pin("c", PINNED)
    msgs, plan = chat.turns(1)[0]
    c = plan.cache
    # the previous context is the prefix: the pin is appended, not the pinned block rebuilt
    assert not c.new_epoch and msgs[:len(prev)] == prev, c
    assert c.prefix_messages == len(prev) and f"#{PINNED} made since shown late" in c.reason, c
    (at,) = late_blocks(msgs)
    assert at == len(msgs) - 2  # in the per-turn part, just before the latest user message
    assert pinned_line(memory, PINNED) in msgs[at]["content"]
    assert shows(plan, PINNED)
    assert any(it.slice == "pinned" and it.positions == [PINNED] and "shown late" in it.reason for it in plan.items)


def test_a_late_pin_follows_the_head_across_evictions_and_is_read_back(memory: Memory) -> None:
    history(memory)
    chat = Chat(memory)
    chat.turns(3)
    memory.pin("c", PINNED)
    calls = chat.turns(40)
    assert not [p.cache.reason for _, p in calls if p.cache.new_epoch]  # no epoch for the pin
    assert all(shows(p, PINNED) for _, p in calls)  # pins are always in the context
    evictions = [i for i, (_, p) in enumerate(calls) if p.cache.reason.startswith("evicts from the middle")]
    assert len(evictions) >= 2, [p.cache.reason for _, p in calls]
    for i in evictions:
        msgs, plan = calls[i]
        marks = {b.layer: b.index for b in plan.breakpoints}
        # the late block right after the kept head; both ends are marked for caching
        assert marks["late_pinned"] == marks["head"] + 1 and late_blocks(msgs) == [marks["late_pinned"]], marks
        assert "pin(s) its leaving turns showed follow the head" in plan.cache.reason
        # evicted at the cap, not left to grow to the budget: the late block is not counted
        late = messages_tokens(memory.tokens, [msgs[marks["late_pinned"]]])
        assert plan.tokens <= MIDDLE_CAP_SHARE * BUDGET + late, plan.tokens
    # a later restart keeps the head and the late block byte for byte: the cache reads them
    first, second = calls[evictions[0]], calls[evictions[1]]
    k = next(b.index for b in first[1].breakpoints if b.layer == "late_pinned") + 1
    assert second[0][:k] == first[0][:k]
    assert second[1].cache.expected_cached_tokens >= messages_tokens(memory.tokens, first[0][:k]) - 3


def test_a_late_pin_that_stops_being_current_ends_the_epoch(memory: Memory) -> None:
    history(memory)
    chat = Chat(memory)
    chat.turns(3)
    memory.pin("c", PINNED)
    msgs, _ = chat.turns(1)[0]
    assert late_blocks(msgs)
    memory.unpin("c", PINNED)
    msgs, plan = chat.turns(1)[0]
    c = plan.cache
    # it was presented as current: a rebuild, and the plan says why
    assert c.new_epoch and c.reason == f"pin changed: #{PINNED} is no longer a current pin", c
    assert not late_blocks(msgs) and not shows(plan, PINNED)


def test_late_pins_past_their_share_fold_into_the_pinned_block(memory: Memory) -> None:
    # bounded: late pins that would pass LATE_PINS_SHARE of the budget start a new epoch,
    # whose pinned block holds them (as every pin made out of sight did before)
    history(memory)
    chat = Chat(memory)
    chat.turns(3)
    first, more = range(4, 16, 4), range(16, 28, 4)
    for p in first:  # three pins of ~20 tokens: one late block, within 5% of the budget
        memory.pin("c", p)
    msgs, plan = chat.turns(1)[0]
    assert not plan.cache.new_epoch and len(late_blocks(msgs)) == 1, plan.cache
    assert messages_tokens(memory.tokens, [msgs[late_blocks(msgs)[0]]]) <= late_pins.LATE_PINS_SHARE * BUDGET
    for p in more:  # three more: two blocks would pass it
        memory.pin("c", p)
    msgs, plan = chat.turns(1)[0]
    c = plan.cache
    assert c.new_epoch and c.reason.startswith("pin changed") and "the pinned block takes them" in c.reason, c
    assert not late_blocks(msgs)
    pinned = {p for it in plan.items if it.slice == "pinned" for p in it.positions}
    assert pinned == {*first, *more}, pinned


def test_late_pins_read_back_long_enough_fold_at_an_eviction(memory: Memory, monkeypatch: Any) -> None:
    # a late block is read back at every call, a fold is paid once: once the late pins
    # sent reach LATE_FOLD_RATIO times a rebuild's cost, an eviction folds them instead
    monkeypatch.setattr(late_pins, "LATE_FOLD_RATIO", 0.01)  # due at the first eviction
    history(memory)
    chat = Chat(memory)
    chat.turns(3)
    memory.pin("c", PINNED)
    calls = chat.turns(40)
    folds = [i for i, (_, p) in enumerate(calls) if p.cache.new_epoch]
    assert folds, [p.cache.reason for _, p in calls]
    msgs, plan = calls[folds[0]]
    assert plan.cache.reason.startswith("pin changed: 1 late pin(s) fold into the pinned block"), plan.cache
    assert not late_blocks(msgs)
    assert any(it.slice == "pinned" and it.positions == [PINNED] and "shown late" not in it.reason
               for it in plan.items)  # in the rebuilt pinned block
    assert all(shows(p, PINNED) for _, p in calls)
    assert not [i for i, (_, p) in enumerate(calls[:folds[0]]) if p.cache.reason.startswith("evicts")]


def test_the_cost_replay_bills_a_late_pin_block_as_the_pin_change() -> None:
    # evals.decompose: a late-pin block sent after a kept prefix is what the pin change
    # cost (before: it would have been counted as a retrieved block)
    from tiermem.evals.decompose import Decomposition, message_kind

    block = late_pins.block([])
    assert message_kind(block, set()) == "late_pin"
    assert Decomposition._cause("late_pin", "extension") == "pin_change"
    assert Decomposition._cause("late_pin", "middle_eviction") == "pin_change"
    assert Decomposition._cause("retrieved", "extension") == "retrieved_appended"


def test_a_context_past_the_eviction_cap_marks_nothing_after_its_head(memory: Memory) -> None:
    # the next call on a new user message evicts to the head, so nothing after it would
    # be read back: a cache_control mark there would only pay Anthropic's write premium.
    # Fails on the code before: the stable part and the whole context were marked too.
    history(memory)
    chat = Chat(memory)
    while not chat.calls or not chat.calls[-1][1].cache.reason.startswith("evicts from the middle"):
        chat.turns(1)
        assert len(chat.calls) < 60, "no middle eviction"
    # another query on the same log, whose clearly related turns are appended past the cap
    ctx = memory.context("c", "glacier lantern marathon orchid pottery satellite and so on?", budget=BUDGET)
    plan = ctx.plan
    assert not plan.cache.new_epoch and plan.tokens > MIDDLE_CAP_SHARE * BUDGET, (plan.cache, plan.tokens)
    head = next(b.index for b in plan.breakpoints if b.layer == "head")
    assert plan.breakpoints and all(b.index <= head for b in plan.breakpoints), plan.breakpoints

"""The first recorded context of a conversation that keeps no previous one (its first
call on a log already long, e.g. the Agents SDK filter or `tiermem serve` after a restart
without a shared Redis) leaves the room a new epoch on a new user message leaves
(planner.epoch_policy.EPOCH_RESERVE_SHARE), as a session start after the provider's cache
expired already did: the next turn then extends it instead of starting another epoch, a
second cache miss in a row.

On the code before, that first context filled the budget to the brim (96-100% of it at
400 and 1,000 tokens) and the next turn at 1,000 started a new epoch ("room used up").
A what-if plan (`record=False`, the LoCoMo recall eval's fresh contexts) has no next call
to leave room for: it still takes the whole room."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiermem import Config, Memory
from tiermem.planner.epoch_policy import reserve_tokens
from tiermem.planner.plan import Context
from tiermem.tiers.embed import Embedder

pytestmark = pytest.mark.usefixtures("shared_vectors")

T0 = 1_765_000_000.0  # the first turn's created_at; turns a second apart (one cache lifetime)
EXCHANGES = 30  # user/assistant pairs stored before the first context call
TOPICS = ["the night train to Vienna", "my sister's wedding in June", "the new espresso machine",
          "the marathon training plan", "the broken bike gear", "our trip to Lisbon", "the garden shed roof",
          "a violin lesson on Tuesday", "the quarterly tax filing", "the dog's vet appointment"]
FIRST_Q = "What did we decide about the night train to Vienna?"
NEXT_Q = "And the espresso machine?"


def _history(mem: Memory) -> None:
    msgs: list[dict[str, object]] = []
    for i in range(EXCHANGES):
        topic = TOPICS[i % len(TOPICS)]
        msgs.append({"role": "user", "content": f"Can you remind me what we decided about {topic}? I think it "
                     f"was around item {i} and involved {i + 2} people.", "created_at": T0 + 2 * i})
        msgs.append({"role": "assistant", "content": f"About {topic}: we agreed on option {i % 3 + 1}, to revisit "
                     f"in {i + 1} days, and to ask {i + 2} people before deciding.", "created_at": T0 + 2 * i + 1})
    mem.append_many("c", msgs)
    mem.append("c", {"role": "user", "content": FIRST_Q, "created_at": T0 + 2 * EXCHANGES})


def _next_turn(mem: Memory) -> None:
    mem.append("c", {"role": "assistant", "content": "Option 1, to revisit in 1 day.",
                     "created_at": T0 + 2 * EXCHANGES + 1})
    mem.append("c", {"role": "user", "content": NEXT_Q, "created_at": T0 + 2 * EXCHANGES + 2})


def _first_then_next(mem: Memory, budget: int) -> tuple[Context, Context]:
    first = mem.context("c", FIRST_Q, budget=budget)
    _next_turn(mem)
    return first, mem.context("c", NEXT_Q, budget=budget)


def _check(first: Context, second: Context, budget: int) -> None:
    a, b = first.plan.cache, second.plan.cache
    assert a.new_epoch and "no previous context" in a.reason, a
    assert not b.new_epoch, b.reason
    assert (b.epoch, b.epoch_calls) == (a.epoch, 2)
    # the reserve was left free (only retrieved turns give way; this history has plenty)
    assert first.tokens <= budget - reserve_tokens(budget), (first.tokens, budget)
    assert "stay free for the next calls" in first.plan.retrieval
    # extended: the first context is kept byte for byte, the next turn appended
    assert second.messages[:len(first.messages) - 1] == first.messages[:-1]
    assert second.tokens <= budget


# (budget in tokens): before the fix the first context took 999 of 1,000 tokens (the next
# turn: "room used up", a new epoch) and 1,893 of 2,000 (the next extended, by luck of
# what it appended, but with no room left for the one after)
@pytest.mark.parametrize("budget", [
    pytest.param(1000, id="budget-1000"),  # fails before: a second new epoch
    pytest.param(2000, id="budget-2000"),  # fails before: the first context took 95%
])
def test_the_first_context_of_a_long_log_leaves_room_for_the_next_turn(tmp_path: Path, embedder: Embedder,
                                                                       budget: int) -> None:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False, background_indexing=False) as mem:
        _history(mem)
        _check(*_first_then_next(mem, budget), budget)


def test_the_first_context_after_a_restart_leaves_room_too(tmp_path: Path, embedder: Embedder) -> None:
    """A process without a shared Redis keeps its epoch in memory: after a restart the
    state is lost, and the new process's first context is such a first context."""
    budget = 1000
    cfg = Config(data_dir=tmp_path / "data")
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as before:
        _history(before)
        before.context("c", "What did we say about Lisbon?", budget=budget)  # the old process's epoch
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as after:
        _check(*_first_then_next(after, budget), budget)


def test_a_what_if_plan_still_takes_the_whole_room(tmp_path: Path, embedder: Embedder) -> None:
    budget = 1000
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False, background_indexing=False) as mem:
        _history(mem)
        what_if = mem.context("c", FIRST_Q, budget=budget, record=False)
        # no next call extends it: no reserve (the recall eval's fresh contexts are as before)
        assert what_if.tokens > budget - reserve_tokens(budget), what_if.tokens
        assert "stay free" not in what_if.plan.retrieval
        # and it kept no state: the recorded call after it is still the first, with the reserve
        first = mem.context("c", FIRST_Q, budget=budget)
        assert "no previous context" in first.plan.cache.reason
        assert first.tokens <= budget - reserve_tokens(budget) < what_if.tokens

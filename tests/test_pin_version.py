"""The pin version (m012_pin_versions) moves exactly when what the planner may pin could
have changed, from any connection, and the planner's kept pinned block follows it."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tiermem import Memory
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.models import Message

LB = ("instruction", True, 85, "a rule")  # a load-bearing label
CHAT = ("chitchat", False, 10, "small talk")


def _seed(cold: ColdStore) -> None:
    cold.append_many("c", [Message(role="user", content="Always answer in French."),
                           Message(role="assistant", content="D'accord.")], labels=[LB, CHAT])


def _other(cold: ColdStore) -> ColdStore:
    return ColdStore(cold.path, tokens=cold.tokens, embedder=cold.embedder)


@pytest.mark.parametrize(("change", "moves"), [
    # a load-bearing turn arrives: the pinned block may grow
    (lambda c: c.append_many("c", [Message(role="user", content="Use metric units.")], labels=[LB]), True),
    # an ordinary turn arrives: nothing pinnable changed, the kept block stays valid
    (lambda c: c.append_many("c", [Message(role="user", content="nice weather")], labels=[CHAT]), False),
    # an unlabelled turn (labelled later, which moves it then)
    (lambda c: c.append_many("c", [Message(role="user", content="hmm")]), False),
    # relabelled as load-bearing by consolidation
    (lambda c: c.set_labels("c", [(1, "decision", True, 75, "agreed")]), True),
    # relabelled with the same label: no change
    (lambda c: c.set_labels("c", [(0, *LB)]), False),
    # a supersession recorded
    (lambda c: c.set_superseded("c", [(0, 1)]), True),
    # an explicit pin, and its removal
    (lambda c: c.set_pin("c", 1, 60), True),
    (lambda c: (c.set_pin("c", 1, 60), c.set_pin("c", 1, None)), True),
    # vectors stored: not a label
    (lambda c: c.index_pending(), False),
], ids=["load-bearing-turn", "ordinary-turn", "unlabelled-turn", "relabelled", "same-label", "superseded", "pinned",
        "unpinned", "vectors"])
def test_version_moves_only_when_pins_could_change(cold: ColdStore, change: Callable[[ColdStore], object],
                                                    moves: bool) -> None:
    _seed(cold)
    before = cold.pin_version("c")
    other = _other(cold)  # another process's connection: the triggers hold for every writer
    try:
        change(other)
    finally:
        other.close()
    assert (cold.pin_version("c") != before) is moves


def test_version_never_repeats_across_prune_and_recreate(cold: ColdStore) -> None:
    _seed(cold)
    seen = cold.pin_version("c")
    cold.prune(float("inf"), all_namespaces=True)
    after_prune = cold.pin_version("c")
    assert after_prune > seen  # the load-bearing turn left
    _seed(cold)
    # the new incarnation has its own key, so nothing kept under the old key's versions
    # can ever be mistaken for it; the old key's counter still never moves back
    new_key = cold.key_of("default", "c")
    assert new_key is not None and new_key != "c"
    assert cold.pin_version(new_key) >= 1
    assert cold.pin_version("c") == after_prune


def test_planner_shows_a_pin_labelled_by_another_connection(cold_memory: Memory) -> None:
    mem = cold_memory
    mem.append_many("c", [{"role": "user", "content": "The budget cap is 400 euros."},
                          *[{"role": "user" if i % 2 else "assistant", "content": f"chat {i}"} for i in range(60)],
                          {"role": "user", "content": "ok, next?"}])
    first = mem.context("c", "ok, next?", 120)
    cap_shown = any("400 euros" in str(m["content"]) for m in first.messages)
    other = _other(mem.cold)
    try:
        other.set_labels("c", [(0, "constraint", True, 85, "a limit")])
    finally:
        other.close()
    second = mem.context("c", "ok, next?", 120)
    assert not cap_shown  # 60 turns back, outside a 120-token tail
    pinned = [i for i in second.plan.items if i.slice == "pinned"]
    assert [i.positions for i in pinned] == [[0]]
    assert any("400 euros" in str(m["content"]) for m in second.messages)
    # and a supersession recorded elsewhere takes it out again
    other = _other(mem.cold)
    try:
        other.set_superseded("c", [(0, 61)])
    finally:
        other.close()
    third = mem.context("c", "ok, next?", 120)
    assert not [i for i in third.plan.items if i.slice == "pinned"]


def test_kept_pins_follow_the_budget_up_and_down(cold_memory: Memory) -> None:
    # the kept block is read for one budget's room: a larger budget later must still
    # see every pin it has room for, and a smaller one the same as before
    mem = cold_memory
    rules = [{"role": "user", "content": f"Rule {i}: always include the reference code R-{i:03d} in replies."}
             for i in range(40)]
    mem.append_many("c", [*rules, {"role": "user", "content": "and now?"}])
    mem.cold.set_labels("c", [(i, "constraint", True, 85, "a rule") for i in range(40)])

    def pinned(budget: int) -> list[int]:
        ctx = mem.context("c", "and now?", budget)
        return sorted(p for i in ctx.plan.items if i.slice == "pinned" for p in i.positions)

    small = pinned(250)
    large = pinned(3000)  # after the small one: the kept set must grow, not cap it
    again = pinned(250)
    assert 0 < len(small) < len(large)
    mem.planner.candidates.pins.clear()  # what a planner without kept pins shows
    assert pinned(3000) == large
    mem.planner.candidates.pins.clear()
    assert pinned(250) == small == again

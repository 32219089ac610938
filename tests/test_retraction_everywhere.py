"""A retracted item (the Agents SDK's `pop_item`, a `tiermem.retract` row) is hidden from
every context, view and search, wherever it sits in the log (tiers.formats, control rows).

Before, the planner read control rows only among the recent tail's rows: once the
retraction scrolled out of the tail, the popped item came back through retrieval, the
pinned block, namespace recall from another conversation, warm views and `search()`; an
epoch that showed it kept re-sending it; and the control rows themselves were labelled
load-bearing system instructions, pinned as empty lines.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder
from tiermem.tiers.formats import RETRACT_TYPE

SECRET = "ZX-998877"
ASK = "What is my passport number?"


@pytest.fixture(params=[False, True], ids=["log only", "with redis"])
def mem(request: pytest.FixtureRequest, tmp_path: Path, embedder: Embedder) -> Iterator[Memory]:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=request.param,
                background_indexing=False) as m:
        yield m


def filler(n: int, what: str) -> list[dict[str, str]]:
    """n exchanges of talk. Their texts come round every 4 exchanges: the rows are as many
    (what moves the retraction out of the tail), the model embeds 8 texts, not 2n (a
    worker whose memo has lost them embedded ~340 texts per test)."""
    out = []
    for i in range(n):
        out += [{"role": "user", "content": f"{what} question {i % 4} about trains and buses"},
                {"role": "assistant", "content": f"{what} answer {i % 4}"}]
    return out


def popped_far_back(mem: Memory) -> int:
    """A secret told, popped at once, then enough talk that the retraction leaves the tail."""
    mem.append_many("trip", filler(20, "early"))
    (pos,) = mem.append_many("trip", [{"role": "user", "content": f"My passport number is {SECRET}, aisle seats."}])
    mem.append("trip", {"type": RETRACT_TYPE, "position": pos})
    mem.append_many("trip", filler(150, "later"))
    mem.append("trip", {"role": "user", "content": ASK})
    mem.catch_up()
    return pos


@pytest.mark.parametrize("budget", [300, 1000, 4000])  # pinned-only room, a mid budget, room for all
def test_a_popped_item_stays_out_of_every_context(mem: Memory, budget: int) -> None:
    pos = popped_far_back(mem)
    ctx = mem.context("trip", ASK, budget)
    assert SECRET not in json.dumps(ctx.messages)
    assert all(pos not in it.positions for it in ctx.plan.items)


def test_a_popped_item_is_not_recalled_from_another_conversation(mem: Memory) -> None:
    popped_far_back(mem)
    mem.append("other", {"role": "user", "content": ASK})
    mem.catch_up()
    assert SECRET not in json.dumps(mem.context("other", ASK, 4000).messages)


def test_search_never_returns_a_popped_item_or_a_control_row(mem: Memory) -> None:
    pos = popped_far_back(mem)
    for conv in ("trip", None):
        hits = mem.search(conv, f"passport number {SECRET}", 5)
        assert hits and all(SECRET not in h.text and h.position not in (pos, pos + 1) for h in hits)
        assert all(h.text for h in hits)  # no empty control row


def test_views_leave_a_popped_item_out(mem: Memory) -> None:
    popped_far_back(mem)
    mem.consolidate("trip")
    for budget in (1000, 4000):
        assert SECRET not in json.dumps(mem.context("trip", "summarize what we discussed", budget).messages)


def test_an_epoch_that_showed_an_item_ends_when_it_is_popped(mem: Memory) -> None:
    mem.append_many("trip", filler(20, "early"))
    (pos,) = mem.append_many("trip", [{"role": "user", "content": f"My passport number is {SECRET}, aisle seats."}])
    mem.append_many("trip", filler(40, "later"))
    mem.append("trip", {"role": "user", "content": ASK})
    mem.catch_up()
    first = mem.context("trip", ASK, 1500)
    assert SECRET in json.dumps(first.messages)  # retrieved: the premise
    mem.append("trip", {"type": RETRACT_TYPE, "position": pos})
    mem.append("trip", {"role": "user", "content": "and which seat do I like?"})
    after = mem.context("trip", "and which seat do I like?", 1500)
    assert SECRET not in json.dumps(after.messages)
    assert after.plan.cache is not None and after.plan.cache.new_epoch
    assert "retracted" in after.plan.cache.reason


def test_control_rows_are_never_pinned(mem: Memory) -> None:
    mem.append_many("c", [{"role": "user", "content": "hello there"}, {"role": "assistant", "content": "hi"}])
    mem.append("c", {"type": RETRACT_TYPE, "position": 1})
    mem.append("c", {"type": "tiermem.clear"})
    mem.append("c", {"role": "user", "content": "what now?"})
    turns = {t.position: t for t in mem.cold.turns(mem.cold.key_of("default", "c") or "")}
    assert not turns[2].load_bearing and not turns[3].load_bearing
    for budget in (300, 1000):
        ctx = mem.context("c", "what now?", budget)
        assert not [it for it in ctx.plan.items if it.slice == "pinned"]


@pytest.mark.parametrize("budget", [300, 1000, 4000])  # the long replies fit only in the last
def test_popping_the_newest_user_message_brings_back_the_one_before(mem: Memory, budget: int) -> None:
    """The user message before the popped one lies beyond the tail's rows (long replies
    between): the context ended up with no user message at all, which both provider APIs
    refuse."""
    mem.append("c", {"role": "user", "content": "Find me a flight to Lisbon next Friday, please."})
    for _ in range(6):  # the same long reply: the model embeds it once
        mem.append("c", {"role": "assistant", "content": "Option: " + "Flight TP1350 leaves at 09:10. " * 40})
    pos = mem.append("c", {"role": "user", "content": "oops, wrong window"})
    mem.append("c", {"type": RETRACT_TYPE, "position": pos})
    ctx = mem.context("c", None, budget)
    users = [m for m in ctx.messages if m["role"] == "user"]
    assert [u["content"] for u in users] == ["Find me a flight to Lisbon next Friday, please."]

"""`Plan.slice_tokens()` (what `explain()`, /metrics' layer histogram, the inspector's
layer chart and the evals' traces show per slice) is what each slice costs as sent: the
tokens of the messages that show it, a block's header and shared session headings once,
the slices summing to at most the plan's tokens.

Before, it summed the items' own counts, each of which includes what the item would cost
alone (its session heading, which the block's lines of one session share): a budget-300
context of 290 tokens said `retrieved: 306 tokens` for a 255-token block, and its slices
summed to 338. Real Memory (cold log, the default tokenizer), real plans."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tiermem import Config, Memory
from tiermem.inspector.routes import _plan_ctx
from tiermem.planner.plan import Plan, PlanItem, sent_slice_tokens
from tiermem.tiers.embed import Embedder
from tiermem.tiers.tokens import message_tokens

pytestmark = pytest.mark.usefixtures("clean_env")

BUDGET = 300  # tokens: the reviewer's budget, small enough that the block's headings matter
FILLER_TURNS = 30  # a session of small talk, so that retrieval finds turns of several sessions
QUERY = "What is my budget?"


def _talk(mem: Memory) -> None:
    # the reviewer's conversation (README walk): four sessions, a fact that changes
    mem.append("life", {"role": "user", "content": "My budget is 2000 EUR."}, session_id="s1")
    mem.append("life", {"role": "assistant", "content": "Noted."}, session_id="s1")
    for i in range(FILLER_TURNS):
        mem.append("life", {"role": "user", "content": f"Filler chat number {i} about the weather and movies."},
                   session_id="s2")
        mem.append("life", {"role": "assistant", "content": f"Sure, filler reply {i}."}, session_id="s2")
    mem.append("life", {"role": "user", "content": "Actually, my budget is now 3000 EUR."}, session_id="s3")
    mem.append("life", {"role": "assistant", "content": "Updated to 3000 EUR."}, session_id="s3")
    mem.append("life", {"role": "user", "content": QUERY}, session_id="s4")


MEMORY_SLICES = ("pinned", "summary", "retrieved")  # the blocks tiermem writes as system messages

# (settings, the caller's system prompt, a turn pinned)
CASES: list[tuple[dict[str, Any], str | None, bool]] = [
    # the reviewer's: the default layout, no system prompt
    ({}, None, False),
    # a caller's system prompt (its own slice) and a pinned block (a block of its own; a
    # share with room for a pinned line and the block's header at this budget)
    ({"layer_shares": {"pinned": 0.3}}, "You are terse.", True),
    # every block in one message before the latest: its slices share that message's tokens
    ({"system_messages": "before_latest", "layer_shares": {"pinned": 0.3}}, "You are terse.", True),
]


@pytest.mark.parametrize(("settings", "system", "pin"), CASES)
def test_slices_are_their_messages_as_sent(tmp_path: Path, embedder: Embedder, settings: dict[str, Any],
                                           system: str | None, pin: bool) -> None:
    with Memory(Config(data_dir=tmp_path / "data", **settings), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        _talk(mem)
        if pin:
            mem.pin("life", 2)  # a filler turn: short, never superseded, not in the tail
        ctx = mem.context("life", QUERY, budget=BUDGET, system=system, record=False)
        plan, per = ctx.plan, ctx.plan.slice_tokens()
        items_alone = sum(i.tokens for i in plan.items if i.slice == "retrieved")
        assert sum(per.values()) <= plan.tokens <= BUDGET, (per, plan.tokens)
        # the case is the reviewer's: the items one by one overstate the block
        assert items_alone > per["retrieved"] > 0, (items_alone, per)
        # each kind of message, counted alone, is what its slices cost
        sent = {"system": 0, "blocks": 0, "turns": 0}
        for m in ctx.messages:
            kind = ("turns" if m["role"] != "system" else "system" if m["content"] == system else "blocks")
            sent[kind] += message_tokens(mem.tokens, m)
        assert per.get("system", 0) == sent["system"], (per, sent)
        assert sum(per.get(s, 0) for s in MEMORY_SLICES) == sent["blocks"], (per, sent)
        assert per["tail"] == sent["turns"], (per, sent)
        assert per.get("pinned", 0) > 0 or not pin, per
        assert f"retrieved: {per['retrieved']} tokens" in plan.explain()
        # the plan as the service answers it (to_dict) reads the same
        assert Plan.from_dict(plan.to_dict()).slice_tokens() == per


def _item(slice_: str, tokens: int) -> PlanItem:
    return PlanItem(slice_, "c", [1], "cold", "verbatim", tokens, 1.0, "test")


# (messages as (layer, tokens, items' (slice, tokens)), the context's total, the slices expected)
SPLITS: list[tuple[list[tuple[str, int, list[tuple[str, int]]]], int, dict[str, int]]] = [
    # one block whose lines each count a heading: the message's tokens, not the lines' 20+20
    ([("retrieved", 30, [("retrieved", 20), ("retrieved", 20)])], 40, {"retrieved": 30}),
    # one message of two slices: split by their items' tokens (3:1)
    ([("memory", 40, [("pinned", 30), ("retrieved", 10)])], 50, {"pinned": 30, "retrieved": 10}),
    # a tool result with no item of its own (its unit's item sits on the call) and the latest
    ([("tail", 10, [("tail", 9)]), ("tail", 5, []), ("latest", 7, [("tail", 7)])], 30, {"tail": 22}),
    # a message of no slice's layer shows nothing: not counted
    ([("other", 10, [])], 20, {}),
    # the messages' counts past the total (a conversion sends less): scaled down to it
    ([("retrieved", 60, [("retrieved", 60)]), ("tail", 40, [("tail", 40)])], 50, {"retrieved": 30, "tail": 20}),
]


@pytest.mark.parametrize(("messages", "total", "expected"), SPLITS)
def test_sent_slice_tokens(messages: list[tuple[str, int, list[tuple[str, int]]]], total: int,
                           expected: dict[str, int]) -> None:
    got = sent_slice_tokens([(k, t, [_item(s, n) for s, n in its]) for k, t, its in messages], total)
    assert got == expected and sum(got.values()) <= total


def test_an_older_stored_plan_is_scaled_to_its_tokens() -> None:
    # a plan stored before slice_sent: its items' sums (retrieved 306, tail 32) past its 290 tokens
    raw = Plan("c", "q", "default", "", BUDGET, tokens=290,
               items=[_item("retrieved", 306), _item("tail", 32)]).to_dict()
    del raw["slice_sent"]
    per = Plan.from_dict(raw).slice_tokens()
    assert sum(per.values()) == 290 and per["retrieved"] < 306, per


def test_the_inspectors_layers_are_the_plans(tmp_path: Path, embedder: Embedder) -> None:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        _talk(mem)
        plan = mem.context("life", QUERY, budget=BUDGET, record=False).plan
    shown = _plan_ctx({"plan": plan.to_dict(), "messages": []})
    assert shown["layers"] == plan.slice_tokens()
    assert sum(shown["layers"].values()) <= plan.tokens

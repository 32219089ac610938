"""The evals' mean tokens per layer (`recall_rounds` and `recall_misses`' `layer_tokens`,
`evals.recall_rounds.slice_tokens`) are what each layer cost as sent, as
`Plan.slice_tokens()` says it since 6ba4f77 (explain(), /metrics, the inspector): a
block's header and shared session headings once, the layers summing to at most the
context's tokens, the latest user message apart (`latest`, its own message's tokens).

Before, the eval summed the items' own counts: the pinned block's header was in no item
(a small LoCoMo sample at budget 120: pinned 22 tokens where its block sent 38) and each
retrieved line counted the session heading the block's lines share (budget 200: retrieved
134 where the block sent 124). Real Memory and planner (cold log), real eval runs on a
tiny hand-made LoCoMo file; the contexts the run builds are recorded as they return."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from convo_fixtures import SMALL_QA, one_session_locomo

from tiermem import Config, Memory
from tiermem.evals import recall_misses, recall_rounds
from tiermem.evals.recall_rounds import mean_layers, parse_variant, slice_tokens
from tiermem.planner.plan import Context, Plan, PlanItem
from tiermem.tiers.embed import Embedder
from tiermem.tiers.tokens import message_tokens

pytestmark = pytest.mark.usefixtures("clean_env")

TURNS = [
    ("Ana", "Hey Ben! I finally adopted a dog last week, a grey whippet called Pixel."),
    ("Ben", "Congrats! Whippets are fast. I started pottery classes on Tuesdays."),
    ("Ana", "Pottery sounds relaxing. Pixel loves the beach near Porto."),
    ("Ben", "My sister moved to Lyon for a job at a bakery."),
    ("Ana", "I am training for a half marathon in October. My knees hurt after long runs."),
    ("Ben", "Good luck! I made two bowls and a cup at pottery so far."),
    ("Ana", "My brother visited and we cooked paella together."),
    ("Ben", "I read a novel about sailors crossing the Atlantic."),
] * 3  # 24 turns: retrieval packs several lines of the one session at these budgets
BUDGETS = [120, 200]  # tokens: a pinned block and a retrieved block; tail turns at 200


def _as_sent(mem: Memory, ctx: Context) -> dict[str, int]:
    """What each layer cost as sent, computed apart from the eval: the plan's slices, the
    latest user message (the last message sent) counted from its own message."""
    per = ctx.plan.slice_tokens()
    latest = message_tokens(mem.tokens, ctx.messages[-1])
    tail = per.pop("tail")
    return {**per, "latest": latest, **({"tail": tail - latest} if tail > latest else {})}


def _rounds(data: Path, root: Path) -> dict[str, Any]:
    out = recall_rounds.run(data, BUDGETS, [parse_variant("base:")], data_root=root, sample_questions=None,
                            baselines=False, hot=False)
    return {str(b): out["variants"]["base"]["budgets"][str(b)]["layer_tokens"] for b in BUDGETS}


def _misses(data: Path, root: Path) -> dict[str, Any]:
    return dict(recall_misses.run(data, BUDGETS, data_root=root)["layer_tokens"])


# (the eval, its layer_tokens per budget)
EVALS: list[tuple[str, Callable[[Path, Path], dict[str, Any]]]] = [
    ("recall_rounds", _rounds),  # --variant base: at each budget
    ("recall_misses", _misses),  # the shipped planner
]


@pytest.mark.parametrize(("name", "layers_of"), EVALS, ids=[e[0] for e in EVALS])
def test_the_evals_report_each_layer_as_sent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str,
                                             layers_of: Callable[[Path, Path], dict[str, Any]]) -> None:
    sent: dict[str, list[dict[str, int]]] = {str(b): [] for b in BUDGETS}
    plans: list[Plan] = []
    real_context = Memory.context

    def recorded(self: Memory, *args: Any, **kw: Any) -> Context:
        ctx = real_context(self, *args, **kw)  # the real call; its answer kept as returned
        sent[str(ctx.plan.budget)].append(_as_sent(self, ctx))
        plans.append(ctx.plan)
        return ctx

    monkeypatch.setattr(Memory, "context", recorded)
    data = one_session_locomo(tmp_path / "small.json", TURNS, SMALL_QA)
    got = layers_of(data, tmp_path / "root")
    assert all(len(v) == len(SMALL_QA) for v in sent.values()), sent  # every question at every budget
    assert got == {b: mean_layers(rows) for b, rows in sent.items()}, (got, sent)
    # the case is the one the items misread: a block's header or shared headings
    items_sum = {p.budget: sum(i.tokens for i in p.items) for p in plans}
    assert any(items_sum[p.budget] != sum(p.slice_tokens().values()) for p in plans), items_sum
    for b in BUDGETS:
        assert sum(got[str(b)].values()) <= b  # the layers of a context within its budget


def test_slice_tokens_separates_the_latest_message_from_a_real_tail(tmp_path: Path, embedder: Embedder) -> None:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False, background_indexing=False) as mem:
        for i, (who, text) in enumerate(TURNS):
            mem.append("c", {"role": "user" if i % 2 == 0 else "assistant", "content": f"{who}: {text}"})
        mem.append("c", {"role": "user", "content": "What kind of dog did Ana adopt?"})
        ctx = mem.context("c", "What kind of dog did Ana adopt?", budget=200, record=False)
        got = slice_tokens(ctx.plan)
        assert got == _as_sent(mem, ctx) and sum(got.values()) <= ctx.tokens, (got, ctx.tokens)
        assert got["tail"] > 0 and got["latest"] > 0, got  # both: recent turns and the question


def _item(slice_: str, tokens: int, reason: str = "recent turn") -> PlanItem:
    return PlanItem(slice_, "c", [1], "cold", "verbatim", tokens, 1.0, reason)


# (items as (slice, tokens, is the latest message), the plan's sent slices, its tokens, expected)
PLANS: list[tuple[list[tuple[str, int, bool]], dict[str, int], int, dict[str, int]]] = [
    # the latest message out of the tail's sent tokens; the retrieved block as sent (38, not 42)
    ([("tail", 40, True), ("tail", 10, False), ("retrieved", 12, False), ("retrieved", 30, False)],
     {"tail": 50, "retrieved": 38}, 90, {"latest": 40, "tail": 10, "retrieved": 38}),
    # the latest message alone in the tail: no tail left
    ([("tail", 15, True), ("pinned", 22, False)], {"tail": 15, "pinned": 38}, 56, {"latest": 15, "pinned": 38}),
    # a plan stored before slice_sent, over its tokens: scaled down, the latest within the tail's share
    ([("tail", 40, True), ("retrieved", 80, False)], {}, 60, {"latest": 20, "retrieved": 40}),
]


@pytest.mark.parametrize(("items", "sent", "tokens", "expected"), PLANS)
def test_slice_tokens_of_a_plan(items: list[tuple[str, int, bool]], sent: dict[str, int], tokens: int,
                                expected: dict[str, int]) -> None:
    plan = Plan("c", "q", "recall", "test", 100, tokens=tokens, slice_sent=sent,
                items=[_item(s, n, recall_rounds.LATEST_REASON if latest else "recent turn")
                       for s, n, latest in items])
    assert slice_tokens(plan) == expected
    assert sum(expected.values()) <= tokens

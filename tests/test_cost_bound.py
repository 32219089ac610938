"""The cost replay's lower bound (evals.bound, issue 22): the stable layers plus an
append-only tail with no retrieval, epochs restarting at the cheapest fill, billed under
the same provider rules as every other method. New with issue 22 (no bound before)."""

from __future__ import annotations

import pytest
import replay_views

from tiermem.evals.baselines import ConvView, tail_truncation
from tiermem.evals.bound import (
    FILL_GRID,
    BoundTurn,
    best_bound,
    best_middle,
    replay_bound,
    replay_middle,
    stable_layers,
)
from tiermem.evals.cost import MethodSeries, Renderer
from tiermem.planner.render import HEADERS
from tiermem.tiers.tokens import BpeTokenCounter, messages_tokens

BUDGET = 2000
PINNED = {"role": "system", "content": HEADERS["pinned"] + "\n[user] Always answer in British English."}


def view_of(counter: BpeTokenCounter, n: int, seed: int = 3) -> ConvView:
    return replay_views.view_of(counter, n, seed)


def user_turns(v: ConvView, layers: tuple[dict[str, str], ...] = ()) -> list[BoundTurn]:
    return [BoundTurn(i + 1, i + 1, layers) for i in range(len(v)) if v.bodies[i]["role"] == "user"]


@pytest.mark.parametrize("fill", [0.1, 0.52, 0.9])  # a long, a cacheable and a short epoch
@pytest.mark.parametrize("layers", [(), (PINNED,)])  # the tail alone, and behind a pinned block
def test_every_bound_context_fits_and_extends_the_previous_one(counter: BpeTokenCounter, fill: float,
                                                               layers: tuple[dict[str, str], ...]) -> None:
    v = view_of(counter, 400)
    turns = user_turns(v, layers)
    renderer = Renderer(counter)
    s = replay_bound(v, turns, BUDGET, fill, renderer, counter)
    assert len(s.tokens) == len(turns) and s.over_budget == 0
    assert max(s.context_tokens) <= BUDGET
    priming = renderer.priming.shape[0]
    restarts = 0
    for i in range(1, len(s.tokens)):
        if s.stable[i] >= s.tokens[i - 1] - priming:
            continue  # the previous request is this one's prefix: an append
        restarts += 1
        # a restart holds about `fill` of the budget (the layers and the latest at least)
        assert s.context_tokens[i] <= max(int(fill * BUDGET), 200) + 60, (i, s.context_tokens[i])
    assert restarts == s.new_epochs > 0


def test_the_bound_keeps_the_cheapest_fill_per_provider(counter: BpeTokenCounter) -> None:
    v = view_of(counter, 300)
    grid = (0.2, 0.52, 0.8)
    b = best_bound(v, user_turns(v), BUDGET, Renderer(counter), counter, grid=grid)
    assert [r["fill"] for r in b["fill_curve"]] == list(grid)
    for p in ("openai", "anthropic"):
        assert b[f"total_billed_{p}"] == min(r[p] for r in b["fill_curve"])
        assert b[f"best_fill_{p}"] in grid
    assert b["series"].turn and b["layers_tokens_mean"] == 0.0
    # more fill, more restarts
    epochs = [r["new_epochs"] for r in b["fill_curve"]]
    assert epochs == sorted(epochs) and epochs[0] < epochs[-1]


def test_the_bound_bills_less_than_a_sliding_tail(counter: BpeTokenCounter) -> None:
    # a tail that slides every turn shares almost no prefix; an append-only one shares all
    v = view_of(counter, 300)
    renderer = Renderer(counter)
    turns = user_turns(v)
    b = best_bound(v, turns, BUDGET, renderer, counter, grid=(0.52,))
    tail = MethodSeries()
    partial = ConvView("c")
    for t in turns:
        partial.positions, partial.bodies, partial.tokens = v.positions[:t.log_len], v.bodies[:t.log_len], \
            v.tokens[:t.log_len]
        out = tail_truncation(partial, BUDGET)
        assert out.tokens == messages_tokens(counter, out.messages)
        tail.add(t.turn, out, 0.0, renderer=renderer, budget=BUDGET)
    summ = tail.summary()
    assert b["total_billed_openai"] < 0.6 * summ["total_billed_openai"]
    assert b["cache_stable_share"] > 0.8 > summ["cache_stable_share"]


def test_stable_layers_are_the_leading_pinned_and_summary_blocks() -> None:
    summary = {"role": "system", "content": HEADERS["summary"] + "\n- a line"}
    retrieved = {"role": "system", "content": HEADERS["retrieved"] + "\n[user] x"}
    turn = {"role": "user", "content": "hi"}
    assert stable_layers([PINNED, summary, turn, retrieved, turn]) == (PINNED, summary)
    assert stable_layers([retrieved, turn]) == ()  # a retrieved block is never a stable layer
    assert stable_layers([turn]) == ()


def test_the_fill_grid_spans_short_to_long_epochs() -> None:
    assert FILL_GRID[0] == 0.05 and FILL_GRID[-1] == 0.95 and len(FILL_GRID) == 91


# -- the middle-eviction family (evals.bound.replay_middle): new with the floor change; it
# fails on the old code, which has no replay_middle / best_middle


@pytest.mark.parametrize(("keep", "after", "cap"), [
    (0.52, 0.1, 1.0),  # restarts at the budget, like the plain family
    (0.54, 0.1, 0.8),  # restarts before the context passes 0.8 of it
])
def test_a_middle_restart_keeps_the_previous_head(counter: BpeTokenCounter, keep: float, after: float,
                                                  cap: float) -> None:
    v = view_of(counter, 400)
    turns = user_turns(v, (PINNED,))
    renderer = Renderer(counter)
    s = replay_middle(v, turns, BUDGET, keep, after, renderer, counter, cap=cap)
    assert len(s.tokens) == len(turns) and s.over_budget == 0
    assert max(s.context_tokens) <= cap * BUDGET
    priming = renderer.priming.shape[0]
    restarts = [i for i in range(1, len(s.tokens)) if s.stable[i] < s.tokens[i - 1] - priming]
    assert len(restarts) == s.new_epochs >= 2
    for i in restarts[1:]:  # after the first restart every restart keeps the same head, cached
        assert s.stable[i] >= keep * BUDGET - 60, (i, s.stable[i])
        # and rebuilds about `after` of the budget after it (the latest at least)
        assert s.context_tokens[i] <= (keep + after) * BUDGET + 60, (i, s.context_tokens[i])
        assert s.cached_openai[i] >= 1024 and s.read_anthropic[i] >= 1024
    plain = replay_bound(v, turns, BUDGET, 0.52, renderer, counter).summary()
    assert s.summary()["total_billed_openai"] < plain["total_billed_openai"]


def test_the_middle_family_keeps_the_cheapest_knobs_per_provider(counter: BpeTokenCounter) -> None:
    v = view_of(counter, 300)
    renderer = Renderer(counter)
    turns = user_turns(v)
    keeps, afters, caps = (0.5, 0.54), (0.1,), (0.8, 1.0)
    b = best_middle(v, turns, BUDGET, renderer, counter, keeps=keeps, afters=afters, caps=caps)
    every = [replay_middle(v, turns, BUDGET, k, a, renderer, counter, cap=c).summary()
             for k in keeps for a in afters for c in caps]
    for p in ("openai", "anthropic"):
        assert b[f"total_billed_{p}"] == min(x[f"total_billed_{p}"] for x in every)
        assert b[f"best_keep_{p}"] in keeps and b[f"best_cap_{p}"] in caps

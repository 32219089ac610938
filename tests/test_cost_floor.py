"""The cost replay's floor (evals.floor, issue 22): the least any context policy can bill
when every build carries its new messages and at least min(history, 1,024) tokens.
New with this change (no floor before): every test here fails on the old code, which
has no evals.floor module and no floor row in the replay."""

from __future__ import annotations

import pytest
import replay_views

from tiermem.evals.baselines import ConvView, full_context, tail_truncation
from tiermem.evals.bound import BoundTurn, replay_bound, replay_middle
from tiermem.evals.cost import PROVIDERS, CacheRules, MethodSeries, Renderer
from tiermem.evals.floor import FloorTurn, floor_bill, floor_summary, floor_turns
from tiermem.tiers.tokens import BpeTokenCounter

BUDGET = 2000
# tiny rules for hand-computed figures: caching from 10 tokens, reads at 0.1
TINY_OPENAI = CacheRules(provider="openai", input_per_mtok=1.0, read_ratio=0.1, min_prefix=10, granularity=1)
TINY_ANTHROPIC = CacheRules(provider="anthropic", input_per_mtok=1.0, read_ratio=0.1, write_ratio=1.25,
                            min_prefix=10)
PRIMING = 3


def view_of(counter: BpeTokenCounter, n: int, seed: int = 5) -> ConvView:
    return replay_views.view_of(counter, n, seed)


def user_turns(v: ConvView) -> list[BoundTurn]:
    return [BoundTurn(i + 1, i + 1) for i in range(len(v)) if v.bodies[i]["role"] == "user"]


# Hand-computed (priming 3, keep 10, caching from 10 tokens):
#   build 1: new 5, history 8: the first request, 8 tokens in full                      -> 8
#   build 2: new 4 (2 header ids shared with the priming), history 12: plain 7, least old
#            part 3 (in full: 3) or 10 read (1.0): reads, 7 - 2 + 1                         -> 6
#   build 3: new 6, history 18: plain 9, least old part 1 (in full: 1) or 10 read (1.0)  -> 10
THREE = [FloorTurn(5, 0, 8), FloorTurn(4, 2, 12), FloorTurn(6, 0, 18)]


@pytest.mark.parametrize(("turns", "rules", "billed"), [
    (THREE, TINY_OPENAI, 24.0),  # 8 + 6 + 10
    (THREE, TINY_ANTHROPIC, 26.5),  # the same and one write premium: 0.25 x 10
    # one read that saves 2 (10 in full against 1 + 7), less than the write premium (2.5):
    # Anthropic's floor never reads (8 + 10), OpenAI's does (8 + 8)
    ([*THREE[:1], FloorTurn(4, 0, 12)], TINY_OPENAI, 16.0),
    ([*THREE[:1], FloorTurn(4, 0, 12)], TINY_ANTHROPIC, 18.0),
])
def test_the_floor_equals_the_hand_computed_figure(turns: list[FloorTurn], rules: CacheRules, billed: float) -> None:
    assert floor_bill(turns, rules, keep=10, priming=PRIMING)["billed"] == billed


def test_floor_turns_count_what_full_context_renders(counter: BpeTokenCounter) -> None:
    v = view_of(counter, 12)
    renderer = Renderer(counter)
    turns = user_turns(v)
    ft = floor_turns(v, turns, renderer)
    assert len(ft) == len(turns) == 6
    for t, f in zip(turns, ft, strict=True):
        ids, _ = renderer.render(v.bodies[:t.log_len])
        assert f.history == ids.shape[0]  # the whole history as full context's request renders it
    # new messages: the first build's one, then an assistant reply and a user message each;
    # the assistant reply's header (start, role, separator) equals the priming; a user
    # message shares only the start marker with it
    assert ft[0].new == renderer.message(v.bodies[0]).shape[0] and ft[0].header == 1
    assert ft[1].new == sum(renderer.message(b).shape[0] for b in v.bodies[1:3])
    assert ft[1].header == renderer.priming.shape[0]


@pytest.mark.parametrize("n", [20, 300])  # all under the 1,024 minimum; well past it and the budget
def test_the_floor_is_at_most_every_methods_bill(counter: BpeTokenCounter, n: int) -> None:
    v = view_of(counter, n)
    renderer = Renderer(counter)
    turns = user_turns(v)
    floor = floor_summary(v, turns, renderer)
    bills: dict[str, MethodSeries] = {"full_context": MethodSeries(), "tail": MethodSeries()}
    partial = ConvView("c")
    for t in turns:
        partial.positions, partial.bodies, partial.tokens = (v.positions[:t.log_len], v.bodies[:t.log_len],
                                                             v.tokens[:t.log_len])
        bills["full_context"].add(t.turn, full_context(partial), 0.0, renderer=renderer, budget=None)
        bills["tail"].add(t.turn, tail_truncation(partial, BUDGET), 0.0, renderer=renderer, budget=BUDGET)
    for fill in (0.1, 0.52, 0.9):  # the bound's family at a long, a cacheable and a short epoch
        bills[f"bound {fill}"] = replay_bound(v, turns, BUDGET, fill, renderer, counter)
    for keep, after, cap in ((0.52, 0.01, 0.6), (0.54, 0.1, 0.8)):  # middle eviction, a degenerate one first
        bills[f"middle {keep}"] = replay_middle(v, turns, BUDGET, keep, after, renderer, counter, cap=cap)
    for name, s in bills.items():
        summ = s.summary()
        for p in PROVIDERS:
            assert floor[f"total_billed_{p}"] <= summ[f"total_billed_{p}"], (name, p)
    if n == 300:  # well past the minimum the floor is a fraction of full context's bill
        assert floor["total_billed_openai"] < 0.5 * bills["full_context"].summary()["total_billed_openai"]


def test_a_larger_kept_memory_never_lowers_the_floor(counter: BpeTokenCounter) -> None:
    v = view_of(counter, 300)
    renderer = Renderer(counter)
    turns = user_turns(v)
    got = [floor_summary(v, turns, renderer, keep={p: k for p in PROVIDERS})["total_billed_openai"]
           for k in (0, 1024, 1500, 2000)]
    assert got == sorted(got) and got[0] < got[-1]


def test_the_kept_memory_never_passes_the_budget(counter: BpeTokenCounter) -> None:
    # a budget-300 policy cannot keep 1,024 tokens: requirement (b) asks min(history, 300)
    v = view_of(counter, 60)
    renderer = Renderer(counter)
    turns = user_turns(v)
    small = floor_summary(v, turns, renderer, budget=300)
    assert small["keep_tokens_openai"] == small["keep_tokens_anthropic"] == 300
    # (the floor still grants a read of a padded 1,024-token prefix: a gift, so it stays a bound)
    assert small["total_billed_openai"] <= floor_summary(v, turns, renderer)["total_billed_openai"]
    assert floor_summary(v, turns, renderer, budget=BUDGET)["keep_tokens_openai"] == 1024

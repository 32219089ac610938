"""The cost replay's caches expire (evals.cost, `CacheRules.ttl_s`; issue 22's cost model):
a cached prefix is gone when no request read or wrote it within the TTL of a build's time
(the latest message's created_at), and a read refreshes it, for both providers, for every
method (the floor too). The old assumption, every build inside the TTL, stays available
(`ttl="inside"`, `ttl_s=None`) and bills exactly as before.

Before this change nothing read `ttl_s`: a cache written in one LoCoMo session was read in
the next, days later. On the code before, every test here fails (the caches take no build
time, `MethodSeries` no `ttl`, the floor's turns no time, the replay reports no `by_ttl`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import replay_views

from tiermem.evals.baselines import close_memory, full_context, open_memory
from tiermem.evals.bound import BoundTurn, replay_bound
from tiermem.evals.cost import (
    PROVIDERS,
    TTL_EXPIRE,
    TTL_INSIDE,
    TTL_LABELS,
    AnthropicCache,
    CacheRules,
    MethodSeries,
    OpenAICache,
    Renderer,
    inside_ttl,
    run_cost,
)
from tiermem.evals.decompose import Decomposition
from tiermem.evals.floor import FloorTurn, floor_bill
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.tokens import BpeTokenCounter

TTL_S = 60.0
LATE_S = TTL_S + 1  # a gap past the TTL
ANTHROPIC_DEFAULT_TTL_S = 300.0  # its 5-minute cache
OPENAI_DEFAULT_TTL_S = 3600.0  # up to an hour off-peak: the upper end
# tiny rules for hand-computed figures: caching from 10 tokens in 1-token steps, reads at 0.1
OPENAI = CacheRules(provider="openai", input_per_mtok=1.0, read_ratio=0.1, min_prefix=10, granularity=1, ttl_s=TTL_S)
ANTHROPIC = CacheRules(provider="anthropic", input_per_mtok=1.0, read_ratio=0.1, write_ratio=1.25, min_prefix=10,
                       ttl_s=TTL_S)
DEV = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "locomo-dev.json"
needs_dev = pytest.mark.skipif(not DEV.is_file(), reason=f"LoCoMo dev file not found at {DEV.resolve()}")


def ids(*runs: tuple[int, int]) -> np.ndarray:
    """Token ids: the ranges given, one after another."""
    return np.concatenate([np.arange(a, b, dtype=np.int64) for a, b in runs])


R20 = ids((0, 20))
R25 = ids((0, 25))
R30 = ids((0, 30))
R20_B = ids((0, 20), (500, 505))  # R20's prefix, another suffix
R20_C = ids((0, 20), (900, 905))

# (requests: (ids, build time s), bills with the TTL, bills inside it (the old model))
OPENAI_CASES = [
    # R25 reads R20's 20 tokens 30 s on (5 + 2.0); R30 comes 61 s after R25: nothing is
    # cached any more (30 in full), where inside the TTL it reads R25's 25 (5 + 2.5)
    pytest.param([(R20, 0.0), (R25, 30.0), (R30, 30.0 + LATE_S)], [20.0, 7.0, 30.0], [20.0, 7.0, 7.5],
                 id="gap-over-ttl-empties"),
    # R20_B reads R20's prefix at 50 s and caches it again with itself: at 100 s (100 s
    # after R20, 50 after R20_B) R20_C still reads those 20 tokens (5 + 2.0)
    pytest.param([(R20, 0.0), (R20_B, 50.0), (R20_C, 100.0)], [20.0, 7.0, 7.0], [20.0, 7.0, 7.0],
                 id="read-refreshes"),
    # the same three without the refreshing read between: R20 is 100 s old, R20_C pays 25
    pytest.param([(R20, 0.0), (R20_C, 100.0)], [20.0, 25.0], [20.0, 7.0], id="no-read-no-refresh"),
    # a gap of exactly the TTL is still inside it
    pytest.param([(R20, 0.0), (R25, TTL_S)], [20.0, 7.0], [20.0, 7.0], id="gap-equal-to-ttl"),
]


@pytest.mark.parametrize(("requests", "expire", "inside"), OPENAI_CASES)
def test_openai_cache_expires_by_the_build_times(requests: list[tuple[np.ndarray, float]], expire: list[float],
                                                inside: list[float]) -> None:
    for rules, want in ((OPENAI, expire), (inside_ttl(OPENAI), inside)):
        cache = OpenAICache(rules)
        assert [cache.request(r, at).billed(rules) for r, at in requests] == pytest.approx(want)
    old = OpenAICache(OPENAI)  # no build times at all: the old model, nothing expires
    assert [old.request(r).billed(OPENAI) for r, _at in requests] == pytest.approx(inside)


# Anthropic: (ids, message ends, breakpoint indexes, build time s)
A40 = ids((0, 40))
ANTHROPIC_CASES = [
    # 1: writes 20 (25.0); 2: reads 20, writes 10 (2.0 + 12.5); 3, 61 s after 2: both
    # breakpoints are gone, it writes all 40 (50.0); inside the TTL it reads 30, writes 10
    pytest.param([(R20, [10, 20], [1], 0.0), (R30, [10, 20, 30], [2], 30.0),
                  (A40, [10, 20, 30, 40], [3], 30.0 + LATE_S)],
                 [25.0, 14.5, 50.0], [25.0, 14.5, 15.5], id="gap-over-ttl-empties"),
    # R20_B reads the breakpoint at 20 at 50 s (writing only its own at 25): the read
    # refreshes the one at 20, so R20_C at 100 s (100 s after it was written) reads it too
    pytest.param([(R20, [10, 20], [1], 0.0), (R20_B, [10, 20, 25], [2], 50.0),
                  (R20_C, [10, 20, 25], [2], 100.0)],
                 [25.0, 8.25, 8.25], [25.0, 8.25, 8.25], id="read-refreshes"),
    # without that read the breakpoint at 20 is 100 s old: R20_C writes all 25 (31.25)
    pytest.param([(R20, [10, 20], [1], 0.0), (R20_C, [10, 20, 25], [2], 100.0)],
                 [25.0, 31.25], [25.0, 8.25], id="no-read-no-refresh"),
]


@pytest.mark.parametrize(("requests", "expire", "inside"), ANTHROPIC_CASES)
def test_anthropic_breakpoints_expire_by_the_build_times(
        requests: list[tuple[np.ndarray, list[int], list[int], float]], expire: list[float],
        inside: list[float]) -> None:
    for rules, want in ((ANTHROPIC, expire), (inside_ttl(ANTHROPIC), inside)):
        cache = AnthropicCache(rules)
        assert [cache.request(r, e, b, at).billed(rules) for r, e, b, at in requests] == pytest.approx(want)
    old = AnthropicCache(ANTHROPIC)
    assert [old.request(r, e, b).billed(ANTHROPIC) for r, e, b, _at in requests] == pytest.approx(inside)


def test_the_defaults_are_the_providers_ttls() -> None:
    # Anthropic's 5-minute cache; OpenAI's up to an hour (the most favourable to full context)
    assert (PROVIDERS["anthropic"].ttl_s, PROVIDERS["openai"].ttl_s) == (ANTHROPIC_DEFAULT_TTL_S, OPENAI_DEFAULT_TTL_S)
    assert inside_ttl(PROVIDERS["openai"]).ttl_s is None
    with pytest.raises(ValueError, match="ttl_s"):
        CacheRules(provider="openai", input_per_mtok=1.0, ttl_s=0)


CHAT_TURNS = 60


def series_bills(counter: BpeTokenCounter, ttl: str, gap_s: float | None) -> MethodSeries:
    """Full context over a 60-turn chat (past 1,024 tokens from about turn 25), one build
    per user turn `gap_s` apart (None: no times)."""
    v = replay_views.view_of(counter, CHAT_TURNS, seed=3)
    renderer = Renderer(counter)
    s = MethodSeries(ttl=ttl)
    for i in range(0, len(v), 2):
        sub = replay_views.view_of(counter, i + 1, seed=3)
        s.add(i + 1, full_context(sub), 0.0, renderer=renderer, budget=None,
              at=None if gap_s is None else i * gap_s)
    return s


@pytest.mark.parametrize("gap_s", [
    pytest.param(ANTHROPIC_DEFAULT_TTL_S + 1, id="past-anthropic-inside-openai"),
    pytest.param(OPENAI_DEFAULT_TTL_S + 1, id="past-both"),
])
def test_a_series_bills_both_assumptions_and_inside_is_the_old_bill(counter: BpeTokenCounter, gap_s: float) -> None:
    old = series_bills(counter, TTL_INSIDE, None)  # no times: as the replay billed before
    inside = series_bills(counter, TTL_INSIDE, gap_s)
    expire = series_bills(counter, TTL_EXPIRE, gap_s)
    assert inside.billed == old.billed and inside.billed_anthropic == old.billed_anthropic
    assert expire.other_billed == old.billed and expire.other_billed_anthropic == old.billed_anthropic
    summ = expire.summary()
    assert list(summ["by_ttl"]) == list(TTL_LABELS) == [TTL_EXPIRE, TTL_INSIDE]
    assert summ["by_ttl"][TTL_INSIDE]["total_billed_openai"] == old.summary()["total_billed_openai"]
    # the later requests pass 1,024 tokens and cache inside the TTL; past Anthropic's TTL
    # every Anthropic build writes anew and reads nothing
    assert sum(old.read_anthropic) > 0 and sum(expire.read_anthropic) == 0
    assert sum(expire.billed_anthropic) > sum(old.billed_anthropic)
    openai_past = gap_s > PROVIDERS["openai"].ttl_s
    assert (sum(expire.cached_openai) == 0) == openai_past  # OpenAI's hour holds gaps of 301 s
    assert sum(expire.billed) == (sum(expire.tokens) if openai_past else sum(old.billed))


def test_the_bound_bills_by_its_turns_times(counter: BpeTokenCounter) -> None:
    v = replay_views.view_of(counter, 60, seed=4)
    renderer = Renderer(counter)
    users = [i + 1 for i in range(len(v)) if v.bodies[i]["role"] == "user"]
    far = [BoundTurn(n, n, (), k * LATE_S * 60) for k, n in enumerate(users)]  # 61 min apart: past both TTLs
    untimed = [BoundTurn(n, n) for n in users]
    got = replay_bound(v, far, 2000, 0.5, renderer, counter).summary()
    old = replay_bound(v, untimed, 2000, 0.5, renderer, counter).summary()
    assert got["by_ttl"][TTL_INSIDE] == {k: old[k] for k in ("total_billed_openai", "total_billed_anthropic")}
    assert got["total_billed_openai"] == got["total_tokens"] > old["total_billed_openai"]


# The floor (hand-computed as in test_cost_floor: priming 3, keep 10, caching from 10).
# Four builds (new, header ids, history): (5, 0, 8), (4, 2, 12), (6, 0, 18), (4, 2, 22).
# Inside the TTL: 8, then 7 - 2 + 1.0 (reads 10), 10 (1 old token in full beats reading
# 10), 7 - 2 + 1.0 (reads) = 30 (OpenAI); Anthropic adds one write premium 0.25 x 10. A
# build past the TTL is a first build again: its least size (10) in full, nothing read;
# each run of builds that reads pays its own write premium. Never reading: 8 + 3 x 10 = 38.
PRIMING = 3


@pytest.mark.parametrize(("times", "openai", "anthropic"), [
    pytest.param([0.0, 30.0, 60.0, 90.0], 30.0, 32.5, id="inside-ttl"),
    # build 3 past the TTL: it read nothing anyway (10); builds 2 and 4 read in two runs: two premiums
    pytest.param([0.0, 30.0, 30.0 + LATE_S, 60.0 + LATE_S], 30.0, 35.0, id="build-3-past-ttl"),
    # build 2 past the TTL: 10 in full instead of 6; build 4 reads: one premium
    pytest.param([0.0, LATE_S, LATE_S + 30.0, LATE_S + 60.0], 34.0, 36.5, id="build-2-past-ttl"),
    # each past it: nothing is ever read, the never-reading policy's 38
    pytest.param([0.0, LATE_S, 2 * LATE_S, 3 * LATE_S], 38.0, 38.0, id="each-past-ttl"),
])
def test_the_floor_restarts_past_the_ttl(times: list[float], openai: float, anthropic: float) -> None:
    turns = [FloorTurn(5, 0, 8, times[0]), FloorTurn(4, 2, 12, times[1]), FloorTurn(6, 0, 18, times[2]),
             FloorTurn(4, 2, 22, times[3])]
    assert floor_bill(turns, OPENAI, keep=10, priming=PRIMING)["billed"] == openai
    assert floor_bill(turns, ANTHROPIC, keep=10, priming=PRIMING)["billed"] == anthropic
    for rules, old in ((OPENAI, 30.0), (ANTHROPIC, 32.5)):  # inside the TTL: the old floor
        assert floor_bill(turns, inside_ttl(rules), keep=10, priming=PRIMING)["billed"] == old


@needs_dev
def test_the_replay_reports_both_assumptions(tmp_path: Path, shared_vectors: FastEmbedder) -> None:
    """conv-26's first 40 turns cross into its second session, days later: full context's
    first build there finds the caches empty under the TTL, warm inside it."""
    got = {}
    for ttl in (TTL_EXPIRE, TTL_INSIDE):
        opened = open_memory(tmp_path / ttl, embedder=shared_vectors)
        try:
            got[ttl] = run_cost(opened.memory, DEV, sample=0, budget=300, turns=40,
                                methods=("full_context", "tail"), hot=opened.hot, ttl=ttl).result
        finally:
            opened.stop_redis = True
            close_memory(opened)
    e, i = got[TTL_EXPIRE], got[TTL_INSIDE]
    assert e["ttl"]["label"] == TTL_LABELS[TTL_EXPIRE] and i["ttl"]["label"] == TTL_LABELS[TTL_INSIDE]
    for name in ("full_context", "tail"):
        assert e["methods"][name]["by_ttl"] == i["methods"][name]["by_ttl"]  # both runs report both
        for p in PROVIDERS:
            top = f"total_billed_{p}"
            assert e["methods"][name][top] == e["methods"][name]["by_ttl"][TTL_EXPIRE][top]
            assert i["methods"][name][top] == i["methods"][name]["by_ttl"][TTL_INSIDE][top]
    full = e["methods"]["full_context"]["by_ttl"]
    assert full[TTL_EXPIRE]["total_billed_anthropic"] > full[TTL_INSIDE]["total_billed_anthropic"]
    assert full[TTL_EXPIRE]["ratio_billed_vs_full_openai"] == 1.0


@pytest.mark.parametrize("ttl", [TTL_EXPIRE, TTL_INSIDE])
def test_the_bill_by_cause_names_what_expired(counter: BpeTokenCounter, ttl: str) -> None:
    """Full context's builds 301 s apart (past Anthropic's TTL, inside OpenAI's): the
    Anthropic tokens a warm cache would have served are `expired`, and the parts still
    sum to the bill; inside the TTL nothing is."""
    v = replay_views.view_of(counter, CHAT_TURNS, seed=3)
    renderer = Renderer(counter)
    s = MethodSeries(ttl=ttl)
    parts = Decomposition(renderer)
    prev = 0
    for i in range(0, len(v), 2):
        out = full_context(replay_views.view_of(counter, i + 1, seed=3))
        s.add(i + 1, out, 0.0, renderer=renderer, budget=None, at=i * (ANTHROPIC_DEFAULT_TTL_S + 1))
        exp_o, exp_a = s.expired_last()
        parts.add(out.messages, v.bodies[prev:i + 1], cached_openai=s.cached_openai[-1],
                  read_anthropic=s.read_anthropic[-1], written_anthropic=s.written_anthropic[-1],
                  new_epoch=False, reason="extends the previous context", expired_openai=exp_o,
                  expired_anthropic=exp_a)
        prev = i + 1
    got = parts.summary()
    assert got["openai_total"] == pytest.approx(sum(s.billed), abs=0.05)
    assert got["anthropic_total"] == pytest.approx(sum(s.billed_anthropic), abs=0.05)
    assert got["openai"]["expired"] == 0  # OpenAI's hour holds 301 s
    # every Anthropic read of the inside-TTL bill is an expired prefix here
    assert got["anthropic"]["expired"] == (sum(s.other_read_anthropic) if ttl == TTL_EXPIRE else 0)

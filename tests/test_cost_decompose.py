"""tiermem's bill by cause in the cost replay (evals.decompose, issue 22): the parts sum
exactly to the bill under both providers' rules, and each kind of request lands on its
own cause. New with this change: every test here fails on the old code, which has no
evals.decompose module and no decomposition in the replay's output."""

from __future__ import annotations

from typing import Any

import pytest
import replay_views

from tiermem.evals.baselines import MethodOutput
from tiermem.evals.cost import PROVIDERS, MethodSeries, Renderer, common_prefix_ids, methods_table, table
from tiermem.evals.decompose import CAUSES, Decomposition, event_of
from tiermem.planner.render import HEADERS
from tiermem.tiers.tokens import BpeTokenCounter, messages_tokens

PINNED = {"role": "system", "content": HEADERS["pinned"] + "\n[user] Always answer in British English."}
HEAD = 30  # messages kept across the synthetic middle eviction


def retrieved(text: str) -> dict[str, str]:
    return {"role": "system", "content": HEADERS["retrieved"] + "\n" + text}


def script(bodies: list[dict[str, Any]]) -> list[tuple[list[dict[str, Any]], int, bool, str]]:
    """A synthetic tiermem run, one entry per build (context, log length, new epoch,
    reason): appends, a retrieved block appended, a rewind past it, a middle eviction
    (head kept, newest turns rebuilt), a pin change and a view refresh (full rebuilds)."""
    out: list[tuple[list[dict[str, Any]], int, bool, str]] = []
    ctx: list[dict[str, Any]] = [PINNED]
    for end in range(1, 81, 2):  # a user turn every other message
        new = bodies[len(ctx) - 1 if not out else out[-1][1]:end]
        reason, epoch = "extends the previous context: 1 new message(s)", not out
        if end == 41:
            ctx = [*ctx, retrieved(bodies[2]["content"]), *new]
        elif end == 43:  # the block gives way: what follows it is sent again
            ctx = [m for m in ctx if not m["content"].startswith(HEADERS["retrieved"])] + new
            reason = "rewinds to message 41: the retrieved turns of 1 earlier call(s) give way; extends"
        elif end == 61:
            ctx = [*ctx[:HEAD], *bodies[end - 6:end]]
            reason = "evicts from the middle: the first 30 message(s) stay as the cached prefix"
        elif end == 71:
            ctx = [PINNED, *bodies[end - 20:end]]
            reason, epoch = "pin changed: #3 is no longer a current pin", True
        elif end == 75:
            ctx = [{"role": "system", "content": HEADERS["summary"] + "\nThey talked."}, *bodies[end - 20:end]]
            reason, epoch = "summary view refreshed: a shown line is no longer in it", True
        else:
            ctx = [*ctx, *new]
        out.append((list(ctx), end, epoch, reason))
    return out


def test_parts_sum_to_the_bill_under_both_providers(counter: BpeTokenCounter) -> None:
    v = replay_views.view_of(counter, 80, seed=7)
    renderer = Renderer(counter)
    series = MethodSeries()
    parts = Decomposition(renderer)
    prev_len = 0
    for n, (ctx, end, epoch, reason) in enumerate(script(v.bodies), start=1):
        out = MethodOutput(ctx, set(), messages_tokens(counter, ctx))
        series.add(n, out, 0.0, renderer=renderer, budget=None)
        own = parts.add(ctx, v.bodies[prev_len:end], cached_openai=series.cached_openai[-1],
                        read_anthropic=series.read_anthropic[-1], written_anthropic=series.written_anthropic[-1],
                        new_epoch=epoch, reason=reason)
        # each request's own parts are its bill (the trace's rows), to the rounding
        assert sum(own["openai"].values()) == pytest.approx(series.billed[-1], abs=0.1 * len(CAUSES))
        assert sum(own["anthropic"].values()) == pytest.approx(series.billed_anthropic[-1], abs=0.1 * len(CAUSES))
        prev_len = end
    got = parts.summary({p: 1000.0 for p in PROVIDERS})
    assert got["openai_total"] == pytest.approx(sum(series.billed), abs=0.05)
    assert got["anthropic_total"] == pytest.approx(sum(series.billed_anthropic), abs=0.05)
    for p in PROVIDERS:  # unrounded, the parts are the bill to float precision
        assert sum(parts.parts[p].values()) == pytest.approx(sum(series.billed if p == "openai"
                                                                 else series.billed_anthropic), rel=1e-12)
    oa = parts.parts["openai"]
    # every kind of request of the script shows under its own cause
    for cause in ("new_messages", "retrieved_appended", "rewind", "middle_eviction", "pin_change",
                  "view_refresh", "cached_reads", "first"):
        assert oa[cause] > 0, cause
    assert parts.parts["anthropic"]["cache_writes"] > 0 and oa["cache_writes"] == 0  # OpenAI writes free
    assert oa["step_loss"] > 0  # 128-token steps lose the end of every shared prefix
    assert oa["short_prefix"] > 0  # the first builds share less than 1,024 tokens: nothing cached
    assert 0 < parts.reads_beyond_min["openai"] < oa["cached_reads"]
    assert got["events"] == {"extension": 35, "first": 1, "middle_eviction": 1, "pin_change": 1,
                             "rewind": 1, "view_refresh": 1}
    assert parts.retrieved_in["retrieved_appended"] > 0
    assert sum(got["openai_points_vs_full"].values()) == pytest.approx(100 * sum(series.billed) / 1000, abs=0.05)


def test_new_messages_are_billed_once_in_an_append_only_run(counter: BpeTokenCounter) -> None:
    """A context that only ever appends: nothing but the new messages (each billed in
    full exactly once, with the priming after it), the reads and the shared prefix's
    losses is billed (no rebuild cause)."""
    v = replay_views.view_of(counter, 120, seed=9)
    renderer = Renderer(counter)
    series = MethodSeries()
    parts = Decomposition(renderer)
    for end in range(1, 121, 2):
        ctx = v.bodies[:end]
        series.add(end, MethodOutput(ctx, set(), messages_tokens(counter, ctx)), 0.0, renderer=renderer,
                   budget=None)
        parts.add(ctx, v.bodies[max(0, end - 2):end], cached_openai=series.cached_openai[-1],
                  read_anthropic=series.read_anthropic[-1], written_anthropic=series.written_anthropic[-1],
                  new_epoch=end == 1, reason="extends the previous context")
    oa = parts.parts["openai"]
    rebuilt = ("retrieved_appended", "new_epoch", "middle_eviction", "pin_change", "view_refresh", "rewind")
    assert all(oa[c] == 0 for c in rebuilt)
    assert oa["cached_reads"] > 0 and oa["short_prefix"] > 0 and oa["step_loss"] > 0
    # the new messages' rendered ids and the priming, less the header the previous
    # request's priming already sent (an assistant message starts with the same ids)
    priming = renderer.priming
    expected = 0
    for end in range(1, 121, 2):
        ids = [renderer.message(b) for b in v.bodies[max(0, end - 2):end]]
        expected += sum(int(x.shape[0]) for x in ids) + int(priming.shape[0])
        if end > 1:
            expected -= common_prefix_ids(ids[0], priming)
    assert oa["new_messages"] == expected
    assert sum(oa.values()) == pytest.approx(sum(series.billed), rel=1e-12)


@pytest.mark.parametrize(("first", "new_epoch", "reason", "event"), [
    (True, True, "first context of this conversation in this process", "first"),  # nothing before it
    (False, True, "pin changed: #3 is no longer a current pin", "pin_change"),
    (False, True, "summary view refreshed: a shown line is no longer in it", "view_refresh"),
    (False, True, "room used up: 2 new message(s)", "new_epoch"),  # any other rebuild
    (False, False, "evicts from the middle: the first 30 message(s)", "middle_eviction"),
    (False, False, "rewinds to message 12: the retrieved turns", "rewind"),
    (False, False, "extends the previous context: 1 new message(s)", "extension"),
])
def test_each_cache_report_names_its_event(first: bool, new_epoch: bool, reason: str, event: str) -> None:
    assert event_of(first, new_epoch, reason) == event


def test_the_text_output_shows_the_causes() -> None:
    parts = {"events": {}, "retrieved_tokens_in": {}, "openai": dict.fromkeys(CAUSES, 1.0), "openai_total": 11.0,
             "anthropic": dict.fromkeys(CAUSES, 2.0), "anthropic_total": 22.0}
    m = {"total_tokens": 1, "ratio_tokens_vs_full": None, "total_billed_openai": 1.0, "total_billed_anthropic": 1.0,
         "ratio_billed_vs_full_openai": None, "ratio_billed_vs_full_anthropic": None, "cache_stable_share": None,
         "new_epochs": 0, "context_ms": {"p50": None}}
    result = {"sample": "s", "turns_replayed": 1, "context_builds": 1, "budget": 1,
              "methods": {"tiermem": {**m, "decomposition": parts}}}
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(table(result))
    text = console.export_text()
    assert all(c in text for c in CAUSES) and "22" in text
    console = Console(width=200, record=True)
    console.print(methods_table(result))
    assert "new_messages" not in console.export_text()

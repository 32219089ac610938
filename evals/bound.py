"""A lower bound for the cost replay (`evals.cost`): the cheapest context a budget-B
memory can send that still carries the conversation.

The bound's context at each replayed user turn is the stable layers (the pinned block
and the summary, taken from the tiermem context of the same turn when that method runs,
else none) followed by an append-only tail: every turn since its epoch began, the
current user message last, and no retrieved turns at all. When the next context would
pass the budget, a new epoch starts with the newest turns that fit `fill` x budget (the
latest message always). Within an epoch each context is a byte-identical extension of
the previous one, the best a prefix cache can be given; a retrieval of any kind only
adds tokens no cache has seen.

`fill` trades two costs against each other: a small fill starts long epochs (few full
misses) whose first requests sit under the providers' minimum cacheable prefix (1,024
tokens) and pay in full; a large one is cacheable at once but restarts often, paying
`fill` tokens in full at every restart. `best_bound` replays every fill of
`FILL_GRID` under each provider's rules (evals.cost.CacheRules) and keeps the cheapest
per provider: the figure reported is a minimum over policies, not one chosen policy.

Invariants:
- Every bound context holds at most `budget` tokens (counted as the budget counts:
  tiers.tokens.messages_tokens), and holds the latest user message.
- Nothing of the replayed conversation is read here but what the replay already read
  (its ConvView); the simulation is pure arithmetic on token ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tiermem.evals.baselines import ConvView, MethodOutput
from tiermem.evals.cost import PROVIDERS, MethodSeries, Renderer
from tiermem.planner.render import HEADERS
from tiermem.tiers.models import message_text
from tiermem.tiers.tokens import REPLY_PRIMING_TOKENS, TokenCounter, message_tokens

BOUND = "bound"  # the method name in the replay's table
# Epoch-start fills tried, as shares of the budget: 0.05 .. 0.95 in steps of 0.01
FILL_STEP = 0.01
FILL_MIN = 0.05
FILL_MAX = 0.95
FILL_GRID: tuple[float, ...] = tuple(round(FILL_MIN + i * FILL_STEP, 2)
                                     for i in range(round((FILL_MAX - FILL_MIN) / FILL_STEP) + 1))
STABLE_HEADERS = (HEADERS["pinned"], HEADERS["summary"])  # the stable layers' blocks start with these


@dataclass(frozen=True)
class BoundTurn:
    """One replayed user turn as the bound sees it: the replay's 1-based message index,
    how many messages of the log exist then (the user message is the last), and the
    stable-layer messages to lead with."""

    turn: int
    log_len: int
    layers: tuple[dict[str, Any], ...] = ()


def stable_layers(messages: Sequence[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    """The leading pinned and summary blocks of a tiermem context (a caller's system
    prompt before them too, when the replay had one: it has none)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.get("role") != "system":
            break
        out.append(m)
    # a leading system message that is none of the stable blocks (the retrieved block of
    # a context with no tail) ends the stable part where it sits
    for i, m in enumerate(out):
        if not message_text(m).startswith(STABLE_HEADERS):
            return tuple(out[:i])
    return tuple(out)


def replay_bound(view: ConvView, turns: Sequence[BoundTurn], budget: int, fill: float, renderer: Renderer,
                 counter: TokenCounter) -> MethodSeries:
    """The bound's requests at one epoch-start fill, billed under every provider."""
    series = MethodSeries()
    start = 0  # the view index where the current epoch's tail begins
    for t in turns:
        layers = list(t.layers)
        base = REPLY_PRIMING_TOKENS + sum(message_tokens(counter, m) for m in layers)
        end = t.log_len
        if end <= 0:
            continue
        tail_tokens = sum(view.tokens[start:end])
        if start >= end or base + tail_tokens > budget:
            # a new epoch: the newest turns that fit the fill (the latest always, while the budget holds)
            target = max(int(budget * fill), base + view.tokens[end - 1])
            start, used = end - 1, base + view.tokens[end - 1]
            while start > 0 and used + view.tokens[start - 1] <= min(target, budget):
                start -= 1
                used += view.tokens[start]
            if used > budget:  # the stable layers and the latest alone pass the budget: no layers
                layers, base, used = [], REPLY_PRIMING_TOKENS, REPLY_PRIMING_TOKENS + view.tokens[end - 1]
            if series.turn:
                series.new_epochs += 1
                series.epoch_reasons["room used up"] = series.epoch_reasons.get("room used up", 0) + 1
            tail_tokens = used - base
        msgs = layers + [dict(b) for b in view.bodies[start:end]]
        out = MethodOutput(msgs, {view.positions[i] for i in range(start, end)}, base + tail_tokens)
        marks = ([len(layers) - 1] if layers else []) + [len(msgs) - 1]
        series.add(t.turn, out, 0.0, renderer=renderer, budget=budget, breakpoints=marks)
    series.ms.clear()  # a simulation, not a method with a latency of its own
    return series


def best_bound(view: ConvView, turns: Sequence[BoundTurn], budget: int, renderer: Renderer,
               counter: TokenCounter, grid: Sequence[float] = FILL_GRID) -> dict[str, Any]:
    """The bound at the cheapest fill for each provider, and the bill at every fill.

    The summary row is the OpenAI-cheapest series (its tokens, stable share, epochs),
    with each provider's total taken at that provider's own cheapest fill."""
    curve: list[dict[str, float]] = []
    best: dict[str, tuple[float, float, MethodSeries]] = {}
    for f in grid:
        s = replay_bound(view, turns, budget, f, renderer, counter)
        summ = s.summary()
        row = {"fill": f, **{p: summ[f"total_billed_{p}"] for p in PROVIDERS},
               "cache_stable_share": summ["cache_stable_share"] or 0.0, "new_epochs": s.new_epochs}
        curve.append(row)
        for p in PROVIDERS:
            if p not in best or row[p] < best[p][0]:
                best[p] = (row[p], f, s)
    series = best["openai"][2]
    out = series.summary()
    for p in PROVIDERS:
        out[f"total_billed_{p}"] = best[p][0]
        out[f"best_fill_{p}"] = best[p][1]
    out["total_billed"] = out["total_billed_openai"]
    out["layers_tokens_mean"] = round(sum(
        sum(message_tokens(counter, m) for m in t.layers) for t in turns) / len(turns), 1) if turns else 0.0
    out["fill_curve"] = curve
    out["series"] = series
    return out

"""The best of one family of policies for the cost replay (`evals.cost`): the cheapest
context a budget-B memory that keeps an append-only recent tail and retrieves nothing can
send. It is not a lower bound for other policies: tiermem's middle eviction bills under it
on every LoCoMo dev conversation, and under cache expiry (`--ttl expire`) it ignores session
boundaries too; `evals.floor` is the true lower bound.

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
from tiermem.evals.cost import PROVIDERS, TTL_EXPIRE, MethodSeries, Renderer, by_ttl
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
    how many messages of the log exist then (the user message is the last), the
    stable-layer messages to lead with, and the build's time (seconds: its latest
    message's created_at, for the caches' TTL; None: no gap from the previous build)."""

    turn: int
    log_len: int
    layers: tuple[dict[str, Any], ...] = ()
    at: float | None = None

    def layer_tokens(self, counter: TokenCounter) -> int:
        """The stable-layer messages' tokens, counted as the budget counts them."""
        return sum(message_tokens(counter, m) for m in self.layers)


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
                 counter: TokenCounter, ttl: str = TTL_EXPIRE) -> MethodSeries:
    """The bound's requests at one epoch-start fill, billed under every provider (and
    both TTL assumptions, `ttl`'s on top)."""
    series = MethodSeries(ttl=ttl)
    start = 0  # the view index where the current epoch's tail begins
    for t in turns:
        layers = list(t.layers)
        base = REPLY_PRIMING_TOKENS + t.layer_tokens(counter)
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
        series.add(t.turn, out, 0.0, renderer=renderer, budget=budget, breakpoints=marks, at=t.at)
    series.ms.clear()  # a simulation, not a method with a latency of its own
    return series


def cheapest_by_ttl(summaries: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per TTL assumption and provider, the least bill over a family's policies (each
    assumption's own minimum: the policy cheapest under one need not be under the other)."""
    out: dict[str, dict[str, Any]] = {}
    for summ in summaries:
        for t, got in summ["by_ttl"].items():
            mine = out.setdefault(t, {})
            for p in PROVIDERS:
                k = f"total_billed_{p}"
                mine[k] = min(mine.get(k, got[k]), got[k])
    return by_ttl(out)


def best_bound(view: ConvView, turns: Sequence[BoundTurn], budget: int, renderer: Renderer,
               counter: TokenCounter, grid: Sequence[float] = FILL_GRID, ttl: str = TTL_EXPIRE) -> dict[str, Any]:
    """The bound at the cheapest fill for each provider, and the bill at every fill.

    The summary row is the OpenAI-cheapest series (its tokens, stable share, epochs),
    with each provider's total taken at that provider's own cheapest fill (under `ttl`;
    `by_ttl`: the cheapest fill's bill under each assumption)."""
    curve: list[dict[str, float]] = []
    best: dict[str, tuple[float, float, MethodSeries]] = {}
    every: list[dict[str, Any]] = []
    for f in grid:
        s = replay_bound(view, turns, budget, f, renderer, counter, ttl)
        summ = s.summary()
        every.append(summ)
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
    out["by_ttl"] = cheapest_by_ttl(every)
    out["layers_tokens_mean"] = round(sum(t.layer_tokens(counter) for t in turns) / len(turns), 1) if turns else 0.0
    out["fill_curve"] = curve
    out["series"] = series
    return out


# -- the middle-eviction family -----------------------------------------------------------
# A restart of the family above rebuilds the whole tail. Evicting from the middle
# (docs/design.md) keeps the head of the previous epoch's context instead: the stable
# layers and the turns after them, up to `keep` x budget tokens in all, stay byte for
# byte, a prefix the cache still holds across the restart, and only what follows is
# rebuilt: the newest turns, `after` x budget of them (the latest always). A restart then
# pays only for what it rebuilds after the kept head.
MIDDLE = "bound_middle"  # the second family's name in the replay's JSON
KEEP_GRID: tuple[float, ...] = (0.52, 0.54, 0.56, 0.6, 0.65)  # the kept head, shares of the budget
# the rebuilt part after the head at a restart, shares of the budget: at least the tail
# layer's 10% (planner.build.DEFAULT_LAYER_SHARES), so the context keeps a recent tail
AFTER_GRID: tuple[float, ...] = (0.1, 0.15, 0.2)
# the restart point: when the next context would pass this share of the budget (a
# smaller context is cheaper to read back, and restarts cost only the rebuilt part)
CAP_GRID: tuple[float, ...] = (0.7, 0.75, 0.8, 0.9, 1.0)
MIDDLE_START_FILL = 0.52  # the first epoch starts as the plain family's does at its usual best fill


def replay_middle(view: ConvView, turns: Sequence[BoundTurn], budget: int, keep: float, after: float,
                  renderer: Renderer, counter: TokenCounter, cap: float = 1.0,
                  fill: float = MIDDLE_START_FILL, ttl: str = TTL_EXPIRE) -> MethodSeries:
    """The middle-eviction family's requests at one kept head, rebuilt part and restart
    point, billed under every provider. The first epoch starts as `replay_bound`'s does
    at `fill`; each restart keeps the previous context's leading turns while the layers
    and they hold at most `keep` x budget tokens, then the newest turns up to `after` x
    budget. A context never passes `cap` x budget unless its head and latest alone do."""
    series = MethodSeries(ttl=ttl)
    head: list[int] = []  # view indexes kept across restarts, after the layers
    start = 0  # where the current epoch's rebuilt part begins
    shown: list[int] = []  # the previous context's turns, in context order
    limit = min(budget, int(cap * budget))
    for t in turns:
        layers = list(t.layers)
        base = REPLY_PRIMING_TOKENS + t.layer_tokens(counter)
        end = t.log_len
        if end <= 0:
            continue
        body = head + list(range(max(start, head[-1] + 1 if head else 0), end))
        used = base + sum(view.tokens[i] for i in body)
        if start >= end or used > limit:
            room = int(budget * fill)
            if series.turn:  # a restart: keep the previous context's head
                head, kept = [], base
                for i in shown:
                    if kept + view.tokens[i] > keep * budget:
                        break
                    head.append(i)
                    kept += view.tokens[i]
                room = kept + int(after * budget)
                series.new_epochs += 1
                series.epoch_reasons["room used up"] = series.epoch_reasons.get("room used up", 0) + 1
            head_tokens = sum(view.tokens[i] for i in head)
            start, used = end - 1, base + head_tokens + view.tokens[end - 1]
            floor_at = head[-1] + 1 if head else 0
            while start > floor_at and used + view.tokens[start - 1] <= min(room, limit):
                start -= 1
                used += view.tokens[start]
            body = head + list(range(start, end))
            if used > budget:  # the head and the latest pass the budget: the plain family's restart
                head, start = [], end - 1
                body, used = [end - 1], base + view.tokens[end - 1]
                if used > budget:
                    layers, base, used = [], REPLY_PRIMING_TOKENS, REPLY_PRIMING_TOKENS + view.tokens[end - 1]
        shown = body
        msgs = layers + [dict(view.bodies[i]) for i in body]
        out = MethodOutput(msgs, {view.positions[i] for i in body}, used)
        marks = ([len(layers) - 1] if layers else []) + ([len(layers) + len(head) - 1] if head else []) \
            + [len(msgs) - 1]
        series.add(t.turn, out, 0.0, renderer=renderer, budget=budget, breakpoints=marks, at=t.at)
    series.ms.clear()
    return series


def best_middle(view: ConvView, turns: Sequence[BoundTurn], budget: int, renderer: Renderer,
                counter: TokenCounter, keeps: Sequence[float] = KEEP_GRID, afters: Sequence[float] = AFTER_GRID,
                caps: Sequence[float] = CAP_GRID, ttl: str = TTL_EXPIRE) -> dict[str, Any]:
    """The middle-eviction family at its cheapest (keep, after, cap) per provider (under
    `ttl`; `by_ttl`: the cheapest under each assumption)."""
    best: dict[str, tuple[float, tuple[float, float, float], MethodSeries]] = {}
    every: list[dict[str, Any]] = []
    for k in keeps:
        for a in afters:
            for c in caps:
                if k + a >= c:
                    continue
                s = replay_middle(view, turns, budget, k, a, renderer, counter, cap=c, ttl=ttl)
                summ = s.summary()
                every.append(summ)
                for p in PROVIDERS:
                    v = summ[f"total_billed_{p}"]
                    if p not in best or v < best[p][0]:
                        best[p] = (v, (k, a, c), s)
    series = best["openai"][2]
    out = series.summary()
    for p in PROVIDERS:
        out[f"total_billed_{p}"] = best[p][0]
        out[f"best_keep_{p}"], out[f"best_after_{p}"], out[f"best_cap_{p}"] = best[p][1]
    out["total_billed"] = out["total_billed_openai"]
    out["by_ttl"] = cheapest_by_ttl(every)
    out["series"] = series
    return out

"""Tokens billed over a replayed conversation, with and without prompt caching.

    tiermem eval cost --data ../shared/data/locomo-dev.json --sample 0 --budget 1000 --plot docs/cost.png

One LoCoMo conversation is replayed turn by turn as an agent would see it (roles as in
`evals.locomo`): every turn is appended as it happens, and at every user turn each
method builds the context the model would be sent:

- ``tiermem``: ``Memory.context(conv, <that user message>, budget)``;
- ``full_context``: every turn so far (the current one included);
- ``tail``: the most recent turns that fit the same budget.

Prompt caching: a provider bills the part of a prompt that repeats the previous
prompt's beginning byte for byte at a discount. Per method and turn, the cached part is
the longest common prefix of *whole messages* between this turn's context and the
previous turn's (each message serialized as canonical JSON, compared in order); its
size is those messages' tokens. Billed = uncached + cached x
``Config.pricing.cached_input_ratio`` (0.1 by default). ``--min-cache-tokens`` models a
provider's minimum cacheable prefix (OpenAI: 1,024); the default 0 caches any prefix.

Reported per method: total context tokens (what is billed without caching), total
billed with caching, the cache-stable share (cached tokens / context tokens over the
replay), ratios against full context, latency. Goals (issue 6): tiermem's total at most
10% of full context's, at least 80% of its context tokens cache-stable.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.progress import Progress
from rich.table import Table

from evals.baselines import (
    TIERMEM,
    ConvView,
    MethodOutput,
    full_context,
    percentiles,
    tail_truncation,
    tiermem_available,
    tiermem_context,
    unique_conversation_id,
    warn,
)
from evals.locomo import LocomoError, Sample, load_samples, session_times, turn_message
from tiermem.memory import Memory
from tiers.models import message_text
from tiers.tokens import message_tokens, messages_tokens

COST_METHODS: tuple[str, ...] = (TIERMEM, "full_context", "tail")
DEFAULT_COST_BUDGET = 1000
GOAL_TOTAL_RATIO = 0.10
GOAL_CACHE_STABLE = 0.80


def canonical(message: dict[str, Any]) -> str:
    return json.dumps(message, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def common_prefix_chars(a: str, b: str) -> int:
    """Length of the longest common prefix of two strings."""
    n = min(len(a), len(b))
    lo, hi = 0, n  # binary search on slice equality: fast in C
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def common_prefix_messages(prev: Sequence[str], cur: Sequence[str]) -> int:
    """How many leading messages two serialized contexts share."""
    n = 0
    for a, b in zip(prev, cur, strict=False):
        if a != b:
            break
        n += 1
    return n


@dataclass
class MethodSeries:
    turn: list[int] = field(default_factory=list)  # 1-based index of the replayed message
    tokens: list[int] = field(default_factory=list)
    cached: list[int] = field(default_factory=list)
    billed: list[float] = field(default_factory=list)
    ms: list[float] = field(default_factory=list)
    cached_bytes: list[int] = field(default_factory=list)  # byte-prefix variant, see `add`
    over_budget: int = 0
    token_mismatches: int = 0
    _prev: list[str] = field(default_factory=list)
    _prev_blob: str = ""

    def add(
        self,
        turn: int,
        out: MethodOutput,
        ms: float,
        *,
        counter: Any,
        ratio: float,
        min_cache: int,
        budget: int | None,
        token_ok: bool = True,
    ) -> None:
        cur = [canonical(m) for m in out.messages]
        k = common_prefix_messages(self._prev, cur)
        cached = sum(message_tokens(counter, m) for m in out.messages[:k])
        if cached < min_cache:
            cached = 0
        self._prev = cur
        # Variant: providers cache the longest common *token* prefix, not whole messages;
        # when a planner packs many turns into one message, only part of it may change.
        # Estimate: tokens of the common prefix of the serialized lists, scaled to the
        # context's token count.
        blob = "[" + ",".join(cur) + "]"
        common = blob[: common_prefix_chars(self._prev_blob, blob)]
        whole = counter.count(blob)
        cached_b = round(out.tokens * counter.count(common) / whole) if whole and common else 0
        self.cached_bytes.append(cached_b if cached_b >= min_cache else 0)
        self._prev_blob = blob
        self.turn.append(turn)
        self.tokens.append(out.tokens)
        self.cached.append(cached)
        self.billed.append((out.tokens - cached) + cached * ratio)
        self.ms.append(ms)
        if budget is not None and out.tokens > budget:
            self.over_budget += 1
        if not token_ok:
            self.token_mismatches += 1

    def summary(self) -> dict[str, Any]:
        total = sum(self.tokens)
        cached = sum(self.cached)
        shares = [c / t for c, t in zip(self.cached[1:], self.tokens[1:], strict=True) if t]
        return {
            "total_tokens": total,
            "total_billed": round(sum(self.billed), 1),
            "cached_tokens": cached,
            "cache_stable_share": round(cached / total, 4) if total else None,
            "mean_turn_cache_share": round(sum(shares) / len(shares), 4) if shares else None,
            "cache_stable_share_token_prefix": round(sum(self.cached_bytes) / total, 4) if total else None,
            "mean_context_tokens": round(total / len(self.tokens), 1) if self.tokens else None,
            "max_context_tokens": max(self.tokens, default=None),
            "context_ms": percentiles(self.ms),
            "budget_violations": self.over_budget,
            "token_mismatches": self.token_mismatches,
        }


@dataclass
class CostRun:
    result: dict[str, Any]
    series: dict[str, MethodSeries]


def pick_sample(samples: list[Sample], which: str | int) -> Sample:
    """A sample by index or by sample_id."""
    for s in samples:
        if s.sample_id == str(which):
            return s
    try:
        i = int(which)
    except (TypeError, ValueError):
        raise LocomoError(f"no sample {which!r}; samples: {[s.sample_id for s in samples]}") from None
    if not 0 <= i < len(samples):
        raise LocomoError(f"sample index {i} out of range 0..{len(samples) - 1}")
    return samples[i]


def run_cost(
    memory: Memory,
    data: Path,
    *,
    sample: str | int = 0,
    budget: int = DEFAULT_COST_BUDGET,
    turns: int | None = None,
    methods: Sequence[str] = COST_METHODS,
    min_cache_tokens: int = 0,
    hot: bool = True,
    progress: Progress | None = None,
) -> CostRun:
    if budget < 1:
        raise LocomoError("budget must be a positive integer")
    unknown = set(methods) - set(COST_METHODS)
    if unknown:
        raise LocomoError(f"unknown methods {sorted(unknown)}; known: {list(COST_METHODS)}")
    s = pick_sample(load_samples(data), sample)
    use_tiermem = TIERMEM in methods and tiermem_available(memory)
    if TIERMEM in methods and not use_tiermem:
        warn("Memory has no context() yet: the tiermem method is skipped in the cost replay")
    active = [m for m in methods if m != TIERMEM or use_tiermem]
    ratio = memory.config.pricing.cached_input_ratio
    conv = unique_conversation_id(memory, f"locomo-cost-{s.sample_id}"[:120])
    ns = conv
    times, _ = session_times(s)
    plan: list[dict[str, Any]] = []
    for session, start in zip(s.sessions, times, strict=True):
        for i, turn in enumerate(session.turns):
            msg, _known = turn_message(turn, s, session, start + i)
            plan.append(msg)
    if turns is not None:
        plan = plan[:turns]
    series = {m: MethodSeries() for m in active}
    view = ConvView(conv)
    task = progress.add_task(f"replay {s.sample_id}", total=len(plan)) if progress is not None else None
    t0 = time.perf_counter()
    builds = 0
    for n, msg in enumerate(plan, start=1):
        memory.append_many(conv, [msg], namespace=ns)
        if msg["role"] == "user":
            builds += 1
            view.refresh(memory)
            query = message_text(msg)
            for name in active:
                if name == TIERMEM:
                    memory.catch_up(conv, namespace=ns)  # what the background indexer would have done by now
                    t = time.perf_counter()
                    out = tiermem_context(memory, conv, query, budget, namespace=ns)
                    ms = (time.perf_counter() - t) * 1000
                    ok = messages_tokens(memory.tokens, out.messages) == out.tokens
                    series[name].add(
                        n,
                        out,
                        ms,
                        counter=memory.tokens,
                        ratio=ratio,
                        min_cache=min_cache_tokens,
                        budget=budget,
                        token_ok=ok,
                    )
                else:
                    t = time.perf_counter()
                    out = full_context(view) if name == "full_context" else tail_truncation(view, budget)
                    ms = (time.perf_counter() - t) * 1000
                    series[name].add(
                        n,
                        out,
                        ms,
                        counter=memory.tokens,
                        ratio=ratio,
                        min_cache=min_cache_tokens,
                        budget=None if name == "full_context" else budget,
                    )
        if progress is not None and task is not None:
            progress.advance(task)
    summaries = {m: series[m].summary() for m in active}
    full = summaries.get("full_context")
    for summ in summaries.values():
        if full and full["total_tokens"]:
            summ["ratio_tokens_vs_full"] = round(summ["total_tokens"] / full["total_tokens"], 4)
            summ["ratio_billed_vs_full"] = round(summ["total_billed"] / full["total_billed"], 4)
            summ["ratio_billed_vs_full_uncached"] = round(summ["total_billed"] / full["total_tokens"], 4)
        else:
            summ["ratio_tokens_vs_full"] = summ["ratio_billed_vs_full"] = None
            summ["ratio_billed_vs_full_uncached"] = None
    goals: dict[str, Any] = {"total_ratio_max": GOAL_TOTAL_RATIO, "cache_stable_min": GOAL_CACHE_STABLE}
    tm = summaries.get(TIERMEM)
    if tm is not None and full is not None:
        goals["tiermem_billed_vs_full_billed_ok"] = (
            tm["ratio_billed_vs_full"] is not None and tm["ratio_billed_vs_full"] <= GOAL_TOTAL_RATIO
        )
        goals["tiermem_billed_vs_full_uncached_ok"] = (
            tm["ratio_billed_vs_full_uncached"] is not None
            and tm["ratio_billed_vs_full_uncached"] <= GOAL_TOTAL_RATIO
        )
        goals["tiermem_cache_stable_ok"] = (
            tm["cache_stable_share"] is not None and tm["cache_stable_share"] >= GOAL_CACHE_STABLE
        )
    result: dict[str, Any] = {
        "data": str(data),
        "sample": s.sample_id,
        "budget": budget,
        "turns_replayed": len(plan),
        "context_builds": builds,
        "cached_input_ratio": ratio,
        "min_cache_tokens": min_cache_tokens,
        "hot_tier": hot,
        "tokenizer": memory.tokens.name,
        "elapsed_s": round(time.perf_counter() - t0, 2),
        "methods": summaries,
        "skipped_methods": [m for m in methods if m not in active],
        "goals": goals,
    }
    return CostRun(result, series)


def table(result: dict[str, Any]) -> Table:
    t = Table(
        title=f"Cost replay of {result['sample']} ({result['turns_replayed']} turns, "
        f"{result['context_builds']} contexts, budget {result['budget']}, cached input at "
        f"{result['cached_input_ratio']:.0%})"
    )
    for col in (
        "method",
        "context tokens",
        "billed (cached)",
        "vs full (tokens)",
        "vs full (billed)",
        "cache-stable",
        "p50 ms",
    ):
        t.add_column(col, justify="left" if col == "method" else "right")
    for name, m in result["methods"].items():
        t.add_row(
            name,
            f"{m['total_tokens']:,}",
            f"{m['total_billed']:,.0f}",
            "-" if m["ratio_tokens_vs_full"] is None else f"{100 * m['ratio_tokens_vs_full']:.1f}%",
            "-" if m["ratio_billed_vs_full"] is None else f"{100 * m['ratio_billed_vs_full']:.1f}%",
            "-" if m["cache_stable_share"] is None else f"{100 * m['cache_stable_share']:.1f}%",
            "-" if m["context_ms"]["p50"] is None else f"{m['context_ms']['p50']:.1f}",
        )
    return t

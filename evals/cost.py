"""Tokens billed over a replayed conversation, with and without prompt caching.

    tiermem eval cost --data ../shared/data/locomo-dev.json --sample 0 --budget 2000 --plot docs/cost.png

One LoCoMo conversation (`--sample`: an index, or a sample_id or the `<id>-2` label that
`eval session` reports a repeated id under; an id the file repeats is refused as
ambiguous, `pick_sample`; the result's `sample` is the label, however it was asked for)
is replayed turn by turn as an agent would see it (roles as in `evals.locomo`): every
turn is appended as it happens, and at every user turn each method builds the context
the model would be sent:

- ``tiermem``: ``Memory.context(conv, <that user message>, budget)``;
- ``full_context``: every turn so far (the current one included);
- ``tail``: the most recent turns that fit the same budget;
- ``bound``: the best of the append-only family (evals.bound; not a lower bound, see there): the stable layers plus an append-only tail with
  no retrieval at all, epochs restarting at the cost-optimal fill for each provider;
  ``bound_middle`` (reported with it): the same, but a restart keeps the previous
  context's head and rebuilds only what follows (evicting from the middle);
- ``floor``: the least any context policy can bill (evals.floor) when every build carries
  the messages that arrived since the previous one and at least min(history, 1,024)
  tokens: a target above it is out of reach of every such policy.

Prompt caching is billed on the rendered token sequence, not on whole messages: each
context is rendered as the chat format does (per message a start marker, the role, a
separator, the text's real tokenizer ids, an end marker; then the assistant header the
provider appends), and two provider models bill it (`CacheRules`, `PROVIDERS`, kept in
`tiermem.planner.cache_rules`, by whose rules each plan reports its own expected cached
tokens, `plan.cache.openai_cached_tokens` and `anthropic_cached_tokens`):

- ``openai``: automatic caching. The cached part of a request is its longest common
  token prefix with a recent request (the last `RECENT_REQUESTS`), counted only from
  `min_prefix` (1,024) tokens and then in `granularity` (128) token steps; billed at
  `read_ratio`.
- ``anthropic``: explicit ``cache_control`` breakpoints (at most 4). A request reads the
  longest prefix that an earlier request wrote at one of its breakpoints, when that
  point is at most `lookback_blocks` (20) messages before one of this request's
  breakpoints; the tokens from there to its last breakpoint are written (billed at
  `write_ratio`, 1.25 for the 5-minute TTL); the rest is plain input. A prefix shorter
  than `min_prefix` is neither written nor read. tiermem places its breakpoints where
  the plan says the stable layers end (`Context.breakpoints`); full context and tail
  truncation put one on their last message, as the provider's guide does for chat.

Caches expire (`CacheRules.ttl_s`): a cached prefix (OpenAI: a recent request's prefix;
Anthropic: each written breakpoint) is gone when no request read or wrote it within
`ttl_s` of a build's time, the `created_at` of the latest message of the replayed log
(reads refresh it). Anthropic's default is its 5-minute TTL (300 s); OpenAI's is 3,600 s,
the upper end of its minutes-to-an-hour retention and the most favourable to cached full
context. A LoCoMo conversation's sessions are days apart (at least 28 h), its turns within
a session 1 s apart (`evals.locomo.turn_message`): every session's first build finds
the caches empty, the others find them warm. Every bill is also reported under the old
assumption, every build inside the TTL (`ttl_s` None: never expires), in `by_ttl`
(`TTL_EXPIRE`, `TTL_INSIDE`); `--ttl` picks which of the two the top-level figures,
the goals and the plot use (default: expiry).

``--instances N`` replays a deployment of N processes on one store (servers behind a
load balancer, a web app's workers): the tiermem contexts come from N `Memory` objects
on the same data dir and Redis in turn, so consecutive turns of the conversation land on
different ones, each with its own per-process state.

Reported per method: input tokens (what is billed without caching), billed with each
provider's rules, the token-prefix cache-stable share (tokens of each context that are
a prefix of the previous turn's context, over all tokens), new epochs (tiermem), and
ratios against full context, which caches best of all, and for tiermem its bill split by
cause (evals.decompose: new messages, retrieved appends, short prefixes and step loss,
middle evictions, new epochs, pin changes, view refreshes, rewinds, reads, the write
premium; the parts sum to the bill; `--trace` rows carry each context's own). Goals (issue 22, budget 2,000):
stable share at least 80%, billed at most 25% (OpenAI) and 30% (Anthropic) of cached
full context's bill.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Group
from rich.progress import Progress
from rich.table import Table

from tiermem.config import Pricing
from tiermem.evals.baselines import (
    TIERMEM,
    ConvView,
    MethodOutput,
    full_context,
    percentiles,
    tail_truncation,
    tiermem_context,
    tiermem_runs,
    unique_conversation_id,
)
from tiermem.evals.conversations import checked_samples
from tiermem.evals.locomo import LocomoError, Sample, id_text, sample_labels, session_times, turn_message
from tiermem.memory import Memory
from tiermem.planner.cache_rules import (
    PROVIDERS,
    CacheRules,
    Renderer,
    alive,
    anthropic_marks,
    anthropic_readable,
    common_prefix_ids,
    openai_cached,
)
from tiermem.planner.cache_rules import canonical as canonical  # re-exported: the rules' home is there
from tiermem.tiers.models import message_text
from tiermem.tiers.tokens import messages_tokens

COST_METHODS: tuple[str, ...] = (TIERMEM, "full_context", "tail", "bound", "floor")
SIMULATED = ("bound", "floor")  # computed from the replay's log after it, no context of their own
DEFAULT_COST_BUDGET = 2000
# Memory objects a replay may spread its contexts over (`--instances`): each holds its
# own store connection and turn cache, and a few already show what sharing costs
MAX_COST_INSTANCES = 8
GOAL_TOTAL_RATIO = 0.10  # tiermem's tokens against full context's, uncached (issue 6)
GOAL_CACHE_STABLE = 0.80
GOAL_BILLED_VS_CACHED_FULL = {"openai": 0.25, "anthropic": 0.30}
RECENT_REQUESTS = 16  # earlier requests an OpenAI-style cache is matched against
# The two cache-lifetime assumptions every bill is reported under
TTL_EXPIRE = "expire"
TTL_INSIDE = "inside"
TTL_LABELS: dict[str, str] = {TTL_EXPIRE: "caches expire by the log's timestamps",
                              TTL_INSIDE: "every build inside the TTL"}
USD_PER_MTOK = 1e-6  # prices are per million tokens


def priced(pricing: Pricing, base: CacheRules = PROVIDERS["openai"]) -> CacheRules:
    """`base`'s caching rules (automatic, OpenAI's: `Config.pricing` names no provider,
    minimum prefix or step) at a config's prices: its input price and cached-input ratio."""
    return base.model_copy(update={"input_per_mtok": pricing.input_per_mtok,
                                   "read_ratio": pricing.cached_input_ratio})


def inside_ttl(rules: CacheRules) -> CacheRules:
    """`rules` under the old assumption: every build inside the TTL (nothing expires)."""
    return rules.model_copy(update={"ttl_s": None})


@contextmanager
def planner_ttl(memories: Sequence[Memory], ttl: str) -> Iterator[None]:
    """Under `TTL_INSIDE` (every build inside the TTL) the planners of `memories` assume
    no expiry either (planner.build `cache_ttl_s` off) for the duration, so the replay is
    the one from before caches expired: a new epoch at every gap past the TTL would be a
    miss the inside bill pays for nothing. Under `TTL_EXPIRE` each keeps its config's."""
    if ttl != TTL_INSIDE:
        yield
        return
    settings = [m.planner.settings for m in memories]
    saved = [s.cache_ttl_s for s in settings]
    for s in settings:
        s.cache_ttl_s = None
    try:
        yield
    finally:
        for s, v in zip(settings, saved, strict=True):
            s.cache_ttl_s = v


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


def common_prefix_messages(prev: Sequence[object], cur: Sequence[object]) -> int:
    """How many leading messages two contexts share (serialized, or the message dicts)."""
    n = 0
    for a, b in zip(prev, cur, strict=False):
        if a != b:
            break
        n += 1
    return n


@dataclass
class Bill:
    tokens: int
    read: int = 0
    written: int = 0

    def billed(self, rules: CacheRules) -> float:
        return (self.tokens - self.read - self.written) + self.read * rules.read_ratio + self.written * rules.write_ratio


class OpenAICache:
    """Automatic prefix caching: the longest token prefix shared with a recent request
    that is still cached (sent within `ttl_s` of `at`). A request caches its whole
    prefix at its own time, so what it read is refreshed with it."""

    def __init__(self, rules: CacheRules) -> None:
        self.rules = rules
        self._recent: list[tuple[np.ndarray, float | None]] = []  # a request's ids, when it was sent

    def request(self, ids: np.ndarray, at: float | None = None) -> Bill:
        """`at`: the build's time, seconds (None: no expiry checked)."""
        r = self.rules
        self._recent = [(prev, t) for prev, t in self._recent if alive(r, t, at)]
        lcp = max((common_prefix_ids(ids, prev) for prev, _t in self._recent), default=0)
        cached = openai_cached(r, lcp, int(ids.shape[0]))
        self._recent.append((ids, at))
        del self._recent[:-RECENT_REQUESTS]
        return Bill(int(ids.shape[0]), read=cached)


class AnthropicCache:
    """Explicit breakpoints: reads what earlier breakpoints wrote, writes up to its last.
    Each written breakpoint expires `ttl_s` after the last request that wrote or read
    it (`at`); a read refreshes it."""

    def __init__(self, rules: CacheRules) -> None:
        self.rules = rules
        # a request's ids, and per length it wrote, when that prefix was last written or read
        self._written: list[tuple[np.ndarray, dict[int, float | None]]] = []

    def request(self, ids: np.ndarray, ends: Sequence[int], breakpoints: Sequence[int],
                at: float | None = None) -> Bill:
        """`ends`: where each message ends; `breakpoints`: message indexes marked; `at`:
        the build's time, seconds (None: no expiry checked)."""
        r = self.rules
        marks = anthropic_marks(r, ends, breakpoints)
        read = 0
        shared: list[tuple[dict[int, float | None], int]] = []  # each entry's lengths, its prefix shared
        for prev, lengths in self._written:
            lcp = common_prefix_ids(ids, prev)
            shared.append((lengths, lcp))
            for length, touched in lengths.items():
                if length > read and alive(r, touched, at) and anthropic_readable(r, length, lcp, ends, marks):
                    read = length
        if read:  # the prefix read is one cache entry, whichever request wrote it: refreshed
            for lengths, lcp in shared:
                if read in lengths and read <= lcp:
                    lengths[read] = at
        written = max(0, marks[-1] - read) if marks else 0
        if marks:
            self._written.append((ids, dict.fromkeys(marks, at)))
            del self._written[:-RECENT_REQUESTS]
        return Bill(int(ids.shape[0]), read=read, written=written)


def by_ttl(figures: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per-assumption figures in one order (expiry first), whichever the run reports on top."""
    return {t: figures[t] for t in TTL_LABELS if t in figures}


def check_ttl(ttl: str) -> str:
    if ttl not in TTL_LABELS:
        raise LocomoError(f"ttl must be one of {sorted(TTL_LABELS)}, got {ttl!r}")
    return ttl


def add_ttl_ratios(summaries: dict[str, dict[str, Any]], full: dict[str, Any] | None) -> None:
    """Each method's bill against full context's under the same TTL assumption."""
    for summ in summaries.values():
        for t, got in summ.get("by_ttl", {}).items():
            ref = full["by_ttl"][t] if full is not None else None
            for p in PROVIDERS:
                den = ref[f"total_billed_{p}"] if ref is not None else 0
                got[f"ratio_billed_vs_full_{p}"] = round(got[f"total_billed_{p}"] / den, 4) if den else None


@dataclass
class MethodSeries:
    turn: list[int] = field(default_factory=list)  # 1-based index of the replayed message
    tokens: list[int] = field(default_factory=list)  # rendered input tokens per request
    stable: list[int] = field(default_factory=list)  # tokens that are a prefix of the previous request
    billed: list[float] = field(default_factory=list)  # OpenAI rules (the plot's curve)
    billed_anthropic: list[float] = field(default_factory=list)
    read_anthropic: list[int] = field(default_factory=list)
    written_anthropic: list[int] = field(default_factory=list)
    cached_openai: list[int] = field(default_factory=list)
    context_tokens: list[int] = field(default_factory=list)  # the method's own count (tiers.tokens)
    ms: list[float] = field(default_factory=list)
    new_epochs: int = 0
    epoch_reasons: dict[str, int] = field(default_factory=dict)
    over_budget: int = 0
    token_mismatches: int = 0
    # the rules each request is billed under (`billed`: automatic caching; `tune` passes
    # the candidate's `pricing` through `priced`)
    openai_rules: CacheRules = field(default_factory=lambda: PROVIDERS["openai"])
    anthropic_rules: CacheRules = field(default_factory=lambda: PROVIDERS["anthropic"])
    # which TTL assumption the lists above bill under (`TTL_EXPIRE`: the rules' ttl_s at
    # each build's time; `TTL_INSIDE`: never expires); `other_billed*`: the other one's
    ttl: str = TTL_EXPIRE
    other_billed: list[float] = field(default_factory=list)
    other_billed_anthropic: list[float] = field(default_factory=list)
    other_cached_openai: list[int] = field(default_factory=list)
    other_read_anthropic: list[int] = field(default_factory=list)
    _prev: np.ndarray | None = None
    _at: float | None = None  # the last build's time: a build without one is taken as at it
    _openai: OpenAICache = field(init=False)
    _anthropic: AnthropicCache = field(init=False)
    _other_openai: OpenAICache = field(init=False)
    _other_anthropic: AnthropicCache = field(init=False)

    def __post_init__(self) -> None:
        check_ttl(self.ttl)
        self.new_prompt()

    def new_prompt(self) -> None:
        """Another conversation is another prompt: nothing of the last one's prefix is
        shared or cached from here on."""
        self._prev = None
        expire = (self.openai_rules, self.anthropic_rules)
        inside = (inside_ttl(self.openai_rules), inside_ttl(self.anthropic_rules))
        mine, other = (expire, inside) if self.ttl == TTL_EXPIRE else (inside, expire)
        self._openai, self._anthropic = OpenAICache(mine[0]), AnthropicCache(mine[1])
        self._other_openai, self._other_anthropic = OpenAICache(other[0]), AnthropicCache(other[1])

    def add(self, turn: int, out: MethodOutput, ms: float, *, renderer: Renderer, budget: int | None,
            breakpoints: Sequence[int] | None = None, token_ok: bool = True, at: float | None = None) -> None:
        """`breakpoints`: message indexes marked for Anthropic caching (default: the last);
        `at`: the build's time in seconds (the latest message's created_at), for the
        caches' TTL (None: the previous build's time, no gap)."""
        at = self._at if at is None else at
        self._at = at
        ids, ends = renderer.render(out.messages)
        self.stable.append(common_prefix_ids(ids, self._prev) if self._prev is not None else 0)
        self._prev = ids
        o = self._openai.request(ids, at)
        marks = list(breakpoints) if breakpoints is not None else [len(out.messages) - 1]
        a = self._anthropic.request(ids, ends, marks, at)
        oo = self._other_openai.request(ids, at)
        oa = self._other_anthropic.request(ids, ends, marks, at)
        self.other_billed.append(oo.billed(self.openai_rules))
        self.other_billed_anthropic.append(oa.billed(self.anthropic_rules))
        self.other_cached_openai.append(oo.read)
        self.other_read_anthropic.append(oa.read)
        self.turn.append(turn)
        self.tokens.append(int(ids.shape[0]))
        self.context_tokens.append(out.tokens)
        self.cached_openai.append(o.read)
        self.billed.append(o.billed(self.openai_rules))
        self.read_anthropic.append(a.read)
        self.written_anthropic.append(a.written)
        self.billed_anthropic.append(a.billed(self.anthropic_rules))
        self.ms.append(ms)
        if budget is not None and out.tokens > budget:
            self.over_budget += 1
        if not token_ok:
            self.token_mismatches += 1

    def expired_last(self) -> tuple[int, int]:
        """The last request's tokens that OpenAI's and Anthropic's caches would have
        served inside the TTL beyond what they served (0 under `TTL_INSIDE`)."""
        if self.ttl != TTL_EXPIRE or not self.turn:
            return 0, 0
        return (max(0, self.other_cached_openai[-1] - self.cached_openai[-1]),
                max(0, self.other_read_anthropic[-1] - self.read_anthropic[-1]))

    def other_ttl(self) -> str:
        return TTL_INSIDE if self.ttl == TTL_EXPIRE else TTL_EXPIRE

    def summary(self) -> dict[str, Any]:
        total = sum(self.tokens)
        first = self.tokens[0] if self.tokens else 0  # the first request has nothing to share
        return {
            "total_tokens": total,
            "total_billed": round(sum(self.billed), 1),  # OpenAI rules
            "total_billed_openai": round(sum(self.billed), 1),
            "total_billed_anthropic": round(sum(self.billed_anthropic), 1),
            "cached_tokens_openai": sum(self.cached_openai),
            "read_tokens_anthropic": sum(self.read_anthropic),
            "written_tokens_anthropic": sum(self.written_anthropic),
            "ttl": self.ttl,
            # both TTL assumptions' bills (the figures above are `ttl`'s)
            "by_ttl": by_ttl({t: {"total_billed_openai": round(sum(o), 1), "total_billed_anthropic": round(sum(a), 1)}
                              for t, o, a in ((self.ttl, self.billed, self.billed_anthropic),
                                              (self.other_ttl(), self.other_billed, self.other_billed_anthropic))}),
            # tokens of each request that are a prefix of the previous one, over every
            # request but the first (which has nothing to share)
            "cache_stable_share": round(sum(self.stable) / (total - first), 4) if total > first else None,
            "mean_context_tokens": round(sum(self.context_tokens) / len(self.tokens), 1) if self.tokens else None,
            "max_context_tokens": max(self.context_tokens, default=None),
            "context_ms": percentiles(self.ms),
            "new_epochs": self.new_epochs,
            "epoch_reasons": dict(sorted(self.epoch_reasons.items(), key=lambda kv: -kv[1])),
            "budget_violations": self.over_budget,
            "token_mismatches": self.token_mismatches,
        }


@dataclass
class CostRun:
    result: dict[str, Any]
    series: dict[str, MethodSeries]


def pick_sample(samples: list[Sample], which: str | int) -> Sample:
    """A sample by index or by name (`pick_sample_index`)."""
    return samples[pick_sample_index(samples, which)]


def pick_sample_index(samples: list[Sample], which: str | int) -> int:
    """The index of a sample by index or by name: its sample_id, or the label the
    per-sample figures of `eval session` and `recall_rounds` give it
    (`locomo.sample_labels`: `<id>-2`, ... for an id the file repeats). A name that means
    more than one sample (a repeated sample_id, or one sample's id that is another's label)
    is refused naming their indexes: it found the first, and the replay of the other one
    could not be asked for. A number that names no sample is an index."""
    labels = sample_labels([s.sample_id for s in samples])
    named = [i for i, (s, label) in enumerate(zip(samples, labels, strict=True))
             if str(which) in (s.sample_id, label)]
    if len(named) > 1:
        raise LocomoError(f"sample {str(which)!r} is ambiguous: the file gives it to the samples at indexes "
                          f"{', '.join(map(str, named))} (reported as {', '.join(repr(labels[i]) for i in named)}); "
                          f"give the index of the one to replay, e.g. --sample {named[0]}")
    if named:
        return named[0]
    try:
        i = int(which)
    except (TypeError, ValueError):
        raise LocomoError(f"no sample {which!r}; samples: {[s.sample_id for s in samples]}") from None
    if not 0 <= i < len(samples):
        raise LocomoError(f"sample index {i} out of range 0..{len(samples) - 1}")
    return i


def epoch_category(reason: str) -> str:
    """A plan's epoch reason without its figures ("room used up: ..." -> "room used up")."""
    return reason.split(":", 1)[0].split("(", 1)[0].strip()


def asked_by(plan: Any) -> str:
    """A plan's query class and the rule or prototype that chose it, without its figures."""
    reason = str(getattr(plan, "class_reason", "") or "")
    return f"{getattr(plan, 'query_class', '')} {reason.split(' ', 1)[0].split('(', 1)[0].split('=', 1)[0]}".strip()


def tiermem_request(memory: Memory, conv: str, query: str, budget: int, *, namespace: str
                    ) -> tuple[MethodOutput, list[int], Any]:
    """`tiermem_context`, plus the context's breakpoints and the plan's cache report."""
    out = tiermem_context(memory, conv, query, budget, namespace=namespace)
    plan = out.plan
    marks = getattr(plan, "breakpoints", None)  # a build without them: the last message, like the others
    return out, ([b.index for b in marks] if marks else [len(out.messages) - 1]), getattr(plan, "cache", None)


def replay_tiermem(series: MethodSeries, memory: Memory, conv: str, query: str, budget: int, *, namespace: str,
                   turn: int, renderer: Renderer, first: bool, at: float | None = None) -> tuple[MethodOutput, Any]:
    """One tiermem context of a turn-by-turn replay, billed into `series`: the one home of
    what `eval cost` and `tune` measure per context. The turn's embedding is done first
    (what the background indexer would have done by now), then `Memory.context` at
    `budget`, billed with its breakpoints, its token count checked, and a new epoch
    counted unless it is the conversation's `first` build. `at`: the build's time (`add`).
    The builds of one series must be the only ones on that conversation: the planner
    keeps one prompt-cache epoch per conversation and a build at another budget, or any
    other query, between two of them starts a new one (planner.build `_epoch_key`).
    Returns the context and the plan's cache report."""
    memory.catch_up(conv, namespace=namespace)
    t = time.perf_counter()
    out, marks, cache = tiermem_request(memory, conv, query, budget, namespace=namespace)
    ms = (time.perf_counter() - t) * 1000
    ok = messages_tokens(memory.tokens, out.messages) == out.tokens
    series.add(turn, out, ms, renderer=renderer, budget=budget, breakpoints=marks, token_ok=ok, at=at)
    if cache is not None and cache.new_epoch and not first:
        series.new_epochs += 1
        cat = epoch_category(cache.reason)
        series.epoch_reasons[cat] = series.epoch_reasons.get(cat, 0) + 1
    return out, cache


def trace_entry(turn: int, query: str, out: MethodOutput, s: MethodSeries) -> dict[str, Any]:
    """One tiermem context of a replay, for `--trace`: what it was and why it missed."""
    plan = out.plan
    cache = getattr(plan, "cache", None)
    per: dict[str, int] = plan.slice_tokens() if plan is not None else {}
    return {
        "turn": turn, "query": query, "class": getattr(plan, "query_class", None),
        "class_reason": getattr(plan, "class_reason", None), "retrieval": getattr(plan, "retrieval", None),
        "tokens": s.tokens[-1], "stable": s.stable[-1], "cached_openai": s.cached_openai[-1],
        "billed_openai": s.billed[-1], "billed_anthropic": s.billed_anthropic[-1], "slices": per,
        "new_epoch": bool(cache.new_epoch) if cache is not None else None,
        "cache_reason": cache.reason if cache is not None else None,
        "boundary": cache.boundary if cache is not None else None,
    }


def run_cost(
    memory: Memory,
    data: Path,
    *,
    sample: str | int = 0,
    budget: int = DEFAULT_COST_BUDGET,
    turns: int | None = None,
    methods: Sequence[str] = COST_METHODS,
    hot: bool = True,
    progress: Progress | None = None,
    trace: list[dict[str, Any]] | None = None,
    others: Sequence[Memory] = (),
    ttl: str = TTL_EXPIRE,
) -> CostRun:
    """`others`: more Memory objects on the same data dir and Redis (the processes of one
    deployment): tiermem's contexts come from `memory` and them in turn, one context call
    each (a load balancer's round robin), while `memory` alone appends; each keeps its own
    per-process state (the epoch, caches), as separate processes would.
    `trace`: when given, one entry per tiermem context is appended to it (`trace_entry`:
    class, retrieval, tokens per layer, the token-prefix share kept and the epoch's reason;
    `bill_by_cause`: its own bill per provider by cause, evals.decompose), to see why each
    cache miss happened.
    `ttl`: the TTL assumption of the top-level figures, goals and decomposition
    (`TTL_EXPIRE`: by the log's created_at; `TTL_INSIDE`: never expires); `by_ttl` has both."""
    from tiermem.evals.bound import (  # it builds on this module
        MIDDLE,
        BoundTurn,
        best_bound,
        best_middle,
        stable_layers,
    )
    from tiermem.evals.decompose import Decomposition
    from tiermem.evals.floor import floor_summary

    if budget < 1:
        raise LocomoError("budget must be a positive integer")
    check_ttl(ttl)
    unknown = set(methods) - set(COST_METHODS)
    if unknown:
        raise LocomoError(f"unknown methods {sorted(unknown)}; known: {list(COST_METHODS)}")
    # every turn checked as `tiermem import` checks it, before anything is written
    samples = checked_samples(data, memory.config)
    picked = pick_sample_index(samples, sample)
    s = samples[picked]
    # the result names the sample by its label, as eval session's figures do: the second
    # of two 'dup' samples was reported as 'dup', the first one's name
    label = sample_labels([x.sample_id for x in samples])[picked]
    use_tiermem = tiermem_runs(memory, methods, " in the cost replay")
    instances = (memory, *others)
    active = [m for m in methods if m != TIERMEM or use_tiermem]
    conv = unique_conversation_id(memory, f"locomo-cost-{id_text(s.sample_id)}")  # within max_id_chars
    ns = conv
    times, _ = session_times(s)
    plan: list[dict[str, Any]] = []
    for session, start in zip(s.sessions, times, strict=True):
        for i, turn in enumerate(session.turns):
            msg, _known = turn_message(turn, s, session, start + i)
            plan.append(msg)
    if turns is not None:
        plan = plan[:turns]
    series = {m: MethodSeries(ttl=ttl) for m in active}
    renderer = Renderer(memory.tokens)
    view = ConvView(conv)
    task = progress.add_task(f"replay {label}", total=len(plan)) if progress is not None else None
    t0 = time.perf_counter()
    builds = 0
    bound_turns: list[BoundTurn] = []
    parts = Decomposition(renderer)  # tiermem's bill by cause (evals.decompose)
    # inside the TTL the planner assumes no expiry either: the old replay, exactly
    with planner_ttl(instances if use_tiermem else (), ttl):
        for n, msg in enumerate(plan, start=1):
            memory.append_many(conv, [msg], namespace=ns)
            if msg["role"] == "user":
                builds += 1
                at = float(msg["created_at"])  # the build's time: its latest message's, for the caches' TTL
                view.refresh(memory)
                query = message_text(msg)
                layers: tuple[dict[str, Any], ...] = ()
                for name in active:
                    if name == TIERMEM:
                        serving = instances[(builds - 1) % len(instances)]
                        out, cache = replay_tiermem(series[name], serving, conv, query, budget, namespace=ns, turn=n,
                                                    renderer=renderer, first=builds == 1, at=at)
                        layers = stable_layers(out.messages)
                        st = series[name]
                        expired_openai, expired_anthropic = st.expired_last()
                        own = parts.add(out.messages, view.bodies[bound_turns[-1].log_len if bound_turns else 0:],
                                  cached_openai=st.cached_openai[-1], read_anthropic=st.read_anthropic[-1],
                                  written_anthropic=st.written_anthropic[-1],
                                  new_epoch=cache.new_epoch if cache is not None else None,
                                  reason=cache.reason if cache is not None else "",
                                  asked_by=asked_by(out.plan), expired_openai=expired_openai,
                                  expired_anthropic=expired_anthropic)
                        if trace is not None:
                            trace.append({**trace_entry(n, query, out, series[name]), "bill_by_cause": own})
                    elif name not in SIMULATED:
                        t = time.perf_counter()
                        out = full_context(view) if name == "full_context" else tail_truncation(view, budget)
                        ms = (time.perf_counter() - t) * 1000
                        series[name].add(n, out, ms, renderer=renderer,
                                         budget=None if name == "full_context" else budget, at=at)
                bound_turns.append(BoundTurn(n, len(view), layers, at))
            if progress is not None and task is not None:
                progress.advance(task)
    summaries = {m: series[m].summary() for m in active if m not in SIMULATED}
    if "bound" in active:  # replayed after the others: it takes tiermem's stable layers turn by turn
        b = best_bound(view, bound_turns, budget, renderer, memory.tokens, ttl=ttl)
        series["bound"] = b.pop("series")
        summaries["bound"] = b
        mid = best_middle(view, bound_turns, budget, renderer, memory.tokens, ttl=ttl)  # the second family
        series[MIDDLE] = mid.pop("series")
        summaries[MIDDLE] = mid
    if "floor" in active:
        summaries["floor"] = floor_summary(view, bound_turns, renderer, budget=budget, ttl=ttl)
        if "bound" in active:  # the "keeps a budget-sized memory" variant: M = budget x the bound's best fill
            kept = {p: int(budget * summaries["bound"][f"best_fill_{p}"]) for p in PROVIDERS}
            alt = floor_summary(view, bound_turns, renderer, keep=kept, budget=budget, ttl=ttl)
            summaries["floor"]["at_bound_fill"] = {
                **{f"keep_tokens_{p}": kept[p] for p in PROVIDERS},
                **{f"total_billed_{p}": alt[f"total_billed_{p}"] for p in PROVIDERS}}
    full = summaries.get("full_context")
    for summ in summaries.values():
        if full and full["total_tokens"]:
            summ["ratio_tokens_vs_full"] = round(summ["total_tokens"] / full["total_tokens"], 4)
            for p in PROVIDERS:
                summ[f"ratio_billed_vs_full_{p}"] = round(summ[f"total_billed_{p}"] / full[f"total_billed_{p}"], 4)
            summ["ratio_billed_vs_full"] = summ["ratio_billed_vs_full_openai"]
        else:
            summ["ratio_tokens_vs_full"] = summ["ratio_billed_vs_full"] = None
            for p in PROVIDERS:
                summ[f"ratio_billed_vs_full_{p}"] = None
    add_ttl_ratios(summaries, full)
    if TIERMEM in summaries:
        summaries[TIERMEM]["decomposition"] = parts.summary(
            {p: full[f"total_billed_{p}"] for p in PROVIDERS} if full else None)
    goals: dict[str, Any] = {"total_ratio_max": GOAL_TOTAL_RATIO, "cache_stable_min": GOAL_CACHE_STABLE,
                             "billed_vs_cached_full_max": dict(GOAL_BILLED_VS_CACHED_FULL)}
    floor_row = summaries.get("floor")
    if floor_row is not None and full is not None:
        for p, cap in GOAL_BILLED_VS_CACHED_FULL.items():
            variant = floor_row.get("at_bound_fill")
            if variant is not None and full[f"total_billed_{p}"]:
                variant[f"ratio_billed_vs_full_{p}"] = round(variant[f"total_billed_{p}"] / full[f"total_billed_{p}"], 4)
            # above the floor's ratio the target is out of reach of every policy (evals.floor)
            got = floor_row[f"ratio_billed_vs_full_{p}"]
            goals[f"billed_vs_cached_full_{p}_feasible"] = got is not None and got <= cap
    tm = summaries.get(TIERMEM)
    if tm is not None and full is not None:
        goals["tiermem_tokens_vs_full_ok"] = (
            tm["ratio_tokens_vs_full"] is not None and tm["ratio_tokens_vs_full"] <= GOAL_TOTAL_RATIO)
        for p, cap in GOAL_BILLED_VS_CACHED_FULL.items():
            got = tm[f"ratio_billed_vs_full_{p}"]
            goals[f"tiermem_billed_vs_cached_full_{p}_ok"] = got is not None and got <= cap
        goals["tiermem_cache_stable_ok"] = (
            tm["cache_stable_share"] is not None and tm["cache_stable_share"] >= GOAL_CACHE_STABLE)
    result: dict[str, Any] = {
        "data": str(data),
        "sample": label,
        "budget": budget,
        "turns_replayed": len(plan),
        "context_builds": builds,
        "providers": {p: r.model_dump() for p, r in PROVIDERS.items()},
        "ttl": ttl_report(ttl),
        "cached_input_ratio": PROVIDERS["openai"].read_ratio,
        "hot_tier": hot,
        "instances": len(instances),
        "tokenizer": memory.tokens.name,
        "elapsed_s": round(time.perf_counter() - t0, 2),
        "methods": summaries,
        "skipped_methods": [m for m in methods if m not in active],
        "goals": goals,
    }
    return CostRun(result, series)


def ttl_report(ttl: str) -> dict[str, Any]:
    """The result's account of the TTL assumptions: which one the top-level figures use."""
    return {"assumption": ttl, "label": TTL_LABELS[ttl], "labels": dict(TTL_LABELS),
            "ttl_s": {p: r.ttl_s for p, r in PROVIDERS.items()},
            "build_time": "the created_at of the latest message of the replayed log"}


def table(result: dict[str, Any]) -> Table | Group:
    """The methods' table, both TTL assumptions' bills, and tiermem's bill by cause when
    the replay has it."""
    t = methods_table(result)
    parts = result["methods"].get(TIERMEM, {}).get("decomposition")
    both = ttl_table(result["methods"])
    return Group(t, both) if parts is None else Group(t, both, decomposition_table(parts))


def ttl_table(methods: dict[str, Any], budget: str | None = None) -> Table:
    """Each method's bill under both TTL assumptions, against cached full context's under
    the same one."""
    ttl_s = ", ".join(f"{p} {r.ttl_s:,.0f} s" for p, r in PROVIDERS.items() if r.ttl_s is not None)
    t = Table(title=f"Billed under both cache-lifetime assumptions (TTL {ttl_s}; % of cached full context's "
                    "bill under the same assumption)")
    cols = (["budget"] if budget is not None else []) + ["method"]
    for p in ("OpenAI", "Anthropic"):
        for label in TTL_LABELS.values():
            cols += [f"{p}: {label}", "%"]
    for col in cols:
        t.add_column(col, justify="left" if col in ("method", "budget") else "right")
    for name, m in methods.items():
        row = ([budget] if budget is not None else []) + [name]
        for p in PROVIDERS:
            for mode in TTL_LABELS:
                got = m.get("by_ttl", {}).get(mode)
                row += ["-", "-"] if got is None else [f"{got[f'total_billed_{p}']:,.0f}",
                                                       _pct(got.get(f"ratio_billed_vs_full_{p}"))]
        t.add_row(*row)
    return t


def decomposition_table(parts: dict[str, Any]) -> Table:
    """tiermem's billed tokens by cause (evals.decompose), per provider, in tokens and in
    points of cached full context's bill."""
    from tiermem.evals.decompose import CAUSES

    t = Table(title="tiermem's bill by cause (points: % of cached full context's bill)")
    for col in ("cause", "OpenAI", "points", "Anthropic", "points", "retrieved in it"):
        t.add_column(col, justify="left" if col == "cause" else "right")
    for c in (*CAUSES, "total"):
        row = [c]
        for p in PROVIDERS:
            got = parts[f"{p}_total"] if c == "total" else parts[p][c]
            pts = parts.get(f"{p}_points_vs_full")
            row += [f"{got:,.0f}", "-" if pts is None else
                    f"{(sum(pts.values()) if c == 'total' else pts[c]):.2f}"]
        row.append(f"{parts['retrieved_tokens_in'].get(c, 0):,}" if c != "total" else "")
        t.add_row(*row)
    beyond = [parts.get(f"{p}_reads_beyond_min") for p in PROVIDERS]
    if None not in beyond:
        t.caption = ("of cached_reads, for prefixes past the 1,024-token minimum: "
                     + " / ".join(f"{b:,.0f}" for b in beyond if b is not None) + " (OpenAI / Anthropic)")
    return t


def methods_table(result: dict[str, Any]) -> Table:
    t = Table(
        title=f"Cost replay of {result['sample']} ({result['turns_replayed']} turns, "
        f"{result['context_builds']} contexts, budget {result['budget']}; billed on rendered tokens, "
        f"OpenAI and Anthropic caching rules; {result.get('ttl', {}).get('label', TTL_LABELS[TTL_INSIDE])})"
    )
    for col in ("method", "input tokens", "vs full (tokens)", "billed OpenAI", "vs cached full",
                "billed Anthropic", "vs cached full", "cache-stable", "new epochs", "p50 ms"):
        t.add_column(col, justify="left" if col == "method" else "right")
    for name, m in result["methods"].items():
        t.add_row(
            name,
            f"{m['total_tokens']:,}",
            _pct(m["ratio_tokens_vs_full"]),
            f"{m['total_billed_openai']:,.0f}",
            _pct(m["ratio_billed_vs_full_openai"]),
            f"{m['total_billed_anthropic']:,.0f}",
            _pct(m["ratio_billed_vs_full_anthropic"]),
            _pct(m["cache_stable_share"]),
            str(m["new_epochs"]) if name in (TIERMEM, "bound", "bound_middle") else "-",
            "-" if m["context_ms"]["p50"] is None else f"{m['context_ms']['p50']:.1f}",
        )
    return t


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"

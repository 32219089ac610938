"""Metrics for silent memory failures: what each `context()` call did, as Prometheus series
and as a short per-namespace history the inspector draws.

A memory failure is silent: a load-bearing turn paged out, a summary read past its
freshness budget, a context answered from the cold log alone because Redis was away. None
of that fails a request, so none of it shows in latency or error counts. `PlanMetrics`
observes every plan the service hands to an agent (the HTTP `context` route calls
`observe`; the inspector's own what-if plans are not observed, they are not traffic):

- `tiermem_context_budget_use_ratio` (histogram): tokens / budget per call, the tokens
  the answer sends (an Anthropic request's are the plan's and its current tool loop's
  thinking: above 1 where that thinking takes it past the budget);
- `tiermem_context_layer_tokens{layer}` (histogram): tokens per layer per call;
- `tiermem_context_query_class_total{query_class}`: how queries were classified;
- `tiermem_context_degraded_total`: contexts planned without the hot tier;
- `tiermem_context_load_bearing_left_out_total`: pinned or load-bearing turns left out
  for lack of room (a superseded turn left out on purpose is not counted);
- `tiermem_warm_stale_reads_total{kind}`: warm views read past their freshness budget;
- `tiermem_context_epochs_started_total`: prompt-cache epochs started (each one a planned
  cache miss); `tiermem_context_expected_cached_tokens` (histogram): the tokens of the
  messages each context shares with the previous call's (`plan.cache.expected_cached_tokens`,
  message accounting), not what a provider serves from its cache, which is
  `tiermem_context_provider_cached_tokens{provider}` (histogram: `openai`, `anthropic`;
  `plan.cache.openai_cached_tokens` / `anthropic_cached_tokens`, by the cost replay's rules);
- index lag is `tiermem_pending_embeddings` (turns not embedded yet), already exported
  by the service's state collector.

Invariants: /metrics carries no namespace label (it is read with a metrics token that
sees every namespace; a namespace name in a label would be one more place a tenant's name
leaks to, and an unbounded label set). The per-namespace history lives in this process
only, and the inspector shows a caller only namespaces its grant allows.

The history is bounded per group, a group being the reach of a token: `group_of(ns)`,
in the service the most specific configured token prefix that covers the namespace
(`acme/alice` for `acme/alice/s3` when alice has a token, `acme/bob` for bob's), else
its top-level namespace (`tenant_of`, the default). Each group keeps the `HISTORY_CALLS`
last calls of each of its `MAX_NAMESPACES_PER_TENANT` most recently seen namespaces, so
a token's sub-namespaces compete only with each other: no number of alice's evicts bob's
(`acme/bob`, a sibling with a token of his own) or another tenant's history. A token for
`acme` acting in `acme/alice/...` shares alice's group, and may read and erase all of it
anyway. At most `MAX_TENANTS_TRACKED` groups are kept, the least recently seen dropped:
only a namespace of another group, i.e. activity under another token's reach (or an
operator's), can push one out. In all, at most MAX_TENANTS_TRACKED x
MAX_NAMESPACES_PER_TENANT x HISTORY_CALLS = 500,000 samples (under 1 KB each).

Erasure reaches the history: `follow(memory)` (done on the first observed call, through
`memory_of`) registers `erased` in `Memory.erasure_hooks`, so a prune, a conversation's
erasure or a namespace's drops the calls of every conversation it erased (ids, times,
token counts, query classes), and a namespace left with none is no longer tracked. Only
erasures by the Memory this process serves with are seen (another process's, e.g. the
CLI's, are not: this history is per process).
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram

from tiermem.planner.plan import SLICES, Plan
from tiermem.tiers.models import NAMESPACE_SEPARATOR, ErasureReport

if TYPE_CHECKING:
    from tiermem.memory import Memory

log = logging.getLogger("tiermem.inspector")

HISTORY_CALLS = 500  # plans kept per namespace for the inspector's charts
MAX_NAMESPACES_PER_TENANT = 20  # namespaces of one group with a history; its least recently seen dropped
MAX_TENANTS_TRACKED = 50  # groups (token reaches, else top levels) with a history; least recently seen dropped
USE_BUCKETS = (0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1.0)  # tokens / budget
TOKEN_BUCKETS = (0, 50, 100, 250, 500, 1000, 2000, 4000, 8000, 16000, 32000, 64000, 128000)  # tokens


def load_bearing_left_out(plan: Plan) -> int:
    """Pinned or load-bearing turns the plan left out for lack of room. The planner leaves
    a superseded turn out on purpose (it is no longer current): that is not a failure."""
    return sum(1 for it in plan.left_out if it.slice == "pinned" and not it.reason.startswith("superseded"))


def stale_views(plan: Plan) -> list[str]:
    """Kinds of the warm views this plan read while they were past their freshness budget."""
    return [v.kind for v in plan.views if v.over_budget]


@dataclass(frozen=True)
class PlanSample:
    """One observed call, as the inspector's charts need it."""

    at: float  # unix seconds
    conversation_id: str
    tokens: int
    budget: int
    layers: dict[str, int]
    query_class: str
    degraded: bool
    load_bearing_left_out: int
    stale_views: tuple[str, ...]
    new_epoch: bool
    expected_cached_tokens: int

    @classmethod
    def of(cls, plan: Plan, at: float, tokens: int | None = None, budget: int | None = None) -> PlanSample:
        sent = plan.tokens if tokens is None else tokens  # what the answer sends (PlanMetrics.observe)
        room = plan.budget if budget is None else budget
        return cls(at, plan.conversation_id, sent, room, plan.slice_tokens(), plan.query_class,
                   plan.degraded, load_bearing_left_out(plan), tuple(stale_views(plan)), plan.cache.new_epoch,
                   plan.cache.expected_cached_tokens)


def tenant_of(namespace: str) -> str:
    """The tenant a namespace belongs to: its top-level namespace."""
    return namespace.split(NAMESPACE_SEPARATOR, 1)[0]


class _Erased:
    """`PlanMetrics.erased` as an erasure hook that does not keep the metrics alive: a
    Memory outlives the apps served with it (one per test, in the tests)."""

    def __init__(self, metrics: PlanMetrics) -> None:
        self._metrics = weakref.ref(metrics)

    def __call__(self, report: ErasureReport) -> None:
        metrics = self._metrics()
        if metrics is not None:
            metrics.erased(report)


@dataclass
class PlanMetrics:
    registry: CollectorRegistry
    clock: Callable[[], float] = time.time
    # the Memory whose erasures reach the history (the service's, once it is open)
    memory_of: Callable[[], Memory | None] | None = None
    # the group whose bound a namespace's history counts against (the same answer for a
    # namespace every time: the service's is its token prefixes')
    group_of: Callable[[str], str] = tenant_of
    # group -> namespace -> its last calls; both levels in least recently seen order
    _history: OrderedDict[str, OrderedDict[str, deque[PlanSample]]] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _followed: weakref.WeakSet[Memory] = field(default_factory=weakref.WeakSet)

    def __post_init__(self) -> None:
        r = self.registry
        self.budget_use = Histogram("tiermem_context_budget_use_ratio", "context tokens / budget, per call",
                                    registry=r, buckets=USE_BUCKETS)
        self.layer_tokens = Histogram("tiermem_context_layer_tokens", "tokens per context layer, per call",
                                      ["layer"], registry=r, buckets=TOKEN_BUCKETS)
        self.query_class = Counter("tiermem_context_query_class", "context calls by query class",
                                   ["query_class"], registry=r)
        self.degraded = Counter("tiermem_context_degraded", "contexts planned without the hot tier (cold only)",
                                registry=r)
        self.lb_left_out = Counter("tiermem_context_load_bearing_left_out",
                                   "pinned or load-bearing turns left out of a context for lack of room", registry=r)
        self.stale_reads = Counter("tiermem_warm_stale_reads", "warm views read past their freshness budget",
                                   ["kind"], registry=r)
        self.epochs = Counter("tiermem_context_epochs_started",
                              "prompt-cache epochs started (each a planned cache miss)", registry=r)
        self.cached = Histogram("tiermem_context_expected_cached_tokens",
                                "tokens of the leading messages shared with the previous call, per call (message "
                                "accounting; a provider's cached count is tiermem_context_provider_cached_tokens)",
                                registry=r, buckets=TOKEN_BUCKETS)
        self.provider_cached = Histogram("tiermem_context_provider_cached_tokens",
                                         "tokens a provider is expected to serve from its prompt cache for the "
                                         "request against the previous call's, by its rules, per call",
                                         ["provider"], registry=r, buckets=TOKEN_BUCKETS)
        self.calls = Counter("tiermem_context_calls", "context calls observed", registry=r)

    def observe(self, namespace: str, plan: Plan, tokens: int | None = None, budget: int | None = None) -> None:
        """Record one plan handed to an agent; never raises (a metric must not fail a context call).
        `tokens`: what the answer sends, where its form adds to the plan's (an Anthropic
        request's current-loop thinking, its blocks kept whole, its opening message); None:
        the plan's. `budget`: the room it had, where the plan was made with pending tokens
        kept for the answer's form (an Anthropic opening message); None: the plan's."""
        try:
            self._observe(namespace, plan, plan.tokens if tokens is None else tokens,
                          plan.budget if budget is None else budget)
        except Exception:
            log.exception("could not record the metrics of a plan")

    def follow(self, memory: Memory) -> None:
        """Drop from the history what `memory` erases from now on (idempotent)."""
        with self._lock:
            if memory in self._followed:
                return
            self._followed.add(memory)
        memory.erasure_hooks.append(_Erased(self))

    def erased(self, report: ErasureReport) -> None:
        """Drop the calls of the conversations a prune or an erasure removed (each named by
        its tombstone's namespace and id), and the namespaces and tenants left empty."""
        gone: dict[str, set[str]] = {}
        for t in report.tombstones:
            gone.setdefault(str(t["namespace"]), set()).add(str(t["id"]))
        with self._lock:
            for ns, ids in gone.items():
                group = self.group_of(ns)
                spaces = self._history.get(group)
                q = spaces.get(ns) if spaces is not None else None
                if spaces is None or q is None:
                    continue
                kept = [s for s in q if s.conversation_id not in ids]
                if kept:
                    spaces[ns] = deque(kept, maxlen=HISTORY_CALLS)
                else:
                    del spaces[ns]
                if not spaces:
                    del self._history[group]

    def _observe(self, namespace: str, plan: Plan, tokens: int, budget: int) -> None:
        memory = self.memory_of() if self.memory_of is not None else None
        if memory is not None:  # before the call is kept: an erasure after it must reach it
            self.follow(memory)
        self.calls.inc()
        if budget > 0:
            self.budget_use.observe(tokens / budget)
        per = plan.slice_tokens()
        for layer in SLICES:
            self.layer_tokens.labels(layer).observe(per.get(layer, 0))
        self.query_class.labels(plan.query_class or "unknown").inc()
        if plan.degraded:
            self.degraded.inc()
        lb = load_bearing_left_out(plan)
        if lb:
            self.lb_left_out.inc(lb)
        for kind in stale_views(plan):
            self.stale_reads.labels(kind).inc()
        if plan.cache.new_epoch:
            self.epochs.inc()
        self.cached.observe(plan.cache.expected_cached_tokens)
        self.provider_cached.labels("openai").observe(plan.cache.openai_cached_tokens)
        self.provider_cached.labels("anthropic").observe(plan.cache.anthropic_cached_tokens)
        sample = PlanSample.of(plan, self.clock(), tokens, budget)
        group = self.group_of(namespace)
        with self._lock:
            spaces = self._history.get(group)
            if spaces is None:
                spaces = self._history[group] = OrderedDict()
            self._history.move_to_end(group)
            q = spaces.get(namespace)
            if q is None:
                q = spaces[namespace] = deque(maxlen=HISTORY_CALLS)
            spaces.move_to_end(namespace)
            q.append(sample)
            # each bound drops only what competes with the caller's own: its group's
            # namespaces, or (a new group only) the least recently seen group
            while len(spaces) > MAX_NAMESPACES_PER_TENANT:
                spaces.popitem(last=False)
            while len(self._history) > MAX_TENANTS_TRACKED:
                self._history.popitem(last=False)

    def history(self, namespaces: Iterable[str]) -> list[PlanSample]:
        """The samples of exactly these namespaces, oldest first."""
        none: OrderedDict[str, deque[PlanSample]] = OrderedDict()
        with self._lock:
            out = [s for ns in set(namespaces) for s in self._history.get(self.group_of(ns), none).get(ns, ())]
        return sorted(out, key=lambda s: s.at)

    def namespaces(self, allowed: Callable[[str], bool]) -> list[str]:
        """The tracked namespaces a caller may see."""
        with self._lock:
            return sorted(ns for spaces in self._history.values() for ns in spaces if allowed(ns))

"""Metrics for silent memory failures: what each `context()` call did, as Prometheus series
and as a short per-namespace history the inspector draws.

A memory failure is silent: a load-bearing turn paged out, a summary read past its
freshness budget, a context answered from the cold log alone because Redis was away. None
of that fails a request, so none of it shows in latency or error counts. `PlanMetrics`
observes every plan the service hands to an agent (the HTTP `context` route calls
`observe`; the inspector's own what-if plans are not observed, they are not traffic):

- `tiermem_context_budget_use_ratio` (histogram): tokens / budget per call;
- `tiermem_context_layer_tokens{layer}` (histogram): tokens per layer per call;
- `tiermem_context_query_class_total{query_class}`: how queries were classified;
- `tiermem_context_degraded_total`: contexts planned without the hot tier;
- `tiermem_context_load_bearing_left_out_total`: pinned or load-bearing turns left out
  for lack of room (a superseded turn left out on purpose is not counted);
- `tiermem_warm_stale_reads_total{kind}`: warm views read past their freshness budget;
- `tiermem_context_epochs_started_total`: prompt-cache epochs started (each one a planned
  cache miss), and `tiermem_context_expected_cached_tokens` (histogram);
- index lag is `tiermem_pending_embeddings` (turns not embedded yet), already exported
  by the service's state collector.

Invariants: /metrics carries no namespace label (it is read with a metrics token that
sees every namespace; a namespace name in a label would be one more place a tenant's name
leaks to, and an unbounded label set). The per-namespace history lives in this process
only (`HISTORY_CALLS` calls per namespace, `MAX_NAMESPACES_TRACKED` namespaces, the least
recently seen dropped) and the inspector shows a caller only namespaces its grant allows.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Histogram

from tiermem.planner.plan import SLICES, Plan

log = logging.getLogger("tiermem.inspector")

HISTORY_CALLS = 500  # plans kept per namespace for the inspector's charts
MAX_NAMESPACES_TRACKED = 1000  # namespaces with a history; the least recently seen dropped
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
    def of(cls, plan: Plan, at: float) -> PlanSample:
        return cls(at, plan.conversation_id, plan.tokens, plan.budget, plan.slice_tokens(), plan.query_class,
                   plan.degraded, load_bearing_left_out(plan), tuple(stale_views(plan)), plan.cache.new_epoch,
                   plan.cache.expected_cached_tokens)


@dataclass
class PlanMetrics:
    registry: CollectorRegistry
    clock: Callable[[], float] = time.time
    _history: OrderedDict[str, deque[PlanSample]] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

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
                                "tokens of the prefix shared with the previous call, per call",
                                registry=r, buckets=TOKEN_BUCKETS)
        self.calls = Counter("tiermem_context_calls", "context calls observed", registry=r)

    def observe(self, namespace: str, plan: Plan) -> None:
        """Record one plan handed to an agent; never raises (a metric must not fail a context call)."""
        try:
            self._observe(namespace, plan)
        except Exception:
            log.exception("could not record the metrics of a plan")

    def _observe(self, namespace: str, plan: Plan) -> None:
        self.calls.inc()
        if plan.budget > 0:
            self.budget_use.observe(plan.tokens / plan.budget)
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
        sample = PlanSample.of(plan, self.clock())
        with self._lock:
            q = self._history.get(namespace)
            if q is None:
                q = self._history[namespace] = deque(maxlen=HISTORY_CALLS)
            self._history.move_to_end(namespace)
            q.append(sample)
            while len(self._history) > MAX_NAMESPACES_TRACKED:
                self._history.popitem(last=False)

    def history(self, namespaces: Iterable[str]) -> list[PlanSample]:
        """The samples of exactly these namespaces, oldest first."""
        with self._lock:
            out = [s for ns in set(namespaces) for s in self._history.get(ns, ())]
        return sorted(out, key=lambda s: s.at)

    def namespaces(self, allowed: Callable[[str], bool]) -> list[str]:
        """The tracked namespaces a caller may see."""
        with self._lock:
            return sorted(ns for ns in self._history if allowed(ns))

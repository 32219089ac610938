"""Prometheus metrics of the HTTP service: request latency per route template, requests
answered 500, and the state of the tiers and the scheduler, read on scrape.

Invariants: labels carry route templates, never raw paths, so no conversation id or
namespace reaches a label, and methods from `METHOD_LABELS` only (any other a client
invents is "other": HTTP lets a method be any token, and a label per invented method
would grow /metrics and the process without bound, before auth); a request the client
abandoned before any answer (it hung up mid-body) is recorded as status "499", not as
a server error; a scrape costs a fixed number of queries and Redis commands whatever the
number of conversations (one SQL statement of counts and one aggregate over the failing
views' `view_failures` rows, one PING; the hot tier's figures
are this process's running counts, HotLink.counters), and the state collector reads
the tiers at most once per `METRICS_CACHE_S`; a tier that fails to answer is reported
down (`tiermem_tier_up` 0), never a failed scrape. `/metrics`
counts every namespace, so only a metrics token may read it (tiermem.service.routes.ops).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, MutableMapping
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tiermem.service.asgi import HttpMiddleware, Receive, Scope, Send

if TYPE_CHECKING:
    from tiermem.service.runtime import Runtime

log = logging.getLogger("tiermem.service")

METRICS_CACHE_S = 10.0
# the methods a request is labelled with; any other is OTHER_METHOD
METHOD_LABELS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
OTHER_METHOD = "other"
# a request the client gave up on before any answer (nginx's "client closed request")
CLIENT_CLOSED_STATUS = 499
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


def latency_histogram(registry: CollectorRegistry) -> Histogram:
    return Histogram(
        "tiermem_http_request_duration_seconds",
        "HTTP request latency by route",
        ["method", "route", "status"],
        registry=registry,
        buckets=LATENCY_BUCKETS,
    )


def unhandled_counter(registry: CollectorRegistry) -> Counter:
    return Counter(
        "tiermem_http_unhandled_errors",
        "requests answered 500 (a bug: should be 0)",
        registry=registry,
    )


class StateCollector(Collector):
    """Tier health, hot-tier evictions, salvaged rows, the turn cache and scheduler lag, read on scrape
    (cached for METRICS_CACHE_S). It never visits the conversations' hot sets: that
    took seconds per scrape at a few thousand conversations (audit_scale), past a
    scraper's timeout as tenants grow."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._cache: tuple[float, list[Metric]] | None = None
        self._lock = threading.Lock()

    def describe(self) -> list[Metric]:
        return []  # collected lazily; nothing to check against at registration

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            now = time.monotonic()
            if self._cache is None or now - self._cache[0] > METRICS_CACHE_S:
                self._cache = (now, self._gather())
            return list(self._cache[1])

    def _gather(self) -> list[Metric]:
        out: list[Metric] = []
        rt = self.runtime
        mem = rt.memory
        up = GaugeMetricFamily("tiermem_tier_up", "1 when the tier answers, 0 when degraded", labels=["tier"])
        out.append(up)
        if mem is None:
            up.add_metric(["cold"], 0)
            return out
        try:
            cold = mem.cold.stats()
            up.add_metric(["cold"], 1)
            for key, name, doc in (
                ("conversations", "tiermem_conversations", "conversations in the log"),
                ("messages", "tiermem_messages", "messages in the log"),
                ("pending_embeddings", "tiermem_pending_embeddings", "turns not embedded yet"),
            ):
                out.append(GaugeMetricFamily(name, doc, value=float(cold.get(key, 0))))
            # the log's bad rows and the warm views' (one counter: a bad stored row is one either way)
            salvaged = float(cold.get("salvaged_rows", 0) + mem.warm.salvaged)
            out.append(
                CounterMetricFamily(
                    "tiermem_salvaged_rows", "stored rows skipped as undecodable", value=salvaged
                )
            )
            # refresh failures as counts and an age, no label: which view failed, and why,
            # is the conversation's (WarmStore.errors), erased with it
            failing, oldest = mem.views.failing()
            out.append(GaugeMetricFamily("tiermem_warm_views_failing",
                                         "warm views whose latest refresh failed (every process's)",
                                         value=float(failing)))
            out.append(GaugeMetricFamily("tiermem_warm_oldest_failure_age_seconds",
                                         "seconds since the longest-failing view began failing (0: none fails)",
                                         value=float(oldest or 0.0)))
            out.append(CounterMetricFamily("tiermem_warm_refresh_failures",
                                           "warm view refreshes that failed in this process",
                                           value=float(mem.views.failures)))
        except Exception as exc:
            log.warning("metrics: cold stats failed: %s", exc)
            up.add_metric(["cold"], 0)
        # the planner's in-process copy of conversations (tiers/turncache.py): loads rising
        # with conversations steady is the cache thrashing (turn_cache_mb too small)
        turns = mem.turns.stats()
        out.append(GaugeMetricFamily("tiermem_turn_cache_bytes",
                                     "bytes the turn cache holds (bounded by turn_cache_mb)",
                                     value=float(turns["bytes"])))
        out.append(GaugeMetricFamily("tiermem_turn_cache_conversations", "conversations the turn cache holds",
                                     value=float(turns["conversations"])))
        for key, name, doc in (
            ("loads", "tiermem_turn_cache_loads", "conversations this process read whole from the log"),
            ("reloads", "tiermem_turn_cache_reloads",
             "cached conversations read whole again (pruned and re-created, or vectors of another width)"),
            ("oversize_loads", "tiermem_turn_cache_oversize_loads",
             "loads of conversations larger than half of turn_cache_mb (kept only until another's call)"),
        ):
            out.append(CounterMetricFamily(name, doc, value=float(turns[key])))
        if mem.hot is not None:
            try:
                hot = mem.hot.counters()
                up.add_metric(["hot"], 1 if hot["healthy"] else 0)
                out.append(
                    CounterMetricFamily(
                        "tiermem_hot_evictions",
                        "turns this process's appends and pins evicted from the hot tier",
                        value=float(hot["evictions"]),
                    )
                )
                out.append(
                    CounterMetricFamily(
                        "tiermem_hot_demotions",
                        "pinned turns this process's writes demoted out of the hot tier (pins over the budget)",
                        value=float(hot["demotions"]),
                    )
                )
                out.append(
                    CounterMetricFamily(
                        "tiermem_hot_rebuilds",
                        "hot sets rebuilt from the cold log by this process",
                        value=float(hot["rebuilds"]),
                    )
                )
            except Exception as exc:
                log.warning("metrics: hot stats failed: %s", exc)
                up.add_metric(["hot"], 0)
        snap = rt.scheduler_snapshot()
        out.append(
            GaugeMetricFamily(
                "tiermem_scheduler_running",
                "1 when the consolidation scheduler runs here",
                value=1.0 if snap and snap.get("running") else 0.0,
            )
        )
        if snap:
            out.append(
                GaugeMetricFamily(
                    "tiermem_scheduler_lag_turns",
                    "most turns behind among the views the last run found over budget",
                    value=float(snap.get("lag_turns") or 0),
                )
            )
            out.append(
                GaugeMetricFamily(
                    "tiermem_scheduler_lag_seconds",
                    "most seconds behind among those views",
                    value=float(snap.get("lag_seconds") or 0.0),
                )
            )
            out.append(
                GaugeMetricFamily(
                    "tiermem_scheduler_start_delay_seconds",
                    "how late the last run started",
                    value=float(snap.get("schedule_lag_s") or 0.0),
                )
            )
            out.append(
                CounterMetricFamily(
                    "tiermem_scheduler_runs", "consolidation runs", value=float(snap.get("runs") or 0)
                )
            )
            out.append(
                CounterMetricFamily(
                    "tiermem_scheduler_errors",
                    "view refreshes that raised",
                    value=float(snap.get("errors") or 0),
                )
            )
        return out


class MetricsMiddleware(HttpMiddleware):
    """Request latency per route template (never the raw path: ids stay out of labels)."""

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        start = time.perf_counter()
        status: int | None = None  # no answer started yet
        disconnected = False

        async def receive_wrapper() -> MutableMapping[str, Any]:
            nonlocal disconnected
            message = await receive()
            if message["type"] == "http.disconnect":
                disconnected = True
            return message

        async def send_wrapper(message: MutableMapping[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                if status == 201:  # something was written: the storage takes writes again
                    self.runtime.storage_failed_at = None
            await send(message)

        try:
            await self.app(scope, receive_wrapper, send_wrapper)
        except Exception:
            status = 500
            raise
        finally:
            if status is None:
                # no answer: the client hung up before one (the guard stops reading a body
                # on http.disconnect), else the app returned without answering, a bug
                status = CLIENT_CLOSED_STATUS if disconnected else 500
            route = scope.get("route")
            label = getattr(route, "path", None) or "unmatched"
            self.runtime.latency.labels(method_label(scope.get("method", "")), label, str(status)).observe(
                time.perf_counter() - start
            )


def method_label(method: str) -> str:
    """The method as a label: one of METHOD_LABELS, else OTHER_METHOD."""
    return method if method in METHOD_LABELS else OTHER_METHOD

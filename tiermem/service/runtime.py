"""What one app instance holds (its config, token auth, Memory, scheduler and metrics),
and how a request reaches it (`runtime_of`: `app.state.runtime`, set by create_app).

Invariants: the Memory and the scheduler exist only between the lifespan's start and
its end, in the worker process (never at import); a Memory passed to create_app is the
caller's to close (`owns_memory` False), one handed over before start (`app.hand_over`,
`tiermem serve`) the app's to warm up and close, as one its lifespan opened; until the Memory exists every route that needs
it answers 503 with Retry-After (`mem`), saying the service is starting, and from the start
of the shutdown on (`stopping`), whoever owns the Memory, the same 503 saying the service
is shutting down (as /v1/mcp answers then), never "starting". A Memory passed in is left
open for its caller, not served: the service has stopped, and its scheduler with it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Depends, HTTPException, Request
from prometheus_client import CollectorRegistry, Counter, Histogram

from tiermem.config import Config
from tiermem.memory import Memory
from tiermem.service.metrics import StateCollector, latency_histogram, unhandled_counter

if TYPE_CHECKING:
    from tiermem.consolidation.scheduler import ConsolidationScheduler
    from tiermem.service.auth import TokenAuth

log = logging.getLogger("tiermem.service")

STARTING_RETRY_AFTER_S = 5  # what a 503 while the service starts (or stops) tells clients to wait
STARTING = "the service is starting"  # the 503's detail before the lifespan has opened the Memory
SHUTTING_DOWN = "the service is shutting down"  # ... once its shutdown has begun (mcp_http's too)


@dataclass
class Runtime:
    """What one app instance holds: its config, Memory, scheduler and metrics."""

    config: Config
    auth: TokenAuth
    memory: Memory | None = None
    owns_memory: bool = False
    scheduler: ConsolidationScheduler | None = None
    start_scheduler: bool = True
    # the lifespan's shutdown has begun (cleared when it starts again)
    stopping: bool = False
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    # monotonic time of the last request the storage refused or failed (for /healthz)
    storage_failed_at: float | None = None
    # the embedding model loads in the background: "idle", "loading", "ready" or "failed"
    embedder_state: str = "idle"
    # called with (namespace, plan, tokens sent, budget) for every context handed to a caller
    # (tiermem.inspector's metrics): the tokens of the answer's form, the plan's or more, and
    # the room they had (the plan's budget, with what its pending tokens kept for the request)
    plan_hooks: list[Callable[[str, Any, int, int], None]] = field(default_factory=list)
    latency: Histogram = field(init=False)
    unhandled: Counter = field(init=False)

    def __post_init__(self) -> None:
        self.latency = latency_histogram(self.registry)
        self.unhandled = unhandled_counter(self.registry)
        self.registry.register(StateCollector(self))

    def warm_embedder(self) -> None:
        """Load the model off the request path (queries arriving meanwhile wait for the
        same load); /healthz reports the state."""
        mem = self.memory
        if mem is None:
            return
        self.embedder_state = "loading"
        try:
            mem.warm_up()
            self.embedder_state = "ready"
        except Exception:
            log.exception("loading the embedding model failed; dense retrieval is unavailable")
            self.embedder_state = "failed"

    def unavailable(self) -> str | None:
        """Why no request may use the Memory now (a 503's detail), or None: not opened yet,
        or the shutdown has begun. A Memory passed in stays open (the caller's to close)
        but is no longer served: the lifespan that served it has ended (its scheduler
        stopped), as /v1/mcp, which answers 503 then whoever owns it, says."""
        if self.stopping:
            return SHUTTING_DOWN
        return STARTING if self.memory is None else None

    def mem(self) -> Memory:
        detail = self.unavailable()
        if detail is not None or self.memory is None:
            raise HTTPException(
                503, detail or STARTING, headers={"Retry-After": str(STARTING_RETRY_AFTER_S)}
            )
        return self.memory

    def scheduler_snapshot(self) -> dict[str, Any] | None:
        if self.scheduler is None:
            return None
        try:
            snap: dict[str, Any] = self.scheduler.snapshot()
            return snap
        except Exception:
            return None


def runtime_of(request: Request) -> Runtime:
    """The runtime of the app serving `request`."""
    runtime: Runtime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[Runtime, Depends(runtime_of)]

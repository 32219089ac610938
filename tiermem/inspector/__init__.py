"""The web inspector (`/ui`), offline API docs (`/docs`, `/redoc`) and the metrics of
silent memory failures, mounted on the service's app by `install`.

    app = tiermem.service.create_app(config)   # calls install(app, runtime)

Everything a browser loads comes from this package or from the `fastapi-offline`
distribution (Swagger UI, ReDoc): templates/ and static/ are package data, so the wheel
carries them and nothing is fetched at run time. static/htmx.min.js (htmx 2.0.11) and
static/json-enc.js (htmx-ext-json-enc 2.0.3) are vendored unmodified, with their licences
(Zero-Clause BSD) beside them.

Invariants: the inspector reads through Memory and the stores' public methods only, in
one namespace at a time, behind the API's tokens (tiermem.inspector.routes); its what-if
plans show what the agent's next call gets and change nothing it sees next
(`Memory.context(preview=True)`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from tiermem.inspector.docs import install_docs
from tiermem.inspector.metrics import PlanMetrics, tenant_of
from tiermem.inspector.routes import install_ui

if TYPE_CHECKING:
    from tiermem.service import Runtime

__all__ = ["PlanMetrics", "install"]


def install(app: FastAPI, runtime: Runtime) -> PlanMetrics:
    """Mount /ui, /ui/static, /docs, /redoc on `app`; observe every context the service
    hands out (runtime.plan_hooks) into /metrics and the inspector's history, which
    forgets what the runtime's Memory erases (PlanMetrics.follow)."""
    # a namespace's history competes with those of its token's reach only
    metrics = PlanMetrics(runtime.registry, memory_of=lambda: runtime.memory,
                          group_of=lambda ns: runtime.auth.reach(ns) or tenant_of(ns))
    runtime.plan_hooks.append(metrics.observe)
    app.state.plan_metrics = metrics
    app.mount("/ui/static", StaticFiles(packages=[("tiermem.inspector", "static")]), name="ui-static")
    install_docs(app)
    install_ui(app, runtime, metrics)
    return metrics

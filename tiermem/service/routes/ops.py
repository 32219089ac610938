"""The operator's routes: /healthz (no auth) and /metrics (a metrics token).

Invariants: /healthz answers from the first moment of the process ("starting", 503,
while Memory opens) and reports the cold tier `ok`, `read-only` (the kernel says this
process cannot write the database, or the storage refused a request in the last
`STORAGE_FAILURE_MEMORY_S`) or `down` (it cannot be read, or PostgreSQL gave no
connection and answer within `HEALTH_CONNECTION_WAIT_S`, also a server that takes the
query and never answers: 503); read-only still serves
reads, so it is `degraded`, not down. The hot tier is `ok`, `degraded` (Redis failing,
calls served from the log; a degraded link is probed by the check itself, HotLink.probe:
one PING waited on for at most PROBE_TIMEOUT_S, so the hot tier reads `ok` again once
Redis is back, with no request having read a hot set) or `down` when Redis refuses
tiermem itself (a wrong or missing password, an ACL user without a command it needs:
tiermem.hotlink), with Redis's reply in `reasons` (no URL, no secret); either way
requests are served from the log, so the status does not change for it. Nor for the embedder: `degraded` while its model cannot
be loaded (Memory.embedding_failure: contexts rank by keywords only), the error's type in
`reasons` (not its message, which names the model's path). /metrics counts every
namespace, so a tenant token gets 403 and no token 401, unless `metrics_public`
(loopback clients only) or auth is off.
"""

import logging
import pathlib
import time
from contextlib import AbstractContextManager, nullcontext
from typing import Protocol, runtime_checkable

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from tiermem.config import is_loopback
from tiermem.memory import Memory
from tiermem.service.head import HeadRoute
from tiermem.service.runtime import SHUTTING_DOWN, STARTING_RETRY_AFTER_S, RuntimeDep
from tiermem.service.schemas import BODY_ERRORS, HOST_ERRORS, ErrorOut, HealthOut, as_json
from tiermem.tiers.embed_onnx import embedder_loaded
from tiermem.tiers.files import database_writable

log = logging.getLogger("tiermem.service")

STORAGE_FAILURE_MEMORY_S = 60.0  # /healthz reports a storage failure this long after it
# the probe's wait for a pooled database connection and the server's answer together
# (PostgreSQL): a stopped or silent server is "down" this soon, where a request waits the
# pool's cold_pool_wait_s (30 s by default) and then its operation timeout
# (tiers.postgres.OPERATION_TIMEOUT_S), past most probes' own timeouts of 1-10 s
HEALTH_CONNECTION_WAIT_S = 3.0


@runtime_checkable
class _PooledStore(Protocol):
    """A cold store whose reads wait for a pooled connection (tiers.postgres)."""

    def connection_wait(self, seconds: float) -> AbstractContextManager[None]: ...

health_routes = APIRouter(route_class=HeadRoute)
metrics_routes = APIRouter(route_class=HeadRoute)  # included with the bearer credentials dependency


def cold_health(memory: Memory, failed_at: float | None) -> str:
    """The cold tier's state for /healthz: "ok"; "read-only" when the kernel says this
    process cannot write the database, its sidecars or its directory (read-only mount,
    immutable file, permissions), or the storage refused or failed a request in the
    last STORAGE_FAILURE_MEMORY_S. Raises when the database cannot even be read, or
    (PostgreSQL) no connection and answer come within HEALTH_CONNECTION_WAIT_S."""
    cold = memory.cold
    with cold.connection_wait(HEALTH_CONNECTION_WAIT_S) if isinstance(cold, _PooledStore) else nullcontext():
        cold.namespace_of("healthz")  # a real read; raises when reads fail
    if isinstance(memory.cold.path, pathlib.Path) and not database_writable(memory.cold.path):
        return "read-only"
    if failed_at is not None and time.monotonic() - failed_at < STORAGE_FAILURE_MEMORY_S:
        return "read-only"
    return "ok"


@health_routes.get(
    "/healthz",
    response_model=HealthOut,
    tags=["ops"],
    summary="Liveness and tier health (no auth): the cold tier is ok, read-only or down",
    # no Host or Origin check (HOST_UNCHECKED_PATHS), no token; the body checks still run
    responses={**BODY_ERRORS, 503: {"model": HealthOut, "description": (
        "the cold tier cannot be read, or starting (`status`: starting), or shutting down (stopping)")}},
)
def healthz(runtime: RuntimeDep) -> JSONResponse:
    mem = runtime.memory
    unavailable = runtime.unavailable()
    if unavailable is not None or mem is None:
        status = "stopping" if unavailable == SHUTTING_DOWN else "starting"
        return JSONResponse({"status": status, "tiers": {}}, status_code=503,
                            headers={"Retry-After": str(STARTING_RETRY_AFTER_S)})
    tiers: dict[str, str] = {}
    try:
        tiers["cold"] = cold_health(mem, runtime.storage_failed_at)
    except Exception as exc:
        log.warning("healthz: cold tier failed: %s", exc)
        tiers["cold"] = "down"
    reasons: dict[str, str] = {}
    if mem.hot is None and mem.hot_unavailable is not None:
        # asked for and could not start (a read-only data dir, no redis-server): not the
        # "disabled" of a service run without it. The error's type only: its message may
        # name paths, and this route needs no token
        tiers["hot"] = "down"
        reasons["hot"] = (f"the hot tier could not start ({mem.hot_unavailable.split(':', 1)[0]}); "
                          "contexts answer from the cold log")
    elif mem.hot is None:
        tiers["hot"] = "disabled"
    elif mem.hot.misconfigured is not None:
        tiers["hot"] = "down"
        reasons["hot"] = mem.hot.misconfigured
    else:
        tiers["hot"] = "ok" if mem.hot.probe() else "degraded"
    tiers["scheduler"] = "running" if (runtime.scheduler_snapshot() or {}).get("running") else "off"
    embed_failure = mem.embedding_failure
    if embed_failure is not None:
        tiers["embedder"] = "degraded"
        reasons["embedder"] = (f"the embedding model cannot be used ({embed_failure.split(':', 1)[0]}); "
                               "contexts rank by keywords only")
    elif runtime.owns_memory and runtime.embedder_state != "failed":
        tiers["embedder"] = runtime.embedder_state
    else:  # a failed warm-up that a later load mended (it would be degraded still) is ready
        tiers["embedder"] = "ready" if embedder_loaded(mem.embedder) else "idle"
    if tiers["cold"] == "down":
        return JSONResponse({"status": "down", "tiers": tiers, "reasons": reasons}, status_code=503)
    # read-only still answers reads: degraded, not down (a restart would not fix it)
    status = "ok" if tiers["cold"] == "ok" else "degraded"
    return JSONResponse({"status": status, "tiers": tiers, "reasons": reasons}, status_code=200)


@metrics_routes.get(
    "/metrics",
    response_class=PlainTextResponse,
    tags=["ops"],
    summary="Prometheus metrics: latency per route, tier health, evictions, salvaged rows, scheduler lag",
    description="Counts every namespace, so it needs a token from `metrics_tokens` (a tenant's "
    "token answers 403), unless `metrics_public` is set (loopback only) or auth is off.",
    # the refusals are JSON, the route's own answer text
    responses=as_json({
        **BODY_ERRORS,
        **HOST_ERRORS,
        401: {"model": ErrorOut, "description": "no metrics token"},
        403: {"model": ErrorOut, "description": "a tenant token: metrics count every namespace; or "
                                                f"{HOST_ERRORS[403]['description']}"},
    }),
)
def metrics(request: Request, runtime: RuntimeDep) -> PlainTextResponse:
    authorization = request.headers.get("authorization")
    client = request.client.host if request.client is not None else ""
    public = runtime.config.metrics_public and is_loopback(client)
    if not (public or not runtime.auth.enabled or runtime.auth.metrics_token(authorization)):
        if runtime.auth.grant(authorization) is not None:
            raise HTTPException(
                403, "a tenant token cannot read /metrics (it counts every namespace); use a metrics token"
            )
        raise HTTPException(401, "missing or invalid metrics token", headers={"WWW-Authenticate": "Bearer"})
    return PlainTextResponse(generate_latest(runtime.registry).decode(), media_type=CONTENT_TYPE_LATEST)

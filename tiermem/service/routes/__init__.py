"""The HTTP routes, one module per area: ops (/healthz, /metrics), conversations (one
conversation's reads and writes), recall (context, search), admin (a namespace's
listing, counts, retention and erasure) and limits (what the service refuses past).

Every route but /healthz carries the bearer credentials dependency (`auth.credentials`),
so that OpenAPI shows the scheme when auth is on; what a token may do is decided by the
namespace dependencies of tiermem.service.auth and, before them, by the guard. Every
route that takes GET takes HEAD too, and the document says so (tiermem.service.head).
"""

from fastapi import FastAPI

from tiermem.service.auth import credentials
from tiermem.service.head import document_head
from tiermem.service.routes.admin import admin_routes
from tiermem.service.routes.conversations import conversation_routes
from tiermem.service.routes.limits import limits_routes
from tiermem.service.routes.ops import health_routes, metrics_routes
from tiermem.service.routes.recall import recall_routes
from tiermem.service.schemas import METHOD_NOT_ALLOWED


def install_routes(app: FastAPI, *, auth_enabled: bool) -> None:
    creds = credentials(auth_enabled)
    # any path answers 405 to a method it does not take: declared on each of its operations
    app.include_router(health_routes, responses=METHOD_NOT_ALLOWED)
    for routes in (metrics_routes, conversation_routes, recall_routes, admin_routes, limits_routes):
        app.include_router(routes, dependencies=creds, responses=METHOD_NOT_ALLOWED)
    document_head(app)

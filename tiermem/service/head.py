"""HEAD wherever the service answers GET: the same status and headers, no body.

HTTP (RFC 9110, 9.3.2) has a server answer HEAD as it would GET, without the content;
Starlette's own routes take HEAD where they take GET, FastAPI's do not (a 405). So the
service's routes are `HeadRoute`s: a HEAD request is matched and handled as the path's
GET (the handler runs; the ASGI server, which still sees HEAD, sends no body: uvicorn
drops it, keeping Content-Length), and the OpenAPI document gives every GET operation a
HEAD twin (`document_head`): the same parameters, security and statuses, with their
headers and no content. A 405's `Allow` (tiermem.service.handlers.allowed_methods, read
from the document) then names HEAD on each path that takes GET, and only there.

The routes outside the document take HEAD the same way: create_app makes HeadRoute the
app's own route class (`/docs`, `/redoc`) and the inspector's router uses it (`/ui`...);
their 405's `Allow` (the route's methods) gets HEAD next to GET (`with_head`). Starlette's
own routes (/openapi.json) and static files (/ui/static, /docs/static) take HEAD already.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette.routing import Match
from starlette.types import Receive, Scope, Send

HEAD, GET = "HEAD", "GET"
HEAD_NOTE = "HEAD: what GET answers (status and headers) without the body."


class HeadRoute(APIRoute):
    """An APIRoute that takes HEAD where it takes GET, handled as the GET."""

    def _as_get(self, scope: Scope) -> Scope | None:
        """`scope` as its GET, for a HEAD request to a route that takes GET; else None."""
        if scope["type"] == "http" and scope.get("method") == HEAD and GET in (self.methods or ()):
            return {**scope, "method": GET}
        return None

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        as_get = self._as_get(scope)
        return super().matches(scope if as_get is None else as_get)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        # the handler sees GET; the server's own scope keeps HEAD, so no body goes out
        as_get = self._as_get(scope)
        await super().handle(scope if as_get is None else as_get, receive, send)


def with_head(methods: list[str]) -> list[str]:
    """`methods` (a route's, for a 405's Allow) with HEAD after GET where GET is there."""
    if GET not in methods or HEAD in methods:
        return methods
    at = methods.index(GET) + 1
    return [*methods[:at], HEAD, *methods[at:]]


def head_operation(get: dict[str, Any]) -> dict[str, Any]:
    """The HEAD twin of a GET operation: its parameters, security and statuses (each with
    its headers), no content, and an operationId of its own."""
    op = copy.deepcopy(get)
    op_id = str(op.get("operationId", ""))
    op["operationId"] = (op_id[: -len("_get")] if op_id.endswith("_get") else op_id) + "_head"
    op["description"] = f"{HEAD_NOTE}\n\n{op['description']}" if op.get("description") else HEAD_NOTE
    for answer in op.get("responses", {}).values():
        answer.pop("content", None)
    return op


def document_head(app: FastAPI) -> None:
    """Give each GET operation of `app`'s OpenAPI document its HEAD twin (`head_operation`)."""
    built: Callable[[], dict[str, Any]] = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            spec = built()  # caches it in app.openapi_schema, which this completes
            for item in spec.get("paths", {}).values():
                if "get" in item and "head" not in item:
                    item["head"] = head_operation(item["get"])
        return app.openapi_schema or built()

    app.openapi = openapi  # type: ignore[method-assign]

"""The MCP server mounted in `tiermem serve`: streamable HTTP at `/v1/mcp`.

    POST /v1/mcp   Authorization: Bearer <token>   [X-Tiermem-Namespace: acme/user-7]

`/v1/mcp/` (as many MCP client configs write the URL) is the same endpoint, answered in
place: Starlette would redirect it (307), and not every MCP client follows a redirect of
a POST (the `mcp` client follows one only within the URL's origin, and behind a proxy
that terminates TLS the redirect names http://, another origin).

The tools are those of `tiermem mcp` (`tiermem.adapters.mcp_server`), served by the
official `mcp` package's streamable-HTTP session manager, whose task group runs in the
service's lifespan. An MCP client connects with the endpoint's URL and the same headers
as any /v1 call (the `mcp` client: `streamable_http_client(url, http_client=
httpx2.AsyncClient(headers={"Authorization": "Bearer <token>"}))`).

Invariants:
- The same auth as the HTTP API. The service's guard middleware refuses a request to
  /v1/... without a valid token (401) before any body is read, and applies its body
  limits and checks; the endpoint here resolves the token's grant again, and the
  namespace it acts in: the namespace header, validated (422 naming it), else the
  token's own prefix; a namespace outside the prefix answers 403, the same for every
  outside namespace, like the namespace routes.
- Refusals an MCP client must be able to read are JSON-RPC errors (`jsonrpc_refusal`:
  the same status, the message naming the header or field and the rule, the service's
  error JSON in `data`), as the `mcp` package's own transport and session manager answer
  a request they refuse: the guard's refusals of a body or its framing (400, 413, 415,
  422), and this endpoint's own: the namespace header outside the prefix (403) or
  malformed (422), the server still starting, failed or stopping (503, with Retry-After),
  a verb other than POST (405). Each carries the request's `id` where it can be read
  (`request_id_of`), null only where it cannot (JSON-RPC 2.0): a guard's refusal of a
  body it parsed is invalid params, never a parse error, whose id JSON-RPC 2.0 requires
  null; this endpoint decides on headers, then reads the body for the id alone
  (`_Body.request_id`): behind the guard it is the guard's buffered copy, mounted
  without it the read is bounded by max_body_bytes and http_body_timeout_s (past
  either, or not a JSON-RPC request: null). An MCP client matches an answer to its call
  by id: one with id null left the `mcp` client's call unanswered. Auth (401:
  the guard's, and this endpoint's own for a direct mount) and Host/Origin (421, 403)
  refusals are plain HTTP, as the `mcp` package's own bearer-auth middleware (OAuth
  error JSON and WWW-Authenticate, which its client's auth flow reads) and host check
  (plain text) answer them.
- Both spellings of the path (`MCP_PATHS`) are one route, under the same auth and guard,
  counted in the metrics as `/v1/mcp`.
- Every tool call acts in exactly that namespace: the endpoint writes it into the
  request's ASGI scope and each tool asks for `memory.namespaced(<it>)` from the scope
  of the HTTP request that carried the call, not from a session. A conversation of
  another namespace is, to the tools, a conversation that does not exist.
- Stateless, with JSON responses: no MCP session lives in a worker between requests, so
  every request is authorized on its own, any worker can answer it, and a restart loses
  nothing a client holds. So the endpoint serves POST only: a GET (the stream of
  server-initiated messages, which it never sends) or a DELETE (the end of a session it
  does not have), or any other verb, is answered 405 with `Allow: POST` once the token is
  valid, as the streamable-HTTP spec has a server that offers no GET stream answer (the
  `mcp` package's stateless mode opened an event stream that never sent a byte, held until
  the client went away; its DELETE answered 405 already), a JSON-RPC error like the
  endpoint's other refusals.
- DNS rebinding protection (Host and Origin checked) when the service binds a loopback
  address: with `--no-auth` a web page must not reach the tools through a rebound name.
  The service's guard makes that check for every path, this one included
  (tiermem.service.guard.HostCheck, with `http_allowed_hosts`); the `mcp` package's own
  check, which knows no allowed names and wants a port in Host, is off, so /v1/mcp
  answers exactly the hosts every other route does.
- Never a 500 for the server's lifetime: a request that arrives once the service's
  shutdown has begun (its lifespan ending: the session manager stopping or stopped) is
  answered 503 with Retry-After, a JSON-RPC error like the endpoint's other refusals,
  never handed to the stopped session manager (which raised, answered 500); one that
  is waiting for the server's start-up when the shutdown begins is answered so at once,
  not at the end of its wait (`MCP_START_WAIT_S`).
- Without the `mcp` package (the `mcp` extra), nothing is mounted: /v1/mcp is a 404 and
  the rest of the service is unchanged. With it, the package is imported in the
  background after start-up (about 1-2 s): `tiermem serve` starts, and restarts, as
  fast as without it; an MCP request that arrives meanwhile waits for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import logging
from collections.abc import AsyncIterator, MutableMapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from tiermem.config import MAX_ID_CHARS_LIMIT
from tiermem.tiers.errors import ValidationError
from tiermem.tiers.models import validate_namespace

if TYPE_CHECKING:
    from fastapi import FastAPI
    from starlette.types import Receive, Scope, Send

    from tiermem.adapters._common import LocalMemory

log = logging.getLogger(__name__)

MCP_PATH = "/v1/mcp"
# the endpoint's spellings: with the trailing slash many MCP client configs write
MCP_PATHS = frozenset({MCP_PATH, MCP_PATH + "/"})
# JSON-RPC 2.0's error codes (mcp_types.PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS), not
# imported: the guard uses them and the mcp package is optional and 1-2 s of imports
JSONRPC_PARSE_ERROR = -32700
JSONRPC_INVALID_REQUEST = -32600
JSONRPC_INVALID_PARAMS = -32602
# what the mcp package's session manager answers its own 503 with (too many sessions)
JSONRPC_INTERNAL_ERROR = -32603
# the ASGI scope key the endpoint writes the request's namespace under (read by the tools)
SCOPE_NAMESPACE = "tiermem.namespace"
NAMESPACE_HEADER = b"x-tiermem-namespace"
NAMESPACE_FIELD = "X-Tiermem-Namespace"  # as a refusal names it (the namespace routes' spelling)
# the route takes every verb (Starlette's `methods=None`): the endpoint answers all but
# POST with its own 405 (`Allow: POST`, a JSON-RPC error); a list here had Starlette answer
# PUT, PATCH and OPTIONS itself, `Allow: GET, HEAD, DELETE, POST` and `{"detail": ...}`
MCP_METHODS: list[str] | None = None
# the one verb a stateless endpoint serves: no server-initiated stream (GET), no session to end (DELETE)
MCP_SERVED_METHOD = "POST"
NOT_SERVED = ("this endpoint serves POST only (stateless: it sends no server-initiated messages, so it offers "
              "no GET event stream, and it has no session to DELETE)")
MCP_START_WAIT_S = 30.0  # a request that arrives while the server starts waits this long (or until shutdown), then 503
SHUTTING_DOWN = "the service is shutting down"  # as tiermem.service.runtime.SHUTTING_DOWN (not imported here)


async def _send_json(send: Send, status: int, body: Any, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    payload = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()), *(headers or [])]})
    await send({"type": "http.response.body", "body": payload})


def jsonrpc_refusal(code: int, message: str, data: Any, request_id: str | int | None = None) -> dict[str, Any]:
    """A JSON-RPC error response for a refused request, in the shape the `mcp` package's
    streamable-HTTP transport answers a body it cannot take with; `data` carries what the
    service answers on its other routes. `request_id` null when the request's id could
    not be read (JSON-RPC 2.0: only then)."""
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message, "data": data}}


def refusal_message(detail: str | list[dict[str, Any]]) -> str:
    """The service's error `detail` as a JSON-RPC error message: itself, or a check's
    items (`error_body`) as `loc: msg`, which names the field or header."""
    if isinstance(detail, str):
        return detail
    return "; ".join(f"{'.'.join(map(str, item['loc']))}: {item['msg']}" for item in detail)


def request_id_of(doc: Any) -> str | int | None:
    """The id of a parsed JSON-RPC request, when it is one a response may carry back (a
    string of valid Unicode or an integer, as the mcp package's RequestId); else None (a
    notification, a batch, an id of another type, or one the body check refuses itself:
    a lone surrogate cannot even be encoded in the answer)."""
    rid = doc.get("id") if isinstance(doc, dict) else None
    if isinstance(rid, bool):  # JSON true is no id, though Python's bool is an int
        return None
    if isinstance(rid, int):
        return rid
    if isinstance(rid, str):
        try:
            rid.encode("utf-8")
        except UnicodeEncodeError:
            return None
        return rid
    return None


class _Body:
    """The request's body as the endpoint sees it: passed to the session manager through
    `receive` (and kept as it passes, up to `limit` bytes), or read for a refusal's id
    (`request_id`)."""

    def __init__(self, receive: Receive, limit: int, timeout_s: float) -> None:
        self._receive = receive
        self.limit = limit  # bytes (max_body_bytes): past it the id is not read
        self.timeout_s = timeout_s  # seconds (http_body_timeout_s) the read for an id may take
        self.chunks: list[bytes] = []
        self.size = 0
        self.done = False  # the last chunk arrived, or the client went away, or past the limit

    async def receive(self) -> MutableMapping[str, Any]:
        message = await self._receive()
        self._keep(message)
        return message

    def _keep(self, message: MutableMapping[str, Any]) -> None:
        if self.done:
            return
        if message.get("type") != "http.request":  # http.disconnect: no more body
            self.chunks, self.done = [], True
            return
        chunk = message.get("body", b"")
        self.size += len(chunk)
        if self.size > self.limit:
            self.chunks, self.done = [], True
            return
        self.chunks.append(chunk)
        self.done = not message.get("more_body", False)

    async def request_id(self) -> str | int | None:
        """The request's JSON-RPC id for a refusal, or None where it cannot be read: a body
        past `limit` or `timeout_s`, cut off, not JSON, or no request with an id (behind
        the service's guard the body was read and checked already: this reads its copy)."""
        try:
            async with asyncio.timeout(self.timeout_s):
                while not self.done:
                    self._keep(await self._receive())
        except TimeoutError:
            return None
        try:
            return request_id_of(json.loads(b"".join(self.chunks)))
        except (ValueError, RecursionError):  # not JSON (UnicodeDecodeError is a ValueError)
            return None


async def _refuse(send: Send, status: int, code: int, body: dict[str, Any], message: str | None = None,
                  headers: list[tuple[bytes, bytes]] | None = None, request_id: str | int | None = None) -> None:
    """Answer one of this endpoint's refusals as a JSON-RPC error carrying `body`, the
    service's error JSON, in `data`, and the request's id (None where it was not read)."""
    text = message if message is not None else refusal_message(body["detail"])
    await _send_json(send, status, jsonrpc_refusal(code, text, body, request_id), headers)


class McpEndpoint:
    """The ASGI endpoint at /v1/mcp: authorizes, names the namespace, then hands the
    request to the session manager once it runs (`serve`, started by the lifespan)."""

    def __init__(self, runtime: Any) -> None:
        self.runtime = runtime
        self.manager: Any = None
        self.failed: str | None = None
        self.ready = asyncio.Event()
        self.stop = asyncio.Event()

    async def serve(self) -> None:
        """Import the `mcp` package and build the server off the event loop (about 1-2 s
        of imports: the service answers meanwhile, and a start-up or a restart does not
        wait for it), then run the session manager until `stop`."""
        try:
            manager = await asyncio.to_thread(_build_manager, self.runtime)
        except Exception as exc:  # the rest of the service keeps serving; /v1/mcp says why
            log.exception("the MCP server failed to start")
            self.failed = f"{type(exc).__name__}: {exc}"
            self.ready.set()
            return
        try:
            async with manager.run():
                self.manager = manager
                self.ready.set()
                await self.stop.wait()
        finally:
            # stopped: its task group is gone, and handle_request would raise (a 500)
            self.manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers: dict[bytes, bytes] = {}
        for k, v in scope.get("headers", []):
            headers.setdefault(k.lower(), v)
        auth = headers.get(b"authorization")
        grant = self.runtime.auth.grant(auth.decode("latin-1") if auth is not None else None)
        if grant is None:  # the guard middleware refused it already; kept for direct mounts
            # plain, as the guard's 401 and the mcp package's own bearer auth answer it
            await _send_json(send, 401, {"detail": "missing or invalid bearer token"}, [(b"www-authenticate", b"Bearer")])
            return
        config = self.runtime.config
        body = _Body(receive, config.max_body_bytes, config.http_body_timeout_s)
        if scope.get("method") != MCP_SERVED_METHOD:
            # the streamable-HTTP spec's answer of a server that offers no GET stream; the
            # mcp package's stateless mode opened one that never sent a byte and held the
            # connection (and a task of its task group) until the client went away
            await _refuse(send, 405, JSONRPC_INVALID_REQUEST, {"detail": NOT_SERVED},
                          headers=[(b"allow", MCP_SERVED_METHOD.encode())], request_id=await body.request_id())
            return
        raw = headers.get(NAMESPACE_HEADER)
        ns = grant.default
        if raw is not None:
            try:
                # bounded by any config, as the service's header: a namespace made before
                # max_id_chars was lowered is still read and erased (appends check it again)
                ns = validate_namespace(raw.decode("latin-1"), NAMESPACE_FIELD, MAX_ID_CHARS_LIMIT)
            except ValidationError as exc:
                # not at import: the service imports this module
                from tiermem.service.schemas import error_body, error_type

                # the item a namespace route answers for the same header, type included
                await _refuse(send, 422, JSONRPC_INVALID_REQUEST,
                              error_body(["header", NAMESPACE_FIELD], exc.problem, error_type(exc)),
                              request_id=await body.request_id())
                return
        if not grant.allows(ns):
            # only the header can name a namespace outside the prefix (the default is the prefix)
            detail = f"namespace {ns!r} is outside this token's scope"
            await _refuse(send, 403, JSONRPC_INVALID_REQUEST, {"detail": detail},
                          f"header.{NAMESPACE_FIELD}: {detail} (a token acts on its namespace prefix and below)",
                          request_id=await body.request_id())
            return
        if not self.ready.is_set() and not self.stop.is_set():
            await self._await_start()
        manager = self.manager
        if self.stop.is_set() or self.runtime.memory is None or manager is None:
            await self._unavailable(send, body)
            return
        scope[SCOPE_NAMESPACE] = ns
        started = False

        async def tracked(message: MutableMapping[str, Any]) -> None:
            nonlocal started
            started = True
            await send(message)

        try:
            # the body kept as it passes: a 503 after the manager read it still has its id
            await manager.handle_request(scope, body.receive, tracked)
        except RuntimeError:
            # the session manager stopped while the request reached it (its task group
            # gone: "Task group is not initialized"); any other RuntimeError is a bug
            if started or not self.stop.is_set():
                raise
            await self._unavailable(send, body)

    async def _await_start(self) -> None:
        """Wait for the server's start-up, at most MCP_START_WAIT_S, and no longer than
        the shutdown's beginning (`stop`): a request waiting then is answered at once."""
        waits = [asyncio.ensure_future(self.ready.wait()), asyncio.ensure_future(self.stop.wait())]
        try:
            await asyncio.wait(waits, timeout=MCP_START_WAIT_S, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()

    async def _unavailable(self, send: Send, body: _Body) -> None:
        """503, Retry-After: the server is starting, failed to start, or shutting down."""
        # not at import: the service imports this module
        from tiermem.service.runtime import STARTING_RETRY_AFTER_S

        detail = (SHUTTING_DOWN if self.stop.is_set()
                  else f"the MCP server failed to start ({self.failed})" if self.failed
                  else "the service is starting")
        await _refuse(send, 503, JSONRPC_INTERNAL_ERROR, {"detail": detail},
                      f"{detail}; retry after {STARTING_RETRY_AFTER_S} s (Retry-After)",
                      [(b"retry-after", str(STARTING_RETRY_AFTER_S).encode())], await body.request_id())


def _build_manager(runtime: Any) -> Any:
    """The MCP server over the runtime's Memory and its stateless session manager (not
    yet running). Imports the `mcp` package."""
    from mcp.server.mcpserver import Context
    from mcp.server.transport_security import TransportSecuritySettings

    from tiermem.adapters.mcp_server import MemoryToolError, build_server

    def resolve(ctx: Context) -> LocalMemory:
        request = ctx.request_context.request
        scope: MutableMapping[str, Any] | None = getattr(request, "scope", None)
        ns = scope.get(SCOPE_NAMESPACE) if scope is not None else None
        memory = runtime.memory
        if not isinstance(ns, str) or memory is None:  # not through McpEndpoint: act nowhere
            raise MemoryToolError(RuntimeError("this call carries no authorized namespace"))
        namespaced: LocalMemory = memory.namespaced(ns)
        return namespaced

    server = build_server(resolve=resolve)
    # builds the session manager (the Starlette app it returns is not used: the route
    # is mounted in the service's own app, behind its middleware)
    # the guard middleware checks Host and Origin for the whole app (DNS rebinding)
    server.streamable_http_app(streamable_http_path=MCP_PATH, stateless_http=True, json_response=True,
                               host=runtime.config.http_host,
                               transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
    return server.session_manager


# -- the endpoint in the service's OpenAPI document ------------------------------------------
# (FastAPI documents its own routes only: this one is a Starlette route, so `mount` adds it)

_JSONRPC_ID = {"type": ["string", "integer", "null"],
               "description": "the request's id; null when the request's id could not be read (a refusal)"}
JSONRPC_ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "a JSON-RPC 2.0 error response",
    "required": ["jsonrpc", "id", "error"],
    "properties": {
        "jsonrpc": {"type": "string", "enum": ["2.0"]},
        "id": _JSONRPC_ID,
        "error": {"type": "object", "required": ["code", "message"], "properties": {
            "code": {"type": "integer", "description": (
                f"{JSONRPC_PARSE_ERROR} (parse error), {JSONRPC_INVALID_REQUEST} (invalid request: every "
                f"refusal of the request itself), {JSONRPC_INVALID_PARAMS} (invalid params), "
                f"{JSONRPC_INTERNAL_ERROR} (the server is starting or busy)")},
            "message": {"type": "string", "description": "the refusal's text (a check's items as `loc: msg`)"},
            "data": {"description": "what the service's other routes answer for the same refusal "
                                    "(`{\"detail\": ...}`, a 422's items)"}}},
    },
}
# the service's own error body, answered here where the request is refused before it is
# read as JSON-RPC (no token, a foreign Host or Origin, Host or Origin sent twice)
_SERVICE_ERROR: dict[str, Any] = {"type": "object", "required": ["detail"], "properties": {"detail": {}}}
_EITHER_ERROR = {"application/json": {"schema": {"anyOf": [JSONRPC_ERROR_SCHEMA, _SERVICE_ERROR]}}}
_JSONRPC_ERROR = {"application/json": {"schema": JSONRPC_ERROR_SCHEMA}}
_PLAIN_ERROR = {"application/json": {"schema": _SERVICE_ERROR}}


def openapi_operation() -> dict[str, Any]:
    """The OpenAPI operation of `POST /v1/mcp`: the statuses it answers and, for each, the
    shape: a JSON-RPC error for a refusal of the request, the service's `{"detail": ...}`
    where the request is refused before its body is read as JSON-RPC."""
    retry_after = {"Retry-After": {"description": "seconds to wait before retrying", "schema": {"type": "integer"}}}
    return {
        "tags": ["mcp"],
        "summary": "The Model Context Protocol over streamable HTTP (stateless, JSON answers): POST only",
        "description": (
            "One JSON-RPC 2.0 message per request (`initialize`, `tools/list`, `tools/call`, ...), answered as "
            "JSON. Stateless: no server-initiated messages and no sessions, so any other method is answered 405 "
            "with `Allow: POST` and a JSON-RPC error. The tools act in the request's namespace, as the other "
            "routes. A refusal is the status the other routes answer, as a JSON-RPC error (id null unless the "
            "request's id could be read) carrying their error body in `error.data`."),
        "operationId": "mcp_v1_mcp_post",
        "security": [{"HTTPBearer": []}],
        "parameters": [{"name": NAMESPACE_FIELD, "in": "header", "required": False, "schema": {"type": "string"},
                        "description": "the namespace the tools act in; absent: the token's own prefix"}],
        "requestBody": {"required": True, "content": {"application/json": {"schema": {
            "type": "object", "required": ["jsonrpc", "method"], "description": "a JSON-RPC 2.0 request"}}}},
        "responses": {
            "200": {"description": "the JSON-RPC response (a `result`, or an `error` of the method)",
                    "content": {"application/json": {"schema": {"type": "object", "required": ["jsonrpc"]}}}},
            "202": {"description": "a notification (no id) accepted; no body"},
            "400": {"description": "a header sent twice, an invalid Content-Length, or both Content-Length and "
                                     "Transfer-Encoding (the connection is closed)", "content": _EITHER_ERROR},
            "401": {"description": "missing or invalid bearer token", "content": _PLAIN_ERROR},
            "403": {"description": "the namespace is outside this token's prefix (a JSON-RPC error); or a request "
                                   "from a page of another origin (Origin header)", "content": _EITHER_ERROR},
            "405": {"description": "any method but POST; `Allow: POST`", "content": _JSONRPC_ERROR,
                    "headers": {"Allow": {"description": "POST", "schema": {"type": "string"}}}},
            "408": {"description": "the request body did not arrive whole within http_body_timeout_s",
                    "content": _JSONRPC_ERROR},
            "413": {"description": "request body over max_body_bytes", "content": _JSONRPC_ERROR},
            "415": {"description": "a body that is not application/json in UTF-8", "content": _JSONRPC_ERROR},
            "421": {"description": "a Host header naming none of this service's names (http_allowed_hosts)",
                    "content": _PLAIN_ERROR},
            "422": {"description": "a body that is not one valid JSON-RPC request (naming the field), or an invalid "
                                   f"{NAMESPACE_FIELD}", "content": _JSONRPC_ERROR},
            "503": {"description": ("the service or its MCP server is starting (or failed to start), or the service "
                                    "is shutting down"),
                    "content": _JSONRPC_ERROR, "headers": retry_after},
        },
    }


def _document(app: FastAPI) -> None:
    """Add `POST /v1/mcp` to `app`'s OpenAPI document (`openapi_operation`)."""
    built = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            spec = built()
            operation = openapi_operation()
            # a service without auth documents no bearer token on its routes: nor here
            if not any("security" in op for item in spec["paths"].values() for op in item.values()):
                del operation["security"]
            spec["paths"][MCP_PATH] = {"post": operation}
        return app.openapi_schema or built()

    app.openapi = openapi  # type: ignore[method-assign]


def mount(app: FastAPI, runtime: Any) -> bool:
    """Mount the MCP server at MCP_PATH in `app` (the service's FastAPI app, `runtime` its
    Runtime); the lifespan starts it in the background (`McpEndpoint.serve`). False,
    with nothing mounted, when the `mcp` package is not installed."""
    if importlib.util.find_spec("mcp") is None:
        log.info("MCP over HTTP not mounted (no mcp package): pip install 'tiermem[mcp]'")
        return False
    from starlette.routing import Match, Route

    class McpRoute(Route):
        """A route at both of `MCP_PATHS` that names itself in the scope, as FastAPI's do,
        so the service's metrics label its requests `/v1/mcp`, not "unmatched"."""

        def matches(self, scope: Scope) -> tuple[Match, Scope]:
            if scope.get("path") in MCP_PATHS:
                # either spelling matches the route's own path; the endpoint and the
                # guard see the request's path unchanged
                scope = {**scope, "path": MCP_PATH}
            match, child = super().matches(scope)
            if match != Match.NONE:
                child["route"] = self
            return match, child

    endpoint = McpEndpoint(runtime)
    app.router.routes.append(McpRoute(MCP_PATH, endpoint=endpoint, methods=MCP_METHODS))
    _document(app)
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        async with inner(a) as state:
            # an app started again (a second lifespan, maybe on another event loop, which an
            # asyncio.Event binds to at its first wait) serves again
            endpoint.ready, endpoint.stop, endpoint.failed = asyncio.Event(), asyncio.Event(), None
            task = asyncio.create_task(endpoint.serve(), name="tiermem-mcp")
            try:
                yield state
            finally:
                endpoint.stop.set()
                if not endpoint.ready.is_set():
                    task.cancel()  # still importing: nothing runs yet
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    app.router.lifespan_context = lifespan
    return True

"""How the HTTP service answers an exception: every refusal is a 4xx naming the field,
refusing storage is 503/507, and only a bug is 500.

Invariants (tiermem.service states the rules): a pydantic or tiermem `ValidationError`
is 422 with a `loc` that points at the field (path, query, header or body), except a
conditional append's `PositionMismatch`, 409 naming the position (and incarnation)
expected and the position found (`PositionMismatchOut`; nothing was written); a missing
conversation is 404 with the same body whether it does not exist or belongs to another
namespace; a full disk is 507 (an SQLite store's disk said as full, without its path, also
where SQLite met it as an I/O error: `storage_problem` given the database's path) and a
read-only or failing database 503 with Retry-After
(and /healthz reports the cold tier read-only for `STORAGE_FAILURE_MEMORY_S` after it); a
busy one (another writer held SQLite past `busy_timeout_ms`, a PostgreSQL lock or
statement timeout) 503 with a Retry-After of `STORAGE_BUSY_RETRY_AFTER_S`, /healthz unmoved;
another process on the store embedding with another `embedding_model` (`EmbeddingModelConflict`,
`VectorWidthConflict` where the widths differ) 503 naming both models and widths, without
Retry-After, /healthz unmoved;
a 503 body carries `"written": false` only where the store certainly refused before
writing (busy, read-only), never for a lost connection (the COMMIT may have landed);
a request that only reads (`READ_ONLY_METHODS`, `READ_ONLY_ROUTES`) is never told of a write (rolled back, or
nothing written); a route that commits in several transactions (`SEVERAL_TRANSACTION_ROUTES`: the erasures
in batches) says instead that it may be partly done and is safe to send again
(`INCOMPLETE_REQUEST_TEXT`), never "nothing was written", and carries no `"written"`;
a method a path does not take is 405 with an `Allow` header listing every method the
path takes (Starlette's named only the first route's of a path served by two) and a detail
that says so, on the paths the OpenAPI document leaves out too (the inspector's pages, its
static files: read from the app's routes, `routed_methods`); anything else is logged,
counted in `tiermem_http_unhandled_errors` and answered 500.
"""

import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import BaseRoute, Match, Mount
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from tiermem.errors import (
    ConversationNotFound,
    EmbeddingModelConflict,
    PositionMismatch,
    StorageReadOnly,
    TiermemError,
    ValidationError,
)
from tiermem.service.head import with_head
from tiermem.service.runtime import runtime_of
from tiermem.service.schemas import error_body, error_type
from tiermem.tiers.errors import WRITTEN_FIELD, not_found_detail
from tiermem.tiers.files import (
    DATABASE_DIR_WORDS,
    INCOMPLETE_REQUEST_TEXT,
    READ_FULL_REQUEST_CLAIM,
    storage_problem,
)
from tiermem.tiers.schema import DriverDatabaseError

# the PostgreSQL driver's base error (its pool's timeout too), where the `postgres` extra is installed
POSTGRES_DRIVER_ERRORS: tuple[type[Exception], ...]
try:
    from psycopg import Error as _PostgresError

    POSTGRES_DRIVER_ERRORS = (_PostgresError,)
except ImportError:  # pragma: no cover - SQLite only
    POSTGRES_DRIVER_ERRORS = ()

log = logging.getLogger("tiermem.service")

STORAGE_RETRY_AFTER_S = 30  # what a 503 from refusing storage tells clients to wait
STORAGE_BUSY_RETRY_AFTER_S = 1  # ... and from busy storage (another writer's transaction)

# (method, route path) of the routes whose write commits in several transactions: the
# erasures, in batches of rows or one conversation at a time (Memory.delete_conversation,
# delete_namespace, prune). A storage refusal partway leaves the earlier ones erased, and
# sending the request again erases the rest (as the CLI's SEVERAL_TRANSACTION_COMMANDS).
SEVERAL_TRANSACTION_ROUTES = frozenset({
    ("DELETE", "/v1/conversations/{conversation_id}"),
    ("DELETE", "/v1/namespace"),
    ("POST", "/v1/prune"),
})

# the requests that only read the store: a storage refusal says nothing of a write, which
# they did not make (storage_problem's reads_only). Every GET and HEAD, and the search's
# POST (its query in a body); not the context's POST, which may write the hot set and views
READ_ONLY_METHODS = frozenset({"GET", "HEAD"})
READ_ONLY_ROUTES = frozenset({("POST", "/v1/search")})


def _field_loc(field_name: str) -> list[str | int]:
    """'messages[3].content' -> ['messages', 3, 'content']."""
    out: list[str | int] = []
    for tok in re.findall(r"\[(\d+)\]|([^.\[\]]+)", field_name):
        out.append(int(tok[0]) if tok[0] else tok[1])
    return out or [field_name]


def _route_params(request: Request) -> tuple[set[str], set[str], set[str]]:
    """The path, query and header parameters the route declares, by the names sent."""
    route = request.scope.get("route")
    dep = getattr(route, "dependant", None)
    if dep is None:
        return set(request.path_params), set(request.query_params), set()
    return ({p.alias for p in dep.path_params}, {p.alias for p in dep.query_params},
            {p.alias for p in dep.header_params})


async def pydantic_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    detail = [
        {
            "loc": list(e.get("loc", ())),
            "msg": str(e.get("msg", "invalid")),
            "type": str(e.get("type", "")),
        }
        for e in exc.errors()
    ]
    return JSONResponse({"detail": detail}, status_code=422)


def body_refusal(exc: ValidationError, field: str) -> RequestValidationError:
    """`exc` (its message and type kept) located in the request's body at `field` (a dotted
    path, '' for the whole body) whatever its name. For a route that knows the field is the
    body's: `validation_error` locates a field by its first name, a path, query or header
    parameter's first, so the single append's message field `conversation_id` was reported
    at the path's id."""
    loc: list[str | int] = ["body", *(_field_loc(field) if field else [])]
    return RequestValidationError([{"loc": tuple(loc), "msg": exc.problem, "type": error_type(exc)}])


async def validation_error(request: Request, exc: ValidationError) -> JSONResponse:
    loc = _field_loc(exc.field)
    path_params, query_params, header_params = _route_params(request)
    where = ("path" if loc[0] in path_params else "query" if loc[0] in query_params
             else "header" if loc[0] in header_params else "body")
    return JSONResponse(error_body([where, *loc], exc.problem, error_type(exc)), status_code=422)


METHOD_NOT_ALLOWED_STATUS = 405
# the order the methods are listed in (`Allow`, the 405's detail): any other after them
METHOD_ORDER = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def _template(path: str) -> re.Pattern[str]:
    """An OpenAPI path ('/v1/conversations/{conversation_id}') as a pattern of the paths it names."""
    return re.compile("".join("[^/]+" if part.startswith("{") else re.escape(part)
                              for part in re.split(r"(\{[^}]*\})", path)))


def allowed_methods(request: Request) -> list[str]:
    """Every method the OpenAPI document gives the request's path (Starlette's 405 names
    only those of the first route whose path matched: GET of `GET /v1/search`, not POST);
    empty for a path the document leaves out (/docs)."""
    spec: dict[str, Any] = request.app.openapi()
    path = request.scope.get("path", "")
    found = {m.upper() for template, item in spec.get("paths", {}).items() if _template(template).fullmatch(path)
             for m in item}
    rank = {m: i for i, m in enumerate(METHOD_ORDER)}
    return sorted(found, key=lambda m: (rank.get(m, len(rank)), m))


# the methods StaticFiles serves (/ui/static, /docs/static); it answers any other 405
# itself, with no Allow header
STATIC_FILE_METHODS = frozenset({"GET", "HEAD"})


def routed_methods(request: Request) -> list[str]:
    """Every method of METHOD_ORDER that the app routes the request's path to a handler
    of (`_routed`), for a path the OpenAPI document leaves out: each route of a path
    served by several (/ui/login's GET page and POST form; Starlette's 405 named only the
    first route's), GET and HEAD for a static file (StaticFiles' 405 named none)."""
    scope = request.scope
    # the path from the app's own root: the router has set the scope's root_path to a
    # mount's by the time the mount's app refuses
    fresh: Scope = {"type": "http", "path": scope.get("path", ""), "path_params": {},
                    "root_path": scope.get("app_root_path", scope.get("root_path", ""))}
    return [m for m in METHOD_ORDER if _routed(request.app.router.routes, {**fresh, "method": m})]


def _routed(routes: list[BaseRoute], scope: Scope) -> bool:
    """Whether `routes`, in order as the router tries them, take `scope`'s method on its
    path: the first that matches it fully handles it (a mount matches by path alone: its
    static files take STATIC_FILE_METHODS, its router's routes are asked in turn, another
    ASGI app is taken to answer any)."""
    for route in routes:
        match, child = route.matches(scope)
        if match != Match.FULL:
            continue
        if not isinstance(route, Mount):
            return True
        if isinstance(route.app, StaticFiles):
            return scope["method"] in STATIC_FILE_METHODS
        inner: list[BaseRoute] | None = getattr(route.app, "routes", None)
        return True if inner is None else _routed(inner, {**scope, **child})
    return False


async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
    """The router's and the routes' HTTP exceptions as FastAPI answers them, but a 405
    naming every method of the path (`Allow` and the detail; the method sent is not
    echoed: it is any token a client likes)."""
    if exc.status_code != METHOD_NOT_ALLOWED_STATUS:
        return await http_exception_handler(request, exc)
    # a path the document leaves out (/docs, /ui, static files): the methods its routes
    # take (HEAD where GET: tiermem.service.head), else the refusing route's own
    allowed = allowed_methods(request) or routed_methods(request) or with_head(
        [m.strip() for m in (exc.headers or {}).get("Allow", "").split(",")])
    listed = ", ".join(m for m in allowed if m)
    return JSONResponse({"detail": f"method not allowed: this path takes {listed}"},
                        status_code=METHOD_NOT_ALLOWED_STATUS, headers={"Allow": listed})


async def position_mismatch(request: Request, exc: PositionMismatch) -> JSONResponse:
    # not the caller's input but the log's state: 409, which a client tells from a 422
    return JSONResponse({"detail": str(exc), "type": error_type(exc), "conversation_id": exc.conversation_id,
                         "expected_position": exc.expected, "found_position": exc.found,
                         "expected_incarnation": exc.expected_incarnation,
                         "found_incarnation": exc.found_incarnation}, status_code=409)


async def model_conflict(request: Request, exc: EmbeddingModelConflict) -> JSONResponse:
    # this service cannot embed or compare until an operator runs every process on the
    # store with one embedding_model: 503 saying so (was a 500 from the database's dimension
    # error), without the store's path; no Retry-After, as waiting does not end it
    log.warning("%s %s: %s", request.method, request.url.path, exc)
    return JSONResponse({"detail": exc.problem}, status_code=503)


async def not_found(request: Request, exc: ConversationNotFound) -> JSONResponse:
    # the same body whether it does not exist or belongs to another namespace
    return JSONResponse({"detail": not_found_detail(exc.conversation_id)}, status_code=404)


def _storage_answer(request: Request, exc: BaseException) -> JSONResponse | None:
    route_path = getattr(request.scope.get("route"), "path", None)
    several = (request.method, route_path) in SEVERAL_TRANSACTION_ROUTES
    reads = request.method in READ_ONLY_METHODS or (request.method, route_path) in READ_ONLY_ROUTES
    runtime = getattr(request.app.state, "runtime", None)
    mem = None if runtime is None else runtime.memory
    config = mem.config if mem is not None else None if runtime is None else runtime.config
    # an SQLite store's path: its disk is asked how much is free, so that a full disk met
    # as an I/O error (growing the -shm) is 507 "full", not 503 "failing"
    db_path = config.db_path if config is not None and config.cold_url is None else None
    problem = storage_problem(exc, several_transactions=several, incomplete=INCOMPLETE_REQUEST_TEXT,
                              db_path=db_path, reads_only=reads, disk_named=DATABASE_DIR_WORDS,
                              read_full_claim=READ_FULL_REQUEST_CLAIM)
    if problem is None:
        return None
    status, detail, busy, refused_unwritten = problem
    log.warning("%s %s refused by the storage: %s", request.method, request.url.path, exc)
    headers = {}
    if busy:  # nothing wrong with the storage: /healthz stays "ok"
        headers["Retry-After"] = str(STORAGE_BUSY_RETRY_AFTER_S)
    elif status == 503:
        runtime_of(request).storage_failed_at = time.monotonic()
        headers["Retry-After"] = str(STORAGE_RETRY_AFTER_S)
    # "written": false only where the store certainly refused before writing: the client
    # retries a write on that alone (a lost connection may have come after the COMMIT)
    body: dict[str, object] = {"detail": detail, **({WRITTEN_FIELD: False} if refused_unwritten else {})}
    return JSONResponse(body, status_code=status, headers=headers)


async def storage_error(request: Request, exc: Exception) -> JSONResponse:
    answer = _storage_answer(request, exc)
    return answer if answer is not None else await unexpected_error(request, exc)


async def tiermem_error(request: Request, exc: TiermemError) -> JSONResponse:
    answer = _storage_answer(request, exc)
    if answer is not None:
        return answer
    runtime_of(request).unhandled.inc()
    log.error("tiermem error on %s %s: %s", request.method, request.url.path, exc)
    return JSONResponse({"detail": "internal error"}, status_code=500)


async def unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    # an OSError of the file system (EROFS, EIO, ENOSPC) met outside SQLite is still
    # the storage refusing, not a bug
    answer = _storage_answer(request, exc)
    if answer is not None:
        return answer
    runtime_of(request).unhandled.inc()
    log.exception("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
    return JSONResponse({"detail": "internal error"}, status_code=500)


# exception class -> its handler; FastAPI picks the nearest class in the exception's MRO.
# Each driver's errors have their own entry: what only the `Exception` entry catches is
# answered by Starlette's outermost middleware, which re-raises it after the answer, so
# the ASGI server logs a traceback and drops the client's connection (a PostgreSQL lock
# timeout or lost connection was answered 503 and then the keep-alive connection reset).
HANDLERS: tuple[tuple[type[Exception], Callable[..., Awaitable[Response]]], ...] = (
    (RequestValidationError, pydantic_error),
    (StarletteHTTPException, http_error),
    (ValidationError, validation_error),
    (PositionMismatch, position_mismatch),
    (ConversationNotFound, not_found),
    (EmbeddingModelConflict, model_conflict),
    (DriverDatabaseError, storage_error),
    *((cls, storage_error) for cls in POSTGRES_DRIVER_ERRORS),
    (StorageReadOnly, storage_error),
    (TiermemError, tiermem_error),
    (Exception, unexpected_error),
)


def install_handlers(app: FastAPI) -> None:
    for exc_class, handler in HANDLERS:
        app.exception_handler(exc_class)(handler)

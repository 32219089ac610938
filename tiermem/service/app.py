"""The HTTP app: `create_app` wires the runtime, the exception handlers, the routes and
the two middlewares; `lifespan` opens Memory and the consolidation scheduler.

Invariants: the scheduler is created in the lifespan, i.e. in the worker process after
uvicorn has started it, never at import, and so is the Memory unless one is given:
passed to create_app (the caller's to close) or handed over with `hand_over` (the app's
to warm up and close, as one it opened: `tiermem serve` opens the store before uvicorn
starts, so a store that cannot be opened is one error line, not uvicorn's traceback); the
embedding model of a Memory the app owns loads in the background, so /healthz answers from the start; a
scheduler that fails to start is logged and the service serves without it; at shutdown
the model load is waited for and the scheduler stopped before a Memory the app opened is
closed, so no tiermem thread is left running in onnxruntime when the process exits. The guard middleware runs
inside the metrics middleware, so refused requests are timed and counted too. `create_app`
refuses (ServiceConfigError) a config the service cannot honour, before anything starts:
bad tokens (TokenAuth) and a `max_body_bytes` below `max_content_bytes`
(`check_service_limits`), which would answer 413 for messages the library stores; a
library-only Memory takes such a config. The OpenAPI document states every bound of an
integer field as a JSON integer, exactly (`exact_integer_bounds`).
"""

import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool

from tiermem.config import Config
from tiermem.memory import DEFAULT_NAMESPACE, Memory
from tiermem.service.auth import NAMESPACE_HEADER, ServiceConfigError, TokenAuth
from tiermem.service.guard import GuardMiddleware
from tiermem.service.handlers import install_handlers
from tiermem.service.head import HeadRoute
from tiermem.service.metrics import MetricsMiddleware
from tiermem.service.routes import install_routes
from tiermem.service.runtime import Runtime

log = logging.getLogger("tiermem.service")

WARM_UP_THREAD = "tiermem-warm-up"
UNAUTHORIZED = HTTPStatus.UNAUTHORIZED.value  # 401: never answered without auth (`--no-auth`)


def create_app(
    config: Config,
    memory: Memory | None = None,
    *,
    auth: bool = True,
    namespace: str = DEFAULT_NAMESPACE,
    start_scheduler: bool = True,
) -> FastAPI:
    """The FastAPI app. With `memory=None` a Memory is opened (and warmed) in the
    lifespan (or handed over before start: `hand_over`) and closed at shutdown; a Memory
    passed in is the caller's to close.
    `auth=False` serves `namespace` to every caller: bind it to loopback only."""
    check_service_limits(config)
    runtime = Runtime(
        config=config,
        auth=TokenAuth(
            config.auth_tokens,
            enabled=auth,
            default_namespace=namespace,
            max_id_chars=config.max_id_chars,
            metrics_tokens=config.metrics_tokens,
        ),
        memory=memory,
        start_scheduler=start_scheduler,
    )

    app = FastAPI(
        title="tiermem",
        version=_version(),
        description=api_description(auth, namespace),
        lifespan=lifespan,
        # a path spelt with a trailing slash is a 404 (JSON), not a 307 the document does
        # not declare, which a client may follow resending an authenticated POST without
        # its body; /v1/mcp/ (mcp_http) and /ui (the inspector) answer their own spellings
        redirect_slashes=False,
        docs_url=None,  # tiermem.inspector serves /docs from packaged assets (no CDN)
        redoc_url=None,
    )
    # every route added to the app itself (the inspector's /docs and /redoc) takes HEAD
    # where it takes GET, as the service's routers' do (tiermem.service.head)
    app.router.route_class = HeadRoute
    app.state.runtime = runtime
    install_handlers(app)
    install_routes(app, auth_enabled=runtime.auth.enabled)
    from tiermem.inspector import install as install_inspector

    install_inspector(app, runtime)
    from tiermem.adapters.mcp_http import mount as mount_mcp  # /v1/mcp, when the mcp extra is there

    mount_mcp(app, runtime)
    _document_exact_integers(app)
    app.add_middleware(GuardMiddleware, runtime=runtime)
    app.add_middleware(MetricsMiddleware, runtime=runtime)
    if not auth:
        _document_no_auth(app)
    return app


API_SUMMARY = ("Tiered memory for LLM agents: an append-only log, a budgeted working set and a "
               "per-turn query planner.")


def api_description(auth: bool, namespace: str) -> str:
    """The OpenAPI document's description: how a request is authorised, as this app does
    it. `--no-auth` has no token to ask for: it said every /v1 call needed one."""
    if not auth:
        return (f"{API_SUMMARY} This service runs without authentication (`tiermem serve --no-auth`, "
                "loopback only): no /v1 call needs a token. A request "
                f"acts in the namespace `{namespace}` unless its `{NAMESPACE_HEADER}` header names another, "
                "and may name any. `/metrics` needs no token either.")
    return (f"{API_SUMMARY} Every /v1 call needs `Authorization: Bearer <token>`. A token is bound "
            "to a namespace prefix (`acme`) and acts on that namespace and those below it (`acme/user-7`); "
            f"a request names its namespace in the `{NAMESPACE_HEADER}` header (absent: the token's own "
            "prefix). Outside the prefix a conversation route answers 404 exactly like a missing "
            "conversation, and a namespace route 403, whatever the other namespace holds. `/metrics` "
            "needs a token from `metrics_tokens`.")


def _document_no_auth(app: FastAPI) -> None:
    """`app`'s OpenAPI document without the 401 answers a server without auth never gives
    (the routes declare them for the bearer token); it has no security scheme already
    (auth.credentials)."""
    built = app.openapi

    def openapi() -> dict[str, Any]:
        spec = built()
        for operations in spec.get("paths", {}).values():
            for operation in operations.values():
                if isinstance(operation, dict):
                    operation.get("responses", {}).pop(str(UNAUTHORIZED), None)
        return spec

    app.openapi = openapi  # type: ignore[method-assign]


# the keywords of a JSON Schema bounding a number, which FastAPI's OpenAPI model holds as
# floats (fastapi.openapi.models.Schema: `maximum: float | None`, ...)
NUMBER_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
INTEGER_TYPE = "integer"


def exact_integer_bounds(node: Any) -> None:
    """Give every integer schema in `node` (an OpenAPI document, walked whole) its bounds
    as JSON integers, in place. FastAPI passes the document through its OpenAPI model,
    which reads every bound as a float: `"maximum":200.0`, and MAX_POSITION (2**62) as
    `4.611686018427388e+18`, which a client generating code read as a float, or as 2**62
    only by luck of rounding. Each bound of an integer field is an int in its model
    (pydantic's own schema says 200 and 4611686018427387904); every such bound the service
    declares is exact as a float (a test holds the document equal to the models'), so
    int() gives it back. A number field's bounds stay as they are."""
    if isinstance(node, list):
        for item in node:
            exact_integer_bounds(item)
    elif isinstance(node, dict):
        if node.get("type") == INTEGER_TYPE:
            for key in NUMBER_BOUNDS:
                value = node.get(key)
                if isinstance(value, float) and value.is_integer():
                    node[key] = int(value)
        for value in node.values():
            exact_integer_bounds(value)


def _document_exact_integers(app: FastAPI) -> None:
    """`app`'s OpenAPI document with integer bounds as integers (`exact_integer_bounds`)."""
    built = app.openapi

    def openapi() -> dict[str, Any]:
        spec = built()  # cached by FastAPI in app.openapi_schema: walked again, unchanged
        exact_integer_bounds(spec)
        return spec

    app.openapi = openapi  # type: ignore[method-assign]


def hand_over(app: FastAPI, memory: Memory) -> None:
    """Give `app` (from create_app without a Memory, not yet started) a Memory its caller
    opened, to own as one the lifespan opened: its embedding model is loaded in the
    background at start, and at shutdown, after that load is joined and the scheduler
    stopped, the lifespan closes it. `tiermem serve` opens the store before uvicorn starts
    (a store that cannot be opened is then one `error:` line, exit 1) and cannot close it
    after `uvicorn.run` itself: uvicorn re-raises the SIGTERM it caught once it has shut
    down, which ends the process before the command's own cleanup runs."""
    runtime: Runtime = app.state.runtime
    if runtime.memory is not None:
        raise ValueError("the app already has a Memory: hand one over only to an app created without one")
    runtime.memory = memory
    runtime.owns_memory = True


def check_service_limits(config: Config) -> None:
    """Refuse limits the service cannot honour: a request body limit below the largest
    message content the library stores, under which the service would answer 413 for
    messages `Memory.append` and the CLI accept. Only serving needs the rule: the library
    never reads `max_body_bytes`."""
    if config.max_body_bytes < config.max_content_bytes:
        # twice the content limit (the default ratio; at most MAX_BODY_BYTES_LIMIT) leaves
        # room for the JSON around a message at the limit and its escapes
        suggested = 2 * config.max_content_bytes
        raise ServiceConfigError(
            f"max_body_bytes ({config.max_body_bytes}) is below max_content_bytes ({config.max_content_bytes}): "
            "the service would refuse (413) messages the library stores; set max_body_bytes to at least "
            f"{config.max_content_bytes} (better {suggested}) or lower max_content_bytes"
        )


def _version() -> str:
    try:
        from tiermem import __version__

        return __version__
    except ImportError:  # pragma: no cover
        return "0"


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    runtime: Runtime = app.state.runtime
    runtime.stopping = False  # an app started again
    warm_up: threading.Thread | None = None
    if runtime.memory is None:
        runtime.memory = await run_in_threadpool(Memory, runtime.config)
        runtime.owns_memory = True
    if runtime.owns_memory:  # opened here or handed over (`hand_over`); one passed in is the caller's
        # load the embedding model now, not on the first request, but without holding
        # up the start: /healthz answers meanwhile and says "embedder": "loading". Not a
        # daemon, and joined at shutdown: a process that exits while onnxruntime builds
        # a session in a daemon thread aborts (see tests/test_exit_clean.py)
        warm_up = threading.Thread(target=runtime.warm_embedder, name=WARM_UP_THREAD)
        warm_up.start()
    if runtime.start_scheduler and runtime.config.scheduler_enabled:
        try:
            runtime.scheduler = runtime.memory.make_scheduler()
            runtime.scheduler.start()
        except Exception:
            log.exception("consolidation scheduler failed to start; serving without it")
            runtime.scheduler = None
    try:
        yield
    finally:
        # from here a request that needs the Memory is told the service is shutting down
        # (Runtime.mem): not handed one about to close, nor one the caller keeps open
        runtime.stopping = True
        if warm_up is not None:
            await run_in_threadpool(warm_up.join)
        if runtime.scheduler is not None:
            await run_in_threadpool(runtime.scheduler.shutdown, True)
            runtime.scheduler = None
        if runtime.owns_memory and runtime.memory is not None:
            memory, runtime.memory = runtime.memory, None
            await run_in_threadpool(memory.close)

"""The HTTP service: every Memory operation as JSON over HTTP (`tiermem serve`).

    app = create_app(Config.load(), auth=True)      # Memory is opened in the lifespan
    uvicorn.run(app, host=config.http_host, port=config.http_port)

Rules this module keeps:

- **Tenancy.** Namespaces are hierarchical (`acme`, `acme/alice`). Each bearer token in
  `config.auth_tokens` is bound to a namespace *prefix*: it may act on that namespace and
  every namespace below it, never on a sibling or a parent. Every /v1 request acts in one
  namespace, named by the `X-Tiermem-Namespace` header (absent: the token's own prefix),
  and passes it to Memory. What a caller sees never depends on another namespace:
  - a conversation route (`/v1/conversations/{id}/...`, and `/v1/search` with a
    `conversation_id`) in a namespace outside the token's prefix answers 404 with exactly
    the body a missing conversation gets, whatever that namespace holds;
  - a namespace-level route (`/v1/conversations`, `/v1/search` without a conversation,
    `/v1/stats`, `/v1/prune`, `DELETE /v1/namespace`) outside the prefix answers 403
    `namespace '<ns>' is outside this token's scope`, the same for every outside
    namespace, existing or not (it tells the caller only what its own token allows);
  - a malformed namespace header answers 422 naming the header; a duplicated one 400.
  Without a valid token, 401. `auth=False` (the CLI's `--no-auth`, loopback only) serves
  every namespace; without the header it acts in the `namespace` given to `create_app`.
- **Erasure.** `DELETE /v1/conversations/{id}` and `DELETE /v1/namespace` erase on
  request (Memory.delete_conversation / delete_namespace) and answer the erasure report;
  the namespace route needs the header: nothing is erased by default.
- **Metrics.** `/metrics` counts every namespace (messages, conversations, requests per
  route), so a tenant token may not read it (403): it needs a token from
  `config.metrics_tokens`, or `config.metrics_public` (loopback `http_host` only, served
  only to loopback clients), or a `--no-auth` server.
- **Hostile input.** Bodies are read into memory up to `config.max_body_bytes` (413
  past it, from Content-Length or by counting the stream), then checked before any
  handler sees them, whatever the headers say: `Content-Type`, `Content-Length`,
  `Authorization` and the namespace header at most once each (400), a non-empty body
  only as `application/json` in UTF-8 or with no Content-Type (415), and every non-empty
  body must be strict UTF-8 JSON without NaN/Infinity, nested at most `MAX_JSON_DEPTH`,
  without lone surrogates; then pydantic models, then Memory's own validation. Every
  refusal is 4xx with a message naming the field; nothing is written.
- **Storage that refuses.** A full disk answers 507; a read-only or failing database
  (read-only mount, immutable file, I/O errors) answers 503 with `Retry-After`, never 500,
  and `/healthz` reports the cold tier `read-only` (the kernel's answer to "may this
  process write the database, its sidecars and its directory?", plus any storage failure
  of the last `STORAGE_FAILURE_MEMORY_S`).
- **No 500s.** An unexpected exception is logged and answered 500, and counted in
  `/metrics`; the tests (tests/test_service_fuzz.py) show no input reaches it.
- **Startup order.** Memory (with the embedding model) and the consolidation scheduler
  are created in the lifespan, i.e. in the worker process after uvicorn has started it,
  never at import.
"""

import hmac
import json
import logging
import math
import pathlib
import re
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, MutableMapping
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, HTTPException, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from pydantic import BaseModel, ConfigDict, Field, model_validator
from starlette.concurrency import run_in_threadpool

from tiermem.config import DEFAULT_MAX_ID_CHARS, Config, is_loopback
from tiermem.errors import (
    ConversationNotFound,
    StorageReadOnly,
    TiermemError,
    ValidationError,
)
from tiermem.memory import DEFAULT_NAMESPACE, MAX_BATCH_MESSAGES, MAX_BUDGET_TOKENS, MAX_SEARCH_K, Memory
from tiermem.tiers.cold import DriverDatabaseError, ErasureReport
from tiermem.tiers.embed_onnx import embedder_loaded
from tiermem.tiers.files import database_writable, storage_problem
from tiermem.tiers.models import (
    ID_PATTERN,
    NAMESPACE_PATTERN,
    Message,
    StoredMessage,
    namespace_within,
    validate_id,
    validate_namespace,
)

log = logging.getLogger("tiermem.service")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

MAX_JSON_DEPTH = 32
MAX_CREATED_AT = 253_402_214_400.0  # 9999-12-31T00:00:00Z
MAX_POSITION = 2**62  # SQLite integers are 64-bit; anything above is refused by pydantic
METRICS_CACHE_S = 10.0
NAMESPACE_HEADER = "X-Tiermem-Namespace"
# headers whose second copy would let two parsers disagree (the guard and FastAPI read
# different copies): a request that repeats one is refused
SINGLE_HEADERS = ("content-type", "content-length", "authorization", NAMESPACE_HEADER.lower())
STORAGE_RETRY_AFTER_S = 30  # what a 503 from refusing storage tells clients to wait
STORAGE_FAILURE_MEMORY_S = 60.0  # /healthz reports a storage failure this long after it
MAX_ECHO_CHARS = 80  # of a refused header value quoted back in an error
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
# Ids are documented with their pattern but validated by Memory, whose message is clearer.
_ID_SCHEMA: dict[str, Any] = {"pattern": ID_PATTERN.pattern, "maxLength": DEFAULT_MAX_ID_CHARS}
_ID_DOC = "ASCII letters, digits and . _ : @ - (not starting with . or -)"
ConvId = Annotated[str, Path(description=f"conversation id: {_ID_DOC}", json_schema_extra=_ID_SCHEMA)]
_NS_DOC = (
    "the namespace this request acts in: ids joined by '/' (e.g. `acme/user-7`), which must be the "
    "token's namespace prefix or below it; absent: the token's own prefix. Outside the prefix, "
    "conversation routes answer 404 exactly like a missing conversation and namespace routes 403"
)
NsHeader = Annotated[
    str | None,
    Header(
        alias=NAMESPACE_HEADER,
        description=_NS_DOC,
        json_schema_extra={"pattern": NAMESPACE_PATTERN.pattern, "maxLength": DEFAULT_MAX_ID_CHARS},
    ),
]


class ServiceConfigError(ValueError):
    """The service cannot start with this configuration (e.g. auth on, no tokens)."""


# -- request and response models ---------------------------------------------------------------


class MessageIn(Message):
    """One message in any OpenAI format (a Chat Completions message or a Responses input
    item: tiers.formats) plus tiermem's envelope fields."""

    # extra="allow": the body is every field that is not the envelope; tiers.formats refuses
    # unknown ones by name
    model_config = ConfigDict(extra="allow", frozen=True, allow_inf_nan=False)
    # Bounded so that every stored time still converts to a date (year <= 9999) when
    # plans and summaries render it; the library model only requires >= 0.
    created_at: float | None = Field(None, ge=0, le=MAX_CREATED_AT, description="unix seconds; default: now")

    @model_validator(mode="after")
    def _shape(self) -> "MessageIn":
        # the body is checked by Memory.append (tiers.formats), whose error names the field:
        # a 422 whose loc points at it, not at the whole body
        if self.session_id is not None and any(ord(c) < 32 or ord(c) == 127 for c in self.session_id):
            raise ValueError("session_id must not contain control characters")
        return self


class BatchIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    messages: list[MessageIn] = Field(min_length=1, max_length=MAX_BATCH_MESSAGES)
    session_id: str | None = Field(
        None, min_length=1, max_length=128, description="applied to every message of the batch"
    )


class ContextIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str | None = Field(None, description="the new turn's question; None: plan from the log alone")
    budget: int = Field(2000, ge=1, le=MAX_BUDGET_TOKENS, description="hard cap on the returned tokens")
    system: str | None = Field(None, description="a system message to put first")
    namespace_recall: bool = Field(
        True, description="also retrieve from this namespace's other conversations"
    )
    truncate_latest: bool = Field(
        False, description="cut the latest user message instead of failing when it alone exceeds the budget"
    )


class ForkIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    up_to: int = Field(ge=0, le=MAX_POSITION, description="last position copied into the fork")
    new_id: str | None = Field(
        None,
        description=f"id of the new conversation (default: generated): {_ID_DOC}",
        json_schema_extra=_ID_SCHEMA,
    )


class PinIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    position: int = Field(ge=0, le=MAX_POSITION)
    priority: int = Field(50, ge=0, le=100, description="lowest priorities are demoted first under pressure")


class CheckpointIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    summary: str = Field(min_length=1, description="stands in for positions <= position")
    position: int = Field(ge=0, le=MAX_POSITION)


class PruneIn(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    older_than_seconds: float = Field(
        ge=0,
        description="delete whole conversations of this namespace whose "
        "last message is older than this many seconds",
    )


class AppendOut(BaseModel):
    conversation_id: str
    position: int


class BatchOut(BaseModel):
    conversation_id: str
    positions: list[int]


class StoredMessageOut(BaseModel):
    conversation_id: str
    position: int
    role: str
    message: dict[str, Any] = Field(description="the OpenAI-format message as stored")
    session_id: str | None
    metadata: dict[str, Any] | None
    created_at: float
    tokens: int


class HistoryOut(BaseModel):
    conversation_id: str
    messages: list[StoredMessageOut]


class ValidityPoint(BaseModel):
    position: int
    time: float


class ValidUntil(ValidityPoint):
    superseded_by: int


class StatementSpan(BaseModel):
    start: int
    end: int


class FactOut(BaseModel):
    """A statement and what was true when: valid from its own position and time until
    the turn that superseded it (null while current)."""

    position: int
    role: str
    text: str
    status: str  # "current" or "superseded"
    valid_from: ValidityPoint
    valid_until: ValidUntil | None
    current_position: int | None  # the end of its chain of corrections; null when retracted
    # the statement's characters in the message text, when the turn holds several facts
    # and only some were superseded (null: the whole turn)
    span: StatementSpan | None = None


class FactsOut(BaseModel):
    conversation_id: str
    facts: list[FactOut]


class CheckpointOut(BaseModel):
    conversation_id: str
    position: int
    summary: str
    metadata: dict[str, Any] | None
    created_at: float


class ActiveOut(BaseModel):
    conversation_id: str
    checkpoint: CheckpointOut | None
    messages: list[StoredMessageOut]


class ContextOut(BaseModel):
    messages: list[dict[str, Any]] = Field(description="OpenAI-format messages, ready to send")
    tokens: int = Field(description="exact token count of `messages`, never above the budget")
    plan: dict[str, Any] = Field(description="every slice, why it was chosen, what was left out")
    explain: str = Field(description="the plan as text")


class ForkOut(BaseModel):
    conversation_id: str
    parent_id: str
    up_to: int


class PinOut(BaseModel):
    conversation_id: str
    position: int
    pinned: bool
    priority: int | None


class PruneOut(BaseModel):
    conversations: int
    messages: int
    conversation_ids: list[str]


class ErasureOut(BaseModel):
    conversations: int = Field(description="conversations erased")
    messages: int = Field(description="messages erased with them")
    bytes_reclaimed: int = Field(description="bytes the database file gave back")
    tombstones: list[dict[str, Any]] = Field(
        description="one per erased conversation: id, namespace, time and counts, no content"
    )


class ConversationsOut(BaseModel):
    namespace: str
    conversations: list[str]


class SearchHitOut(BaseModel):
    conversation_id: str
    position: int
    score: float
    ranks: dict[str, int]
    text: str


class SearchOut(BaseModel):
    hits: list[SearchHitOut]


class StatsOut(BaseModel):
    namespace: str
    cold: dict[str, Any]
    hot: dict[str, Any] | None
    scheduler: dict[str, Any] | None


class HealthOut(BaseModel):
    status: str
    tiers: dict[str, str]


class ErrorOut(BaseModel):
    detail: str


class ErrorItem(BaseModel):
    loc: list[str | int]
    msg: str
    type: str


class ValidationErrorOut(BaseModel):
    detail: list[ErrorItem]


_RETRY_AFTER = {"Retry-After": {"description": "seconds to wait before retrying", "schema": {"type": "integer"}}}
_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorOut, "description": "a header sent twice (Content-Type, Authorization, ...)"},
    401: {"model": ErrorOut, "description": "missing or invalid bearer token"},
    413: {"model": ErrorOut, "description": "request body over max_body_bytes"},
    415: {"model": ErrorOut, "description": "a body that is not application/json in UTF-8"},
    422: {"model": ValidationErrorOut, "description": "invalid input, naming the field; nothing written"},
    503: {
        "model": ErrorOut,
        "description": "the storage is read-only or failing (or the service is starting); nothing written",
        "headers": _RETRY_AFTER,
    },
    507: {"model": ErrorOut, "description": "the disk (or the database's size cap) is full; nothing written"},
}
# conversation routes: outside the token's prefix, exactly the answer of a missing conversation
_CONV_ERRORS = {
    **_ERRORS,
    404: {
        "model": ErrorOut,
        "description": "no such conversation in this namespace; the same answer, body included, when "
        "the namespace is outside the token's prefix",
    },
}
# namespace routes: outside the token's prefix, 403, the same for every outside namespace
_NS_ERRORS = {
    **_ERRORS,
    403: {"model": ErrorOut, "description": "the namespace is outside this token's prefix"},
}
_APPEND_ERRORS = _CONV_ERRORS  # ids are per namespace: an append never meets another namespace's id


# -- helpers ----------------------------------------------------------------------------------------


def finite(value: Any) -> Any:
    """`value` with every non-finite float replaced by None (JSON has no NaN/Infinity)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def _stored(m: StoredMessage) -> StoredMessageOut:
    return StoredMessageOut(
        conversation_id=m.conversation_id,
        position=m.position,
        role=m.role,
        message=finite(m.body),
        session_id=m.session_id,
        metadata=finite(m.metadata),
        created_at=m.created_at if math.isfinite(m.created_at) else 0.0,
        tokens=m.tokens,
    )


def _erasure(report: ErasureReport) -> ErasureOut:
    """The HTTP form of an `ErasureReport` (tiers.cold)."""
    return ErasureOut(
        conversations=report.conversations,
        messages=report.messages,
        bytes_reclaimed=report.bytes_reclaimed,
        tombstones=[finite(dict(t)) for t in report.tombstones],
    )


def _field_loc(field_name: str) -> list[str | int]:
    """'messages[3].content' -> ['messages', 3, 'content']."""
    out: list[str | int] = []
    for tok in re.findall(r"\[(\d+)\]|([^.\[\]]+)", field_name):
        out.append(int(tok[0]) if tok[0] else tok[1])
    return out or [field_name]


def _error_body(loc: Iterable[str | int], msg: str, type_: str) -> dict[str, Any]:
    return {"detail": [{"loc": list(loc), "msg": msg, "type": type_}]}


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


class _BodyProblem(Exception):
    def __init__(self, loc: list[str | int], msg: str, type_: str) -> None:
        super().__init__(msg)
        self.loc, self.msg, self.type = loc, msg, type_


def _reject_constant(name: str) -> Any:
    raise _BodyProblem(["body"], f"{name} is not valid JSON", "json_invalid")


def check_json_body(raw: bytes) -> None:
    """Raise `_BodyProblem` unless `raw` is strict UTF-8 JSON, at most MAX_JSON_DEPTH deep,
    whose strings (keys included) are valid Unicode."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _BodyProblem(
            ["body"], f"request body is not valid UTF-8 (byte {exc.start})", "unicode_error"
        ) from None
    try:
        doc = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise _BodyProblem(["body", exc.pos], f"invalid JSON: {exc.msg}", "json_invalid") from None
    except RecursionError:
        raise _BodyProblem(
            ["body"], f"JSON nested deeper than {MAX_JSON_DEPTH} levels", "json_too_deep"
        ) from None
    stack: list[tuple[Any, list[str | int]]] = [(doc, ["body"])]
    while stack:
        node, loc = stack.pop()
        if len(loc) - 1 > MAX_JSON_DEPTH:
            raise _BodyProblem(
                loc[: MAX_JSON_DEPTH + 1], f"JSON nested deeper than {MAX_JSON_DEPTH} levels", "json_too_deep"
            )
        if isinstance(node, str):
            _check_unicode(node, loc)
        elif isinstance(node, dict):
            for k, v in node.items():
                _check_unicode(k, [*loc, k])
                stack.append((v, [*loc, k]))
        elif isinstance(node, list):
            stack.extend((v, [*loc, i]) for i, v in enumerate(node))


def _check_unicode(s: str, loc: list[str | int]) -> None:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        safe = [p.encode("utf-8", "backslashreplace").decode() if isinstance(p, str) else p for p in loc]
        raise _BodyProblem(
            safe, "contains a lone UTF-16 surrogate, which is not valid Unicode", "unicode_error"
        ) from None


async def _send_json(
    send: Send, status: int, body: dict[str, Any], headers: Iterable[tuple[bytes, bytes]] = ()
) -> None:
    payload = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


# -- auth ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Grant:
    """What one request's credential allows: the namespaces it may act on (`prefix` and
    below; None: every namespace, for `--no-auth`) and the namespace it acts in when the
    request names none."""

    prefix: str | None
    default: str

    def allows(self, namespace: str) -> bool:
        return self.prefix is None or namespace_within(namespace, self.prefix)


class TokenAuth:
    """Bearer token -> namespace prefix (and the separate metrics tokens), compared in
    constant time."""

    def __init__(
        self,
        tokens: dict[str, str],
        *,
        enabled: bool,
        default_namespace: str,
        max_id_chars: int,
        metrics_tokens: Iterable[str] = (),
    ) -> None:
        self.enabled = enabled
        try:
            self.default_namespace = validate_namespace(default_namespace, "namespace", max_id_chars)
        except ValidationError as exc:
            raise ServiceConfigError(f"namespace {default_namespace!r}: {exc.problem}") from None
        self._tokens: list[tuple[bytes, str]] = []
        for token, ns in tokens.items():
            if not token or not token.strip():
                raise ServiceConfigError("auth_tokens: a token is empty")
            try:
                validate_namespace(ns, "namespace", max_id_chars)
            except ValidationError as exc:
                raise ServiceConfigError(
                    f"auth_tokens: namespace prefix {ns!r} is not a valid namespace ({exc.problem})"
                ) from None
            self._tokens.append((token.encode("utf-8"), ns))
        self._metrics: list[bytes] = []
        for token in metrics_tokens:
            if not token or not token.strip():
                raise ServiceConfigError("metrics_tokens: a token is empty")
            if token in tokens:
                raise ServiceConfigError(
                    "metrics_tokens: a token is also in auth_tokens; a metrics token must not be a tenant's"
                )
            self._metrics.append(token.encode("utf-8"))
        if enabled and not self._tokens:
            raise ServiceConfigError(
                "auth is on but no tokens are configured: set auth_tokens (env TIERMEM_AUTH_TOKENS="
                '\'{"<token>": "<namespace prefix>"}\') or run without auth (loopback only)'
            )
        if (enabled and any(len(t) < 16 for t, _ in self._tokens)) or any(len(t) < 16 for t in self._metrics):
            log.warning("some auth tokens are shorter than 16 characters; use long random tokens")

    @staticmethod
    def _given(authorization: str | None) -> bytes | None:
        if not authorization:
            return None
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        return token.strip().encode("utf-8", "surrogateescape")

    def grant(self, authorization: str | None) -> Grant | None:
        """What the request's token allows; None when it has none or a bad one."""
        if not self.enabled:
            return Grant(None, self.default_namespace)
        given = self._given(authorization)
        if given is None:
            return None
        found: str | None = None
        for known, ns in self._tokens:  # no early exit: the time does not depend on which matched
            if hmac.compare_digest(known, given):
                found = ns
        return Grant(found, found) if found is not None else None

    def namespace(self, authorization: str | None) -> str | None:
        """The namespace a request with this token acts in by default; None: no valid token."""
        g = self.grant(authorization)
        return None if g is None else g.default

    def metrics_token(self, authorization: str | None) -> bool:
        """True when the request carries one of `metrics_tokens`."""
        given = self._given(authorization)
        if given is None:
            return False
        ok = False
        for known in self._metrics:
            ok |= hmac.compare_digest(known, given)
        return ok


# -- metrics ------------------------------------------------------------------------------------------


class _StateCollector(Collector):
    """Tier health, hot-tier evictions, salvaged rows and scheduler lag, read on scrape
    (cached for METRICS_CACHE_S: reading the hot stats visits every conversation)."""

    def __init__(self, runtime: "Runtime") -> None:
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
            salvaged = float(cold.get("salvaged_rows", 0))
            out.append(
                CounterMetricFamily(
                    "tiermem_salvaged_rows", "stored rows skipped as undecodable", value=salvaged
                )
            )
        except Exception as exc:
            log.warning("metrics: cold stats failed: %s", exc)
            up.add_metric(["cold"], 0)
        if mem.hot is not None:
            try:
                hot = mem.hot.stats()
                up.add_metric(["hot"], 1 if hot.get("healthy") else 0)
                out.append(
                    CounterMetricFamily(
                        "tiermem_hot_evictions",
                        "turns evicted from the hot tier",
                        value=float(hot.get("evictions", 0)),
                    )
                )
                out.append(
                    CounterMetricFamily(
                        "tiermem_hot_rebuilds",
                        "hot sets rebuilt from the cold log by this process",
                        value=float(hot.get("rebuilds", 0)),
                    )
                )
                out.append(
                    GaugeMetricFamily(
                        "tiermem_hot_tokens", "tokens held in the hot tier", value=float(hot.get("tokens", 0))
                    )
                )
                out.append(
                    GaugeMetricFamily(
                        "tiermem_hot_pins", "pinned turns in the hot tier", value=float(hot.get("pins", 0))
                    )
                )
                out.append(
                    GaugeMetricFamily(
                        "tiermem_hot_overflow_tokens",
                        "pinned tokens over the hot budget",
                        value=float(hot.get("overflow_tokens", 0)),
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


@dataclass
class Runtime:
    """What one app instance holds: its config, Memory, scheduler and metrics."""

    config: Config
    auth: TokenAuth
    memory: Memory | None = None
    owns_memory: bool = False
    scheduler: Any = None
    start_scheduler: bool = True
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    # monotonic time of the last request the storage refused or failed (for /healthz)
    storage_failed_at: float | None = None
    # the embedding model loads in the background: "idle", "loading", "ready" or "failed"
    embedder_state: str = "idle"
    latency: Histogram = field(init=False)
    unhandled: Counter = field(init=False)

    def __post_init__(self) -> None:
        self.latency = Histogram(
            "tiermem_http_request_duration_seconds",
            "HTTP request latency by route",
            ["method", "route", "status"],
            registry=self.registry,
            buckets=LATENCY_BUCKETS,
        )
        self.unhandled = Counter(
            "tiermem_http_unhandled_errors",
            "requests answered 500 (a bug: should be 0)",
            registry=self.registry,
        )
        self.registry.register(_StateCollector(self))

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

    def mem(self) -> Memory:
        if self.memory is None:
            raise HTTPException(503, "the service is starting", headers={"Retry-After": "5"})
        return self.memory

    def scheduler_snapshot(self) -> dict[str, Any] | None:
        if self.scheduler is None:
            return None
        try:
            snap: dict[str, Any] = self.scheduler.snapshot()
            return snap
        except Exception:
            return None


def build_scheduler(memory: Memory) -> Any:
    """A ConsolidationScheduler over `memory`'s log, configured from its Config.
    Raises ImportError when the consolidation package is not there."""
    from tiermem.consolidation import scheduler as sched_mod

    cfg = memory.config
    factory = getattr(memory, "make_scheduler", None)
    if callable(factory):
        return factory()
    maintainer = getattr(memory, "views", None)
    if maintainer is None:
        from tiermem.consolidation.summarize import build_summarizer
        from tiermem.consolidation.views import ViewMaintainer
        from tiermem.tiers.warm import WarmStore

        summarizer = build_summarizer(
            cfg.summarizer,
            tokens=memory.tokens,
            embedder=memory.embedder,
            llm_base_url=cfg.llm_base_url,
            llm_model=cfg.llm_model,
            llm_api_key_env=cfg.llm_api_key_env,
            llm_timeout_s=cfg.llm_timeout_s,
        )
        maintainer = ViewMaintainer(
            memory.cold,
            WarmStore(memory.cold),
            summarizer,
            memory.tokens,
            target_tokens=cfg.summary_target_tokens,
            max_turns_behind=cfg.warm_max_turns_behind,
            max_seconds_behind=cfg.warm_max_seconds_behind,
        )
    return sched_mod.ConsolidationScheduler(
        maintainer, interval_s=cfg.scheduler_interval_s, max_views_per_run=cfg.scheduler_max_views_per_run
    )


# -- ASGI middleware -------------------------------------------------------------------------------


def json_content_type(value: str) -> bool:
    """True for `application/json` and `application/*+json`, with no charset or UTF-8."""
    media, *params = (part.strip().lower() for part in value.split(";"))
    if not (media == "application/json" or (media.startswith("application/") and media.endswith("+json"))):
        return False
    for param in params:
        key, _, val = param.partition("=")
        if key.strip() == "charset" and val.strip().strip('"') not in ("utf-8", "utf8"):
            return False
    return True


class GuardMiddleware:
    """Repeated headers, auth (before any body is read), body size, content type and the
    body checks of `check_json_body` on every non-empty body; then hands the buffered
    body to the app."""

    def __init__(self, app: ASGIApp, runtime: Runtime) -> None:
        self.app = app
        self.runtime = runtime

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        all_headers: dict[str, list[str]] = {}
        for k, v in scope.get("headers", []):
            all_headers.setdefault(k.decode("latin-1").lower(), []).append(v.decode("latin-1"))
        for name in SINGLE_HEADERS:
            if len(all_headers.get(name, ())) > 1:
                # the guard and FastAPI could each read a different copy
                await _send_json(send, 400, {"detail": f"the {name} header is sent more than once; send it once"})
                return
        headers = {k: v[0] for k, v in all_headers.items()}
        path: str = scope.get("path", "")
        if path.startswith("/v1/") and self.runtime.auth.grant(headers.get("authorization")) is None:
            await _send_json(
                send, 401, {"detail": "missing or invalid bearer token"}, [(b"www-authenticate", b"Bearer")]
            )
            return
        limit = self.runtime.config.max_body_bytes
        declared = headers.get("content-length")
        if declared is not None:
            if not declared.strip().isdigit():
                await _send_json(send, 400, {"detail": "invalid Content-Length"})
                return
            if int(declared) > limit:
                await _send_json(send, 413, {"detail": f"request body over the limit of {limit} bytes"})
                return
        chunks: list[bytes] = []
        total = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body = message.get("body", b"")
            total += len(body)
            if total > limit:
                await _send_json(send, 413, {"detail": f"request body over the limit of {limit} bytes"})
                return
            chunks.append(body)
            if not message.get("more_body", False):
                break
        raw = b"".join(chunks)
        if raw:
            # Every body is checked, whatever its Content-Type says: FastAPI parses JSON
            # from a body without one, and a body it would not parse has no business here.
            ctype = headers.get("content-type")
            if ctype is not None and not json_content_type(ctype):
                shown = ctype if len(ctype) <= MAX_ECHO_CHARS else ctype[:MAX_ECHO_CHARS] + "..."
                await _send_json(
                    send, 415, {"detail": f"Content-Type must be application/json (UTF-8), got {shown!r}"}
                )
                return
            try:
                check_json_body(raw)
            except _BodyProblem as p:
                await _send_json(send, 422, _error_body(p.loc, p.msg, p.type))
                return
        sent = False

        async def replay() -> MutableMapping[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": raw, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


class MetricsMiddleware:
    """Request latency per route template (never the raw path: ids stay out of labels)."""

    def __init__(self, app: ASGIApp, runtime: Runtime) -> None:
        self.app = app
        self.runtime = runtime

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_wrapper(message: MutableMapping[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                if status == 201:  # something was written: the storage takes writes again
                    self.runtime.storage_failed_at = None
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        except Exception:
            status = 500
            raise
        finally:
            route = scope.get("route")
            label = getattr(route, "path", None) or "unmatched"
            self.runtime.latency.labels(scope.get("method", ""), label, str(status)).observe(
                time.perf_counter() - start
            )


# -- the app ----------------------------------------------------------------------------------------------


def create_app(
    config: Config,
    memory: Memory | None = None,
    *,
    auth: bool = True,
    namespace: str = DEFAULT_NAMESPACE,
    start_scheduler: bool = True,
) -> FastAPI:
    """The FastAPI app. With `memory=None` a Memory is opened (and warmed) in the
    lifespan and closed at shutdown; a Memory passed in is the caller's to close.
    `auth=False` serves `namespace` to every caller: bind it to loopback only."""
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

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if runtime.memory is None:
            runtime.memory = await run_in_threadpool(Memory, config)
            runtime.owns_memory = True
            # load the embedding model now, not on the first request, but without holding
            # up the start: /healthz answers meanwhile and says "embedder": "loading"
            threading.Thread(target=runtime.warm_embedder, name="tiermem-warm-up", daemon=True).start()
        if runtime.start_scheduler and config.scheduler_enabled:
            try:
                runtime.scheduler = build_scheduler(runtime.memory)
                runtime.scheduler.start()
            except ImportError as exc:
                log.info(
                    "consolidation scheduler not available (%s); warm views are refreshed on demand", exc
                )
                runtime.scheduler = None
            except Exception:
                log.exception("consolidation scheduler failed to start; serving without it")
                runtime.scheduler = None
        try:
            yield
        finally:
            if runtime.scheduler is not None:
                await run_in_threadpool(runtime.scheduler.shutdown, True)
                runtime.scheduler = None
            if runtime.owns_memory and runtime.memory is not None:
                await run_in_threadpool(runtime.memory.close)
                runtime.memory = None

    app = FastAPI(
        title="tiermem",
        version=_version(),
        description="Tiered memory for LLM agents: an append-only log, a budgeted working set and a "
        "per-turn query planner. Every /v1 call needs `Authorization: Bearer <token>`. A token is bound "
        "to a namespace prefix (`acme`) and acts on that namespace and those below it (`acme/user-7`); "
        f"a request names its namespace in the `{NAMESPACE_HEADER}` header (absent: the token's own "
        "prefix). Outside the prefix a conversation route answers 404 exactly like a missing "
        "conversation, and a namespace route 403, whatever the other namespace holds. `/metrics` "
        "needs a token from `metrics_tokens`.",
        lifespan=lifespan,
    )
    app.state.runtime = runtime
    _install_handlers(app, runtime)
    _install_routes(app, runtime)
    app.add_middleware(GuardMiddleware, runtime=runtime)
    app.add_middleware(MetricsMiddleware, runtime=runtime)
    return app


def _version() -> str:
    try:
        from tiermem import __version__

        return __version__
    except ImportError:  # pragma: no cover
        return "0"


def _route_params(request: Request) -> tuple[set[str], set[str]]:
    route = request.scope.get("route")
    dep = getattr(route, "dependant", None)
    if dep is None:
        return set(request.path_params), set(request.query_params)
    return ({p.alias for p in dep.path_params}, {p.alias for p in dep.query_params})


def _install_handlers(app: FastAPI, runtime: Runtime) -> None:
    @app.exception_handler(RequestValidationError)
    async def _pydantic(request: Request, exc: RequestValidationError) -> JSONResponse:
        detail = [
            {
                "loc": list(e.get("loc", ())),
                "msg": str(e.get("msg", "invalid")),
                "type": str(e.get("type", "")),
            }
            for e in exc.errors()
        ]
        return JSONResponse({"detail": detail}, status_code=422)

    @app.exception_handler(ValidationError)
    async def _validation(request: Request, exc: ValidationError) -> JSONResponse:
        loc = _field_loc(exc.field)
        path_params, query_params = _route_params(request)
        where = "path" if loc[0] in path_params else "query" if loc[0] in query_params else "body"
        return JSONResponse(
            _error_body([where, *loc], exc.problem, _snake(type(exc).__name__)), status_code=422
        )

    @app.exception_handler(ConversationNotFound)
    async def _not_found(request: Request, exc: ConversationNotFound) -> JSONResponse:
        # the same body whether it does not exist or belongs to another namespace
        return JSONResponse({"detail": f"conversation {exc.conversation_id!r} not found"}, status_code=404)

    def _storage_answer(request: Request, exc: BaseException) -> JSONResponse | None:
        problem = storage_problem(exc)
        if problem is None:
            return None
        status, detail = problem
        log.warning("%s %s refused by the storage: %s", request.method, request.url.path, exc)
        headers = {}
        if status == 503:
            runtime.storage_failed_at = time.monotonic()
            headers["Retry-After"] = str(STORAGE_RETRY_AFTER_S)
        return JSONResponse({"detail": detail}, status_code=status, headers=headers)

    @app.exception_handler(DriverDatabaseError)
    @app.exception_handler(StorageReadOnly)
    async def _storage(request: Request, exc: Exception) -> JSONResponse:
        answer = _storage_answer(request, exc)
        return answer if answer is not None else await _unexpected(request, exc)

    @app.exception_handler(TiermemError)
    async def _tiermem(request: Request, exc: TiermemError) -> JSONResponse:
        answer = _storage_answer(request, exc)
        if answer is not None:
            return answer
        runtime.unhandled.inc()
        log.error("tiermem error on %s %s: %s", request.method, request.url.path, exc)
        return JSONResponse({"detail": "internal error"}, status_code=500)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        # an OSError of the file system (EROFS, EIO, ENOSPC) met outside SQLite is still
        # the storage refusing, not a bug
        answer = _storage_answer(request, exc)
        if answer is not None:
            return answer
        runtime.unhandled.inc()
        log.exception("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
        return JSONResponse({"detail": "internal error"}, status_code=500)


def cold_health(memory: Memory, failed_at: float | None) -> str:
    """The cold tier's state for /healthz: "ok"; "read-only" when the kernel says this
    process cannot write the database, its sidecars or its directory (read-only mount,
    immutable file, permissions), or the storage refused or failed a request in the
    last STORAGE_FAILURE_MEMORY_S. Raises when the database cannot even be read."""
    memory.cold.namespace_of("healthz")  # a real read; raises when reads fail
    if isinstance(memory.cold.path, pathlib.Path) and not database_writable(memory.cold.path):
        return "read-only"
    if failed_at is not None and time.monotonic() - failed_at < STORAGE_FAILURE_MEMORY_S:
        return "read-only"
    return "ok"


def _install_routes(app: FastAPI, runtime: Runtime) -> None:
    bearer = HTTPBearer(
        auto_error=False, description="a token from auth_tokens; it is bound to a namespace prefix"
    )

    def no_credentials() -> None:
        return None

    # declared so that OpenAPI shows the bearer scheme on each route, only when auth is on
    Creds = Annotated[
        HTTPAuthorizationCredentials | None, Depends(bearer if runtime.auth.enabled else no_credentials)
    ]

    def grant_of(request: Request) -> Grant:
        grant = runtime.auth.grant(request.headers.get("authorization"))
        if grant is None:  # the middleware refused it already; kept for direct callers
            raise HTTPException(401, "missing or invalid bearer token", headers={"WWW-Authenticate": "Bearer"})
        return grant

    def named(header: str | None, grant: Grant) -> str:
        """The request's namespace: the header, validated, else the grant's default."""
        if header is None:
            return grant.default
        try:
            return validate_namespace(header, NAMESPACE_HEADER, runtime.config.max_id_chars)
        except ValidationError as exc:
            raise HTTPException(
                422,
                [{"loc": ["header", NAMESPACE_HEADER], "msg": exc.problem, "type": _snake(type(exc).__name__)}],
            ) from None

    def conversation_scope(
        request: Request,
        creds: Creds,
        x_tiermem_namespace: NsHeader = None,
    ) -> str:
        """Namespace of a conversation route. Outside the token's prefix, the answer of a
        missing conversation (raised before the body is validated, so neither a body nor
        an id can make it differ between outside namespaces)."""
        grant = grant_of(request)
        ns = named(x_tiermem_namespace, grant)
        if not grant.allows(ns):
            conv = request.path_params.get("conversation_id") or request.query_params.get("conversation_id", "")
            raise ConversationNotFound(conv)
        return ns

    def namespace_scope(
        request: Request,
        creds: Creds,
        x_tiermem_namespace: NsHeader = None,
    ) -> str:
        """Namespace of a namespace-level route: outside the prefix, 403, the same for
        every outside namespace."""
        grant = grant_of(request)
        ns = named(x_tiermem_namespace, grant)
        if not grant.allows(ns):
            raise HTTPException(403, f"namespace {ns!r} is outside this token's scope")
        return ns

    def search_scope(
        request: Request,
        creds: Creds,
        x_tiermem_namespace: NsHeader = None,
    ) -> str:
        """/v1/search is a conversation route with `conversation_id`, a namespace route without."""
        if request.query_params.get("conversation_id") is not None:
            return conversation_scope(request, creds, x_tiermem_namespace)
        return namespace_scope(request, creds, x_tiermem_namespace)

    def explicit_namespace(
        request: Request,
        creds: Creds,
        x_tiermem_namespace: NsHeader = None,
    ) -> str:
        """Like `namespace_scope`, but the header is required: a whole namespace is never
        erased by default."""
        if x_tiermem_namespace is None:
            raise HTTPException(
                422,
                [
                    {
                        "loc": ["header", NAMESPACE_HEADER],
                        "msg": "required: name the namespace to erase explicitly",
                        "type": "missing",
                    }
                ],
            )
        return namespace_scope(request, creds, x_tiermem_namespace)

    Ns = Annotated[str, Depends(conversation_scope)]
    SpaceNs = Annotated[str, Depends(namespace_scope)]

    @app.get(
        "/healthz",
        response_model=HealthOut,
        tags=["ops"],
        summary="Liveness and tier health (no auth): the cold tier is ok, read-only or down",
        responses={503: {"model": HealthOut, "description": "the cold tier cannot be read, or starting"}},
    )
    def healthz() -> JSONResponse:
        mem = runtime.memory
        if mem is None:
            return JSONResponse({"status": "starting", "tiers": {}}, status_code=503, headers={"Retry-After": "5"})
        tiers: dict[str, str] = {}
        try:
            tiers["cold"] = cold_health(mem, runtime.storage_failed_at)
        except Exception as exc:
            log.warning("healthz: cold tier failed: %s", exc)
            tiers["cold"] = "down"
        tiers["hot"] = "disabled" if mem.hot is None else ("ok" if mem.hot.healthy else "degraded")
        tiers["scheduler"] = "running" if (runtime.scheduler_snapshot() or {}).get("running") else "off"
        tiers["embedder"] = runtime.embedder_state if runtime.owns_memory else (
            "ready" if embedder_loaded(mem.embedder) else "idle")
        if tiers["cold"] == "down":
            return JSONResponse({"status": "down", "tiers": tiers}, status_code=503)
        # read-only still answers reads: degraded, not down (a restart would not fix it)
        status = "ok" if tiers["cold"] == "ok" else "degraded"
        return JSONResponse({"status": status, "tiers": tiers}, status_code=200)

    @app.get(
        "/metrics",
        response_class=PlainTextResponse,
        tags=["ops"],
        summary="Prometheus metrics: latency per route, tier health, evictions, salvaged rows, scheduler lag",
        description="Counts every namespace, so it needs a token from `metrics_tokens` (a tenant's "
        "token answers 403), unless `metrics_public` is set (loopback only) or auth is off.",
        responses={
            401: {"model": ErrorOut, "description": "no metrics token"},
            403: {"model": ErrorOut, "description": "a tenant token: metrics count every namespace"},
        },
    )
    def metrics(request: Request, creds: Creds) -> PlainTextResponse:
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

    v1 = "/v1/conversations/{conversation_id}"

    @app.post(
        v1 + "/messages",
        response_model=AppendOut,
        status_code=201,
        responses=_APPEND_ERRORS,
        tags=["write"],
        summary="Append one message",
    )
    def append(conversation_id: ConvId, message: MessageIn, ns: Ns) -> AppendOut:
        pos = runtime.mem().append(conversation_id, message, namespace=ns)  # the body as sent, nulls included
        return AppendOut(conversation_id=conversation_id, position=pos)

    @app.post(
        v1 + "/messages:batch",
        response_model=BatchOut,
        status_code=201,
        responses=_APPEND_ERRORS,
        tags=["write"],
        summary="Append messages in one transaction (all or nothing)",
    )
    def append_batch(conversation_id: ConvId, batch: BatchIn, ns: Ns) -> BatchOut:
        positions = runtime.mem().append_many(
            conversation_id,
            list(batch.messages),
            namespace=ns,
            session_id=batch.session_id,
        )
        return BatchOut(conversation_id=conversation_id, positions=positions)

    @app.post(
        v1 + "/context",
        response_model=ContextOut,
        responses=_CONV_ERRORS,
        tags=["read"],
        summary="The slice of the past to send with this turn, under a hard token budget",
    )
    def context(conversation_id: ConvId, body: ContextIn, ns: Ns) -> ContextOut:
        ctx = runtime.mem().context(
            conversation_id,
            body.query,
            body.budget,
            system=body.system,
            namespace_recall=body.namespace_recall,
            namespace=ns,
            truncate_latest=body.truncate_latest,
        )
        return ContextOut(
            messages=finite(ctx.messages),
            tokens=ctx.tokens,
            plan=finite(ctx.plan.to_dict()),
            explain=ctx.plan.explain(),
        )

    @app.get(
        v1 + "/history",
        response_model=HistoryOut,
        responses=_CONV_ERRORS,
        tags=["read"],
        summary="Every message, in order",
    )
    def history(conversation_id: ConvId, ns: Ns) -> HistoryOut:
        msgs = runtime.mem().history(conversation_id, namespace=ns)
        return HistoryOut(conversation_id=conversation_id, messages=[_stored(m) for m in msgs])

    @app.get(
        v1 + "/facts",
        response_model=FactsOut,
        responses=_CONV_ERRORS,
        tags=["read"],
        summary="What the agent believes now: current statements and superseded ones with validity intervals",
    )
    def facts(conversation_id: ConvId, ns: Ns) -> FactsOut:
        got = runtime.mem().facts(conversation_id, namespace=ns)
        return FactsOut(conversation_id=conversation_id, facts=[FactOut(**finite(f.to_json())) for f in got])

    @app.get(
        v1 + "/active",
        response_model=ActiveOut,
        responses=_CONV_ERRORS,
        tags=["read"],
        summary="The latest checkpoint and the messages after it",
    )
    def active(conversation_id: ConvId, ns: Ns) -> ActiveOut:
        view = runtime.mem().active(conversation_id, namespace=ns)
        cp = view.checkpoint
        return ActiveOut(
            conversation_id=conversation_id,
            checkpoint=CheckpointOut(**finite(asdict(cp))) if cp is not None else None,
            messages=[_stored(m) for m in view.messages],
        )

    @app.post(
        v1 + "/fork",
        response_model=ForkOut,
        status_code=201,
        responses=_CONV_ERRORS,
        tags=["write"],
        summary="A new conversation holding positions 0..up_to of this one",
    )
    def fork(conversation_id: ConvId, body: ForkIn, ns: Ns) -> ForkOut:
        if body.new_id is not None:  # Memory names this field conversation_id; the caller sent new_id
            validate_id(body.new_id, "new_id", runtime.config.max_id_chars)
        child = runtime.mem().fork(conversation_id, body.up_to, new_id=body.new_id, namespace=ns)
        return ForkOut(conversation_id=child, parent_id=conversation_id, up_to=body.up_to)

    @app.post(
        v1 + "/pins",
        response_model=PinOut,
        responses=_CONV_ERRORS,
        tags=["write"],
        summary="Keep a turn in the working set whatever the eviction pressure",
    )
    def pin(conversation_id: ConvId, body: PinIn, ns: Ns) -> PinOut:
        runtime.mem().pin(conversation_id, body.position, priority=body.priority, namespace=ns)
        return PinOut(
            conversation_id=conversation_id, position=body.position, pinned=True, priority=body.priority
        )

    @app.delete(
        v1 + "/pins/{position}",
        response_model=PinOut,
        responses=_CONV_ERRORS,
        tags=["write"],
        summary="Remove an explicit pin",
    )
    def unpin(
        conversation_id: ConvId, position: Annotated[int, Path(ge=0, le=MAX_POSITION)], ns: Ns
    ) -> PinOut:
        runtime.mem().unpin(conversation_id, position, namespace=ns)
        return PinOut(conversation_id=conversation_id, position=position, pinned=False, priority=None)

    @app.post(
        v1 + "/checkpoints",
        response_model=CheckpointOut,
        status_code=201,
        responses=_CONV_ERRORS,
        tags=["write"],
        summary="Fold: a summary stands in for positions <= position (deletes nothing)",
    )
    def checkpoint(conversation_id: ConvId, body: CheckpointIn, ns: Ns) -> CheckpointOut:
        cp = runtime.mem().checkpoint(conversation_id, body.summary, body.position, namespace=ns)
        return CheckpointOut(**finite(asdict(cp)))


    @app.delete(
        v1,
        response_model=ErasureOut,
        responses=_CONV_ERRORS,
        tags=["write"],
        summary="Erase a conversation: its messages and every derived byte; a tombstone keeps counts only",
        description="The right to erasure for one conversation: messages, turns, search and vector "
        "rows, summaries, checkpoints, plans, pins and its hot-tier keys go in one action, disk is "
        "reclaimed, and a tombstone records id, namespace, time and counts (no content). 404 when the "
        "conversation does not exist in the request's namespace (or the namespace is outside the "
        "token's prefix), with the body of a missing conversation.",
    )
    def delete_conversation(conversation_id: ConvId, ns: Ns) -> ErasureOut:
        return _erasure(runtime.mem().delete_conversation(conversation_id, namespace=ns))

    @app.post(
        "/v1/prune",
        response_model=PruneOut,
        responses=_NS_ERRORS,
        tags=["write"],
        summary="Delete this namespace's conversations idle for longer than older_than_seconds",
    )
    def prune(body: PruneIn, ns: SpaceNs) -> PruneOut:
        report = runtime.mem().prune(body.older_than_seconds, namespace=ns)
        return PruneOut(
            conversations=report.conversations,
            messages=report.messages,
            conversation_ids=list(report.conversation_ids),
        )

    @app.delete(
        "/v1/namespace",
        response_model=ErasureOut,
        responses=_NS_ERRORS,
        tags=["write"],
        summary=f"Erase the namespace named by {NAMESPACE_HEADER} and every namespace below it",
        description=f"The right to erasure for a user or tenant: every conversation of the namespace "
        f"named in the `{NAMESPACE_HEADER}` header and of the namespaces below it is erased as by "
        "`DELETE /v1/conversations/{id}`. The header is required (422 without it): a namespace is never "
        "erased by default. 403 when it is outside the token's prefix.",
    )
    def delete_namespace(ns: Annotated[str, Depends(explicit_namespace)]) -> ErasureOut:
        return _erasure(runtime.mem().delete_namespace(ns))

    @app.get(
        "/v1/conversations",
        response_model=ConversationsOut,
        responses=_NS_ERRORS,
        tags=["read"],
        summary="This namespace's conversations",
    )
    def conversations(ns: SpaceNs) -> ConversationsOut:
        return ConversationsOut(namespace=ns, conversations=runtime.mem().conversations(ns))

    @app.get(
        "/v1/search",
        response_model=SearchOut,
        responses={**_CONV_ERRORS, **_NS_ERRORS},
        tags=["read"],
        summary="Hybrid search (vectors + bm25) in one conversation, or across the namespace",
    )
    def search(
        ns: Annotated[str, Depends(search_scope)],
        q: Annotated[str, Query(description="free text; search syntax is not interpreted")],
        conversation_id: Annotated[
            str | None, Query(description="omit to search the whole namespace")
        ] = None,
        k: Annotated[int, Query(ge=1, le=MAX_SEARCH_K)] = 10,
    ) -> SearchOut:
        try:
            hits = runtime.mem().search(conversation_id, q, k, namespace=ns)
        except ValidationError as exc:
            if exc.field == "query":
                raise ValidationError("q", exc.problem) from None
            raise
        return SearchOut(
            hits=[
                SearchHitOut(
                    conversation_id=h.conversation_id,
                    position=h.position,
                    score=h.score if math.isfinite(h.score) else 0.0,
                    ranks=dict(h.ranks),
                    text=h.text,
                )
                for h in hits
            ]
        )

    @app.get(
        "/v1/stats",
        response_model=StatsOut,
        responses=_NS_ERRORS,
        tags=["read"],
        summary="Counts and tier health for this namespace",
    )
    def stats(ns: SpaceNs) -> StatsOut:
        raw = runtime.mem().stats(namespace=ns)
        cold = {k: raw["cold"].get(k) for k in ("conversations", "messages", "pending_embeddings")}
        hot = None
        if raw.get("hot") is not None:
            h = raw["hot"]
            hot = {
                k: h.get(k)
                for k in (
                    "healthy",
                    "backend",
                    "tokens",
                    "members",
                    "pins",
                    "evictions",
                    "overflow_tokens",
                    "demoted_pins",
                )
            }
        snap = runtime.scheduler_snapshot()
        sched = (
            None
            if snap is None
            else {k: snap.get(k) for k in ("running", "interval_s", "lag_turns", "lag_seconds")}
        )
        return StatsOut(namespace=ns, cold=finite(cold), hot=finite(hot), scheduler=finite(sched))

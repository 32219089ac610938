"""The HTTP service's request and response models, its path-parameter annotations, the
error responses each kind of route documents, and the conversions of library records into
response bodies.

Invariants: every request model forbids unknown fields (except `MessageIn`, whose extra
fields are the message body, checked by tiers.formats), bounds every number the store
keeps (`MAX_POSITION`, `MAX_CREATED_AT`) or the library takes (`MAX_AGE_S`), so its 422
names the field as sent, and refuses NaN/Infinity; every request model is strict
(`strict=True`): a number field takes a JSON number alone (an integer field no fraction,
not even `5.0`; a float field an integer too), a boolean field `true`/`false` alone, as the
library refuses what is not one (`check_int`, `Memory.prune`). Pydantic's lax mode read
`true` as 1 and `"5"` as 5: a prune of `true` erased every conversation idle for a second.
The path and query parameters are text by nature and parse as numbers. Every response body
is finite JSON (`finite`): no NaN, no Infinity, whatever a stored row holds. A
`format` field picks the wire format of the messages a route takes or answers: OpenAI's
(the default, whose answers are the same as before the field existed) or Anthropic's,
converted by `tiermem.adapters.anthropic` alone, so HTTP and the library agree.
A conversation's incarnation is answered as an opaque token (`incarnation_token`, the
library's own: `Memory.append_outcome` answers it), never as the store's key: the key is
the bare name the first time the name is used anywhere in the database, so a tenant would
read from it whether its id is, or was, used elsewhere. A token sent back goes to the
library as it came, which alone turns it into the key it stands for.
"""

import math
import re
from collections.abc import Iterable
from typing import Annotated, Any, Literal

from fastapi import Path
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from tiermem.config import DEFAULT_MAX_ID_CHARS, MAX_ID_CHARS_LIMIT
from tiermem.memory import (
    DEFAULT_BUDGET_TOKENS,
    DEFAULT_PIN_PRIORITY,
    MAX_AGE_S,
    MAX_BATCH_MESSAGES,
    MAX_BUDGET_TOKENS,
    MAX_PIN_PRIORITY,
    MAX_SEARCH_K,
    MIN_PIN_PRIORITY,
)
from tiermem.planner.plan import MAX_BREAKPOINTS
from tiermem.tiers.files import INCOMPLETE_REQUEST_TEXT
from tiermem.tiers.models import (
    ID_PATTERN,
    INCARNATION_PATTERN,
    MAX_JSON_DEPTH,
    MAX_POSITION,
    MAX_TIMESTAMP,
    SESSION_MAX_CHARS,
    ErasureReport,
    Message,
    StoredMessage,
    check_session_chars,
)
from tiermem.tiers.zones import MAX_ZONE_NAME_CHARS, TIMEZONE_DOC

MAX_CREATED_AT = MAX_TIMESTAMP  # the last instant a datetime can show (tiers.models)
# Ids are documented with their pattern but validated by Memory, whose message is clearer:
# every id a request names carries the pattern (path ids, a fork's new id, a search's
# conversation, a page cursor), as the server refuses any other.
ID_SCHEMA: dict[str, Any] = {"pattern": ID_PATTERN.pattern, "maxLength": DEFAULT_MAX_ID_CHARS}
ID_DOC = "ASCII letters, digits and . _ : @ - (not starting with . or -)"
# an id a request only looks up (a search's conversation, a page cursor): any id a config
# may have written under (MAX_ID_CHARS_LIMIT), as Memory reads it: a conversation made
# before max_id_chars was lowered is still found (`Memory._conv`)
LOOKUP_ID_SCHEMA: dict[str, Any] = {**ID_SCHEMA, "maxLength": MAX_ID_CHARS_LIMIT}
ConvId = Annotated[str, Path(description=f"conversation id: {ID_DOC}", json_schema_extra=ID_SCHEMA)]

# the wire formats of messages; OpenAI's is the default, what every route spoke before
MessageFormat = Literal["openai", "anthropic"]
OPENAI_FORMAT: MessageFormat = "openai"
# the appends' optional request header (IETF draft "The Idempotency-Key HTTP Header Field"),
# and the header of an answer that replays the first one given under that key
IDEMPOTENCY_HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
_INCARNATION_DOC = ("the conversation's incarnation as an append answered it (`incarnation`): written only if "
                    "the conversation is still that one, not erased or pruned (and written again) since; needs "
                    "`expect_position`")
_POSITION_DOC = ("written only if the conversation goes on at this position (holds positions 0..n-1; 0: it "
                 "does not exist yet), else 409 and nothing written")
# to_anthropic's `thinking` (its THINKING_SCOPES, which a test holds this equal to)
ThinkingScope = Literal["current_loop", "all"]


# -- request and response models ---------------------------------------------------------------


class MessageIn(Message):
    """One message in any OpenAI format (a Chat Completions message or a Responses input
    item: tiers.formats) plus tiermem's envelope fields."""

    # extra="allow": the body is every field that is not the envelope; tiers.formats refuses
    # unknown ones by name
    model_config = ConfigDict(extra="allow", frozen=True, allow_inf_nan=False, strict=True)
    # Bounded so that every stored time still converts to a date (year <= 9999) when
    # plans and summaries render it; the library model only requires >= 0.
    created_at: float | None = Field(None, ge=0, le=MAX_CREATED_AT, description="unix seconds; default: now")

    @model_validator(mode="after")
    def _shape(self) -> "MessageIn":
        # overrides Message._shape, which checks the body: Memory.append checks it
        # (tiers.formats), and its error names the field: a 422 whose loc points at it, not
        # at the whole body. The session id's characters: Message's field validator
        return self


def _needs_position(value: str | None, info: ValidationInfo) -> str | None:
    # a refused expect_position is absent from info.data: that refusal alone is reported
    if value is not None and "expect_position" in info.data and info.data["expect_position"] is None:
        raise ValueError("needs expect_position (the position the conversation goes on at)")
    return value


class ConditionalMessageIn(MessageIn):
    """The single-message append's body: the message and its envelope, and the append's
    own conditions (declared fields, so never part of the stored body)."""

    expect_position: int | None = Field(None, ge=0, le=MAX_POSITION, description=_POSITION_DOC)
    expect_incarnation: str | None = Field(None, pattern=INCARNATION_PATTERN, description=_INCARNATION_DOC)

    _incarnation_needs_position = field_validator("expect_incarnation")(_needs_position)


class BatchIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    messages: list[MessageIn] = Field(min_length=1, max_length=MAX_BATCH_MESSAGES, description=(
        "OpenAI-format messages; with `format: \"anthropic\"`, Anthropic MessageParams or replies, each "
        "stored as the OpenAI messages `from_anthropic` makes of it (its envelope fields on every one)"))
    session_id: str | None = Field(
        None, min_length=1, max_length=SESSION_MAX_CHARS, description="applied to every message of the batch"
    )
    format: MessageFormat = Field(OPENAI_FORMAT, description=(
        "the format of `messages`: `openai` (Chat Completions messages or Responses items) or `anthropic` "
        "(Messages API `{role, content}` params or whole replies, `id`/`model`/`usage` kept in metadata)"))

    expect_position: int | None = Field(None, ge=0, le=MAX_POSITION, description=_POSITION_DOC)
    expect_incarnation: str | None = Field(None, pattern=INCARNATION_PATTERN, description=_INCARNATION_DOC)

    # refused here, located at the batch's own field (each message would name it as its own)
    _session_chars = field_validator("session_id")(check_session_chars)
    _incarnation_needs_position = field_validator("expect_incarnation")(_needs_position)


class ContextIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    query: str | None = Field(None, description="the new turn's question; None: plan from the log alone")
    budget: int = Field(DEFAULT_BUDGET_TOKENS, ge=1, le=MAX_BUDGET_TOKENS, description="hard cap on the returned tokens")
    system: str | None = Field(None, description="a system message to put first")
    namespace_recall: bool = Field(
        True, description="also retrieve from this namespace's other conversations"
    )
    truncate_latest: bool = Field(
        False, description="cut the latest user message instead of failing when it alone exceeds the budget"
    )
    format: MessageFormat = Field(OPENAI_FORMAT, description=(
        "the answer's format: `openai` (`messages` ready for Chat Completions) or `anthropic` (`system` and "
        "`messages` ready for Anthropic's `messages.create`, thinking blocks and metadata restored)"))
    # None: the adapter's default; refused with format openai, where they mean nothing
    thinking: ThinkingScope | None = Field(None, description=(
        "format anthropic only: whose thinking blocks go back, `current_loop` (default: the current tool "
        "loop's, what models with preserved thinking accept) or `all`"))
    max_breakpoints: int | None = Field(None, ge=0, le=MAX_BREAKPOINTS, description=(
        f"format anthropic only: at most this many `cache_control` marks (default {MAX_BREAKPOINTS}, "
        f"Anthropic's limit; less the marks your tools carry)"))
    # checked by Memory.context (tiers.zones.check_timezone): a 422 naming `timezone`
    timezone: str | None = Field(None, max_length=MAX_ZONE_NAME_CHARS, description=TIMEZONE_DOC)
    pending_tokens: int = Field(0, ge=0, le=MAX_BUDGET_TOKENS, description=(
        "tokens you send after the context, a message not stored yet (a streamed Agents run's question): the "
        "context is planned under `budget` less them, while the prompt-cache epoch stays keyed by `budget`"))


class ForkIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    up_to: int = Field(ge=0, le=MAX_POSITION, description="last position copied into the fork")
    new_id: str | None = Field(
        None,
        description=f"id of the new conversation (default: generated): {ID_DOC}",
        json_schema_extra=ID_SCHEMA,
    )


class PinIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    position: int = Field(ge=0, le=MAX_POSITION)
    priority: int = Field(DEFAULT_PIN_PRIORITY, ge=MIN_PIN_PRIORITY, le=MAX_PIN_PRIORITY, description="lowest priorities are demoted first under pressure")


class CheckpointIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    summary: str = Field(min_length=1, description="stands in for positions <= position")
    position: int = Field(ge=0, le=MAX_POSITION)


class PruneIn(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)
    # bounded here as Memory.prune bounds it: the library's refusal names its own argument,
    # `older_than`, which the caller never sent
    older_than_seconds: float = Field(
        ge=0,
        le=MAX_AGE_S,
        description="delete whole conversations of this namespace idle for longer than this many seconds "
        "(whose last message is older; a fork's creation counts as activity too)",
    )
    dry_run: bool = Field(False, description="true: erase nothing; answer what a prune would erase now")


_INCARNATION_OUT_DOC = ("the conversation's incarnation the message(s) went to, an opaque token: pass it as "
                        "`expect_incarnation` to chain conditional appends")


class AppendOut(BaseModel):
    conversation_id: str
    position: int
    incarnation: str = Field(description=_INCARNATION_OUT_DOC)


class BatchOut(BaseModel):
    conversation_id: str
    positions: list[int]
    incarnation: str = Field(description=_INCARNATION_OUT_DOC)


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
    # with `limit`: the `after` of the next page, null when this page reaches the end
    next_after: int | None = None


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
    # forbid: an Anthropic answer (more fields) never validates as this one in the union
    model_config = ConfigDict(extra="forbid")
    messages: list[dict[str, Any]] = Field(description="OpenAI-format messages, ready to send")
    tokens: int = Field(description="exact token count of `messages`, never above the budget")
    plan: dict[str, Any] = Field(description="every slice, why it was chosen, what was left out")
    explain: str = Field(description="the plan as text")


class AnthropicContextOut(BaseModel):
    """The context with `format: "anthropic"`: `to_anthropic`'s request, with the plan."""

    model_config = ConfigDict(extra="forbid")
    format: Literal["anthropic"] = Field(description="the answer's format, as asked")
    system: list[dict[str, Any]] = Field(description="Anthropic `system` text blocks (empty: send no system)")
    messages: list[dict[str, Any]] = Field(description="Anthropic messages, user and assistant alternating")
    tokens: int = Field(description=(
        "exact token count of what this request sends: the plan's tokens, the current tool loop's thinking "
        "blocks the API requires, and blocks kept whole (documents, citations); above the budget only where "
        "the API requires it, said in `notes` (the plan's own count is `plan.tokens`, never above the budget)"))
    notes: list[str] = Field(default_factory=list, description=(
        "what `tokens` holds beyond the plan, one line each: thinking that takes the request past the "
        "budget, a document counted at an estimate (`to_anthropic`'s `notes`); empty: nothing to say"))
    plan: dict[str, Any] = Field(description="every slice, why it was chosen, what was left out")
    explain: str = Field(description="the plan as text")
    breakpoints: list[dict[str, Any]] = Field(description=(
        "where the plan's breakpoints are in this request: `message` (an index of `messages`, or \"system\"), "
        "`block` (an index of its content, or of `system`), `layer`, `tokens`; every one, marked or not "
        "(the plan's `breakpoints` index the OpenAI form)"))


class ForkOut(BaseModel):
    conversation_id: str
    parent_id: str
    up_to: int


class PinOut(BaseModel):
    conversation_id: str
    position: int
    pinned: bool
    priority: int | None


class ErasureOut(BaseModel):
    conversations: int = Field(description="conversations erased")
    messages: int = Field(description="messages erased with them")
    scrubbed: bool = Field(
        description="no data file holds an erased byte any more; false: the rows are gone but their bytes wait "
                    "for the store's next write (SQLite WAL held by a reader) or its next open or erasure (PostgreSQL)"
    )
    tombstones: list[dict[str, Any]] = Field(
        description="one per erased conversation: id, namespace, time and counts, no content"
    )
    wal_truncated: bool = Field(
        description="the write-ahead log holds no erased byte any more; false on SQLite while another "
                    "process's read transaction held the WAL (its old frames stay until the store's next "
                    "write or close), and always false on PostgreSQL, whose WAL (pg_wal/, its archives "
                    "and replicas) keeps the records until its segments are recycled"
    )


class NamespacedIdOut(BaseModel):
    """One conversation of a report, by namespace and id (a tombstone's two fields)."""

    namespace: str
    id: str


class PruneOut(ErasureOut):
    """A prune's answer: an erasure's (a prune erases as `DELETE /v1/conversations/{id}` does,
    so it answers `scrubbed` and the tombstones too), with the names of the conversations."""

    conversations: int = Field(description="conversations pruned")
    conversation_ids: list[str] = Field(description="the pruned conversations' names")
    namespaced_ids: list[NamespacedIdOut] = Field(
        default_factory=list, description="the same conversations, in the same order, each with its namespace "
        "(a dry run has no tombstone to say it)")
    dry_run: bool = Field(False, description="true: nothing was erased (the request's dry_run); the counts and "
                          "names are what a prune would erase now, `scrubbed` and `wal_truncated` are false "
                          "(nothing rewritten nor truncated) and there is no tombstone")


class ConversationsOut(BaseModel):
    namespace: str
    conversations: list[str]
    # the `after` of the next page, null when this page reaches the end
    next_after: str | None = None


DEFAULT_SEARCH_K = 10  # hits /v1/search returns when the caller names no k


class SearchIn(BaseModel):
    """The body of `POST /v1/search`: the query travels in the body, so it stays out of
    URLs and the logs that record them."""

    model_config = ConfigDict(extra="forbid", strict=True)
    q: str = Field(description="free text; search syntax is not interpreted")
    conversation_id: str | None = Field(None, description=f"omit to search the whole namespace: {ID_DOC}",
                                        json_schema_extra=LOOKUP_ID_SCHEMA)
    k: int = Field(DEFAULT_SEARCH_K, ge=1, le=MAX_SEARCH_K, description="how many hits")


class SearchHitOut(BaseModel):
    conversation_id: str
    position: int
    score: float
    ranks: dict[str, int]
    text: str
    # optional, for clients of the service before they were answered: null there
    status: Literal["current", "superseded", "superseded_in_part"] | None = Field(None, description=(
        "what the hit's conversation holds of this message now, as `facts` says it: `current`, "
        "`superseded` (a later message replaced or retracted all of it: `valid_until`) or "
        "`superseded_in_part` (some of its statements: `facts` names them). The hits are ranked "
        "by relevance alone: a superseded message is marked, not moved"))
    valid_until: ValidUntil | None = Field(None, description=(
        "when `status` is `superseded`: the message (`position`, `superseded_by`) and time that "
        "superseded it, as a fact's `valid_until`; null otherwise"))


class SearchOut(BaseModel):
    hits: list[SearchHitOut]
    degraded: str | None = Field(None, description=(
        "why the hits are ranked by keywords (BM25) only: the embedding model cannot be used "
        "(its error's type); null when ranked by meaning and keywords"))
    vectors_pending: int = Field(0, ge=0, description=(
        "turns in the search's scope without a vector yet (a bulk import's backlog past the one "
        "catch-up pool a search embeds inline, left to the background indexer): ranked by keywords "
        "only until then; 0 when the ranking by meaning saw every turn"))


class StatsOut(BaseModel):
    namespace: str
    cold: dict[str, Any]
    hot: dict[str, Any] | None
    scheduler: dict[str, Any] | None


class LimitsOut(BaseModel):
    """What this service refuses past (`GET /v1/limits`), each field named as the
    setting (`Config`) or library constant it comes from; the route fills it from one
    map (`tiermem.service.routes.limits`), so nothing here restates a value."""

    model_config = ConfigDict(extra="forbid")
    max_content_bytes: int = Field(description="config: UTF-8 bytes of one message's text (and of a query, "
                                   "a system message, a checkpoint summary)")
    max_metadata_bytes: int = Field(description="config: bytes of one message's metadata, as JSON")
    max_body_bytes: int = Field(description="config: bytes of one request body (413 past it)")
    max_id_chars: int = Field(description=(
        "config: characters of a conversation id, and of a whole namespace (all its levels and the `/` between "
        "them, as sent in X-Tiermem-Namespace)"))
    max_batch_messages: int = Field(description="messages in one `messages:batch` request")
    max_budget_tokens: int = Field(description="the largest `budget` of a context")
    max_history_page: int = Field(description="the largest `limit` of a history page")
    max_conversations_page: int = Field(description="the largest `limit` of a page of conversation ids")
    max_search_k: int = Field(description="the largest `k` of a search")
    max_json_depth: int = Field(description="levels a message may nest (the message itself level 1)")
    max_namespace_depth: int = Field(description="levels of a namespace (`acme/user-7` has 2)")
    session_max_chars: int = Field(description="characters of a `session_id`")
    max_breakpoints: int = Field(description="the largest `max_breakpoints` of an Anthropic context")
    idempotency_keys: bool = Field(description=f"the appends honour an `{IDEMPOTENCY_HEADER}` header: a "
                                   "request sent again under its key is stored once (an older server "
                                   "ignores the header and does not say this)")
    max_idempotency_key_chars: int = Field(description=f"characters of an `{IDEMPOTENCY_HEADER}` (visible "
                                           "ASCII only)")
    conditional_appends: bool = Field(description="the appends take `expect_position` and `expect_incarnation` "
                                      "(409 on a mismatch, nothing written); an older server refuses the fields "
                                      "(422) and does not say this")
    max_json_int_digits: int = Field(description="digits of one JSON integer anywhere in a request body (a "
                                     "message's content, its metadata, a tool call's input; its sign not counted): "
                                     "422 past it, naming where (an older server does not say this)")


class HealthOut(BaseModel):
    status: str
    tiers: dict[str, str]
    reasons: dict[str, str] = Field(default_factory=dict, description=(
        "why a tier is down, where tiermem knows and it holds no secret: the hot tier's is Redis refusing "
        "tiermem (a wrong or missing password, an ACL user without a command it needs), or the type of the "
        "error that kept it from starting (a read-only data dir, no redis-server); the embedder's, while "
        "it is degraded, the type of the error its model's load raised"))


class ErrorOut(BaseModel):
    detail: str


class UnavailableOut(ErrorOut):
    written: bool | None = Field(None, description=(
        "false when the storage refused before writing anything (busy, read-only): a retry cannot apply the "
        "write twice; absent when that is not certain (a lost database connection, a failing disk, a "
        "starting service)"))


class PositionMismatchOut(ErrorOut):
    """A conditional append's 409: what the append expected and what it found."""

    type: Literal["position_mismatch"]
    conversation_id: str
    expected_position: int
    found_position: int | None = Field(description=(
        "the position the conversation goes on at now; null when it is not the incarnation expected (erased or "
        "pruned since, whether or not the id was written again, or a token it never had)"))
    expected_incarnation: str | None = Field(description="the `expect_incarnation` sent, null when none was")
    found_incarnation: str | None = Field(description=(
        "the conversation's incarnation now, null when no conversation of that id exists"))


class ErrorItem(BaseModel):
    loc: list[str | int]
    msg: str
    type: str


class ValidationErrorOut(BaseModel):
    detail: list[ErrorItem]


_RETRY_AFTER = {"Retry-After": {"description": "seconds to wait before retrying", "schema": {"type": "integer"}}}
# What the guard middleware (service.guard) answers on any route, before the route runs:
# the checks of the request's headers and body (/healthz included) ...
BODY_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorOut, "description": "a header sent twice (Content-Type, Authorization, Host, Origin, ...), "
                                            "an invalid Content-Length, or both Content-Length and "
                                            "Transfer-Encoding (the connection is closed, nothing written)"},
    408: {"model": ErrorOut, "description": "the request body did not arrive whole within http_body_timeout_s; "
                                            "the connection is closed, nothing written"},
    413: {"model": ErrorOut, "description": "request body over max_body_bytes"},
    415: {"model": ErrorOut, "description": "a body that is not application/json in UTF-8"},
    422: {"model": ValidationErrorOut, "description": "invalid input, naming the field; nothing written"},
}
# ... its Host and Origin checks (every route but /healthz) ...
HOST_ERRORS: dict[int | str, dict[str, Any]] = {
    403: {"model": ErrorOut, "description": "a request from a page of another origin (Origin header)"},
    421: {"model": ErrorOut, "description": "a Host header naming none of this service's names "
                                            "(http_allowed_hosts)"},
}
# ... and, on /v1, the bearer token
GUARD_ERRORS: dict[int | str, dict[str, Any]] = {
    **BODY_ERRORS,
    **HOST_ERRORS,
    401: {"model": ErrorOut, "description": "missing or invalid bearer token"},
}
# a /v1 route that reaches the storage
ERRORS: dict[int | str, dict[str, Any]] = {
    **GUARD_ERRORS,
    503: {
        "model": UnavailableOut,
        "description": "the storage is busy, read-only, failing or unreachable (or the service is starting); "
                       "'written': false when nothing was written. Also (no Retry-After) another process on the "
                       "store embeds with another embedding_model than this service's: "
                       "the detail names both models and widths",
        "headers": _RETRY_AFTER,
    },
    507: {"model": ErrorOut, "description": "the disk (or the database's size cap) is full; nothing written"},
}
# conversation routes: outside the token's prefix, exactly the answer of a missing conversation
CONV_ERRORS = {
    **ERRORS,
    404: {
        "model": ErrorOut,
        "description": "no such conversation in this namespace; the same answer, body included, when "
        "the namespace is outside the token's prefix",
    },
}
# namespace routes: outside the token's prefix, 403, the same for every outside namespace
NS_ERRORS = {
    **ERRORS,
    403: {"model": ErrorOut, "description": "the namespace is outside this token's prefix; or "
                                            f"{HOST_ERRORS[403]['description']}"},
}


def as_json(errors: dict[int | str, dict[str, Any]]) -> dict[int | str, dict[str, Any]]:
    """`errors` declared `application/json` on a route whose own answer is another type
    (/metrics, text/plain): FastAPI declares a `model` in the route's media type, while
    every refusal is JSON. The schemas are the models' components, which the routes that
    declare them by `model` put in the document."""
    out: dict[int | str, dict[str, Any]] = {}
    for status, entry in errors.items():
        rest = {k: v for k, v in entry.items() if k != "model"}
        model: type[BaseModel] = entry["model"]
        out[status] = {**rest, "content": {"application/json": {
            "schema": {"$ref": f"#/components/schemas/{model.__name__}"}}}}
    return out


# every route: a method its path does not take (the router's answer, `handlers.method_not_allowed`),
# JSON on /metrics too (as_json), so declared on every operation of the path
METHOD_NOT_ALLOWED: dict[int | str, dict[str, Any]] = as_json({
    405: {"model": ErrorOut, "description": "a method this path does not take (another than its operations'); "
                                            "`Allow` lists those it takes",
          "headers": {"Allow": {"description": "the methods this path takes, comma-separated",
                                "schema": {"type": "string"}}}},
})


# the erasures (`handlers.SEVERAL_TRANSACTION_ROUTES`) commit in batches: a storage refusal
# partway leaves the earlier batches erased, so their 503 and 507 never say "nothing
# written" (and carry no `written`): they say what the answer itself says
def several_transaction_errors(errors: dict[int | str, dict[str, Any]]) -> dict[int | str, dict[str, Any]]:
    """`errors` with the 503 and 507 of a route that commits in several transactions."""
    return {
        **errors,
        503: {
            "model": UnavailableOut,
            "description": "the storage is busy, read-only, failing or unreachable (or the service is starting); "
                           f"{INCOMPLETE_REQUEST_TEXT}; no 'written' field",
            "headers": _RETRY_AFTER,
        },
        507: {"model": ErrorOut,
              "description": f"the disk (or the database's size cap) is full; {INCOMPLETE_REQUEST_TEXT}"},
    }


CONV_ERASURE_ERRORS = several_transaction_errors(CONV_ERRORS)
NS_ERASURE_ERRORS = several_transaction_errors(NS_ERRORS)
# ids are per namespace: an append never meets another namespace's id
APPEND_ERRORS = {
    **CONV_ERRORS,
    422: {"model": ValidationErrorOut, "description": (
        f"invalid input, naming the field; nothing written. Also a malformed `{IDEMPOTENCY_HEADER}`, or one "
        "this conversation already holds for a different request (`type` `idempotency_key_reused`): "
        f"`loc` is `[\"header\", \"{IDEMPOTENCY_HEADER}\"]`")},
    409: {"model": PositionMismatchOut, "description": (
        "a conditional append (`expect_position`, `expect_incarnation`) found the conversation elsewhere or "
        "another incarnation: nothing written. Read the log again, and append from what it holds")},
}
# the appends' 201: a replay under an idempotency key says so (the body is the first answer's)
APPENDED: dict[int | str, dict[str, Any]] = {
    201: {"description": "appended; or, sent again under the same idempotency key, the first answer again",
          "headers": {REPLAYED_HEADER: {
              "description": f"`true` when this answer replays the first one given under the request's "
                             f"`{IDEMPOTENCY_HEADER}` (nothing was stored now); absent otherwise",
              "schema": {"type": "string", "enum": ["true"]}}}},
}


# -- conversions into response bodies -------------------------------------------------------


# Levels of nesting a response value is rendered to. Whatever is stored since
# MAX_JSON_DEPTH was enforced on every way in nests at most that; this leaves room for the
# response's own wrapping (a list of messages, a plan's slices). A row an older version
# stored deeper (the library took any depth) is rendered down to here and the rest shown as
# DEEP_VALUE_MARKER: past 255 levels pydantic's serializer fails, and every read of the
# conversation answered 500. The stored row is never changed (export has it whole).
MAX_RENDER_DEPTH = 4 * MAX_JSON_DEPTH
DEEP_VALUE_MARKER = f"[tiermem: not rendered, nested deeper than {MAX_RENDER_DEPTH} levels]"


def finite(value: Any, max_depth: int = MAX_RENDER_DEPTH) -> Any:
    """`value` as finite JSON: every non-finite float replaced by None (JSON has no
    NaN/Infinity), tuples as lists, and every value nested deeper than `max_depth` (the
    value itself is at 0) replaced by `DEEP_VALUE_MARKER`. Iterative: a stored value of
    any depth is answered without recursion."""
    root: list[Any] = [None]
    # (the node, the container its copy goes into, the key or index there, its depth)
    stack: list[tuple[Any, Any, Any, int]] = [(value, root, 0, 0)]
    while stack:
        node, parent, key, depth = stack.pop()
        out: Any = node
        if depth > max_depth:
            out = DEEP_VALUE_MARKER
        elif isinstance(node, float):
            out = node if math.isfinite(node) else None
        elif isinstance(node, dict):
            out = dict.fromkeys(node)  # the keys in order; each value filled in below
            stack.extend((v, out, k, depth + 1) for k, v in node.items())
        elif isinstance(node, list | tuple):
            out = [None] * len(node)
            stack.extend((v, out, i, depth + 1) for i, v in enumerate(node))
        parent[key] = out
    return root[0]


def stored_out(m: StoredMessage) -> StoredMessageOut:
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


def erasure_out(report: ErasureReport) -> ErasureOut:
    """The HTTP form of an `ErasureReport` (tiers.cold)."""
    return ErasureOut(
        conversations=report.conversations,
        messages=report.messages,
        scrubbed=report.scrubbed is True,  # None (not known) only where a client read an older server
        tombstones=[finite(dict(t)) for t in report.tombstones],
        wal_truncated=report.wal_truncated is True,  # None (not known) only where a client read an older server
    )


def prune_out(report: ErasureReport) -> PruneOut:
    """The HTTP form of a prune's `ErasureReport`: the erasure's, with the names; a
    preview's (`dry_run`) says no work was done (`scrubbed`, `wal_truncated` false)."""
    return PruneOut(**erasure_out(report).model_dump(), conversation_ids=list(report.conversation_ids),
                    namespaced_ids=[NamespacedIdOut(**one) for one in report.named()], dry_run=report.dry_run)


def error_body(loc: Iterable[str | int], msg: str, type_: str) -> dict[str, Any]:
    """A 422 body of one error item, shaped like FastAPI's own (`ValidationErrorOut`)."""
    return {"detail": [{"loc": list(loc), "msg": msg, "type": type_}]}


def error_type(exc: BaseException) -> str:
    """The `type` of an error item for an exception: its class name in snake case."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", type(exc).__name__).lower()

"""A Python client for `tiermem serve`: `Client` (blocking, on `httpx.Client`) and
`AsyncClient` (on `httpx.AsyncClient`), with the methods of `Memory` the service offers,
named and shaped like them, answering the library's own records (`Context` with its
`Plan`, `StoredMessage`, `SearchHit`, `ErasureReport`, `Checkpoint`).

    from tiermem.client import Client
    with Client("http://memory:8700", token="tok-acme-...", namespace="acme/alice") as mem:
        mem.append("trip-1", {"role": "user", "content": "No red-eyes, please."})
        ctx = mem.context("trip-1", "Book the flight", budget=2000)

Invariants:
- One place builds every request and reads every answer (`_Calls`, `_answer`): the two
  clients differ only in how they send and wait.
- What `Memory` would refuse at its edge without reading the store (an empty or malformed
  conversation id or namespace, a position or count out of range, a message that is not
  one) is refused here, with the library's `ValidationError` naming the same field, and
  nothing is sent. Limits that are the server's configuration are the server's to check,
  except where this client has read them (`limits()`, once per client: the LangChain
  adapters read them for artifacts) and the check here gives the server's own error
  (the same field and message): a message's content and metadata bytes and a
  conversation id's length; a check never sends a request of its own. A server without
  `GET /v1/limits` (an older one: 404) leaves every such limit to the server. An
  Anthropic batch (`format="anthropic"`) is sent with the anthropic SDK's objects in it
  (a reply, its blocks) as `from_anthropic` reads them (`sdk_plain_deep`), so the service
  stores what the library would; a value in it that JSON cannot carry (a date, NaN, a
  lone surrogate) is refused here, named by where (`messages[1].content[0].input.when`).
  An OpenAI message (chat or Responses) is sent as `Memory` parses it (`parse_message`):
  the openai SDK's objects in it, at any depth, as their `model_dump`, and what JSON
  cannot carry refused by where (`messages[1].tool_calls[1].function.when`).
- The service's answers become the library's exceptions (tiers.errors): 422
  `ValidationError` naming the field as the service named it (`messages[2].content`),
  as the subclass the library raises where the service names it (`type`
  `idempotency_key_reused`, `budget_too_small`: `IdempotencyKeyReused`, `BudgetTooSmall`
  with its `part` and `needed`); the service's 413 for a body over its `max_body_bytes`
  (`tiers.errors.body_limit_detail`) `RequestTooLarge` (a `LimitExceeded` naming `body`,
  the bytes sent and the limit), as the library refuses an over-limit message (a proxy's
  413 stays `ServiceError`);
  the service's own 404 for a conversation (`tiers.errors.not_found_detail`)
  `ConversationNotFound`, as `Memory` raises it (the same for a conversation outside the
  token's prefix), and any other 404 (a path the service does not serve: an older
  server, a wrong prefix behind a proxy) `ServiceError(404)`; 401/403
  `ServiceAuthError`; 503 `ServiceUnavailable` with the service's Retry-After and
  whether it said nothing was written; any other error `ServiceError` with the status
  and an excerpt of the body. Network failures stay httpx's (`httpx.TransportError`).
- Retries are off by default (`DEFAULT_RETRIES`): with `retries=n`, a request is sent
  again at most n times, and only where sending again cannot apply anything twice:
  - a 503 that carries a Retry-After of at most `max_retry_wait_s`, after that wait: a
    read (every GET: history, active, facts, conversations, stats; `search`; `context`)
    on any such 503; a write (append, append_many, checkpoint, fork, pin, unpin, the
    erasures, prune) only when the 503's body says `"written": false` (the store refused
    before writing: busy, read-only). A 503 for unreachable or failing storage, which
    may come after a COMMIT landed, or from a starting service, is raised to the caller
    of a write. `health()` answers its 503 (starting, down) at once, as its result;
  - any request whose connection failed before it was sent (httpx's `ConnectError`,
    `ConnectTimeout`, `PoolTimeout`), after `RETRY_WAIT_S` doubled at each retry (at
    most `max_retry_wait_s`);
  - an append (`append`, `append_many`) under an idempotency key, on every failure after
    which it may or may not have been stored: any 503, a proxy's 502 or 504, and a
    transport error after the request went out (a read timeout, a connection reset or
    closed without an answer), with the same key (so the server stores it once and
    answers a retry with the first answer), waiting the Retry-After as above or, without
    one, as after a failed connection. Only against a server that says it honours keys
    (`idempotency_keys` in `limits()`, read once per client before the first append
    when `retries` is set): there an append without a key of the caller's gets a
    generated one (a uuid4), the same for each of its retries. A server that does not
    say so (an older one ignores the header) gets the policy above and nothing more; a
    key the caller gave is sent to it all the same. Other writes keep the policy above.
- A conditional append (`expect_position`, and `expect_incarnation`: an earlier
  outcome's `incarnation`, `append_outcome`) is sent only to a server that says it takes
  them (`conditional_appends` in `limits()`, read once per client before the first
  one): to any other (an older one would refuse the fields, 422) it is refused before
  sending, `ValidationError` naming `expect_position` and the server's lack. The
  service's 409 for a mismatch is raised as the library raises it (`PositionMismatch`,
  with the position expected and found, and the incarnation sent), nothing written.
  Retries: only under an idempotency key may a conditional append whose first attempt
  may have committed be sent again (the server answers the replay with the first
  outcome before it checks the condition; without the key, the first attempt's own
  rows would make the condition fail, a 409 for the caller's own write). With `retries`
  set it gets a key as any append does; with `retries=0` and no key of the caller's,
  such a failure is raised: the caller reads the log to know whether it landed.
- An idempotency key is checked before sending by the library's check
  (`check_idempotency_key`: the same field and message) and travels in the
  `Idempotency-Key` header. The server's refusal of a key it holds for a different
  request is raised as the library raises it (`IdempotencyKeyReused`).
- `namespace`: the client's, or a call's own; neither: the token's own prefix (no
  `X-Tiermem-Namespace` header), as the service defines it.
- `token` is held to the service's rule for its tokens (`tiermem.config.HEADER_TOKEN`:
  visible ASCII, no token past it authenticates) when the client is made, refused without
  quoting it (httpx's own refusal quoted the header, secret and all).
- `base_url` is an http(s) URL with a host and no userinfo, query or fragment, refused when
  the client is made otherwise (`ValidationError` naming `base_url`). A URL is shown in an
  error only through `redacted_url` (no password however its userinfo is written): the
  client's errors travel into logs and tracebacks. tiermem authenticates by bearer token
  alone: a `user:password@` in the URL made httpx send basic auth in the token's place,
  and put the password in its INFO request log and in this client's errors.
- Importing this module loads neither the service (FastAPI) nor an embedding runtime.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import json
import re
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Generic, Literal, TypeVar, overload
from urllib.parse import quote, urlsplit

import httpx

from tiermem.adapters.anthropic import (
    THINKING_SCOPES,
    AnthropicBreakpoint,
    AnthropicRequest,
    sdk_plain,
    sdk_plain_deep,
)
from tiermem.config import (
    HEADER_TOKEN,
    HEADER_TOKEN_RULE,
    MAX_CONTENT_BYTES_LIMIT,
    MAX_ID_CHARS_LIMIT,
    MAX_METADATA_BYTES_LIMIT,
)
from tiermem.memory import (
    DEFAULT_BUDGET_TOKENS,
    DEFAULT_CONVERSATIONS_PAGE,
    DEFAULT_PIN_PRIORITY,
    MAX_AGE_S,
    MAX_BATCH_MESSAGES,
    MAX_BUDGET_TOKENS,
    MAX_CONVERSATIONS_PAGE,
    MAX_HISTORY_PAGE,
    MAX_PIN_PRIORITY,
    MAX_SEARCH_K,
    MIN_PIN_PRIORITY,
    ActiveView,
)
from tiermem.planner.plan import MAX_BREAKPOINTS, Context, Plan
from tiermem.tiers.errors import (
    WRITTEN_FIELD,
    BudgetTooSmall,
    ConversationNotFound,
    IdempotencyKeyReused,
    LimitExceeded,
    PositionMismatch,
    RequestTooLarge,
    ServiceAuthError,
    ServiceError,
    ServiceUnavailable,
    ValidationError,
    body_limit_of,
    field_error,
    not_found_detail,
    shown,
)
from tiermem.tiers.models import (
    MAX_POSITION,
    AppendOutcome,
    Checkpoint,
    ErasureReport,
    Message,
    SearchHit,
    SearchHits,
    StoredMessage,
    check_idempotency_key,
    check_int,
    check_keys,
    check_position,
    check_summary,
    check_text,
    parse_message,
    validate_id,
    validate_namespace,
)
from tiermem.tiers.plain_json import MAX_JSON_INT_DIGITS, NESTED_TOO_DEEP, check_int_digits, unencodable
from tiermem.tiers.redis_url import redacted_url
from tiermem.tiers.zones import optional_timezone

__all__ = ["AnthropicContext", "AsyncClient", "Client", "Limits"]

DEFAULT_TIMEOUT_S = 60.0  # per request; a context over a long conversation plans in well under it
DEFAULT_RETRIES = 0  # retries are off unless asked for
# seconds before the first retry of a failure that names no wait (a failed connection, a
# dropped answer, a proxy's 502/504), doubled at each next one; at most max_retry_wait_s
RETRY_WAIT_S = 0.5
MAX_RETRIES = 10  # more than this is a loop, not a retry
DEFAULT_MAX_RETRY_WAIT_S = 30.0  # a Retry-After longer than this is not waited for: raised at once
MAX_ERROR_EXCERPT_CHARS = 500  # of an error body quoted in ServiceError
# the service's (tiermem.service.auth): restated so that the client never imports FastAPI;
# a test holds the two equal
NAMESPACE_HEADER = "X-Tiermem-Namespace"
IDEMPOTENCY_HEADER = "Idempotency-Key"  # the service's (tiermem.service.schemas), held equal too
REPLAYED_HEADER = "Idempotent-Replayed"  # the service's answer to a replay under a key, held equal too
# the service's incarnation tokens (tiermem.service.schemas.INCARNATION_PATTERN), held equal too
INCARNATION_HEX_DIGITS = 32
INCARNATION_PATTERN = re.compile(f"^[0-9a-f]{{{INCARNATION_HEX_DIGITS}}}$")
# digits of one JSON integer a server takes whose /v1/limits does not say
# `max_json_int_digits` (before 34c6621: its body guard refused more than 40, 422 naming
# the place). Held by this client before sending the first chunk of an add sent in
# chunks (an Agents session's, a LangChain add past max_body_bytes: `check_server_ints`),
# so that it is refused whole rather than half-written: the old server refused a later
# chunk after the first was stored. A single request is left to the server (whole)
OLD_SERVER_INT_DIGITS = 40
POSITION_MISMATCH_TYPE = "position_mismatch"  # the `type` of the service's 409 for PositionMismatch
# failures after which an append under a key may have been stored: sent again under it
_MAYBE_APPLIED_STATUSES = (httpx.codes.BAD_GATEWAY, httpx.codes.SERVICE_UNAVAILABLE, httpx.codes.GATEWAY_TIMEOUT)
# transport errors raised before a byte of the request went out: any request may be sent again
_UNSENT_ERRORS = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
# ... and after it went out (a timeout waiting for the answer, a reset, a close without one)
_SENT_ERRORS = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)
OPENAI_FORMAT = "openai"
ANTHROPIC_FORMAT = "anthropic"
# where FastAPI says a refused input was: dropped from the field name, as Memory names fields
_LOCATIONS = ("body", "query", "path", "header")

T = TypeVar("T")
MessageLike = Message | dict[str, Any] | Any  # a dict, a Message or an SDK object (parse_message)


@dataclasses.dataclass(frozen=True)
class AnthropicContext(AnthropicRequest):
    """`context(..., format="anthropic")`: `system` and `messages` for Anthropic's
    `messages.create` (`kwargs()`), its `plan`, the exact `tokens` the request sends (the
    plan's, the current tool loop's thinking and the blocks kept whole: `to_anthropic`'s
    count) and `notes` on them (from a server before 2026-12-07: the plan's count, no notes).
    `breakpoints` are where the request holds the plan's (`AnthropicBreakpoint`: a
    message of `messages` or "system", and a block of it), as `to_anthropic` gives them;
    `plan.breakpoints` index the OpenAI form the plan was made in. From a server that
    does not answer them (before 2026-12-07): empty, the marks placed all the same."""

    tokens: int = dataclasses.field(kw_only=True)
    plan: Plan = dataclasses.field(kw_only=True)


@dataclasses.dataclass(frozen=True)
class Limits:
    """What the server refuses past (`GET /v1/limits`), each named as its `Config`
    setting or library constant (a test holds these fields equal to the service's
    `LimitsOut`)."""

    max_content_bytes: int
    max_metadata_bytes: int
    max_body_bytes: int
    max_id_chars: int
    max_batch_messages: int
    max_budget_tokens: int
    max_history_page: int
    max_conversations_page: int
    max_search_k: int
    max_json_depth: int
    max_namespace_depth: int
    session_max_chars: int
    max_breakpoints: int
    # what the server honours: an older one does not say it (the defaults)
    idempotency_keys: bool = False
    max_idempotency_key_chars: int | None = None
    conditional_appends: bool = False
    # digits of one JSON integer in a request (422 past it); None: an older server, which does
    # not say it. This client holds the library's own limit (`MAX_JSON_INT_DIGITS`) itself
    max_json_int_digits: int | None = None


def _limits(body: dict[str, Any]) -> Limits:
    # the fields this client knows (a newer server may answer more); one with a default
    # may be absent: an older server did not say it
    out: dict[str, Any] = {}
    for f in dataclasses.fields(Limits):
        if f.name not in body and f.default is not dataclasses.MISSING:
            continue
        value = body[f.name]
        out[f.name] = value is True if f.type in (bool, "bool") else int(value)
    return Limits(**out)


@dataclasses.dataclass(frozen=True)
class _Call(Generic[T]):
    """One request, and how its answer becomes a result. `conversation_id`: the
    conversation a 404 means is missing (None: a 404 is no conversation's)."""

    method: str
    path: str
    read: Callable[[Any], T]
    json: Any = None
    # the JSON body already encoded (as httpx would encode `json`), sent as is; `json` then None
    content: bytes | None = None
    params: dict[str, Any] | None = None
    namespace: str | None = None
    conversation_id: str | None = None
    ok_statuses: tuple[int, ...] = ()  # errors answered as results (/healthz's 503)
    reads: bool = False  # writes nothing: sent again on any 503 (GETs are, whatever this says)
    keyable: bool = False  # an append: the server may take an idempotency key for it
    idempotency_key: str | None = None  # sent as IDEMPOTENCY_HEADER
    # under a key the server honours: sent again on any failure after which it may have been stored
    replay_safe: bool = False
    # carries expect_position: sent only to a server that says it takes it (`conditional_appends`)
    conditional: bool = False
    whole_response: bool = False  # `read` takes the httpx.Response (its headers too), not the body

    @property
    def retry_safe_503(self) -> bool:
        """Whether any 503 may be sent again (a read), not only one saying nothing was written."""
        return self.reads or self.method == "GET"


# -- the shared part: arguments checked, requests built, answers read ----------------------------


def _conv(conversation_id: object, max_id_chars: int = MAX_ID_CHARS_LIMIT) -> str:
    return validate_id(conversation_id, "conversation_id", max_id_chars)


def _key(idempotency_key: object | None) -> str | None:
    # the library's check, at the edge: a key the server would refuse is never sent
    return None if idempotency_key is None else check_idempotency_key(idempotency_key)


def _conditions(expect_position: object | None, expect_incarnation: object | None) -> dict[str, Any]:
    """The append's conditions as the service takes them, checked as `Memory` checks them
    (and an incarnation as the service's pattern: only one it answered matches)."""
    out: dict[str, Any] = {}
    if expect_position is not None:
        out["expect_position"] = check_position(expect_position, "expect_position")
    if expect_incarnation is not None:
        if expect_position is None:
            raise ValidationError("expect_incarnation", "needs expect_position (the position it goes on at)")
        if not isinstance(expect_incarnation, str) or not INCARNATION_PATTERN.fullmatch(expect_incarnation):
            raise ValidationError("expect_incarnation", "must be an incarnation this service answered (an "
                                  "append outcome's `incarnation`: 32 lowercase hex digits)")
        out["expect_incarnation"] = expect_incarnation
    return out


def _outcome(response: httpx.Response) -> AppendOutcome:
    body = response.json()
    positions = [int(p) for p in body["positions"]] if "positions" in body else [int(body["position"])]
    # an older server answers no incarnation: None, as the library's outcome before them
    return AppendOutcome(positions, replayed=response.headers.get(REPLAYED_HEADER) == "true",
                         incarnation=body.get("incarnation"))


def _text(value: object, field: str) -> str:
    # the server's byte limit is its configuration: only past any config's is it refused here
    return check_text(value, field, MAX_CONTENT_BYTES_LIMIT)


def _wire(message: MessageLike, limits: Limits | None, *, session_id: str | None = None,
          metadata: dict[str, Any] | None = None, created_at: float | None = None) -> dict[str, Any]:
    """The message as the service's append takes it: its body and the envelope fields
    the caller set, checked as `Memory` checks it, within the server's byte limits when
    `limits` (read from it) says them, else within the largest any config allows. A
    time the caller did not set is left to the server's clock (parse_message fills in
    this machine's)."""
    content, meta = ((limits.max_content_bytes, limits.max_metadata_bytes) if limits is not None
                     else (MAX_CONTENT_BYTES_LIMIT, MAX_METADATA_BYTES_LIMIT))
    parsed = parse_message(message, max_content_bytes=content, max_metadata_bytes=meta,
                           session_id=session_id, metadata=metadata, created_at=created_at)
    out = {**parsed.body(), **{k: v for k in ("session_id", "metadata") if (v := getattr(parsed, k)) is not None}}
    if created_at is None:
        created_at = message.get("created_at") if isinstance(message, dict) else getattr(message, "created_at", None)
    if created_at is not None:
        out["created_at"] = parsed.created_at
    return out


def _json_bytes(value: Any) -> bytes:
    """`value` as the JSON httpx 0.28 and later send for `json=value` (compact UTF-8, no
    NaN), the strictest encoding of any httpx this package takes (0.27 would send a lone
    surrogate escaped, for the server to refuse with no field named). Raises TypeError,
    ValueError (UnicodeEncodeError: a lone surrogate) or RecursionError."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def _anthropic_wire(message: Any) -> bytes:
    """An Anthropic message as sent for the service's adapter to convert: the SDK's objects
    in it (a reply, its blocks, a tool_result's, wherever they are) as `from_anthropic`
    reads them (`sdk_plain_deep`, the adapter's one conversion), so that the service
    stores what the library would. Refused here, naming where, when a dict key in it is no
    string (`check_keys`: the JSON it is sent as would carry the key's text, another key)
    or a value in it is one JSON cannot carry (`tiers.plain_json.unencodable`; httpx's
    encoder raised a bare TypeError for an object, ValueError for NaN). The JSON bytes of
    the check are what is sent (`append_many`: the batch's body is built of them), so the
    message is encoded once."""
    out = dict(sdk_plain(message))  # TypeError, ValueError: not an object (the caller names it)
    for name, value in out.items():
        try:
            out[name] = sdk_plain_deep(value)
        except RecursionError:
            raise field_error(name, NESTED_TOO_DEEP) from None
    check_keys(out, "")
    check_int_digits(out, "")  # the one integer limit, as the service's guard and the library hold it
    try:
        return _json_bytes(out)
    except (TypeError, ValueError, RecursionError):  # UnicodeEncodeError is a ValueError
        raise unencodable(out) from None


def request_bytes(value: Any) -> int:
    """At most how many bytes `value` takes as a request's JSON body, as any httpx this
    package takes sends it: 0.28 and later compact UTF-8, 0.27 `json.dumps`'s default (a
    space after each separator, each non-ASCII character escaped: 6 or 12 bytes for its
    2 to 4), which is never shorter, so that is what is measured (pure ASCII: characters
    are bytes)."""
    return len(json.dumps(value, allow_nan=False))


# an append batch's body without its messages at its longest (the longer format's name,
# both conditions at their longest); a batch-wide session_id is not counted: whoever
# sizes a batch by `batch_request_bytes` sends none
BATCH_ENVELOPE_BYTES = request_bytes({"messages": [], "format": ANTHROPIC_FORMAT, "expect_position": MAX_POSITION,
                                      "expect_incarnation": "0" * INCARNATION_HEX_DIGITS})
BATCH_SEPARATOR_BYTES = len(", ")  # between two messages of the batch (json.dumps's default)


def batch_request_bytes(messages: Sequence[dict[str, Any]]) -> int:
    """At most how many bytes an append batch (`append_many`, `append_outcome`) of
    `messages` (OpenAI-format dicts, as the adapters make them) sends, conditions
    included: what a server's `max_body_bytes` (`Limits`) is held against (413 past it)."""
    return BATCH_ENVELOPE_BYTES + sum(request_bytes(m) + BATCH_SEPARATOR_BYTES for m in messages)


def sent_batch_bytes(messages: Sequence[dict[str, Any]], *, expect_position: int | None = None) -> int:
    """How many bytes this process's httpx sends an append batch of `messages` (as
    `batch_request_bytes` takes them) with that condition as: a refusal of what passes a
    server's `max_body_bytes` holds this, not that bound, which counts a non-ASCII
    character as up to 12 bytes (httpx 0.28 and later send its 2 to 4 of UTF-8)."""
    body = {"messages": list(messages), "format": OPENAI_FORMAT,
            **({} if expect_position is None else {"expect_position": expect_position})}
    # the host is never reached: the request is only encoded
    return len(httpx.Request("POST", "http://localhost/", json=body).content)


def _stored(row: dict[str, Any]) -> StoredMessage:
    return StoredMessage(conversation_id=row["conversation_id"], position=row["position"], role=row["role"],
                         body=row["message"], session_id=row["session_id"], metadata=row["metadata"],
                         created_at=row["created_at"], tokens=row["tokens"])


def _context(body: dict[str, Any]) -> Context | AnthropicContext:
    plan = Plan.from_dict(body["plan"])
    if body.get("format") == ANTHROPIC_FORMAT:
        return AnthropicContext(system=body["system"], messages=body["messages"], tokens=body["tokens"], plan=plan,
                                breakpoints=[AnthropicBreakpoint(**b) for b in body.get("breakpoints", [])],
                                notes=list(body.get("notes", [])))
    return Context(messages=body["messages"], tokens=body["tokens"], plan=plan)


def _erasure(body: dict[str, Any]) -> ErasureReport:
    tombstones = list(body["tombstones"])
    # a service before 2026-12-04 did not answer `scrubbed`, one before 2026-12-07 not
    # `wal_truncated`: not known (None), never a KeyError (the erasure was done) nor the
    # report's defaults (True), which said no file held an erased byte
    ids = [t["id"] for t in tombstones if "id" in t]
    return ErasureReport(conversations=body["conversations"], messages=body["messages"], scrubbed=body.get("scrubbed"),
                         tombstones=tombstones, conversation_ids=ids, namespaces=_namespaces_of(tombstones, ids),
                         wal_truncated=body.get("wal_truncated"))


def _namespaces_of(tombstones: list[dict[str, Any]], ids: list[str]) -> list[str]:
    """`ErasureReport.namespaces` from an answer's tombstones (one per conversation, in the
    order of its `conversation_ids`, each naming its namespace); [] (not known) where they
    do not line up: a dry run's answer has none (nor, from a service before 2026-12-07,
    its `namespaced_ids`), and a service before 2026-12-07 answered a prune without them."""
    if len(tombstones) != len(ids) or any(t.get("id") != i or "namespace" not in t
                                          for t, i in zip(tombstones, ids, strict=True)):
        return []
    return [str(t["namespace"]) for t in tombstones]


def _checkpoint(body: dict[str, Any]) -> Checkpoint:
    return Checkpoint(conversation_id=body["conversation_id"], position=body["position"], summary=body["summary"],
                      metadata=body["metadata"], created_at=body["created_at"])


def _active(body: dict[str, Any]) -> ActiveView:
    cp = body["checkpoint"]
    return ActiveView(_checkpoint(cp) if cp is not None else None, [_stored(m) for m in body["messages"]])


def _hit(h: dict[str, Any]) -> SearchHit:
    # status and valid_until: absent (None) from a service before it said them
    until = h.get("valid_until")
    return SearchHit(h["conversation_id"], h["position"], h["score"], dict(h["ranks"]), h["text"],
                     h.get("status"), until["superseded_by"] if until is not None else None,
                     until["time"] if until is not None else None)


def _hits(body: dict[str, Any]) -> SearchHits:
    out = SearchHits(_hit(h) for h in body["hits"])
    out.degraded = body.get("degraded")  # absent from a service before it said so
    out.vectors_pending = int(body.get("vectors_pending", 0))  # likewise
    return out


def _none(_body: Any) -> None:
    return None


def _token_hint(token: str) -> str:
    """What a refused token's likely mistake is, told without quoting it."""
    if token.lower().startswith("bearer "):
        return " (it starts with 'Bearer ': give the token alone, the client adds the scheme)"
    if HEADER_TOKEN.fullmatch(token.strip()):
        return " (it has whitespace at an end, such as the newline a file read leaves: strip it)"
    return ""


def _checked_base_url(base_url: object) -> str:
    """`base_url` as the client sends to it (no trailing `/`), refused (`ValidationError`
    naming `base_url`, the URL shown only through `redacted_url`: no password, however its
    userinfo is written) unless it is an http(s) URL with a host, a valid port if any, and
    no userinfo, query or fragment."""
    if not isinstance(base_url, str):
        raise ValidationError("base_url", f"must be an http:// or https:// URL, got a {type(base_url).__name__}")
    # shown redacted (first: a password may hold a `?` or `#`), then cut before any query
    # or fragment (either may hold a key)
    redacted = redacted_url(base_url)
    bare = re.split(r"[?#]", redacted, maxsplit=1)[0]
    cut = " followed by a query or fragment (not shown)" if bare != redacted else ""
    got = f"got {shown(bare)}{cut}; nothing was sent"
    if not base_url.startswith(("http://", "https://")):
        raise ValidationError("base_url", f"must be an http:// or https:// URL, {got}")
    # any `@`: a password holding an unescaped `/`, `?` or `#` ends urlsplit's netloc
    # before its `@`, and httpx would still read the userinfo (or refuse the URL quoting it)
    if "@" in base_url:
        raise ValidationError("base_url", "must hold no user name or password (tiermem authenticates by "
                              "bearer token alone: give it as token=...; httpx would send the userinfo "
                              "as basic auth in the token's place, and the URL is in errors and httpx's "
                              f"request log); an '@' in a path must be percent-encoded (%40), {got}")
    parts = urlsplit(base_url)
    if not parts.hostname:
        raise ValidationError("base_url", f"must name a host, {got}")
    try:
        parts.port  # noqa: B018 (urlsplit checks the port when it is read)
    except ValueError:
        raise ValidationError("base_url", f"has an invalid port (a number 0-65535), {got}") from None
    # the client appends /v1/... to the path: a query or fragment (even an empty one, a
    # bare trailing `?` or `#`) would swallow it
    for name, value, mark in (("query", parts.query, "?"), ("fragment", parts.fragment, "#")):
        if value or mark in base_url:
            raise ValidationError("base_url", f"must have no {name} (the client appends /v1/... to its "
                                  f"path), {got}")
    return base_url.rstrip("/")


class _Calls:
    """Every request the clients send, built from Memory-shaped arguments: checks them,
    then says what to send and how to read the answer."""

    def __init__(self, base_url: str, token: str | None, namespace: str | None) -> None:
        base_url = _checked_base_url(base_url)
        if token is not None and (not isinstance(token, str) or not token.strip()):
            raise ValidationError("token", "must be a non-empty string (None: no Authorization header)")
        if token is not None and not HEADER_TOKEN.fullmatch(token):
            # the service's rule for its tokens (no token past it authenticates); never
            # quoted: an error travels into logs and tracebacks
            raise ValidationError("token", f"is refused (not shown: a secret); a token may hold {HEADER_TOKEN_RULE}"
                                  f"{_token_hint(token)}; nothing was sent")
        self.base_url = base_url
        self.token = token
        self.namespace = self._checked_ns(namespace)
        # the server's limits once read (`_Base.limits`); None: not read, or not served
        self.server_limits: Limits | None = None

    def _conv(self, conversation_id: object) -> str:
        # an id that names stored data: any config's bound, as the server checks it (one
        # made before its max_id_chars was lowered is still read and erased)
        return _conv(conversation_id, MAX_ID_CHARS_LIMIT)

    def _new_conv(self, conversation_id: object) -> str:
        # an id an append writes under: the server's max_id_chars when read (validate_id
        # gives the error Memory gives)
        known = self.server_limits
        return _conv(conversation_id, known.max_id_chars if known is not None else MAX_ID_CHARS_LIMIT)

    @staticmethod
    def _checked_ns(namespace: object | None) -> str | None:
        return None if namespace is None else validate_namespace(namespace, "namespace", MAX_ID_CHARS_LIMIT)

    def _ns(self, namespace: object | None) -> str | None:
        """The namespace a call acts in: its own, else the client's (None: the token's prefix)."""
        return self.namespace if namespace is None else self._checked_ns(namespace)

    def url(self, call: _Call[Any]) -> str:
        return self.base_url + call.path

    def headers(self, call: _Call[Any]) -> dict[str, str]:
        out = {"Authorization": f"Bearer {self.token}"} if self.token is not None else {}
        if call.content is not None:  # a body encoded here: the type httpx gives `json`
            out["Content-Type"] = "application/json"
        if call.namespace is not None:
            out[NAMESPACE_HEADER] = call.namespace
        if call.idempotency_key is not None:
            out[IDEMPOTENCY_HEADER] = call.idempotency_key
        return out

    def _conv_call(self, method: str, conversation_id: object, suffix: str, read: Callable[[Any], T],
                   namespace: object | None, **kw: Any) -> _Call[T]:
        conv = self._conv(conversation_id)
        return _Call(method, f"/v1/conversations/{quote(conv, safe='')}{suffix}", read,
                     namespace=self._ns(namespace), conversation_id=conv, **kw)

    # -- writes ----------------------------------------------------------------------------

    def append(self, conversation_id: object, message: MessageLike, session_id: str | None,
               metadata: dict[str, Any] | None, created_at: float | None, namespace: object | None,
               idempotency_key: object | None = None, expect_position: object | None = None,
               expect_incarnation: object | None = None) -> _Call[AppendOutcome]:
        key = _key(idempotency_key)
        conv = self._new_conv(conversation_id)
        conditions = _conditions(expect_position, expect_incarnation)
        body = _wire(message, self.server_limits, session_id=session_id, metadata=metadata, created_at=created_at)
        # the single append's body is the message: its conditions go beside its envelope fields
        return self._conv_call("POST", conv, "/messages", _outcome, namespace, json={**body, **conditions},
                               keyable=True, idempotency_key=key, conditional=bool(conditions),
                               whole_response=True)

    def append_many(self, conversation_id: object, messages: Sequence[MessageLike], session_id: str | None,
                    format: str, namespace: object | None, idempotency_key: object | None = None,
                    expect_position: object | None = None, expect_incarnation: object | None = None
                    ) -> _Call[AppendOutcome]:
        key = _key(idempotency_key)
        conv = self._new_conv(conversation_id)
        conditions = _conditions(expect_position, expect_incarnation)
        if format not in (OPENAI_FORMAT, ANTHROPIC_FORMAT):
            raise ValidationError("format", f"must be {OPENAI_FORMAT!r} or {ANTHROPIC_FORMAT!r}")
        if isinstance(messages, str | bytes | dict) or not isinstance(messages, Sequence):
            raise ValidationError("messages", f"must be a list of messages, got {type(messages).__name__}")
        if not 1 <= len(messages) <= MAX_BATCH_MESSAGES:
            raise ValidationError("messages", f"must hold 1..{MAX_BATCH_MESSAGES} messages, got {len(messages)}")
        wire: list[Any] = []
        for i, m in enumerate(messages):
            try:
                # an Anthropic message is converted by the service's adapter, which names its
                # fields; it is checked by encoding it, and those bytes are sent
                wire.append(_wire(m, self.server_limits) if format == OPENAI_FORMAT else _anthropic_wire(m))
            except ValidationError as exc:
                # named as `Memory` names a batch's message, its class kept (a LimitExceeded:
                # the value and the limit, as `append` and the library raise it)
                raise exc.renamed(f"messages[{i}].{exc.field}") from None
            except (TypeError, ValueError):
                raise ValidationError(f"messages[{i}]", f"must be an object, got {type(m).__name__}") from None
        rest: dict[str, Any] = {"format": format, **conditions}
        if session_id is not None:
            rest["session_id"] = session_id
        sent: dict[str, Any] = {"json": {"messages": wire, **rest}}
        if format == ANTHROPIC_FORMAT:
            # the bytes httpx would send for that body (`_json_bytes`), of the messages' own
            sent = {"content": b'{"messages":[' + b",".join(wire) + b"]," + _json_bytes(rest)[1:]}
        return self._conv_call("POST", conv, "/messages:batch", _outcome, namespace, **sent, keyable=True,
                               idempotency_key=key, conditional=bool(conditions), whole_response=True)

    def checkpoint(self, conversation_id: object, summary: str, position: int,
                   namespace: object | None) -> _Call[Checkpoint]:
        body = {"summary": check_summary(summary, MAX_CONTENT_BYTES_LIMIT),
                "position": check_position(position, "position")}
        return self._conv_call("POST", conversation_id, "/checkpoints", _checkpoint, namespace, json=body)

    def fork(self, conversation_id: object, up_to: int, new_id: str | None, namespace: object | None) -> _Call[str]:
        body: dict[str, Any] = {"up_to": check_position(up_to, "up_to")}
        if new_id is not None:
            body["new_id"] = validate_id(new_id, "new_id", MAX_ID_CHARS_LIMIT)
        return self._conv_call("POST", conversation_id, "/fork", lambda b: str(b["conversation_id"]), namespace,
                               json=body)

    def pin(self, conversation_id: object, position: int, priority: int, namespace: object | None) -> _Call[None]:
        body = {"position": check_position(position, "position"),
                "priority": check_int(priority, "priority", MIN_PIN_PRIORITY, MAX_PIN_PRIORITY)}
        return self._conv_call("POST", conversation_id, "/pins", _none, namespace, json=body)

    def unpin(self, conversation_id: object, position: int, namespace: object | None) -> _Call[None]:
        return self._conv_call("DELETE", conversation_id, f"/pins/{check_position(position, 'position')}", _none,
                               namespace)

    def delete_conversation(self, conversation_id: object, namespace: object | None) -> _Call[ErasureReport]:
        return self._conv_call("DELETE", conversation_id, "", _erasure, namespace)

    def delete_namespace(self, namespace: object) -> _Call[ErasureReport]:
        if namespace is None:
            raise ValidationError("namespace", "Field required (erasure names the namespace it erases)")
        return _Call("DELETE", "/v1/namespace", _erasure, namespace=self._ns(namespace))

    def prune(self, older_than: dt.timedelta | float, namespace: object | None,
              dry_run: bool = False) -> _Call[ErasureReport]:
        age = older_than.total_seconds() if isinstance(older_than, dt.timedelta) else older_than
        if isinstance(age, bool) or not isinstance(age, int | float) or not 0 <= age <= MAX_AGE_S:
            raise ValidationError("older_than", f"must be a timedelta or an age in seconds within 0..{MAX_AGE_S:.0f}")

        def read(b: dict[str, Any]) -> ErasureReport:
            # a service before 2026-12-07 answered neither `scrubbed`, `wal_truncated` nor the
            # tombstones: not known (None), never the defaults, which said the bytes were gone.
            # A dry run erased nothing: nothing scrubbed nor truncated, whatever a service
            # before its report said so answered (it answered true, the defaults of an erasure)
            dry = b.get("dry_run") is True
            ids, tombstones = list(b["conversation_ids"]), list(b.get("tombstones", []))
            # each one's namespace: `namespaced_ids` (a service before 2026-12-07 did not
            # answer it), else the tombstones (a real prune's)
            named = [n for n in b.get("namespaced_ids", []) if isinstance(n, dict)]
            namespaces = ([str(n["namespace"]) for n in named] if [n.get("id") for n in named] == ids and ids
                          else _namespaces_of(tombstones, ids))
            return ErasureReport(conversations=b["conversations"], messages=b["messages"],
                                 conversation_ids=ids, namespaces=namespaces,
                                 scrubbed=False if dry else b.get("scrubbed"), tombstones=tombstones,
                                 wal_truncated=False if dry else b.get("wal_truncated"), dry_run=dry)

        if not isinstance(dry_run, bool):
            raise ValidationError("dry_run", f"must be a boolean, got {type(dry_run).__name__}")
        # dry_run sent only when asked: a service without it refuses the field (422), erasing nothing
        body: dict[str, Any] = {"older_than_seconds": float(age), **({"dry_run": True} if dry_run else {})}
        return _Call("POST", "/v1/prune", read, json=body, namespace=self._ns(namespace))

    # -- reads ---------------------------------------------------------------------------------

    def history_page(self, conversation_id: object, after: int | None, limit: int | None,
                     namespace: object | None) -> _Call[tuple[list[StoredMessage], int | None]]:
        params: dict[str, Any] = {}
        if after is not None:
            params["after"] = check_position(after, "after", low=-1)
        if limit is not None:
            params["limit"] = check_int(limit, "limit", 1, MAX_HISTORY_PAGE)
        return self._conv_call("GET", conversation_id, "/history",
                               lambda b: ([_stored(m) for m in b["messages"]], b.get("next_after")), namespace,
                               params=params)

    def active(self, conversation_id: object, namespace: object | None) -> _Call[ActiveView]:
        return self._conv_call("GET", conversation_id, "/active", _active, namespace)

    def facts(self, conversation_id: object, namespace: object | None) -> _Call[list[dict[str, Any]]]:
        return self._conv_call("GET", conversation_id, "/facts", lambda b: list(b["facts"]), namespace)

    def context(self, conversation_id: object, query: str | None, budget: int, system: str | None,
                namespace_recall: bool, truncate_latest: bool, format: str, thinking: str | None,
                max_breakpoints: int | None, namespace: object | None, timezone: object | None = None,
                pending_tokens: int = 0) -> _Call[Context | AnthropicContext]:
        conv = self._conv(conversation_id)
        body: dict[str, Any] = {"budget": check_int(budget, "budget", 1, MAX_BUDGET_TOKENS, "tokens"),
                                "namespace_recall": bool(namespace_recall), "truncate_latest": bool(truncate_latest)}
        if check_int(pending_tokens, "pending_tokens", 0, MAX_BUDGET_TOKENS, "tokens"):
            body["pending_tokens"] = pending_tokens  # sent only when set: a call without keeps its body
        if query is not None:
            body["query"] = _text(query, "query")
        if system is not None:
            body["system"] = _text(system, "system")
        tz = optional_timezone(timezone)
        if tz is not None:  # unset: the server's config's zone, as the library's None
            body["timezone"] = tz
        if format not in (OPENAI_FORMAT, ANTHROPIC_FORMAT):
            raise ValidationError("format", f"must be {OPENAI_FORMAT!r} or {ANTHROPIC_FORMAT!r}")
        body["format"] = format
        if thinking is not None or max_breakpoints is not None:
            if format != ANTHROPIC_FORMAT:
                raise ValidationError("thinking" if thinking is not None else "max_breakpoints",
                                      f'only with format "{ANTHROPIC_FORMAT}" (an OpenAI context has no '
                                      "thinking blocks or cache marks)")
            if thinking is not None:
                if thinking not in THINKING_SCOPES:
                    raise ValidationError("thinking", f"must be one of {', '.join(THINKING_SCOPES)}")
                body["thinking"] = thinking
            if max_breakpoints is not None:
                body["max_breakpoints"] = check_int(max_breakpoints, "max_breakpoints", 0, MAX_BREAKPOINTS)
        # POST for its body; it records the plan and the prompt-cache epoch, which a repeat only restates
        return self._conv_call("POST", conv, "/context", _context, namespace, json=body, reads=True)

    def search(self, conversation_id: object | None, query: str, k: int | None,
               namespace: object | None) -> _Call[SearchHits]:
        # POST: the query stays out of URLs and the access logs that record them
        body: dict[str, Any] = {"q": _text(query, "query")}
        conv = None if conversation_id is None else self._conv(conversation_id)
        if conv is not None:
            body["conversation_id"] = conv
        if k is not None:
            body["k"] = check_int(k, "k", 1, MAX_SEARCH_K)
        return _Call("POST", "/v1/search", _hits, json=body,
                     namespace=self._ns(namespace), conversation_id=conv, reads=True)

    def conversations_page(self, namespace: object | None, after: str | None,
                           limit: int) -> _Call[tuple[list[str], str | None]]:
        params: dict[str, Any] = {"limit": check_int(limit, "limit", 1, MAX_CONVERSATIONS_PAGE)}
        if after is not None:
            params["after"] = validate_id(after, "after", MAX_ID_CHARS_LIMIT)
        return _Call("GET", "/v1/conversations", lambda b: (list(b["conversations"]), b.get("next_after")),
                     params=params, namespace=self._ns(namespace))

    def stats(self, namespace: object | None) -> _Call[dict[str, Any]]:
        return _Call("GET", "/v1/stats", dict, namespace=self._ns(namespace))

    def limits(self) -> _Call[Limits]:
        return _Call("GET", "/v1/limits", _limits)

    def health(self) -> _Call[dict[str, Any]]:
        # /healthz answers its report with 503 too (starting, cold tier down): a result, not an error
        return _Call("GET", "/healthz", dict, ok_statuses=(503,))


def _retry_after_s(response: httpx.Response) -> float | None:
    """The Retry-After of a response in seconds; None when absent or not a number of
    seconds (an HTTP date is not one the service sends)."""
    raw = response.headers.get("retry-after")
    try:
        value = float(raw) if raw is not None else None
    except ValueError:
        return None
    return value if value is not None and 0 <= value < float("inf") else None


def _written(response: httpx.Response) -> bool | None:
    """False when the service's 503 says nothing was written; None when it does not say."""
    try:
        body = response.json()
    except ValueError:
        return None
    return False if isinstance(body, dict) and body.get(WRITTEN_FIELD) is False else None


def _detail(response: httpx.Response) -> Any:
    try:
        body = response.json()
    except ValueError:
        return response.text
    return body.get("detail", body) if isinstance(body, dict) else body


def _excerpt(value: Any) -> str:
    text = value if isinstance(value, str) else str(value)
    return text if len(text) <= MAX_ERROR_EXCERPT_CHARS else text[:MAX_ERROR_EXCERPT_CHARS] + "..."


# a header the service names in a 422, as the client's argument that sets it is named
_HEADER_ARGUMENTS = {IDEMPOTENCY_HEADER: "idempotency_key"}
_REUSED_TYPE = "idempotency_key_reused"  # the service's `type` for IdempotencyKeyReused (its class, snake case)
_BUDGET_TYPE = "budget_too_small"  # ... and for BudgetTooSmall


def _field_name(loc: Sequence[Any]) -> str:
    """FastAPI's `loc` as Memory names a field: ['body', 'messages', 2, 'content'] ->
    'messages[2].content'."""
    parts = list(loc[1:] if loc and loc[0] in _LOCATIONS else loc)
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "body"


def _refused(call: _Call[Any], response: httpx.Response) -> Exception:
    """The library's exception for an error answer."""
    status = response.status_code
    detail = _detail(response)
    if status == httpx.codes.UNPROCESSABLE_ENTITY:
        if isinstance(detail, list) and detail and isinstance(detail[0], dict):
            first = detail[0]
            field, msg = _field_name(first.get("loc", ())), str(first.get("msg", "invalid"))
            field = _HEADER_ARGUMENTS.get(field, field)
            if len(detail) > 1:
                return ValidationError(field, f"{msg} (and {len(detail) - 1} more problem(s))")
            if first.get("type") == _REUSED_TYPE:  # raised as the library raises it, with its positions
                return IdempotencyKeyReused.from_problem(msg) or ValidationError(field, msg)
            if first.get("type") == _BUDGET_TYPE:  # ... with its part and the tokens needed
                return BudgetTooSmall.from_problem(msg) or ValidationError(field, msg)
            # a limit keeps its numbers, as the library raises it
            return LimitExceeded.from_problem(field, msg) or ValidationError(field, msg)
        return ValidationError("body", _excerpt(detail))
    if status == httpx.codes.NOT_FOUND and call.conversation_id is not None \
            and detail == not_found_detail(call.conversation_id):
        return ConversationNotFound(call.conversation_id, call.namespace)
    if status == httpx.codes.CONFLICT and (mismatch := _mismatch(call, response)) is not None:
        return mismatch
    if status == httpx.codes.REQUEST_ENTITY_TOO_LARGE and (too_large := _too_large(response, detail)) is not None:
        return too_large
    if status in (httpx.codes.UNAUTHORIZED, httpx.codes.FORBIDDEN):
        return ServiceAuthError(status, _excerpt(detail))
    if status == httpx.codes.SERVICE_UNAVAILABLE:
        return ServiceUnavailable(status, _excerpt(detail), _retry_after_s(response), _written(response))
    return ServiceError(status, _excerpt(detail))


def _too_large(response: httpx.Response, detail: Any) -> RequestTooLarge | None:
    """The service's 413 for a body over its `max_body_bytes` as a `LimitExceeded`, as the
    library refuses an over-limit message (`RequestTooLarge`: `body`, the bytes sent, the
    server's limit); None for a 413 of another kind (a proxy's), raised as `ServiceError`."""
    limit = body_limit_of(detail)
    sent = response.request.headers.get("content-length", "")
    return RequestTooLarge("body", int(sent), limit, whole=True) if limit is not None and sent.isdigit() else None


def _mismatch(call: _Call[Any], response: httpx.Response) -> PositionMismatch | None:
    """The service's 409 for a conditional append as the library raises it; None for a
    409 of another kind (a proxy's, another route's)."""
    try:
        body = response.json()
        if not isinstance(body, dict) or body.get("type") != POSITION_MISMATCH_TYPE:
            return None
        found = body["found_position"]
        incarnation = body.get("expected_incarnation")
        # the incarnation there now (null: none), which a server before it did not say
        now = body.get("found_incarnation")
        told = "found_incarnation" in body and (now is None or isinstance(now, str))
        return PositionMismatch(str(body.get("conversation_id", call.conversation_id)), int(body["expected_position"]),
                                None if found is None else int(found),
                                expected_incarnation=incarnation if isinstance(incarnation, str) else None,
                                found_incarnation=now if told else None, exists=(now is not None) if told else None)
    except (ValueError, KeyError, TypeError):
        return None


def _answer(call: _Call[T], response: httpx.Response) -> T:
    """The result of `call` from its response, or the library's exception for it."""
    if response.is_error and response.status_code not in call.ok_statuses:
        raise _refused(call, response)
    try:
        return call.read(response if call.whole_response else response.json())
    except (ValueError, KeyError, TypeError, AttributeError) as exc:  # not the answer this route gives
        raise ServiceError(response.status_code, f"answer not understood ({type(exc).__name__}: {exc}): "
                           f"{_excerpt(response.text)}") from None


class _Base:
    """What both clients hold: the request builder, the HTTP client and the retry policy."""

    def __init__(self, base_url: str, token: str | None, namespace: str | None, timeout_s: float,
                 retries: int, max_retry_wait_s: float) -> None:
        self._calls = _Calls(base_url, token, namespace)
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float) or not 0 < timeout_s < float("inf"):
            raise ValidationError("timeout_s", f"must be a positive number of seconds, got {timeout_s!r}")
        self._timeout_s = float(timeout_s)
        self._retries = check_int(retries, "retries", 0, MAX_RETRIES)
        if isinstance(max_retry_wait_s, bool) or not isinstance(max_retry_wait_s, int | float) \
                or not 0 <= max_retry_wait_s < float("inf"):
            raise ValidationError("max_retry_wait_s", f"must be a non-negative number of seconds, got "
                                  f"{max_retry_wait_s!r}")
        self._max_retry_wait_s = float(max_retry_wait_s)
        self._limits_read = False  # whether /v1/limits was asked (its answer: _calls.server_limits)

    def _remember_limits(self, limits: Limits | None) -> Limits | None:
        """Keep the server's limits (None: it does not say them) for every later call."""
        self._calls.server_limits = limits
        self._limits_read = True
        return limits

    @staticmethod
    def _limits_unknown(exc: ServiceError) -> bool:
        """Whether a refused /v1/limits means the server does not serve it (an older one),
        rather than an error to raise (a bad token, an unavailable service)."""
        return exc.status == httpx.codes.NOT_FOUND

    @property
    def namespace(self) -> str | None:
        """The namespace every call acts in unless it names one (None: the token's prefix)."""
        return self._calls.namespace

    def _request(self, call: _Call[Any]) -> dict[str, Any]:
        return {"method": call.method, "url": self._calls.url(call), "params": call.params, "json": call.json,
                "content": call.content, "headers": self._calls.headers(call), "timeout": self._timeout_s}

    def _needs_limits(self, call: _Call[Any]) -> bool:
        """Whether `call` must first learn what the server takes: whether it honours
        idempotency keys (only a client that retries uses that) or conditional appends
        (a conditional one is sent only where they are said); only the first time."""
        return not self._limits_read and ((call.keyable and self._retries > 0) or call.conditional)

    def _check_conditional(self, call: _Call[Any]) -> None:
        """Refuse, before sending, a conditional append to a server that does not say it
        takes the conditions (an older one refuses the fields)."""
        known = self._calls.server_limits
        if call.conditional and (known is None or not known.conditional_appends):
            lack = "serves no /v1/limits" if known is None else "does not say conditional_appends in /v1/limits"
            raise ValidationError("expect_position", f"the server at {self._calls.base_url} {lack}: it takes "
                                  "no conditional appends (a tiermem serve older than them); nothing was sent")

    def _keyed(self, call: _Call[T]) -> _Call[T]:
        """`call` as sent: an append to a server that says it honours idempotency keys
        carries one (the caller's, else a new uuid4 when this client retries), and is then
        sent again on any failure after which it may have been stored; to any other
        server exactly as before keys existed (a caller's key is sent all the same)."""
        known = self._calls.server_limits
        if not call.keyable or known is None or not known.idempotency_keys:
            return call
        key = call.idempotency_key
        if key is None and self._retries > 0:
            key = str(uuid.uuid4())
        return dataclasses.replace(call, idempotency_key=key, replay_safe=key is not None)

    def _backoff_s(self, attempt: int) -> float:
        return min(RETRY_WAIT_S * 2 ** attempt, self._max_retry_wait_s)

    def _wait_before_retry(self, call: _Call[Any], response: httpx.Response, attempt: int) -> float | None:
        """Seconds to wait before sending `call` again, None to answer this response (one the
        call takes as its result is answered at once)."""
        status = response.status_code
        if status in call.ok_statuses or attempt >= self._retries:
            return None
        wait = _retry_after_s(response)
        if call.replay_safe and status in _MAYBE_APPLIED_STATUSES:
            # under its key a retry stores nothing twice, whatever happened to the first
            if wait is None:
                return self._backoff_s(attempt)
            return wait if wait <= self._max_retry_wait_s else None
        if status != httpx.codes.SERVICE_UNAVAILABLE:
            return None
        if not call.retry_safe_503 and _written(response) is not False:
            return None  # the write may have landed: sending it again could apply it twice
        return wait if wait is not None and wait <= self._max_retry_wait_s else None

    def _wait_after_error(self, call: _Call[Any], exc: httpx.TransportError, attempt: int) -> float | None:
        """Seconds to wait before sending `call` again after `exc`, None to raise it: a
        request never sent may be sent again; one sent only under an idempotency key."""
        if attempt >= self._retries:
            return None
        if isinstance(exc, _UNSENT_ERRORS) or (call.replay_safe and isinstance(exc, _SENT_ERRORS)):
            return self._backoff_s(attempt)
        return None


def check_wire(client: _Base, message: MessageLike, *, server_ints: bool = False) -> None:
    """Refuse `message` as `client`'s append refuses it before sending (`_wire`: `Memory`'s
    own check, within the server's byte limits once read): `ValidationError` naming its
    field (no batch index); nothing is sent, the limits not asked for. `server_ints`: and
    as the server would refuse its integers (`check_server_ints`), for a message of an
    add sent in chunks, whose later chunk the server would refuse after the first stored."""
    limits = client._calls.server_limits
    out = _wire(message, limits)
    if server_ints:
        check_server_ints(out, limits)


def check_server_ints(body: dict[str, Any], limits: Limits | None) -> None:
    """Refuse `body` (a message as sent, `_wire`) holding an integer past the server's own
    limit where it is less than the library's, which `_wire` held: the one its limits say
    (`max_json_int_digits`), or OLD_SERVER_INT_DIGITS where they do not say one (a server
    before it: 40). None (limits not read, or no /v1/limits): nothing more held. Only an
    add sent in chunks needs it (`tiermem.adapters._common.checked_chunks`): one request is
    refused by the server whole, nothing written."""
    if limits is None:
        return
    digits = limits.max_json_int_digits
    if digits is None:
        check_int_digits(body, "", OLD_SERVER_INT_DIGITS,
                         "OLD_SERVER_INT_DIGITS: the server's /v1/limits does not say max_json_int_digits")
    elif digits < MAX_JSON_INT_DIGITS:
        check_int_digits(body, "", digits, "the server's max_json_int_digits")


class Client(_Base):
    """A blocking client of `tiermem serve` (module docstring).

    `token`: the bearer token (None: none sent, for a `--no-auth` service). `namespace`:
    the namespace calls act in unless they name one (None: the token's own prefix).
    `timeout_s`: each request's. `retries`: how many times a request is sent again where
    that cannot apply it twice (module docstring): a 503 that carries a Retry-After of at
    most `max_retry_wait_s` seconds, after that wait (a read on any such 503, a write only
    on one saying `"written": false`); a connection that failed before sending; an
    append under an idempotency key (made up when you give none) on any failure after
    which it may have been stored, where the server says it honours keys. 0 (the
    default) raises at once.

    `http_client`: an `httpx.Client` of yours (proxies, TLS, pooling): the client sends on
    it and never closes it; without one, the client builds its own and closes it in
    `close()` (or at the end of a `with` block). It closes only what it opened.
    """

    def __init__(self, base_url: str, *, token: str | None = None, namespace: str | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S, http_client: httpx.Client | None = None,
                 retries: int = DEFAULT_RETRIES, max_retry_wait_s: float = DEFAULT_MAX_RETRY_WAIT_S) -> None:
        super().__init__(base_url, token, namespace, timeout_s, retries, max_retry_wait_s)
        if http_client is not None and not isinstance(http_client, httpx.Client):
            raise ValidationError("http_client", f"must be an httpx.Client, got {type(http_client).__name__}")
        self._owns_http = http_client is None
        self._http = http_client if http_client is not None else httpx.Client()

    def close(self) -> None:
        """Close the HTTP client if this client built it (a given one is left open)."""
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, call: _Call[T]) -> T:
        if self._needs_limits(call):
            self.limits()  # what the server takes: idempotency keys, conditions (once per client)
        self._check_conditional(call)
        call = self._keyed(call)
        attempt = 0
        while True:
            try:
                response = self._http.request(**self._request(call))
            except httpx.TransportError as exc:
                wait = self._wait_after_error(call, exc, attempt)
                if wait is None:
                    raise
            else:
                wait = self._wait_before_retry(call, response, attempt)
                if wait is None:
                    return _answer(call, response)
            attempt += 1
            time.sleep(wait)

    # -- writes ----------------------------------------------------------------------------

    def append(self, conversation_id: str, message: MessageLike, *, session_id: str | None = None,
               metadata: dict[str, Any] | None = None, created_at: float | None = None,
               namespace: str | None = None, idempotency_key: str | None = None,
               expect_position: int | None = None, expect_incarnation: str | None = None) -> int:
        """Append one message (OpenAI format); returns its position. `idempotency_key`:
        your id of this request (1..255 visible ASCII characters): sent again under it,
        the same request is stored once and answered the first position (module
        docstring: a client with `retries` makes one up when you give none).
        `expect_position`, `expect_incarnation`: as `append_outcome`'s."""
        return self._send(self._calls.append(conversation_id, message, session_id, metadata, created_at, namespace,
                                             idempotency_key, expect_position, expect_incarnation)).positions[0]

    def append_many(self, conversation_id: str, messages: Sequence[MessageLike], *, session_id: str | None = None,
                    format: Literal["openai", "anthropic"] = "openai", namespace: str | None = None,
                    idempotency_key: str | None = None, expect_position: int | None = None,
                    expect_incarnation: str | None = None) -> list[int]:
        """Append a batch in one transaction (all or nothing); returns the positions.
        `format="anthropic"`: Anthropic messages, stored as the library converts them.
        `idempotency_key`: as `append`'s, for the whole batch. `expect_position`,
        `expect_incarnation`: as `append_outcome`'s."""
        return self.append_outcome(conversation_id, messages, session_id=session_id, format=format,
                                   namespace=namespace, idempotency_key=idempotency_key,
                                   expect_position=expect_position, expect_incarnation=expect_incarnation).positions

    def append_outcome(self, conversation_id: str, messages: Sequence[MessageLike], *,
                       session_id: str | None = None, format: Literal["openai", "anthropic"] = "openai",
                       namespace: str | None = None, idempotency_key: str | None = None,
                       expect_position: int | None = None, expect_incarnation: str | None = None
                       ) -> AppendOutcome:
        """`append_many`, answering `Memory.append_outcome`'s record: the positions,
        whether they replay an earlier append under the key, and the `incarnation` they
        went to (the service's opaque token of it). `expect_position`: written only if the
        conversation goes on at that position (0: it does not exist yet), and with
        `expect_incarnation` (an earlier outcome's `incarnation`) only if it is still that
        incarnation; else `PositionMismatch` and nothing written. Only to a server that
        says it takes them (`Limits.conditional_appends`): to another one, refused before
        sending (module docstring, with what retries do)."""
        return self._send(self._calls.append_many(conversation_id, messages, session_id, format, namespace,
                                                  idempotency_key, expect_position, expect_incarnation))

    def checkpoint(self, conversation_id: str, summary: str, position: int, *,
                   namespace: str | None = None) -> Checkpoint:
        return self._send(self._calls.checkpoint(conversation_id, summary, position, namespace))

    def fork(self, conversation_id: str, up_to: int, *, new_id: str | None = None,
             namespace: str | None = None) -> str:
        return self._send(self._calls.fork(conversation_id, up_to, new_id, namespace))

    def pin(self, conversation_id: str, position: int, *, priority: int = DEFAULT_PIN_PRIORITY,
            namespace: str | None = None) -> None:
        self._send(self._calls.pin(conversation_id, position, priority, namespace))

    def unpin(self, conversation_id: str, position: int, *, namespace: str | None = None) -> None:
        self._send(self._calls.unpin(conversation_id, position, namespace))

    def delete_conversation(self, conversation_id: str, *, namespace: str | None = None) -> ErasureReport:
        return self._send(self._calls.delete_conversation(conversation_id, namespace))

    def delete_namespace(self, namespace: str) -> ErasureReport:
        return self._send(self._calls.delete_namespace(namespace))

    def prune(self, older_than: dt.timedelta | float, *, namespace: str | None = None,
              dry_run: bool = False) -> ErasureReport:
        return self._send(self._calls.prune(older_than, namespace, dry_run))

    # -- reads ---------------------------------------------------------------------------------

    def history(self, conversation_id: str, *, namespace: str | None = None, after: int | None = None,
                limit: int | None = None) -> list[StoredMessage]:
        return self.history_page(conversation_id, namespace=namespace, after=after, limit=limit)[0]

    def history_page(self, conversation_id: str, *, namespace: str | None = None, after: int | None = None,
                     limit: int | None = None) -> tuple[list[StoredMessage], int | None]:
        return self._send(self._calls.history_page(conversation_id, after, limit, namespace))

    def active(self, conversation_id: str, *, namespace: str | None = None) -> ActiveView:
        return self._send(self._calls.active(conversation_id, namespace))

    def facts(self, conversation_id: str, *, namespace: str | None = None) -> list[dict[str, Any]]:
        """The service's facts: each a dict as `Validity.to_json()` gives it."""
        return self._send(self._calls.facts(conversation_id, namespace))

    @overload
    def context(self, conversation_id: str, query: str | None = ..., budget: int = ..., *,
                system: str | None = ..., namespace_recall: bool = ..., truncate_latest: bool = ...,
                namespace: str | None = ..., format: Literal["openai"] = ..., timezone: str | None = ...,
                pending_tokens: int = ...) -> Context: ...

    @overload
    def context(self, conversation_id: str, query: str | None = ..., budget: int = ..., *,
                system: str | None = ..., namespace_recall: bool = ..., truncate_latest: bool = ...,
                namespace: str | None = ..., format: Literal["anthropic"],
                thinking: Literal["current_loop", "all"] | None = ...,
                max_breakpoints: int | None = ..., timezone: str | None = ...,
                pending_tokens: int = ...) -> AnthropicContext: ...

    def context(self, conversation_id: str, query: str | None = None, budget: int = DEFAULT_BUDGET_TOKENS, *,
                system: str | None = None, namespace_recall: bool = True, truncate_latest: bool = False,
                namespace: str | None = None, format: Literal["openai", "anthropic"] = "openai",
                thinking: Literal["current_loop", "all"] | None = None,
                max_breakpoints: int | None = None, timezone: str | None = None,
                pending_tokens: int = 0) -> Context | AnthropicContext:
        """The slice of the past to send with this turn (`Memory.context`): a `Context`,
        or with `format="anthropic"` an `AnthropicContext` (`system`, `messages`).
        `timezone`: the user's IANA zone for this call (None: the server's `Config.timezone`).
        `pending_tokens`: as `Memory.context`'s."""
        return self._send(self._calls.context(conversation_id, query, budget, system, namespace_recall,
                                              truncate_latest, format, thinking, max_breakpoints, namespace,
                                              timezone, pending_tokens))

    def search(self, conversation_id: str | None, query: str, k: int | None = None, *,
               namespace: str | None = None) -> SearchHits:
        """Hybrid search in one conversation, or the namespace when `conversation_id` is
        None; `k` None: the service's default. `degraded` as `Memory.search`'s."""
        return self._send(self._calls.search(conversation_id, query, k, namespace))

    def conversations(self, namespace: str | None = None) -> list[str]:
        """Every conversation id of exactly `namespace`, read a page at a time."""
        out: list[str] = []
        after: str | None = None
        while True:
            names, after = self.conversations_page(namespace, after=after, limit=MAX_CONVERSATIONS_PAGE)
            out += names
            if after is None:
                return out

    def conversations_page(self, namespace: str | None = None, *, after: str | None = None,
                           limit: int = DEFAULT_CONVERSATIONS_PAGE) -> tuple[list[str], str | None]:
        return self._send(self._calls.conversations_page(namespace, after, limit))

    def stats(self, *, namespace: str | None = None) -> dict[str, Any]:
        return self._send(self._calls.stats(namespace))

    def health(self) -> dict[str, Any]:
        """/healthz: `status` (ok, degraded, starting, stopping, down) and each tier's state."""
        return self._send(self._calls.health())

    def limits(self) -> Limits | None:
        """What the server refuses past (`GET /v1/limits`), read once per client and kept;
        None when the server does not say (an older one, without the route). Once read,
        this client checks a message's content and metadata bytes and a conversation id's
        length against them before sending, with the error the server would give."""
        if not self._limits_read:
            try:
                return self._remember_limits(self._send(self._calls.limits()))
            except ServiceError as exc:
                if not self._limits_unknown(exc):
                    raise
                return self._remember_limits(None)
        return self._calls.server_limits


class AsyncClient(_Base):
    """`Client`'s methods as coroutines, on an `httpx.AsyncClient` (`Client`'s
    docstring says what each argument does). `http_client`: an `httpx.AsyncClient` of
    yours, never closed by this client; without one it builds its own and closes it in
    `aclose()` (or at the end of an `async with` block)."""

    def __init__(self, base_url: str, *, token: str | None = None, namespace: str | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S, http_client: httpx.AsyncClient | None = None,
                 retries: int = DEFAULT_RETRIES, max_retry_wait_s: float = DEFAULT_MAX_RETRY_WAIT_S) -> None:
        super().__init__(base_url, token, namespace, timeout_s, retries, max_retry_wait_s)
        if http_client is not None and not isinstance(http_client, httpx.AsyncClient):
            raise ValidationError("http_client", f"must be an httpx.AsyncClient, got {type(http_client).__name__}")
        self._owns_http = http_client is None
        self._http = http_client if http_client is not None else httpx.AsyncClient()

    async def aclose(self) -> None:
        """Close the HTTP client if this client built it (a given one is left open)."""
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _send(self, call: _Call[T]) -> T:
        if self._needs_limits(call):
            await self.limits()  # what the server takes: idempotency keys, conditions (once per client)
        self._check_conditional(call)
        call = self._keyed(call)
        attempt = 0
        while True:
            try:
                response = await self._http.request(**self._request(call))
            except httpx.TransportError as exc:
                wait = self._wait_after_error(call, exc, attempt)
                if wait is None:
                    raise
            else:
                wait = self._wait_before_retry(call, response, attempt)
                if wait is None:
                    return _answer(call, response)
            attempt += 1
            await asyncio.sleep(wait)

    # -- writes ----------------------------------------------------------------------------

    async def append(self, conversation_id: str, message: MessageLike, *, session_id: str | None = None,
                     metadata: dict[str, Any] | None = None, created_at: float | None = None,
                     namespace: str | None = None, idempotency_key: str | None = None,
                     expect_position: int | None = None, expect_incarnation: str | None = None) -> int:
        return (await self._send(self._calls.append(conversation_id, message, session_id, metadata, created_at,
                                                    namespace, idempotency_key, expect_position,
                                                    expect_incarnation))).positions[0]

    async def append_many(self, conversation_id: str, messages: Sequence[MessageLike], *,
                          session_id: str | None = None, format: Literal["openai", "anthropic"] = "openai",
                          namespace: str | None = None, idempotency_key: str | None = None,
                          expect_position: int | None = None, expect_incarnation: str | None = None) -> list[int]:
        return (await self.append_outcome(conversation_id, messages, session_id=session_id, format=format,
                                          namespace=namespace, idempotency_key=idempotency_key,
                                          expect_position=expect_position,
                                          expect_incarnation=expect_incarnation)).positions

    async def append_outcome(self, conversation_id: str, messages: Sequence[MessageLike], *,
                             session_id: str | None = None, format: Literal["openai", "anthropic"] = "openai",
                             namespace: str | None = None, idempotency_key: str | None = None,
                             expect_position: int | None = None, expect_incarnation: str | None = None
                             ) -> AppendOutcome:
        return await self._send(self._calls.append_many(conversation_id, messages, session_id, format, namespace,
                                                        idempotency_key, expect_position, expect_incarnation))

    async def checkpoint(self, conversation_id: str, summary: str, position: int, *,
                         namespace: str | None = None) -> Checkpoint:
        return await self._send(self._calls.checkpoint(conversation_id, summary, position, namespace))

    async def fork(self, conversation_id: str, up_to: int, *, new_id: str | None = None,
                   namespace: str | None = None) -> str:
        return await self._send(self._calls.fork(conversation_id, up_to, new_id, namespace))

    async def pin(self, conversation_id: str, position: int, *, priority: int = DEFAULT_PIN_PRIORITY,
                  namespace: str | None = None) -> None:
        await self._send(self._calls.pin(conversation_id, position, priority, namespace))

    async def unpin(self, conversation_id: str, position: int, *, namespace: str | None = None) -> None:
        await self._send(self._calls.unpin(conversation_id, position, namespace))

    async def delete_conversation(self, conversation_id: str, *, namespace: str | None = None) -> ErasureReport:
        return await self._send(self._calls.delete_conversation(conversation_id, namespace))

    async def delete_namespace(self, namespace: str) -> ErasureReport:
        return await self._send(self._calls.delete_namespace(namespace))

    async def prune(self, older_than: dt.timedelta | float, *, namespace: str | None = None,
                    dry_run: bool = False) -> ErasureReport:
        return await self._send(self._calls.prune(older_than, namespace, dry_run))

    # -- reads ---------------------------------------------------------------------------------

    async def history(self, conversation_id: str, *, namespace: str | None = None, after: int | None = None,
                      limit: int | None = None) -> list[StoredMessage]:
        return (await self.history_page(conversation_id, namespace=namespace, after=after, limit=limit))[0]

    async def history_page(self, conversation_id: str, *, namespace: str | None = None, after: int | None = None,
                           limit: int | None = None) -> tuple[list[StoredMessage], int | None]:
        return await self._send(self._calls.history_page(conversation_id, after, limit, namespace))

    async def active(self, conversation_id: str, *, namespace: str | None = None) -> ActiveView:
        return await self._send(self._calls.active(conversation_id, namespace))

    async def facts(self, conversation_id: str, *, namespace: str | None = None) -> list[dict[str, Any]]:
        return await self._send(self._calls.facts(conversation_id, namespace))

    @overload
    async def context(self, conversation_id: str, query: str | None = ..., budget: int = ..., *,
                      system: str | None = ..., namespace_recall: bool = ..., truncate_latest: bool = ...,
                      namespace: str | None = ..., format: Literal["openai"] = ..., timezone: str | None = ...,
                      pending_tokens: int = ...) -> Context: ...

    @overload
    async def context(self, conversation_id: str, query: str | None = ..., budget: int = ..., *,
                      system: str | None = ..., namespace_recall: bool = ..., truncate_latest: bool = ...,
                      namespace: str | None = ..., format: Literal["anthropic"],
                      thinking: Literal["current_loop", "all"] | None = ...,
                      max_breakpoints: int | None = ..., timezone: str | None = ...,
                      pending_tokens: int = ...) -> AnthropicContext: ...

    async def context(self, conversation_id: str, query: str | None = None, budget: int = DEFAULT_BUDGET_TOKENS, *,
                      system: str | None = None, namespace_recall: bool = True, truncate_latest: bool = False,
                      namespace: str | None = None, format: Literal["openai", "anthropic"] = "openai",
                      thinking: Literal["current_loop", "all"] | None = None,
                      max_breakpoints: int | None = None, timezone: str | None = None,
                      pending_tokens: int = 0) -> Context | AnthropicContext:
        return await self._send(self._calls.context(conversation_id, query, budget, system, namespace_recall,
                                                    truncate_latest, format, thinking, max_breakpoints, namespace,
                                                    timezone, pending_tokens))

    async def search(self, conversation_id: str | None, query: str, k: int | None = None, *,
                     namespace: str | None = None) -> SearchHits:
        return await self._send(self._calls.search(conversation_id, query, k, namespace))

    async def conversations(self, namespace: str | None = None) -> list[str]:
        out: list[str] = []
        after: str | None = None
        while True:
            names, after = await self.conversations_page(namespace, after=after, limit=MAX_CONVERSATIONS_PAGE)
            out += names
            if after is None:
                return out

    async def conversations_page(self, namespace: str | None = None, *, after: str | None = None,
                                 limit: int = DEFAULT_CONVERSATIONS_PAGE) -> tuple[list[str], str | None]:
        return await self._send(self._calls.conversations_page(namespace, after, limit))

    async def stats(self, *, namespace: str | None = None) -> dict[str, Any]:
        return await self._send(self._calls.stats(namespace))

    async def health(self) -> dict[str, Any]:
        return await self._send(self._calls.health())

    async def limits(self) -> Limits | None:
        """`Client.limits`: read once per client and kept; None from an older server."""
        if not self._limits_read:
            try:
                read: Limits = await self._send(self._calls.limits())
                return self._remember_limits(read)
            except ServiceError as exc:
                if not self._limits_unknown(exc):
                    raise
                return self._remember_limits(None)
        return self._calls.server_limits

"""The routes of one conversation: append, read (history, facts, active), fork, pins
and checkpoints, under /v1/conversations/{conversation_id}.

Invariants: every route acts in the namespace `auth.conversation_scope` resolved, which
answers a namespace outside the token's prefix exactly like a missing conversation
(before the body is validated); writes answer 201; every body returned is finite JSON.
A batch with `format: "anthropic"` is converted by `from_anthropic` (one Anthropic
message may become several stored ones; `positions` lists them all) and appended in the
same one transaction: a message any step refuses is named by its index in the batch as
sent (`messages[2].content[1].type`) and nothing is written. The single-message route
takes OpenAI messages only: its body is the message itself, and its answer one position.

Both appends take an optional `Idempotency-Key` header (IETF draft "The Idempotency-Key
HTTP Header Field"; `Memory.append_outcome`): the first request under a key is stored
with it, and the same request sent again under it stores nothing and gets the first
answer again (201, the same body) with `Idempotent-Replayed: true`. The key is checked
before anything is read or converted (`check_idempotency_key`, the library's own check)
and a refusal, malformed or reused for a different request, is a 422 whose `loc` names
the header (`["header", "Idempotency-Key"]`), never the library's argument name.

Both take `expect_position` and `expect_incarnation` in the body (the single append's
beside the message's envelope fields; `Memory.append_outcome`): written only if the
conversation goes on at that position and is still that incarnation, else 409
(`PositionMismatch`) and nothing written, checked inside the append's own transaction,
after the messages are validated and a replay under a key answered (a replay answers the
first outcome, whatever the log holds now). Both answer the `incarnation` the messages
went to as the library answers it, the opaque token `incarnation_token` makes of the
store's key, and pass a token sent back to the library as it came: `Memory.append_outcome`
matches it against the conversation's key now (the MCP append tool's too), and one that
does not match (or no conversation) is refused as a gone incarnation.
"""

import re
from collections.abc import Sequence
from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, HTTPException, Path, Query, Response

from tiermem.adapters.anthropic import METADATA_KEYS, from_anthropic
from tiermem.errors import PositionMismatch, ValidationError
from tiermem.memory import MAX_HISTORY_PAGE
from tiermem.service.auth import NAMESPACE_HEADER, Ns
from tiermem.service.handlers import body_refusal
from tiermem.service.head import HeadRoute
from tiermem.service.params import CURSOR, DIGITS, single_values
from tiermem.service.runtime import RuntimeDep
from tiermem.service.schemas import (
    APPEND_ERRORS,
    APPENDED,
    CONV_ERRORS,
    IDEMPOTENCY_HEADER,
    MAX_POSITION,
    OPENAI_FORMAT,
    REPLAYED_HEADER,
    ActiveOut,
    AppendOut,
    BatchIn,
    BatchOut,
    CheckpointIn,
    CheckpointOut,
    ConditionalMessageIn,
    ConvId,
    FactOut,
    FactsOut,
    ForkIn,
    ForkOut,
    HistoryOut,
    MessageIn,
    PinIn,
    PinOut,
    error_type,
    finite,
    stored_out,
)
from tiermem.tiers.models import (
    IDEMPOTENCY_KEY_PATTERN,
    MAX_IDEMPOTENCY_KEY_CHARS,
    check_idempotency_key,
    validate_id,
)

CONVERSATION = "/v1/conversations/{conversation_id}"

# a query parameter given twice is a 422 (tiermem.service.params)
conversation_routes = APIRouter(prefix=CONVERSATION, route_class=HeadRoute, dependencies=[Depends(single_values)])
_BATCH_INDEX = re.compile(r"messages\[(\d+)\]")  # how Memory.append_many names a message of a batch
_ONLY_MESSAGE = "messages[0]"  # how append_outcome names the one message of the single append
_KEY_FIELD = "idempotency_key"  # how the library names the key; the caller sent it as a header
_NS_FIELD = "namespace"  # how the library names the namespace; the caller sent it as a header

IdempotencyKey = Annotated[str | None, Header(
    alias=IDEMPOTENCY_HEADER,
    description=f"optional: 1..{MAX_IDEMPOTENCY_KEY_CHARS} visible ASCII characters (a UUID will do), "
    "unique per request you mean to store once. Sent again with the same request (a retry after a "
    "timeout), nothing is stored and the first answer comes back with `Idempotent-Replayed: true`; "
    "sent with a different request to the same conversation, 422. Kept as long as the conversation",
    json_schema_extra={"maxLength": MAX_IDEMPOTENCY_KEY_CHARS, "pattern": f"^{IDEMPOTENCY_KEY_PATTERN.pattern}$"})]


def _as_header(exc: ValidationError) -> ValidationError:
    """`exc`, a refusal of the key, naming the header the caller sent instead of the
    library's argument (in place: its class, IdempotencyKeyReused included, is kept). A
    refusal of the namespace (the append checks the one it writes in against
    max_id_chars, which reads of it do not: it may be made before that was lowered) is
    raised located at the namespace header, as `named` locates one."""
    if exc.field == _NS_FIELD:
        raise HTTPException(422, [{"loc": ["header", NAMESPACE_HEADER], "msg": exc.problem,
                                   "type": error_type(exc)}]) from None
    if exc.field == _KEY_FIELD:
        exc.field = IDEMPOTENCY_HEADER
        exc.args = (f"{exc.field}: {exc.problem}",)
    return exc


def _checked_key(key: str | None) -> str | None:
    try:
        return None if key is None else check_idempotency_key(key)
    except ValidationError as exc:
        raise _as_header(exc) from None


def _mismatch(exc: PositionMismatch, token: str | None) -> PositionMismatch:
    """`exc` naming the incarnation as the caller sent it, in its message too (`naming`)."""
    return exc.naming(token)


def _replayed(response: Response, replayed: bool) -> None:
    if replayed:
        response.headers[REPLAYED_HEADER] = "true"


@conversation_routes.post(
    "/messages",
    response_model=AppendOut,
    status_code=201,
    responses={**APPEND_ERRORS, **APPENDED},
    tags=["write"],
    summary="Append one message",
)
def append(conversation_id: ConvId, message: ConditionalMessageIn, ns: Ns, runtime: RuntimeDep, response: Response,
           idempotency_key: IdempotencyKey = None) -> AppendOut:
    key = _checked_key(idempotency_key)
    try:  # the body as sent, nulls included; the conditions are declared fields, not of the body
        out = runtime.mem().append_outcome(conversation_id, [message], namespace=ns, idempotency_key=key,
                                           expect_position=message.expect_position,
                                           expect_incarnation=message.expect_incarnation)
    except PositionMismatch as exc:
        raise _mismatch(exc, message.expect_incarnation) from None
    except ValidationError as exc:
        _as_header(exc)
        if exc.field.startswith(_ONLY_MESSAGE):  # the body is the message: named as Memory.append names it,
            # and located in the body, whatever the field's name (one named like the path's id is not the id)
            raise body_refusal(exc, exc.field[len(_ONLY_MESSAGE):].removeprefix(".")) from None
        raise
    _replayed(response, out.replayed)
    return AppendOut(conversation_id=conversation_id, position=out.positions[0],
                     incarnation=_token(out.incarnation))


@conversation_routes.post(
    "/messages:batch",
    response_model=BatchOut,
    status_code=201,
    responses={**APPEND_ERRORS, **APPENDED},
    tags=["write"],
    summary="Append messages in one transaction (all or nothing)",
)
def append_batch(conversation_id: ConvId, batch: BatchIn, ns: Ns, runtime: RuntimeDep, response: Response,
                 idempotency_key: IdempotencyKey = None) -> BatchOut:
    key = _checked_key(idempotency_key)  # before the conversion: a bad header converts nothing
    if batch.format == OPENAI_FORMAT:
        messages: Sequence[MessageIn | dict[str, Any]] = list(batch.messages)
        sent_as: list[int] | None = None
    else:
        messages, sent_as = _from_anthropic(batch.messages, runtime.config.max_metadata_bytes)
    try:
        out = runtime.mem().append_outcome(conversation_id, messages, namespace=ns, session_id=batch.session_id,
                                           idempotency_key=key, expect_position=batch.expect_position,
                                           expect_incarnation=batch.expect_incarnation)
    except PositionMismatch as exc:
        raise _mismatch(exc, batch.expect_incarnation) from None
    except ValidationError as exc:
        _as_header(exc)
        m = _BATCH_INDEX.match(exc.field)
        if sent_as is not None and m is not None and int(m.group(1)) < len(sent_as):
            # the stored message's index is not the caller's: name the message as sent
            exc.field = f"messages[{sent_as[int(m.group(1))]}]{exc.field[m.end():]}"
            exc.args = (f"{exc.field}: {exc.problem}",)
        raise
    _replayed(response, out.replayed)
    return BatchOut(conversation_id=conversation_id, positions=out.positions,
                    incarnation=_token(out.incarnation))


def _token(token: str | None) -> str:
    """The incarnation an append answers: `Memory.append_outcome` always names it, as
    the opaque token (`incarnation_token`) the answer carries."""
    assert token is not None, "Memory.append_outcome answered no incarnation"
    return token


def _from_anthropic(sent: list[MessageIn], max_metadata_bytes: int) -> tuple[list[dict[str, Any]], list[int]]:
    """The OpenAI messages `from_anthropic` makes of each Anthropic message of a batch,
    each carrying its message's envelope (its metadata beside the adapter's keys), and for
    each the index of the message it came from. Converts them all before anything is
    written, so a refusal of any leaves the batch unwritten."""
    out: list[dict[str, Any]] = []
    sent_as: list[int] = []
    for i, m in enumerate(sent):
        where = f"messages[{i}]"
        taken = sorted(set(m.metadata or {}) & set(METADATA_KEYS))
        if taken:
            raise ValidationError(f"{where}.metadata.{taken[0]}", "is a key the Anthropic adapter keeps its "
                                  f"blocks' data under (reserved: {', '.join(METADATA_KEYS)})")
        try:
            converted = from_anthropic(m.body(), max_metadata_bytes=max_metadata_bytes)
        except ValidationError as exc:
            raise ValidationError(f"{where}.{exc.field}", exc.problem) from None
        for c in converted:
            envelope: dict[str, Any] = {k: v for k, v in (("session_id", m.session_id), ("created_at", m.created_at))
                                        if v is not None}
            if m.metadata is not None or "metadata" in c:
                envelope["metadata"] = {**(m.metadata or {}), **c.get("metadata", {})}
            out.append({**c, **envelope})
            sent_as.append(i)
    return out, sent_as


@conversation_routes.get(
    "/history",
    response_model=HistoryOut,
    responses=CONV_ERRORS,
    tags=["read"],
    summary="The messages in order: every one, or a page",
)
def history(
    conversation_id: ConvId,
    ns: Ns,
    runtime: RuntimeDep,
    after: Annotated[int | None, Query(ge=-1, le=MAX_POSITION, description=(
        "page cursor: only positions after this one (the previous page's `next_after`)")), CURSOR] = None,
    limit: Annotated[int | None, Query(ge=1, le=MAX_HISTORY_PAGE, description=(
        "at most this many positions; `next_after` says where the next page starts")), DIGITS] = None,
) -> HistoryOut:
    msgs, next_after = runtime.mem().history_page(conversation_id, namespace=ns, after=after, limit=limit)
    return HistoryOut(conversation_id=conversation_id, messages=[stored_out(m) for m in msgs],
                      next_after=next_after)


@conversation_routes.get(
    "/facts",
    response_model=FactsOut,
    responses=CONV_ERRORS,
    tags=["read"],
    summary="What the agent believes now: current statements and superseded ones with validity intervals",
)
def facts(conversation_id: ConvId, ns: Ns, runtime: RuntimeDep) -> FactsOut:
    got = runtime.mem().facts(conversation_id, namespace=ns)
    return FactsOut(conversation_id=conversation_id, facts=[FactOut(**finite(f.to_json())) for f in got])


@conversation_routes.get(
    "/active",
    response_model=ActiveOut,
    responses=CONV_ERRORS,
    tags=["read"],
    summary="The latest checkpoint and the messages after it",
)
def active(conversation_id: ConvId, ns: Ns, runtime: RuntimeDep) -> ActiveOut:
    view = runtime.mem().active(conversation_id, namespace=ns)
    cp = view.checkpoint
    return ActiveOut(
        conversation_id=conversation_id,
        checkpoint=CheckpointOut(**finite(asdict(cp))) if cp is not None else None,
        messages=[stored_out(m) for m in view.messages],
    )


@conversation_routes.post(
    "/fork",
    response_model=ForkOut,
    status_code=201,
    responses=CONV_ERRORS,
    tags=["write"],
    summary="A new conversation holding positions 0..up_to of this one",
)
def fork(conversation_id: ConvId, body: ForkIn, ns: Ns, runtime: RuntimeDep) -> ForkOut:
    if body.new_id is not None:  # Memory names this field conversation_id; the caller sent new_id
        validate_id(body.new_id, "new_id", runtime.config.max_id_chars)
    child = runtime.mem().fork(conversation_id, body.up_to, new_id=body.new_id, namespace=ns)
    return ForkOut(conversation_id=child, parent_id=conversation_id, up_to=body.up_to)


@conversation_routes.post(
    "/pins",
    response_model=PinOut,
    responses=CONV_ERRORS,
    tags=["write"],
    summary="Keep a turn in the working set whatever the eviction pressure",
)
def pin(conversation_id: ConvId, body: PinIn, ns: Ns, runtime: RuntimeDep) -> PinOut:
    runtime.mem().pin(conversation_id, body.position, priority=body.priority, namespace=ns)
    return PinOut(
        conversation_id=conversation_id, position=body.position, pinned=True, priority=body.priority
    )


@conversation_routes.delete(
    "/pins/{position}",
    response_model=PinOut,
    responses=CONV_ERRORS,
    tags=["write"],
    summary="Remove an explicit pin",
)
def unpin(
    conversation_id: ConvId,
    position: Annotated[int, Path(ge=0, le=MAX_POSITION), DIGITS],
    ns: Ns,
    runtime: RuntimeDep,
) -> PinOut:
    runtime.mem().unpin(conversation_id, position, namespace=ns)
    return PinOut(conversation_id=conversation_id, position=position, pinned=False, priority=None)


@conversation_routes.post(
    "/checkpoints",
    response_model=CheckpointOut,
    status_code=201,
    responses=CONV_ERRORS,
    tags=["write"],
    summary="Fold: a summary stands in for positions <= position (deletes nothing)",
)
def checkpoint(conversation_id: ConvId, body: CheckpointIn, ns: Ns, runtime: RuntimeDep) -> CheckpointOut:
    cp = runtime.mem().checkpoint(conversation_id, body.summary, body.position, namespace=ns)
    return CheckpointOut(**finite(asdict(cp)))

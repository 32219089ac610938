"""The routes of one conversation: append, read (history, facts, active), fork, pins
and checkpoints, under /v1/conversations/{conversation_id}.

Invariants: every route acts in the namespace `auth.conversation_scope` resolved, which
answers a namespace outside the token's prefix exactly like a missing conversation
(before the body is validated); writes answer 201; every body returned is finite JSON.
"""

from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Path, Query

from tiermem.memory import MAX_HISTORY_PAGE
from tiermem.service.auth import Ns
from tiermem.service.runtime import RuntimeDep
from tiermem.service.schemas import (
    APPEND_ERRORS,
    CONV_ERRORS,
    MAX_POSITION,
    ActiveOut,
    AppendOut,
    BatchIn,
    BatchOut,
    CheckpointIn,
    CheckpointOut,
    ConvId,
    FactOut,
    FactsOut,
    ForkIn,
    ForkOut,
    HistoryOut,
    MessageIn,
    PinIn,
    PinOut,
    finite,
    stored_out,
)
from tiermem.tiers.models import validate_id

CONVERSATION = "/v1/conversations/{conversation_id}"

conversation_routes = APIRouter(prefix=CONVERSATION)


@conversation_routes.post(
    "/messages",
    response_model=AppendOut,
    status_code=201,
    responses=APPEND_ERRORS,
    tags=["write"],
    summary="Append one message",
)
def append(conversation_id: ConvId, message: MessageIn, ns: Ns, runtime: RuntimeDep) -> AppendOut:
    pos = runtime.mem().append(conversation_id, message, namespace=ns)  # the body as sent, nulls included
    return AppendOut(conversation_id=conversation_id, position=pos)


@conversation_routes.post(
    "/messages:batch",
    response_model=BatchOut,
    status_code=201,
    responses=APPEND_ERRORS,
    tags=["write"],
    summary="Append messages in one transaction (all or nothing)",
)
def append_batch(conversation_id: ConvId, batch: BatchIn, ns: Ns, runtime: RuntimeDep) -> BatchOut:
    positions = runtime.mem().append_many(
        conversation_id,
        list(batch.messages),
        namespace=ns,
        session_id=batch.session_id,
    )
    return BatchOut(conversation_id=conversation_id, positions=positions)


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
        "page cursor: only positions after this one (the previous page's `next_after`)"))] = None,
    limit: Annotated[int | None, Query(ge=1, le=MAX_HISTORY_PAGE, description=(
        "at most this many positions; `next_after` says where the next page starts"))] = None,
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
    position: Annotated[int, Path(ge=0, le=MAX_POSITION)],
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

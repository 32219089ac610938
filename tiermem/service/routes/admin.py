"""A namespace's administration: its conversations and counts, retention by age, and
erasure on request (one conversation, or a namespace and those below it).

Invariants (DESIGN invariants 3 and 10): erasure removes a conversation's messages and
every derived byte in one action and answers the erasure report (counts and tombstones,
no content); a whole namespace is erased only when the request names it in
`NAMESPACE_HEADER` (422 without it), never by default; namespace routes outside the
token's prefix answer 403, the same for every outside namespace; what a route counts is
its own namespace's only (an erasure answers its counts, not the bytes the store gave
back, which count every tenant's writes: those are logged): the scheduler's lag in /v1/stats is the largest among the
stale views of this namespace's conversations (the namespace itself, as the cold
counts), never the process-wide figure, which would show another tenant's writes
(that one is the operator's, on /metrics).
"""

import logging
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from tiermem.memory import DEFAULT_CONVERSATIONS_PAGE, MAX_CONVERSATIONS_PAGE
from tiermem.service.auth import NAMESPACE_HEADER, ExplicitNs, Ns, SpaceNs
from tiermem.service.head import HeadRoute
from tiermem.service.params import DIGITS, single_values
from tiermem.service.runtime import Runtime, RuntimeDep
from tiermem.service.schemas import (
    CONV_ERASURE_ERRORS,
    ID_DOC,
    LOOKUP_ID_SCHEMA,
    NS_ERASURE_ERRORS,
    NS_ERRORS,
    ConversationsOut,
    ConvId,
    ErasureOut,
    PruneIn,
    PruneOut,
    StatsOut,
    erasure_out,
    finite,
    prune_out,
)
from tiermem.tiers.models import ErasureReport

# what /v1/stats shows of each part of Memory.stats (the rest is internal)
COLD_STATS = ("conversations", "messages", "pending_embeddings")
HOT_STATS = ("healthy", "backend", "tokens", "members", "pins", "evictions", "overflow_tokens", "demoted_pins",
             "demoted_pin_counts", "demoted_pins_listed_max", "pins_behind")
SCHEDULER_STATS = ("running", "interval_s", "lag_turns", "lag_seconds")
# of those, the figures computed over this namespace's views only (`namespace_lag`)
NAMESPACE_LAG_STATS = ("lag_turns", "lag_seconds")

log = logging.getLogger("tiermem.service")

# a query parameter given twice is a 422 (tiermem.service.params)
admin_routes = APIRouter(route_class=HeadRoute, dependencies=[Depends(single_values)])


@admin_routes.delete(
    "/v1/conversations/{conversation_id}",
    response_model=ErasureOut,
    responses=CONV_ERASURE_ERRORS,
    tags=["write"],
    summary="Erase a conversation: its messages and every derived byte; a tombstone keeps counts only",
    description="The right to erasure for one conversation: messages, turns, search and vector "
    "rows, summaries, checkpoints, plans, pins and its hot-tier keys go in one action, disk is "
    "reclaimed, and a tombstone records id, namespace, time and counts (no content). 404 when the "
    "conversation does not exist in the request's namespace (or the namespace is outside the "
    "token's prefix), with the body of a missing conversation.",
)
def delete_conversation(conversation_id: ConvId, ns: Ns, runtime: RuntimeDep) -> ErasureOut:
    return _answered(runtime.mem().delete_conversation(conversation_id, namespace=ns))


@admin_routes.post(
    "/v1/prune",
    response_model=PruneOut,
    responses=NS_ERASURE_ERRORS,
    tags=["write"],
    summary="Delete this namespace's conversations idle for longer than older_than_seconds",
)
def prune(body: PruneIn, ns: SpaceNs, runtime: RuntimeDep) -> PruneOut:
    report = runtime.mem().prune(body.older_than_seconds, namespace=ns, dry_run=body.dry_run)
    return prune_out(report)


@admin_routes.delete(
    "/v1/namespace",
    response_model=ErasureOut,
    responses=NS_ERASURE_ERRORS,
    tags=["write"],
    summary=f"Erase the namespace named by {NAMESPACE_HEADER} and every namespace below it",
    description=f"The right to erasure for a user or tenant: every conversation of the namespace "
    f"named in the `{NAMESPACE_HEADER}` header and of the namespaces below it is erased as by "
    "`DELETE /v1/conversations/{id}`. The header is required (422 without it): a namespace is never "
    "erased by default. 403 when it is outside the token's prefix.",
)
def delete_namespace(ns: ExplicitNs, runtime: RuntimeDep) -> ErasureOut:
    return _answered(runtime.mem().delete_namespace(ns))


def _answered(report: ErasureReport) -> ErasureOut:
    # the bytes the store gave back are the operator's figure (its log), not the
    # tenant's: they count every tenant's writes since the store's last erasure
    log.info("erasure: %d conversation(s), %d message(s), %d bytes reclaimed", report.conversations,
             report.messages, report.bytes_reclaimed)
    return erasure_out(report)


@admin_routes.get(
    "/v1/conversations",
    response_model=ConversationsOut,
    responses=NS_ERRORS,
    tags=["read"],
    summary="This namespace's conversations, a page at a time, in order of id",
)
def conversations(
    ns: SpaceNs,
    runtime: RuntimeDep,
    after: Annotated[str | None, Query(description=(
        "page cursor: only ids after this one (the previous page's `next_after`), an id: " + ID_DOC),
        json_schema_extra=LOOKUP_ID_SCHEMA)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_CONVERSATIONS_PAGE, description=(
        "at most this many ids; `next_after` says where the next page starts")), DIGITS] = DEFAULT_CONVERSATIONS_PAGE,
) -> ConversationsOut:
    names, next_after = runtime.mem().conversations_page(ns, after=after, limit=limit)
    return ConversationsOut(namespace=ns, conversations=names, next_after=next_after)


@admin_routes.get(
    "/v1/stats",
    response_model=StatsOut,
    responses=NS_ERRORS,
    tags=["read"],
    summary="Counts and tier health for this namespace",
)
def stats(ns: SpaceNs, runtime: RuntimeDep) -> StatsOut:
    raw = runtime.mem().stats(namespace=ns)
    cold = {k: raw["cold"].get(k) for k in COLD_STATS}
    hot = None
    if raw.get("hot") is not None:
        hot = {k: raw["hot"].get(k) for k in HOT_STATS}
    snap = runtime.scheduler_snapshot()
    sched = None if snap is None else {k: snap.get(k) for k in SCHEDULER_STATS}
    if sched is not None:
        sched.update(namespace_lag(runtime, ns))
    return StatsOut(namespace=ns, cold=finite(cold), hot=finite(hot), scheduler=finite(sched))


def namespace_lag(runtime: Runtime, ns: str) -> dict[str, Any]:
    """The scheduler's lag over the views of `ns`'s own conversations (an erased one is in
    no namespace); None for both figures when it cannot be computed: never the global one."""
    sched = runtime.scheduler
    if sched is None:
        return dict.fromkeys(NAMESPACE_LAG_STATS)
    cold = runtime.mem().cold
    try:
        turns, seconds = sched.lag(lambda key: cold.namespace_of(key) == ns)
    except Exception:  # a store that cannot answer now: the stats still answer, without the lag
        log.exception("could not compute the scheduler lag of a namespace")
        return dict.fromkeys(NAMESPACE_LAG_STATS)
    return {"lag_turns": turns, "lag_seconds": seconds}

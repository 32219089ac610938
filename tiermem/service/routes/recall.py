"""The retrieval routes: the per-turn context of a conversation (the planner's slice of
the past under a hard token budget) and hybrid search.

Invariants: the context never holds more tokens than the budget asked (Memory.context,
DESIGN invariant 5) and carries its plan; /v1/search with a `conversation_id` is a
conversation route (outside the prefix: 404 like a missing conversation), without one a
namespace route (403), and stays inside the exact namespace asked for; search text is
never interpreted as query syntax; scores are finite. `POST /v1/search` takes the query
in its body, so it stays out of URLs and of the logs that record them; it answers
exactly as the GET. With `format: "anthropic"` the context is answered as
`to_anthropic` builds it from the request's namespace (thinking and metadata restored
from the stored rows), next to the same plan, with the tokens the request sends (the
plan's and the thinking and whole blocks it adds, which /metrics observes too) and
`to_anthropic`'s notes on them; the default answer is
OpenAI's, unchanged. `thinking` and `max_breakpoints` are refused without it.
"""

import math
from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from tiermem.adapters.anthropic import opening_tokens, to_anthropic
from tiermem.errors import ValidationError
from tiermem.memory import MAX_SEARCH_K
from tiermem.service.auth import Ns, SearchBodyNs, SearchNs
from tiermem.service.head import HeadRoute
from tiermem.service.params import DIGITS, single_values
from tiermem.service.runtime import Runtime, RuntimeDep
from tiermem.service.schemas import (
    CONV_ERRORS,
    DEFAULT_SEARCH_K,
    ID_DOC,
    LOOKUP_ID_SCHEMA,
    NS_ERRORS,
    OPENAI_FORMAT,
    AnthropicContextOut,
    ContextIn,
    ContextOut,
    ConvId,
    SearchHitOut,
    SearchIn,
    SearchOut,
    ValidUntil,
    finite,
)

# a query parameter given twice is a 422 (tiermem.service.params)
recall_routes = APIRouter(route_class=HeadRoute, dependencies=[Depends(single_values)])
ANTHROPIC_OPTIONS = ("thinking", "max_breakpoints")  # ContextIn's fields passed to to_anthropic


@recall_routes.post(
    "/v1/conversations/{conversation_id}/context",
    response_model=ContextOut | AnthropicContextOut,
    responses=CONV_ERRORS,
    tags=["read"],
    summary="The slice of the past to send with this turn, under a hard token budget",
    description="OpenAI-format messages by default; with `format: \"anthropic\"`, `system` and `messages` "
    "for Anthropic's Messages API (`AnthropicContextOut`).",
)
def context(conversation_id: ConvId, body: ContextIn, ns: Ns, runtime: RuntimeDep
            ) -> ContextOut | AnthropicContextOut:
    # the adapter's options the caller set; unset ones keep to_anthropic's defaults
    options: dict[str, Any] = {f: v for f in ANTHROPIC_OPTIONS if (v := getattr(body, f)) is not None}
    if body.format == OPENAI_FORMAT and options:
        raise ValidationError(next(iter(options)), 'only with format "anthropic" (an OpenAI context has no '
                              "thinking blocks or cache marks)")
    mem = runtime.mem()
    # an Anthropic request may open with a user message of its own (to_anthropic's,
    # where the context opens with a reply): planned with room for it
    opening = opening_tokens(mem) if body.format != OPENAI_FORMAT else 0
    ctx = mem.context(
        conversation_id,
        body.query,
        body.budget,
        system=body.system,
        namespace_recall=body.namespace_recall,
        namespace=ns,
        truncate_latest=body.truncate_latest,
        timezone=body.timezone,
        pending_tokens=body.pending_tokens + opening,
    )
    if body.format != OPENAI_FORMAT:
        # the request's namespace: the stored rows that restore thinking are read there
        req = to_anthropic(ctx, mem.namespaced(ns), reserved=opening, **options)
        # what is sent, counted (the plan's tokens and the thinking and whole blocks the
        # request adds), answered and observed: the plan's count would understate it
        for hook in runtime.plan_hooks:
            hook(ns, ctx.plan, req.tokens, ctx.plan.budget + opening)
        return AnthropicContextOut(format=body.format, system=finite(req.system), messages=finite(req.messages),
                                   tokens=req.tokens, notes=req.notes, plan=finite(ctx.plan.to_dict()),
                                   explain=ctx.plan.explain(), breakpoints=[asdict(b) for b in req.breakpoints])
    for hook in runtime.plan_hooks:
        hook(ns, ctx.plan, ctx.tokens, ctx.plan.budget)
    return ContextOut(
        messages=finite(ctx.messages),
        tokens=ctx.tokens,
        plan=finite(ctx.plan.to_dict()),
        explain=ctx.plan.explain(),
    )


@recall_routes.get(
    "/v1/search",
    response_model=SearchOut,
    responses={**CONV_ERRORS, **NS_ERRORS},
    tags=["read"],
    summary="Hybrid search (vectors + bm25) in one conversation, or across the namespace",
)
def search(
    ns: SearchNs,
    runtime: RuntimeDep,
    q: Annotated[str, Query(description="free text; search syntax is not interpreted")],
    conversation_id: Annotated[
        str | None, Query(description=f"omit to search the whole namespace: {ID_DOC}",
                            json_schema_extra=LOOKUP_ID_SCHEMA)
    ] = None,
    k: Annotated[int, Query(ge=1, le=MAX_SEARCH_K), DIGITS] = DEFAULT_SEARCH_K,
) -> SearchOut:
    return _search(runtime, ns, q, conversation_id, k)


@recall_routes.post(
    "/v1/search",
    response_model=SearchOut,
    responses={**CONV_ERRORS, **NS_ERRORS},
    tags=["read"],
    summary="Hybrid search, the query in the body (kept out of URLs and access logs)",
    description="As `GET /v1/search`, with `q`, `conversation_id` and `k` in a JSON body.",
)
def search_post(body: SearchIn, ns: SearchBodyNs, runtime: RuntimeDep) -> SearchOut:
    return _search(runtime, ns, body.q, body.conversation_id, body.k)


def _search(runtime: Runtime, ns: str, q: str, conversation_id: str | None, k: int) -> SearchOut:
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
                status=h.status,
                valid_until=(ValidUntil(position=h.superseded_by, time=h.until, superseded_by=h.superseded_by)
                             if h.superseded_by is not None and h.until is not None else None),
            )
            for h in hits
        ],
        degraded=getattr(hits, "degraded", None),
        vectors_pending=getattr(hits, "vectors_pending", 0),
    )

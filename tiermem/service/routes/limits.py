"""`GET /v1/limits`: what the service refuses past, so that a client can check before
sending (`tiermem.client.Client.limits`, the adapters' `metadata_limit`), and that the
appends honour an `Idempotency-Key` (`idempotency_keys: true`, which a server older than
them does not say: the client retries an append under a key only where it is said),
and that they take conditions (`conditional_appends: true`: `expect_position` and
`expect_incarnation`, which an older server refuses as unknown fields, 422: the client
sends them only where it is said).

Invariants: the answer is this process's configuration and the library's fixed limits,
read from the one map below (`CONFIG_LIMITS`, `FIXED_LIMITS`), never a copy of a value,
and nothing else: no token, path or other secret of the config. Any valid token may read
it, whatever its namespace (the limits are the same for every tenant); with auth off it
is served as openly as every other route.
"""

from fastapi import APIRouter

from tiermem.config import Config
from tiermem.memory import MAX_BATCH_MESSAGES, MAX_CONVERSATIONS_PAGE, MAX_HISTORY_PAGE, MAX_SEARCH_K
from tiermem.planner.plan import MAX_BREAKPOINTS
from tiermem.service.head import HeadRoute
from tiermem.service.runtime import RuntimeDep
from tiermem.service.schemas import GUARD_ERRORS, LimitsOut
from tiermem.tiers.models import (
    MAX_BUDGET_TOKENS,
    MAX_IDEMPOTENCY_KEY_CHARS,
    MAX_JSON_DEPTH,
    MAX_JSON_INT_DIGITS,
    MAX_NAMESPACE_DEPTH,
    SESSION_MAX_CHARS,
)

# the Config settings a client must respect, answered under their own names
CONFIG_LIMITS = ("max_content_bytes", "max_metadata_bytes", "max_body_bytes", "max_id_chars")
# the library's fixed limits, each under its constant's name
FIXED_LIMITS = {
    "max_batch_messages": MAX_BATCH_MESSAGES,
    "max_budget_tokens": MAX_BUDGET_TOKENS,
    "max_history_page": MAX_HISTORY_PAGE,
    "max_conversations_page": MAX_CONVERSATIONS_PAGE,
    "max_search_k": MAX_SEARCH_K,
    "max_json_depth": MAX_JSON_DEPTH,
    "max_namespace_depth": MAX_NAMESPACE_DEPTH,
    "session_max_chars": SESSION_MAX_CHARS,
    "max_breakpoints": MAX_BREAKPOINTS,
    # what this server honours, not a limit: an older server, which ignores the header,
    # does not say it, so a client retries an append under a key only where it is said
    "idempotency_keys": True,
    "max_idempotency_key_chars": MAX_IDEMPOTENCY_KEY_CHARS,
    # ... and the appends' conditions: an older server refuses the fields (422), so a
    # client sends them only where this is said
    "conditional_appends": True,
    # digits of one integer anywhere in a body (a message, its metadata, a tool call's
    # input): the guard's and the library's one limit; last, as an older server lacks it
    "max_json_int_digits": MAX_JSON_INT_DIGITS,
}

limits_routes = APIRouter(route_class=HeadRoute)  # included with the bearer credentials dependency


def limits_of(config: Config) -> LimitsOut:
    """The limits a service with `config` enforces (`LimitsOut` forbids a field the map
    lacks and requires every one it declares, so the two cannot drift apart)."""
    return LimitsOut(**{name: getattr(config, name) for name in CONFIG_LIMITS}, **FIXED_LIMITS)


@limits_routes.get(
    "/v1/limits",
    response_model=LimitsOut,
    responses=GUARD_ERRORS,  # no storage: no 503 or 507
    tags=["read"],
    summary="The limits this service refuses past: its configured byte and id limits and the library's fixed ones",
    description="Any valid token may read it (the limits are the same in every namespace); it holds "
    "configuration a client needs to check its requests before sending, no secret.",
)
def limits(runtime: RuntimeDep) -> LimitsOut:
    return limits_of(runtime.config)

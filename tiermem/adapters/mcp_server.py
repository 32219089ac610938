"""An MCP server over tiermem (`pip install 'tiermem[mcp]'`; `tiermem mcp` runs it on stdio).

Tools (each takes a conversation id; every call acts in one namespace): `append` a
message (with an optional `idempotency_key`: called again with the same key and message,
it stores nothing and answers the first position; `Memory.append_outcome`; and with the
HTTP append's optional conditions, `expect_position` and `expect_incarnation`: stored only
if the conversation goes on at that position and is still the incarnation named, else a
tool error naming the position expected and found, nothing written; every append answers
the conversation's `incarnation` as the library and the HTTP service answer it, an
opaque token (`tiermem.tiers.models.incarnation_token`), never the store's key, and a
token sent back goes to the library as it came, which matches it against the
conversation's key), `context` for a query under a token budget (with the plan's reasons),
`history` (each body with the metadata appended with it, as the HTTP history), `search`, `pin`, `unpin` and `erase` (with a confirmation argument, checked after the id's own checks). `context` answers
OpenAI-format messages, or with `format="anthropic"` the `system` and `messages` that
`tiermem.adapters.anthropic.to_anthropic` builds (thinking restored from the call's memory), its
`tokens` what that request sends (`AnthropicRequest.tokens`) and its `notes`. Input that tiermem
refuses comes back as a tool error whose text names the field, and nothing is written; a
number argument is a JSON integer only (`true`, `false` or "5" is a tool error naming it).
What the tools return is rendered as the HTTP service renders it (`render`, the service's
`finite`): a row an older version stored deeper than `MAX_RENDER_DEPTH` is served with
the part past it shown as `DEEP_VALUE_MARKER`, no non-finite float, the row unchanged.

`build_server(memory)` binds every call to one `Memory` / `NamespacedMemory` (stdio, in
process); `build_server(resolve=...)` asks `resolve(ctx)` for the memory of each call,
which is how `tiermem serve` confines a call to its bearer token's namespace
(`tiermem.adapters.mcp_http`).

Built on the `mcp` package's `MCPServer` (mcp 2.x; `FastMCP` in mcp 1.x).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import asdict
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import Tool as MCPTool
from pydantic import Field, StrictBool, StrictInt

from tiermem.adapters._common import DEFAULT_BUDGET_TOKENS, LocalMemory
from tiermem.adapters.anthropic import opening_tokens, to_anthropic
from tiermem.config import MAX_ID_CHARS_LIMIT
from tiermem.memory import MAX_BUDGET_TOKENS, MAX_HISTORY_PAGE, MAX_SEARCH_K
from tiermem.planner.plan import MAX_BREAKPOINTS
from tiermem.tiers.errors import TiermemError, ValidationError
from tiermem.tiers.models import (
    INCARNATION_PATTERN,
    MAX_IDEMPOTENCY_KEY_CHARS,
    MAX_POSITION,
    SearchHit,
    hit_supersession,
    validate_id,
)
from tiermem.tiers.zones import TIMEZONE_DOC

ANTHROPIC_FORMAT = "anthropic"
# A search's k and a history page are bounded by the library's limits (tiermem.memory:
# MAX_SEARCH_K, MAX_HISTORY_PAGE), the ones the HTTP service, the Client and /v1/limits
# state: MCP's own (k <= 100, a page <= 500, no empty query) refused what those take.
SERVER_NAME = "tiermem"
INSTRUCTIONS = (
    "Long-term memory for this conversation. Call `append` with every message worth keeping "
    "(OpenAI Chat Completions messages or Responses items), and `context` before answering to get the "
    "slice of the past that fits your token budget, with the reasons each part was chosen."
)

# to_anthropic's `thinking` (its THINKING_SCOPES, which tests/test_mcp_unknown_arguments.py holds this equal to)
ThinkingScope = Literal["current_loop", "all"]
ONLY_MESSAGE = "messages[0]."  # how append_outcome names a field of the one message appended
# what the tools (schemas) and the stdio reader (guard) import on first use; `load_service`
# imports them before serving (either loads the whole package: both named, both are used)
LAZY_SERVICE_MODULES = ("tiermem.service.guard", "tiermem.service.schemas")
# the request metadata key MCP reserves (params._meta: progressToken and the like); some hosts
# put it inside a tool's arguments, where it is no argument of any tool (`StrictArgumentsServer`)
META_KEY = "_meta"

ConvId = Annotated[str, Field(description="the conversation's id (letters, digits and . _ : @ -)")]
# Every number a tool takes is a StrictInt: the mcp package validates arguments with a pydantic
# model in lax mode, which read JSON `true` as 1, `false` as 0 and "5" as 5 (the library's
# check_int refuses all three): `pin` with `position: true` pinned position 1, `append` with
# `expect_position: true` wrote at position 1. Strict, each is a tool error naming the
# argument (`Input should be a valid integer`), before the tool runs: nothing is written.
# tests/test_mcp_strict_numbers.py lists every tool's number arguments and holds this so.


def render(value: Any) -> Any:
    """`value` as the HTTP service renders it (tiermem.service.schemas.finite): a stored
    body an older version wrote past `MAX_RENDER_DEPTH` levels (the library once took any
    depth) made the MCP server's JSON encoding fail (pydantic gives up past 255 levels),
    and every `history` or `context` call of that conversation answered a tool error.
    Imported here, not at the top: importing this module loads no HTTP service (the base
    install's adapters stay light); `build_server` loads it (`load_service`) before any
    tool runs."""
    from tiermem.service.schemas import finite

    return finite(value)


def load_service() -> None:
    """Import, in the calling thread, the HTTP service's modules that the tools' helpers
    (`render`, `_token`, `_expected_key`) and the stdio reader (`mcp_stdio.line_refusal`)
    import on first use, so that no tool thread is the first to.

    The tools run in worker threads (the mcp package runs a sync tool with
    `anyio.to_thread`), and the service's modules import each other (the package's
    `__init__` imports every one, `auth` imports `schemas`): where two threads import two of
    them at once, Python's import locks see a deadlock and give one thread a partly
    initialised module. A burst of calls to a fresh `tiermem mcp` answered its first appends
    `ImportError: cannot import name 'NAMESPACE_HEADER'`, and the reader, importing the
    guard for a refused line meanwhile, died of a `_DeadlockError` that ended the session.
    Their first use would load the same modules anyway (every answer is rendered by
    `schemas.finite`): this moves those imports (0.2-0.5 s) from the first call to the start."""
    for module in LAZY_SERVICE_MODULES:
        importlib.import_module(module)


class MemoryToolError(ToolError):
    """A tool call tiermem refused; its text names the field. MCP reports a `ToolError` to
    the model as a tool error with this text (any other exception as a bare crash)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))


MemoryResolver = Callable[[Context], LocalMemory]


def _search_hit(h: SearchHit) -> dict[str, Any]:
    """A search hit as the tool answers it: whether it still holds beside what it says
    (`status`, and `valid_until` when a later message superseded it, as `facts`'s)."""
    return {"conversation_id": h.conversation_id, "position": h.position, "score": h.score, "text": h.text,
            **hit_supersession(h)}


def _token(token: str | None) -> str:
    """The incarnation an append answered: the library always names it, as the opaque
    token (`incarnation_token`) the HTTP service answers too, never the store's key."""
    assert token is not None, "Memory.append_outcome answered no incarnation"
    return token


def _one_message(exc: ValidationError) -> ValidationError:
    """`exc` naming a field of the tool's one message as `Memory.append` names it (`role`),
    not as the batch `append_outcome` does (`messages[0].role`); in place, its class kept."""
    if exc.field.startswith(ONLY_MESSAGE):
        exc.field = exc.field[len(ONLY_MESSAGE):]
        exc.args = (f"{exc.field}: {exc.problem}",)
    return exc


def build_server(memory: LocalMemory | None = None, *, resolve: MemoryResolver | None = None,
                 name: str = SERVER_NAME) -> MCPServer:
    """An MCP server whose tools act on `memory` (a `Memory`, or `mem.namespaced(ns)` to
    confine every call to one namespace), or on `resolve(ctx)`, asked once per call
    (exactly one of the two)."""
    if (memory is None) == (resolve is None):
        raise TypeError("build_server takes exactly one of memory and resolve")
    load_service()  # before any tool thread: they import it lazily (see load_service)
    server: MCPServer = StrictArgumentsServer(name, instructions=INSTRUCTIONS)
    fixed = memory

    def mem_of(ctx: Context) -> LocalMemory:
        if fixed is not None:
            return fixed
        assert resolve is not None
        return resolve(ctx)

    def guard(tool: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (TiermemError, KeyError, ValueError) as exc:
            raise MemoryToolError(exc) from None

    @server.tool(description="Remember one message: an OpenAI Chat Completions message ({role, content, ...}) "
                 "or a Responses API input item ({type, ...}), stored exactly as given. Returns its position and "
                 "the conversation's `incarnation`. With `expect_position` it is stored only if the conversation "
                 "goes on at that position (else a tool error saying where it goes on, and nothing stored).")
    def append(ctx: Context, conversation_id: ConvId,
               message: Annotated[dict[str, Any], Field(description="the message, as a JSON object")],
               session_id: Annotated[str | None, Field(description="optional session (visit) id")] = None,
               idempotency_key: Annotated[str | None, Field(description=(
                   f"optional: your id of this append (1..{MAX_IDEMPOTENCY_KEY_CHARS} visible ASCII characters). "
                   "Call again with the same key and message after a failure or timeout: it is stored once "
                   "and the first position comes back"))] = None,
               expect_position: Annotated[StrictInt | None, Field(ge=0, le=MAX_POSITION, description=(
                   "optional: store it only if the conversation goes on at this position (holds positions "
                   "0..n-1; 0: it does not exist yet), else a tool error and nothing stored"))] = None,
               expect_incarnation: Annotated[str | None, Field(pattern=INCARNATION_PATTERN, description=(
                   "optional, with `expect_position`: the `incarnation` an earlier append answered; store it "
                   "only if the conversation is still that one, not erased (and written again) since"))] = None,
               ) -> dict[str, int | str]:
        # the key and the conditions are checked by the library (check_idempotency_key,
        # append_outcome's): a bad one is a tool error naming it, a failed condition the
        # library's PositionMismatch (the position expected and found), nothing written
        mem = mem_of(ctx)
        try:
            out = mem.append_outcome(conversation_id, [message], session_id=session_id,
                                     idempotency_key=idempotency_key, expect_position=expect_position,
                                     expect_incarnation=expect_incarnation)
        except ValidationError as exc:
            raise MemoryToolError(_one_message(exc)) from None
        except (TiermemError, KeyError, ValueError) as exc:
            raise MemoryToolError(exc) from None
        return {"position": out.positions[0], "incarnation": _token(out.incarnation)}

    @server.tool(description="The context to send with the next model call: pinned facts, summaries, "
                 "retrieved turns and the recent tail, never more than `budget` tokens, with the plan "
                 "(what each part is, why it was chosen, what was left out). `tokens` counts what is sent; "
                 "with format `anthropic` that is the plan's tokens and the current tool loop's thinking "
                 "blocks the API requires (which can take it past `budget`) and blocks kept whole, and "
                 "`notes` says when, one line each.")
    def context(ctx: Context, conversation_id: ConvId,
                query: Annotated[str | None, Field(description="the new turn's question; omit to plan from "
                                                   "the log alone")] = None,
                # the HTTP context's limit (ContextIn, /v1/limits' max_budget_tokens): stated in
                # the schema and refused as pydantic refuses it there, naming `budget`
                budget: Annotated[StrictInt, Field(ge=1, le=MAX_BUDGET_TOKENS,
                                                   description="hard cap on the returned tokens")] =
                DEFAULT_BUDGET_TOKENS,
                system: Annotated[str | None, Field(description="a system message to put first")] = None,
                format: Annotated[Literal["openai", "anthropic"], Field(
                    description="`openai`: Chat Completions messages; `anthropic`: `system` blocks and "
                    "`messages` for Anthropic's messages.create")] = "openai",
                timezone: Annotated[str | None, Field(description=TIMEZONE_DOC)] = None,
                pending_tokens: Annotated[StrictInt, Field(ge=0, le=MAX_BUDGET_TOKENS, description=(
                    "tokens you send after the context, a message not stored yet: the context is planned "
                    "under `budget` less them"))] = 0,
                truncate_latest: Annotated[StrictBool, Field(description=(
                    "cut the latest user message instead of failing when it alone exceeds the budget"))] = False,
                namespace_recall: Annotated[StrictBool, Field(description=(
                    "also retrieve from this namespace's other conversations"))] = True,
                thinking: Annotated[ThinkingScope | None, Field(description=(
                    "format anthropic only: whose thinking blocks go back, `current_loop` (default) or `all`"))]
                = None,
                max_breakpoints: Annotated[StrictInt | None, Field(ge=0, le=MAX_BREAKPOINTS, description=(
                    f"format anthropic only: at most this many `cache_control` marks (default "
                    f"{MAX_BREAKPOINTS})"))] = None,
                ) -> dict[str, Any]:
        # the HTTP context's arguments (ContextIn), validated as it validates them: the
        # Anthropic options are refused with format openai (nothing they could change)
        options: dict[str, Any] = {name: value for name, value in
                                   (("thinking", thinking), ("max_breakpoints", max_breakpoints)) if value is not None}
        if format != ANTHROPIC_FORMAT and options:
            raise MemoryToolError(ValidationError(next(iter(options)), 'only with format "anthropic" (an OpenAI '
                                                  "context has no thinking blocks or cache marks)"))
        mem = mem_of(ctx)
        # an Anthropic request may open with a user message of its own: planned with room for it
        opening = opening_tokens(mem) if format == ANTHROPIC_FORMAT else 0
        out = guard("context", mem.context, conversation_id, query, budget, system=system, timezone=timezone,
                    pending_tokens=pending_tokens + opening, truncate_latest=truncate_latest,
                    namespace_recall=namespace_recall)
        rest = {"plan": render(out.plan.to_dict()), "explain": out.plan.explain()}
        if format == ANTHROPIC_FORMAT:
            req = guard("context", to_anthropic, out, mem, reserved=opening, **options)
            # what the request sends (with the thinking and whole blocks it adds), and
            # to_anthropic's notes on it, as the HTTP context answers them
            return {"format": format, "system": render(req.system), "messages": render(req.messages),
                    "tokens": req.tokens, "notes": list(req.notes), **rest,
                    "breakpoints": [asdict(b) for b in req.breakpoints]}
        return {"messages": render(out.messages), "tokens": out.tokens, **rest}

    @server.tool(description="Every message of a conversation in order, exactly as appended, its `metadata` "
                 "beside it (a page of at most `limit` positions from position `start`; `next_start` is where "
                 "the next page starts, null at the end).")
    def history(ctx: Context, conversation_id: ConvId,
                start: Annotated[StrictInt, Field(ge=0, le=MAX_POSITION, description="first position")] = 0,
                limit: Annotated[StrictInt, Field(ge=1, le=MAX_HISTORY_PAGE, description="page size")] = 100,
                ) -> dict[str, Any]:
        # reads the page's rows only (Memory.history_page), never the whole conversation
        page, last = guard("history", mem_of(ctx).history_page, conversation_id, after=start - 1, limit=limit)
        # metadata beside the body, as the HTTP history has it: what append stored with the
        # message (the caller's, the adapters' langchain_* and anthropic_* keys) comes back
        return {"messages": [{"position": m.position, "role": m.role, "message": render(m.body),
                              "metadata": render(m.metadata), "session_id": m.session_id,
                              "created_at": m.created_at} for m in page],
                "next_start": None if last is None else last + 1}

    @server.tool(description="Search past messages by meaning and keywords, in one conversation or (without "
                 "conversation_id) across this namespace's conversations. `degraded`, when present, says "
                 "the hits are ranked by keywords only (the embedding model cannot be used); "
                 "`vectors_pending`, when present, how many turns are not embedded yet (found by "
                 "keywords only until the background indexer embeds them). Each hit's `status` says "
                 "whether its message still holds: `current`, `superseded` (a later message replaced or "
                 "retracted it: `valid_until` names which and when; never use it as a current value) or "
                 "`superseded_in_part` (some of its statements: `facts` names them).")
    def search(ctx: Context, query: Annotated[str, Field(description="what to look for")],
               conversation_id: Annotated[str | None, Field(description="limit to this conversation")] = None,
               k: Annotated[StrictInt, Field(ge=1, le=MAX_SEARCH_K, description="how many hits")] = 10,
               ) -> dict[str, Any]:
        hits = guard("search", mem_of(ctx).search, conversation_id, query, k)
        out: dict[str, Any] = {"hits": [_search_hit(h) for h in hits]}
        if hits.degraded is not None:  # keywords only: the embedding model cannot be used
            out["degraded"] = hits.degraded
        if hits.vectors_pending:  # turns ranked by keywords only until the indexer embeds them
            out["vectors_pending"] = hits.vectors_pending
        return out

    @server.tool(description="Pin a message so every context keeps it (a standing instruction or fact).")
    def pin(ctx: Context, conversation_id: ConvId,
            position: Annotated[StrictInt, Field(ge=0, description="the message's position")],
            priority: Annotated[StrictInt, Field(ge=0, le=100, description="higher pins are kept first")] = 50,
            ) -> dict[str, bool]:
        guard("pin", mem_of(ctx).pin, conversation_id, position, priority=priority)
        return {"pinned": True}

    @server.tool(description="Unpin a message pinned with `pin`.")
    def unpin(ctx: Context, conversation_id: ConvId,
              position: Annotated[StrictInt, Field(ge=0, description="the message's position")]) -> dict[str, bool]:
        guard("unpin", mem_of(ctx).unpin, conversation_id, position)
        return {"pinned": False}

    @server.tool(description="Erase a conversation for good: its messages and everything derived from them "
                 "(summaries, search indexes, pins, cached copies); a tombstone with counts and no content "
                 "remains. Only when the user asks to forget it. `confirm` must repeat the conversation_id; "
                 "anything else erases nothing.")
    def erase(ctx: Context, conversation_id: ConvId,
              confirm: Annotated[str, Field(description="the conversation_id again, to confirm the erasure")],
              ) -> dict[str, Any]:
        mem = mem_of(ctx)
        # the id's own checks first: the refusal below quotes it, and only a valid id is
        # bounded (MAX_ID_CHARS_LIMIT) and of the id alphabet; an invalid one was quoted
        # whole, however long, and refused as the wrong field. Not today's max_id_chars:
        # a conversation made before it was lowered must still be erasable
        guard("erase", validate_id, conversation_id, "conversation_id", MAX_ID_CHARS_LIMIT)
        if confirm != conversation_id:
            raise MemoryToolError(ValidationError(
                "confirm", f"must repeat the conversation_id ({conversation_id!r}) to erase it; nothing was erased"))
        report = guard("erase", mem.delete_conversation, conversation_id)
        return {"erased": True, **report.tenant_json()}

    return server


class StrictArgumentsServer(MCPServer):
    """An `MCPServer` whose tools refuse an argument they do not take, and say so in their schema.

    The mcp package's argument models ignore extra keys (pydantic's default): `append` with a
    misspelled `expect_postion` wrote unconditionally, an `idempotency_kee` sent twice stored
    twice, and `context` took a `pending_tokens` it then dropped. Here a call naming an
    argument its tool's published `inputSchema` lacks is a tool error naming it (`Extra inputs
    are not permitted`) before the tool runs: nothing is written, as the HTTP routes refuse an
    unknown field (their models are `extra="forbid"`); and each published schema carries
    `additionalProperties: false`. Only the server's public methods are overridden (the
    package has no public way to set a tool's argument model, and its private attributes may
    be renamed by its next release: tests/test_mcp_stdio_public_api.py). One key is let
    through and dropped: a top-level `_meta` in the arguments (`META_KEY`), the request
    metadata MCP reserves, which some hosts send there rather than beside them (params._meta);
    no tool takes it, and refusing it refused every call of such a host
    (tests/test_mcp_arguments_meta.py)."""

    async def list_tools(self) -> list[MCPTool]:
        return [t.model_copy(update={"input_schema": {**t.input_schema, "additionalProperties": False}})
                for t in await super().list_tools()]

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context[Any, Any] | None = None) -> Any:
        schema = next((t.input_schema for t in await super().list_tools() if t.name == name), None)
        if schema is not None:
            taken = set(schema.get("properties", {}))
            if META_KEY in arguments and META_KEY not in taken:
                arguments = {k: v for k, v in arguments.items() if k != META_KEY}
            unknown = sorted(set(arguments) - taken)
            if unknown:
                # laid out as pydantic words the tool's other argument errors: the location on
                # a line of its own, the problem on the next
                raise ToolError(f"Error executing tool {name}: {len(unknown)} validation error(s) for {name}"
                                "Arguments\n" + "\n".join(f"{arg}\n  Extra inputs are not permitted "
                                                          "[type=extra_forbidden]" for arg in unknown)
                                + f"\nthe tool takes {', '.join(sorted(taken))}; nothing was done")
        return await super().call_tool(name, arguments, context)

"""The plan: what a `context()` call loaded, at what fidelity, and why.

A plan is data first (`to_dict()` for JSON, the `plans` table, the HTTP API) and text
second (`explain()` for a person asking "why did it load this on turn 37?").

Prompt caching: the plan says where the stable prefix ends. `breakpoints` are message
indexes after which the content is expected to stay byte-identical on the next call
(by layer: system, pinned, summary, and `context`, the whole context, which within an
epoch is the next call's prefix); at most `MAX_BREAKPOINTS` (Anthropic's limit on
`cache_control` markers). `Context.with_cache_control()` puts a marker on the last part
of each breakpoint's message, never on a blank text part (Anthropic refuses it:
"cache_control cannot be set for empty text blocks", also when an OpenAI-form gateway
hands it on, which is what the markers are for: OpenAI caches prefixes without them). A
breakpoint on a message of nothing but blank text (an empty reply, a tool's empty
output, a blank system prompt) marks the last part before it, which ends the same
prefix, or nothing when no part before it can carry one; the messages themselves are
not changed. `cache` compares this context with the previous call's for the same
conversation: the leading messages they share, their tokens (what a provider's
prompt cache can serve), the layer where they first differ and why (a new epoch, a pin
that changed, a refreshed summary view), and the tokens each provider is expected to
serve from its prompt cache for this request (`openai_cached_tokens`,
`anthropic_cached_tokens`: by `planner.cache_rules`, which the cost replay bills by).

Stored plans (`store_plans`) are read back through `read_stored_plan`, the one check of
a stored plan's shape: the row is whatever the database holds (an older version's plan,
a hand-written statement), so every field is checked against what `to_dict` writes,
with bounds (token counts up to `MAX_STORED_TOKENS`, positions up to `MAX_POSITION`,
finite scores). What passes is returned in `to_dict`'s shape (a missing optional field
takes its default); what does not is left out and named in a problem line, so a reader
(the inspector) shows the rest and says what it could not show.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter
from pydantic import ValidationError as ShapeError

from tiermem.tiers.models import MAX_BUDGET_TOKENS, MAX_POSITION

SLICES = ("system", "pinned", "summary", "retrieved", "tail")
# a context's message kinds, in order ("memory": pinned, summary and retrieved in one
# message before the latest, under system_messages="before_latest")
LAYERS = ("system", "pinned", "summary", "tail", "retrieved", "memory", "latest")
MAX_BREAKPOINTS = 4  # Anthropic accepts at most four cache_control breakpoints per request
EPHEMERAL = {"type": "ephemeral"}  # the cache_control mark (Anthropic's one cache type)
# content part type -> its text field: a part whose text is blank carries no cache_control
# (Anthropic refuses an empty text block, and a marked one with "cache_control cannot be
# set for empty text blocks"); Chat and Responses part types both
TEXT_PART_FIELDS = {"text": "text", "input_text": "text", "output_text": "text", "refusal": "refusal"}


def _known(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    """The fields of dataclass `cls` in `data` (a newer version's extra fields ignored)."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}


def _item(data: dict[str, Any]) -> PlanItem:
    # a non-finite score is answered as null in JSON
    return PlanItem(**{**_known(PlanItem, data), "score": float("nan") if data["score"] is None else data["score"]})


@dataclass
class PlanItem:
    slice: str
    conversation_id: str
    positions: list[int]
    tier: str  # hot | cold | warm | caller
    fidelity: str
    tokens: int
    score: float
    reason: str

    def label(self) -> str:
        if not self.positions:
            return "-"
        if len(self.positions) == 1:
            return f"#{self.positions[0]}"
        return f"#{self.positions[0]}..#{self.positions[-1]} ({len(self.positions)})"


@dataclass
class ViewStaleness:
    kind: str
    version: int
    covers: tuple[int, int]
    turns_behind: int
    seconds_behind: float
    over_budget: bool


@dataclass
class Breakpoint:
    """`index`: the message after which content is expected to be stable; `layer`: what
    ends there; `tokens`: the context's tokens up to and including that message (less
    the reply priming), to compare with a provider's minimum cacheable prefix."""

    index: int
    layer: str
    tokens: int


@dataclass
class CacheReport:
    """This context against the previous call's for the same conversation."""

    epoch: int = 0  # epochs start at 1; 0: no context built yet
    epoch_calls: int = 0  # calls answered in this epoch, this one included
    new_epoch: bool = True
    reason: str = ""  # why a new epoch started, or what this call appended
    prefix_messages: int = 0  # leading messages identical to the previous call's context
    # their tokens (message accounting, tiers.tokens): what the two contexts share, not
    # what a provider serves from its cache (it counts rendered tokens, from a minimum,
    # OpenAI in steps): that is openai_cached_tokens / anthropic_cached_tokens
    expected_cached_tokens: int = 0
    boundary: str = ""  # layer of the previous context's first message not reused ("": all of it is)
    # the tokens each provider is expected to serve from its prompt cache for this request,
    # against the previous call's (planner.cache_rules, the rules the cost replay bills by:
    # rendered tokens, none under the 1,024-token minimum or past the provider's TTL,
    # OpenAI in 128-token steps, Anthropic only a prefix it holds: written at a breakpoint
    # of the previous request, or of an earlier one and shared since)
    openai_cached_tokens: int = 0
    anthropic_cached_tokens: int = 0


@dataclass
class Plan:
    conversation_id: str
    query: str | None
    query_class: str
    class_reason: str
    budget: int
    tokens: int = 0
    items: list[PlanItem] = field(default_factory=list)
    left_out: list[PlanItem] = field(default_factory=list)
    views: list[ViewStaleness] = field(default_factory=list)
    # tier -> ok | degraded | unused | rebuilt; "embedder" only when degraded (no query vector)
    tiers: dict[str, str] = field(default_factory=dict)
    degraded: bool = False
    # slice -> tokens of its share of the room (the first packing pass; leftovers can take a
    # slice past it, so it is not a cap)
    shares: dict[str, int] = field(default_factory=dict)
    retrieval: str = ""  # whether and how broadly this turn retrieves, and why
    # turns of the conversation without a vector yet that this call left to the background
    # catch-up (Memory's CONTEXT_EMBED_POOLS: a bulk import's backlog): dense ranking did
    # not see them, keywords and recency did; 0: it saw every turn it could
    vectors_pending: int = 0
    # cumulative: ms from the start of the call to the end of each stage, in stage order
    # ("pack": 1181.9 is when packing ended, not how long it took); `stage_ms` has durations
    timings_ms: dict[str, float] = field(default_factory=dict)
    cache: CacheReport = field(default_factory=CacheReport)
    breakpoints: list[Breakpoint] = field(default_factory=list)
    # slice -> the tokens of the messages that show it, as sent (`sent_slice_tokens`): a
    # block's header and session headings counted once; they sum to at most `tokens`.
    # Empty on a plan stored before 2026-12-07 (slice_tokens then estimates)
    slice_sent: dict[str, int] = field(default_factory=dict)

    def slice_tokens(self) -> dict[str, int]:
        """What each slice costs as sent: its share of the plan's tokens, the slices
        summing to at most `tokens`. An item's own count includes what it would cost on its
        own (a session heading the block shares, the block's header), so the items' sums
        overstated a block: a 290-token context of budget 300 said `retrieved: 306 tokens`
        for a 255-token block. A plan without `slice_sent` (stored by an older version):
        the items' sums, scaled down to `tokens` where they exceed it."""
        if self.slice_sent:
            return dict(self.slice_sent)
        out: dict[str, int] = {}
        for it in self.items:
            out[it.slice] = out.get(it.slice, 0) + it.tokens
        return _scaled_to(out, self.tokens)

    @property
    def stage_ms(self) -> dict[str, float]:
        """How long each stage took (the differences of the cumulative `timings_ms`, in
        stage order); `total` stays the whole call."""
        out: dict[str, float] = {}
        prev = 0.0
        for k, v in self.timings_ms.items():
            if k == "total":
                out[k] = v
                continue
            out[k] = round(max(v - prev, 0.0), 3)
            prev = v
        return out

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "stage_ms": self.stage_ms}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Plan:
        """The plan whose `to_dict()` this is (as the service answers it), so that
        `explain()` and every field read as on the plan itself. Fields this version does
        not know (a newer service's) are ignored; a null score is NaN (JSON has none)."""
        kw = _known(cls, data)
        kw["items"] = [_item(i) for i in data.get("items", [])]
        kw["left_out"] = [_item(i) for i in data.get("left_out", [])]
        kw["views"] = [ViewStaleness(**{**_known(ViewStaleness, v), "covers": tuple(v["covers"])})
                    for v in data.get("views", [])]
        kw["breakpoints"] = [Breakpoint(**_known(Breakpoint, b)) for b in data.get("breakpoints", [])]
        kw["cache"] = CacheReport(**_known(CacheReport, data.get("cache", {})))
        return cls(**kw)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)

    def explain(self) -> str:
        lines = [
            f"context for {self.conversation_id!r}: {self.tokens}/{self.budget} tokens",
            f"query class: {self.query_class} ({self.class_reason})",
            f"retrieval: {self.retrieval}",
            "tiers: " + ", ".join(f"{k}={v}" for k, v in self.tiers.items())
            + ("  [DEGRADED: hot tier unavailable, answered from the cold log]" if self.degraded else ""),
        ]
        per = self.slice_tokens()
        for s in SLICES:
            items = [i for i in self.items if i.slice == s]
            if not items:
                continue
            if s == "tail":  # the tail reads as a stretch of the log: in position order
                items.sort(key=lambda i: min(i.positions, default=-1))
            share = self.shares.get(s)
            # the items' own counts each include what they share as sent (a session heading)
            alone = sum(i.tokens for i in items)
            lines.append(f"{s}: {per.get(s, 0)} tokens" + (f" (share {share})" if share is not None else "")
                         + f", {len(items)} item(s)"
                         + (f" ({alone} tok counted one by one)" if alone != per.get(s, 0) else ""))
            for it in items:
                lines.append(f"  {it.label():>14} {it.fidelity:<9} {it.tier:<5} {it.tokens:>5} tok "
                             f"score={it.score:.3f}  {it.reason}")
        c = self.cache
        if c.epoch:
            lines.append(f"cache: epoch {c.epoch}, call {c.epoch_calls}"
                         + (" (new epoch)" if c.new_epoch else "") + f": {c.reason}")
            lines.append(f"  stable prefix: {c.prefix_messages} message(s), {c.expected_cached_tokens} tokens "
                         "shared with the previous call" + (f"; the previous context is reused up to its {c.boundary} layer"
                                                           if c.boundary else ""))
            lines.append(f"  expected cached: {c.openai_cached_tokens} tokens (OpenAI), {c.anthropic_cached_tokens} "
                         "(Anthropic, at the plan's breakpoints)")
        if self.breakpoints:
            lines.append("  breakpoints: " + ", ".join(f"{b.layer} after message {b.index} ({b.tokens} tok)"
                                                      for b in self.breakpoints))
        for v in self.views:
            lines.append(f"view {v.kind} v{v.version} covers #{v.covers[0]}..#{v.covers[1]}: "
                         f"{v.turns_behind} turns / {v.seconds_behind:.0f}s behind"
                         + (" (over its freshness budget)" if v.over_budget else ""))
        if self.left_out:
            lines.append(f"left out: {len(self.left_out)} item(s)")
            for it in self.left_out[:20]:
                lines.append(f"  {it.label():>14} {it.slice:<9} {it.tokens:>5} tok  {it.reason}")
            if len(self.left_out) > 20:
                lines.append(f"  ... and {len(self.left_out) - 20} more")
        return "\n".join(lines)


def _apportion(weights: dict[str, int], amount: int) -> dict[str, int]:
    """`amount` split among `weights`' keys in proportion (largest remainders first, ties
    by name): the parts sum to `amount` exactly. All of it to the first key by name when
    every weight is 0."""
    whole = sum(weights.values())
    if whole <= 0:
        return {k: (amount if k == min(weights) else 0) for k in weights}
    out = {k: v * amount // whole for k, v in weights.items()}
    for k in sorted(weights, key=lambda k: (-(weights[k] * amount % whole), k))[:amount - sum(out.values())]:
        out[k] += 1
    return out


def _scaled_to(parts: dict[str, int], cap: int) -> dict[str, int]:
    """`parts` scaled down in proportion to sum to `cap`; unchanged when they sum to no more."""
    return dict(parts) if sum(parts.values()) <= cap else _apportion(parts, max(cap, 0))


def sent_slice_tokens(messages: Sequence[tuple[str, int, Sequence[PlanItem]]], total: int) -> dict[str, int]:
    """Slice -> tokens as sent (`Plan.slice_sent`), from each message of a context as
    (its layer, its tokens, the plan items it shows): a message showing items of one
    slice is that slice's; one showing several (the "memory" block of
    system_messages="before_latest") is split among them by their items' tokens; one
    showing none is its layer's when that is a slice (a tool result of a tail unit whose
    item sits on the unit's first message; the latest message is the tail's). Scaled
    down to `total` (the context's exact count) where the messages' counts exceed it (a
    conversion that sends less than is stored)."""
    out: dict[str, int] = {}
    for layer, tokens, items in messages:
        weights: dict[str, int] = {}
        for it in items:
            weights[it.slice] = weights.get(it.slice, 0) + max(it.tokens, 0)
        if not weights:
            owner = "tail" if layer == "latest" else layer
            weights = {owner: 1} if owner in SLICES else {}
        for k, v in (_apportion(weights, tokens) if weights else {}).items():
            out[k] = out.get(k, 0) + v
    return _scaled_to(out, total)


@dataclass
class Context:
    """What `Memory.context()` returns: messages ready to send, their exact token
    count (never above the budget) and the plan that chose them."""

    messages: list[dict[str, Any]]
    tokens: int
    plan: Plan
    # the namespace it was planned in (`Memory.context` sets it: its `namespace=`, a view's
    # own); None: not known (a Client's context, one built by hand). An adapter given the
    # context and a memory (`to_anthropic`) reads the conversation's rows back in it, not
    # in the memory's default, where the same conversation id can be another tenant's.
    # Not part of the plan: stored plans and `Plan.to_dict()` are unchanged
    namespace: str | None = None

    @property
    def breakpoints(self) -> list[Breakpoint]:
        return self.plan.breakpoints

    def with_cache_control(self) -> list[dict[str, Any]]:
        """The messages with an Anthropic-style `cache_control` marker for each breakpoint
        (module docstring: never on a blank text part); the others unchanged."""
        targets: set[int] = set()
        for b in self.plan.breakpoints:
            if not 0 <= b.index < len(self.messages):
                continue  # a plan not of these messages: nothing to mark, as before
            # the prefix through a blank message is the prefix through the last part before it
            at = next((j for j in range(b.index, -1, -1) if _markable(self.messages[j])), None)
            if at is not None:
                targets.add(at)
        out: list[dict[str, Any]] = []
        for i, m in enumerate(self.messages):
            m = dict(m)
            if i in targets:
                content = m.get("content")
                if isinstance(content, str):
                    m["content"] = [{"type": "text", "text": content, "cache_control": dict(EPHEMERAL)}]
                elif isinstance(content, list):
                    k = max(k for k, p in enumerate(content) if _markable_part(p))
                    m["content"] = [*content[:k], {**content[k], "cache_control": dict(EPHEMERAL)}, *content[k + 1:]]
                else:  # no content (tool calls only, a Responses item): on the message, as before
                    m["cache_control"] = dict(EPHEMERAL)
            out.append(m)
        return out


def _markable_part(part: object) -> bool:
    """Whether a content part can carry a `cache_control` mark: any part but a blank text one."""
    if not isinstance(part, dict):
        return False
    field_name = TEXT_PART_FIELDS.get(str(part.get("type")))
    return field_name is None or (isinstance(part.get(field_name), str) and bool(part[field_name].strip()))


def _markable(message: dict[str, Any]) -> bool:
    """Whether a message can carry a `cache_control` mark: non-blank text, a part that
    is not blank text, or no content at all (tool calls only: marked on the message)."""
    content = message.get("content")
    if isinstance(content, str):
        return bool(content.strip())
    if isinstance(content, list):
        return any(_markable_part(p) for p in content)
    return content is None and bool(message.get("tool_calls") or message.get("function_call")
                                    or message.get("type") not in (None, "message"))


# -- stored plans, read back ---------------------------------------------------------------

# tokens: no count of a plan (its tokens, an item's, a share, a breakpoint's) exceeds its
# budget, so a stored count is bounded by the largest budget a call accepts
MAX_STORED_TOKENS = MAX_BUDGET_TOKENS
MAX_SHAPE_PROBLEMS = 5  # problem lines per list field; the rest are counted in one line


def _known_slice(s: str) -> str:
    if s not in SLICES:
        raise ValueError(f"not one of {', '.join(SLICES)}")
    return s


Tokens = Annotated[int, Field(ge=0, le=MAX_STORED_TOKENS)]
Count = Annotated[int, Field(ge=0, le=MAX_POSITION)]  # message indexes, epochs, calls
Position = Annotated[int, Field(ge=0, le=MAX_POSITION)]
Finite = Annotated[float, Field(allow_inf_nan=False)]


class _Shape(BaseModel):
    # strict: "12" is no count and true is no number; unknown keys (a newer version's) are ignored
    model_config = ConfigDict(strict=True, extra="ignore")


class StoredItem(_Shape):
    slice: Annotated[str, AfterValidator(_known_slice)]
    conversation_id: str
    positions: list[Position]
    tier: str
    fidelity: str
    tokens: Tokens
    score: Finite
    reason: str


class StoredView(_Shape):
    kind: str
    version: Count
    # JSON gives a list where to_dict wrote a tuple: the pair's items stay strict
    covers: tuple[Position, Position] = Field(strict=False)
    turns_behind: Count
    seconds_behind: Finite
    over_budget: bool


class StoredBreakpoint(_Shape):
    index: Count
    layer: str
    tokens: Tokens


class StoredCache(_Shape):
    epoch: Count = 0
    epoch_calls: Count = 0
    new_epoch: bool = True
    reason: str = ""
    prefix_messages: Count = 0
    expected_cached_tokens: Tokens = 0
    boundary: str = ""
    openai_cached_tokens: Tokens = 0  # a plan stored before 2026-12-07 has neither: 0
    anthropic_cached_tokens: Tokens = 0


# field -> (what one value is checked as, its default, whether a plan lacks it only when broken);
# a list field's entries are checked one by one, so one bad item hides only itself
_SCALARS: dict[str, tuple[TypeAdapter[Any], Callable[[], Any], bool]] = {
    "conversation_id": (TypeAdapter(str, config=_Shape.model_config), str, False),
    "query": (TypeAdapter(str | None, config=_Shape.model_config), lambda: None, False),
    "query_class": (TypeAdapter(str, config=_Shape.model_config), str, False),
    "class_reason": (TypeAdapter(str, config=_Shape.model_config), str, False),
    "budget": (TypeAdapter(Tokens, config=_Shape.model_config), int, True),
    "tokens": (TypeAdapter(Tokens, config=_Shape.model_config), int, True),
    "tiers": (TypeAdapter(dict[str, str], config=_Shape.model_config), dict, False),
    "degraded": (TypeAdapter(bool, config=_Shape.model_config), bool, False),
    "shares": (TypeAdapter(dict[str, Tokens], config=_Shape.model_config), dict, False),
    "slice_sent": (TypeAdapter(dict[str, Tokens], config=_Shape.model_config), dict, False),
    "retrieval": (TypeAdapter(str, config=_Shape.model_config), str, False),
    "cache": (TypeAdapter(StoredCache), lambda: StoredCache().model_dump(), False),
}
_LISTS: dict[str, tuple[type[_Shape], bool]] = {
    "items": (StoredItem, True),
    "left_out": (StoredItem, False),
    "views": (StoredView, False),
    "breakpoints": (StoredBreakpoint, False),
}


def _problem(field_name: str, exc: ShapeError) -> str:
    e = exc.errors()[0]
    where = ".".join([field_name, *(str(p) for p in e.get("loc", ()))])
    return f"{where}: {e.get('msg', 'invalid')}"


def _dump(value: Any) -> Any:
    return value.model_dump() if isinstance(value, BaseModel) else value


def read_stored_plan(raw: Any) -> tuple[dict[str, Any], list[str]]:
    """A stored plan in `to_dict`'s shape, of the parts that pass the check, and a line per
    part that does not (`field[index].key: why`, with the limit where one was passed)."""
    if not isinstance(raw, dict):
        return {}, [f"plan: not an object but {type(raw).__name__}"]
    plan: dict[str, Any] = {}
    problems: list[str] = []
    for name, (adapter, default, required) in _SCALARS.items():
        plan[name] = default()
        if name not in raw:
            if required:
                problems.append(f"{name}: missing")
            continue
        try:
            plan[name] = _dump(adapter.validate_python(raw[name]))
        except ShapeError as exc:
            problems.append(_problem(name, exc))
    for name, (model, required) in _LISTS.items():
        plan[name] = []
        if name not in raw:
            if required:
                problems.append(f"{name}: missing")
            continue
        entries = raw[name]
        if not isinstance(entries, list):
            problems.append(f"{name}: not a list but {type(entries).__name__}")
            continue
        bad: list[str] = []
        for i, entry in enumerate(entries):
            try:
                plan[name].append(model.model_validate(entry).model_dump())
            except ShapeError as exc:
                bad.append(_problem(f"{name}[{i}]", exc))
        problems += bad[:MAX_SHAPE_PROBLEMS]
        if len(bad) > MAX_SHAPE_PROBLEMS:
            problems.append(f"{name}: {len(bad) - MAX_SHAPE_PROBLEMS} more entries cannot be shown")
    return plan, problems

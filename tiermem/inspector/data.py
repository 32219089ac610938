"""What the inspector shows, read through Memory and the cold store's public methods.

Invariants:
- A conversation is always resolved in one namespace (`resolve`): an id that does not
  exist there raises `ConversationNotFound`, whether it is unused or used elsewhere, so a
  page can never show another namespace's data.
- Reads only, with one exception the caller asks for explicitly (`Memory.pin`/`unpin`).
  A what-if plan is made with `preview=True`: planned as the agent's recorded call would
  be, it advances no prompt-cache epoch and is not stored, so inspecting never changes
  what the agent gets next.
- A stored value is shown as what it is only when it is one: a conversation's times are
  read through `_time`, a stored plan through `planner.plan.read_stored_plan` (by the
  routes), so an odd row renders as "-" or a note, never a 500.
- A page reads its page: the conversations list, the log, the warm views and the stored
  plans read their page's rows (a cursor or a page number, a limit), never every
  conversation, turn, session view or plan, so a namespace or conversation that grows
  costs a page what a small one does.
- No SQL here (the layout test greps): everything goes through `Memory`, `ColdLog`'s
  public methods, the hot link and the warm store.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tiermem.hotlink import REDIS_ERRORS, STALE_BEHIND, pin_state
from tiermem.memory import Memory
from tiermem.tiers.errors import ConversationNotFound, ValidationError
from tiermem.tiers.formats import SentCallIds, joins_round
from tiermem.tiers.models import SESSION_MAX_CHARS, StoredMessage
from tiermem.tiers.statements import read_hidden
from tiermem.tiers.warm import SummaryView

TURNS_PER_PAGE = 50  # rows of the conversation log per page
CONVERSATIONS_PER_PAGE = 50
# view panels per page of a conversation's warm views: the first page holds the
# per-conversation views (VIEW_KINDS) and the first sessions, later pages sessions only
VIEWS_PER_PAGE = 50
RESULT_LOOKAHEAD = 50  # positions past a page searched for the results of its tool calls
# positions before a page read for the calls its first rows' rounds began with: a call
# there may take a result on the page (`pair_results`), which then answers no row's call
CALL_LOOKBEHIND = 50
TOOL_TEXT_CHARS = 400  # of a tool call's arguments or result shown inline
VIEW_KINDS = ("rolling", "constraints")  # the per-conversation views with key ''


def resolve(mem: Memory, namespace: str, name: str) -> str:
    """The conversation key of `name` in exactly `namespace`; ConversationNotFound otherwise."""
    key = mem.cold.key_of(namespace, name)
    if key is None:
        raise ConversationNotFound(name, namespace)
    return key


@dataclass
class HotFigures:
    state: str  # ok | not resident | HOT_STALE | HOT_BEHIND | degraded | disabled
    tokens: int = 0
    budget: int = 0
    members: int = 0
    pins: int = 0
    pinned_tokens: int = 0
    overflow_tokens: int = 0
    evictions: int = 0
    positions: frozenset[int] = frozenset()

    @property
    def use(self) -> float:
        return self.tokens / self.budget if self.budget else 0.0


# how the pages name a set the next context call rebuilds, or catches up with the log
HOT_STALE = "stale (rebuilt on the next context)"
HOT_BEHIND = "behind the log (caught up on the next context)"


def hot_figures(mem: Memory, key: str) -> HotFigures:
    """What Redis holds for the conversation now, read without side effects: a missing set,
    or one of another database or incarnation, is reported as such ("not resident"); one
    the log has moved away from (Redis restored from an older snapshot: its last turn or
    pins are not the log's) as HOT_STALE, one missing the latest appends as HOT_BEHIND, by
    the checks the next context call makes (tiermem.hotlink `HotLink.staleness`); none is
    rebuilt here (the next context call does), so listing 50 conversations loads none of
    them into Redis."""
    if mem.hot is None:
        return HotFigures("disabled")
    try:
        hs = mem.hot.tier.read(key)
        stale = mem.hot.staleness(key, hs) if hs is not None else "missing"
    except REDIS_ERRORS:
        return HotFigures("degraded")
    if hs is None or stale in ("missing", "generation"):
        return HotFigures("not resident")
    if stale is not None:
        return HotFigures(HOT_BEHIND if stale == STALE_BEHIND else HOT_STALE)
    return HotFigures("ok", hs.total_tokens, hs.budget, len(hs.turns), sum(1 for t in hs.turns if t.pinned),
                      sum(t.tokens for t in hs.turns if t.pinned), hs.overflow_tokens, hs.evictions,
                      frozenset(t.position for t in hs.turns))


@dataclass
class ViewLag:
    kind: str
    key: str
    version: int | None
    turns_behind: int
    seconds_behind: float
    over_budget: bool


def view_lag(mem: Memory, key: str, kind: str, vkey: str = "", view: SummaryView | None = None) -> ViewLag:
    st = mem.views.staleness(key, kind, vkey, view=view)
    if view is None:
        view = mem.warm.latest(key, kind, vkey)
    return ViewLag(kind, vkey, view.version if view is not None else None, st.turns_behind, st.seconds_behind,
                   st.over_budget)


@dataclass
class ConversationRow:
    id: str
    turns: int
    created_at: float
    last_activity: float | None
    hot: HotFigures
    warm: ViewLag
    index_lag: int  # turns not embedded yet


def stored_time(value: Any) -> float | None:
    """A stored time as a float, or None where the row holds none a page can show (the
    store returns a conversation's times uncast; SQLite keeps whatever was written). The
    pages' one test of a stored time: `age` takes what this returns, and the `ts` filter
    (tiermem.inspector.routes) also bounds it to what a date can show."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def conversation_row(mem: Memory, namespace: str, name: str) -> ConversationRow:
    key = resolve(mem, namespace, name)
    meta = mem.cold.conversation(key) or {}
    return ConversationRow(name, int(meta.get("messages") or 0), stored_time(meta.get("created_at")) or 0.0,
                           stored_time(meta.get("last_message_at")), hot_figures(mem, key), view_lag(mem, key, "rolling"),
                           mem.cold.pending_embeddings(key))


@dataclass
class ConversationsPage:
    namespace: str
    rows: list[ConversationRow]
    after: str | None  # the cursor this page starts after (None: the first page)
    next_after: str | None  # the next page's cursor; None: this is the last page
    total: int


def conversations_page(mem: Memory, namespace: str, after: str | None) -> ConversationsPage:
    """One page of the namespace's conversations after the id `after`: the page's ids and
    a count are read, never every id of the namespace."""
    names, next_after = mem.conversations_page(namespace, after=after, limit=CONVERSATIONS_PER_PAGE)
    rows = []
    for name in names:
        try:
            rows.append(conversation_row(mem, namespace, name))
        except ConversationNotFound:  # erased between the listing and this read
            continue
    return ConversationsPage(namespace, rows, after, next_after, mem.cold.count_names(namespace))


@dataclass
class ToolCall:
    call_id: str
    name: str
    arguments: str
    result_position: int | None = None
    result: str | None = None


@dataclass
class TurnView:
    position: int
    role: str
    session_id: str | None
    created_at: float
    tokens: int
    text: str
    intent: str | None
    label_reason: str | None
    load_bearing: bool
    priority: int
    pinned_priority: int | None
    superseded_by: int | None
    validity: dict[str, Any] | None
    tiers: list[str]
    tool_calls: list[ToolCall] = field(default_factory=list)
    result_of: str | None = None  # the call id this tool message answers
    auto_pinned: bool = False  # held in the hot set as a load-bearing turn, without an explicit pin
    # the statements of a turn superseded in part, each with its own replacing turn and
    # interval (`Memory.facts`' statement entries; `validity` is one of them)
    superseded_parts: list[dict[str, Any]] = field(default_factory=list)


def _short(text: str, limit: int = TOOL_TEXT_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + " …"


def tool_calls_of(m: StoredMessage) -> list[ToolCall]:
    """The calls a message makes, in either OpenAI format."""
    body = m.body
    if body.get("type") == "function_call":
        return [ToolCall(str(body.get("call_id", "")), str(body.get("name", "")),
                         _short(str(body.get("arguments", ""))))]
    out = []
    for call in body.get("tool_calls") or ():
        if not isinstance(call, dict):
            continue
        got = call.get("function")
        fn: dict[str, Any] = got if isinstance(got, dict) else {}
        out.append(ToolCall(str(call.get("id", "")), str(fn.get("name", call.get("type", ""))),
                            _short(str(fn.get("arguments", "")))))
    return out


def result_of(m: StoredMessage) -> str | None:
    """The call id a tool result answers, in either format."""
    body = m.body
    if body.get("type") == "function_call_output":
        return str(body.get("call_id", ""))
    if m.role == "tool" and body.get("tool_call_id") is not None:
        return str(body.get("tool_call_id"))
    return None


def pair_results(msgs: list[StoredMessage]) -> dict[tuple[int, int], StoredMessage]:
    """(a call's message position, the call's index in it) -> the result that answers it,
    for the calls and results among `msgs` (oldest first), paired as the library pairs them
    (tiermem.tiers.formats, "One unit" and "Ids sent"; `SentCallIds` itself): a result
    answers a call of its id in the round just before it, the n-th result of an id in a
    round its n-th call. Every chat assistant message starts a round, as in
    `unique_chat_call_ids` (one with calls holds all of its round's calls; one after calls
    is the model's next turn, so a result after it answers none of them); a call item
    starts one after a result or a message that ends a round (`joins_round`), as in
    `unique_item_call_ids`, else it is a parallel call of the round. Servers that number
    calls per reply reuse `call_0` every round: pairing by id alone showed a later round's
    call with the first round's result. A result no waiting call takes answers no call."""
    ids = SentCallIds()
    in_round = False
    calls: dict[str, tuple[int, int]] = {}  # id sent (unique in `msgs`) -> its call
    out: dict[tuple[int, int], StoredMessage] = {}
    for m in msgs:
        made = tool_calls_of(m)
        rid = result_of(m)
        item = "type" in m.body  # a Responses item; else a chat message
        if not item and m.body.get("role") == "assistant":
            ids.round()
        if made:
            if item and not in_round:
                ids.round()
            in_round = True
            for i, c in enumerate(made):
                calls[ids.call(c.call_id)] = (m.position, i)
        elif rid is not None:
            in_round = False
            sent = ids.result(rid)
            if sent is not None:
                out[calls[sent]] = m
        else:
            in_round = in_round and joins_round(m.body)
    return out


@dataclass
class TurnsPage:
    name: str
    namespace: str
    rows: list[TurnView]
    page: int
    pages: int
    last_position: int
    hot: HotFigures
    per_page: int = TURNS_PER_PAGE


def warm_positions(mem: Memory, key: str) -> dict[int, list[str]]:
    """position -> the current warm views whose sentences cite it."""
    out: dict[int, list[str]] = {}
    for kind in VIEW_KINDS:
        view = mem.warm.latest(key, kind)
        if view is None:
            continue
        for s in view.sentences:
            if s.status == "current":
                for p in s.positions:
                    out.setdefault(p, [])
                    if kind not in out[p]:
                        out[p].append(kind)
    return out


def turns_page(mem: Memory, namespace: str, name: str, page: int | None) -> TurnsPage:
    """One page of the log; `page=None`: the last (the most recent turns)."""
    key = resolve(mem, namespace, name)
    last = mem.cold.last_position(key)
    pages = max(1, last // TURNS_PER_PAGE + 1) if last >= 0 else 1
    page = pages - 1 if page is None else min(max(page, 0), pages - 1)
    start, end = page * TURNS_PER_PAGE, (page + 1) * TURNS_PER_PAGE - 1
    # each row's supersession as readers see it: past a popped correction, and a turn of
    # which a statement only a popped turn superseded current in part (tiers.statements.Hidden)
    hidden = read_hidden(mem.cold, key)
    turns = {t.position: hidden.row(t) for t in mem.cold.turns(key, start=start, end=end)}
    # the calls before the page whose results it may hold, and the results after it of its calls
    msgs = mem.cold.history(key, start=max(0, start - CALL_LOOKBEHIND), end=end + RESULT_LOOKAHEAD)
    results = pair_results(msgs)
    # the page's rows only (and the chains of corrections they start), never every turn
    facts = mem.facts(name, namespace=namespace, start=start, end=end)
    validity = {v.position: v.to_json() for v in facts}
    parts: dict[int, list[dict[str, Any]]] = {}
    for v in facts:
        if v.span is not None and v.status == "superseded":
            parts.setdefault(v.position, []).append(v.to_json())
    hot = hot_figures(mem, key)
    warm = warm_positions(mem, key)
    rows = []
    for m in msgs:
        if m.position > end:
            break
        if m.position < start:
            continue
        t = turns.get(m.position)
        # hot first, then the warm views that cite it; the cold log holds every turn
        tiers = ["hot"] if m.position in hot.positions else []
        tiers += [f"warm:{k}" for k in warm.get(m.position, ())]
        tiers.append("cold")
        calls = tool_calls_of(m)
        # a message that only calls tools has no text of its own (message_text renders the calls)
        text = "" if calls and not m.body.get("content") else m.text
        for i, c in enumerate(calls):
            r = results.get((m.position, i))
            if r is not None:
                c.result_position, c.result = r.position, _short(r.text)
        rows.append(TurnView(
            m.position, m.role, m.session_id, m.created_at, m.tokens, text,
            t.intent if t else None, t.label_reason if t else None, bool(t and t.load_bearing),
            t.priority if t else 0, t.pinned_priority if t else None, t.superseded_by if t else None,
            validity.get(m.position), tiers, calls, result_of(m),
            t is not None and t.pinned_priority is None and pin_state(t)[0], parts.get(m.position, [])))
    return TurnsPage(name, namespace, rows, page, pages, last, hot)


def source_turns(mem: Memory, namespace: str, name: str, positions: list[int]) -> list[StoredMessage]:
    key = resolve(mem, namespace, name)
    return mem.cold.get(key, sorted(set(positions)))


@dataclass
class ViewPanel:
    kind: str
    key: str
    view: SummaryView | None
    versions: list[int]
    lag: ViewLag
    latest_version: int | None


@dataclass
class ViewsPage:
    panels: list[ViewPanel]
    after: str | None  # the session id this page starts after (None: the first page)
    next_after: str | None  # the next page's cursor; None: this is the last page


def check_session_cursor(after: str) -> str:
    """A page cursor is a session id (1..SESSION_MAX_CHARS, no control character, as a
    message's session_id): only compared, but a NUL would reach PostgreSQL, which refuses it."""
    if not 0 < len(after) <= SESSION_MAX_CHARS or any(ord(c) < 32 or ord(c) == 127 for c in after):
        raise ValidationError("after", f"a session id: 1 to {SESSION_MAX_CHARS} characters, no control characters")
    return after


def view_panels(mem: Memory, namespace: str, name: str, want: tuple[str, str, int] | None = None,
                after: str | None = None) -> ViewsPage:
    """One page of the conversation's warm views, latest version (or `want` = (kind, key,
    version)): on the first page (`after` None) the per-conversation views and the first
    session views, then VIEWS_PER_PAGE session views a page after the session id `after`.
    Only the page's sessions are read (`WarmStore.session_keys_page`), never every one."""
    key = resolve(mem, namespace, name)
    first = after is None
    if after is not None:
        check_session_cursor(after)
    sessions, next_after = mem.warm.session_keys_page(
        key, after=after, limit=VIEWS_PER_PAGE - (len(VIEW_KINDS) if first else 0))
    specs = ([(k, "") for k in VIEW_KINDS] if first else []) + [("session", s) for s in sessions]
    out = []
    for kind, vkey in specs:
        latest = mem.warm.latest(key, kind, vkey)
        view = latest
        if want is not None and want[0] == kind and want[1] == vkey:
            view = mem.warm.version(key, kind, vkey, want[2]) or latest
        out.append(ViewPanel(kind, vkey, view, mem.warm.versions(key, kind, vkey),
                             view_lag(mem, key, kind, vkey, latest),
                             latest.version if latest is not None else None))
    return ViewsPage(out, after, next_after)


# turn links per page of the stored plans (newest first), and plans of one turn per page:
# a plan is ~40 KB of JSON at budget 2000 and renders to about as much HTML, so a page of
# 10 is ~0.5 MB however many an agent stored (10,200 at one turn rendered as one 455 MB page)
PLAN_TURNS_PER_PAGE = 50
PLANS_PER_PAGE = 10


@dataclass
class StoredPlans:
    turns: list[int]  # this page's turn links: last positions with stored plans, newest first
    chosen: int | None
    # a page of the chosen turn's: {"number", "last_position", "plan", "created_at"}; "number"
    # is the plan's place among the turn's plans from 1, never the shared table's row id,
    # whose gaps count other namespaces' plans (design invariant 10)
    plans: list[dict[str, Any]]
    turns_before: int | None = None  # the turn links' cursor: this page lists turns below it (None: the newest)
    next_turns_before: int | None = None  # the older turn links' cursor; None: no older turn
    after: int | None = None  # the plans' cursor: this page's plans come after the turn's first `after` (None: 0)
    next_after: int | None = None  # the chosen turn's next plans' cursor; None: its last page


def stored_plans(mem: Memory, namespace: str, name: str, turn: int | None, *, turns_before: int | None = None,
                 after: int | None = None) -> StoredPlans:
    """A page of turn links (PLAN_TURNS_PER_PAGE turns below `turns_before`, newest first)
    and a page of the chosen turn's plans (PLANS_PER_PAGE after its first `after`); `turn`
    None: the newest turn of the links' page. Only the page's turns and plans are read."""
    key = resolve(mem, namespace, name)
    got = mem.cold.plan_turns(key, before=turns_before, limit=PLAN_TURNS_PER_PAGE + 1)  # one more: older ones?
    turns = got[:PLAN_TURNS_PER_PAGE]
    next_before = turns[-1] if len(got) > PLAN_TURNS_PER_PAGE else None
    if turn is None and turns:
        turn = turns[0]
    plans: list[dict[str, Any]] = []
    next_after = None
    if turn is not None:
        plans, next_after = mem.cold.plans_at(key, turn, after=after, limit=PLANS_PER_PAGE)
    return StoredPlans(turns, turn, plans, turns_before, next_before, after, next_after)


def age(at: float | None, now: float | None = None) -> str:
    """'3 min ago' for a unix time (the inspector's tables)."""
    if at is None:
        return "-"
    s = max(0.0, (now if now is not None else time.time()) - at)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if s >= size:
            return f"{s / size:.0f} {unit} ago"
    return f"{s:.0f} s ago"


def tune_points(path: Path) -> tuple[list[tuple[str, int, float, float]], str]:
    """(candidate, budget, billed cost vs full, recall) of the latest `tiermem tune` result
    at `path`, and which recall it is (evidence when the data had probes, else the
    label-free reply recall); nothing when there is no readable result."""
    try:
        result = json.loads(path.read_text(encoding="utf-8"))
        points: list[tuple[str, int, float, float]] = []
        kind = "evidence_recall" if result.get("probes") else "reply_recall"
        for cand in result.get("candidates", []):
            label = ", ".join(f"{k}={v}" for k, v in (cand.get("values") or {}).items()) or str(cand.get("name"))
            for budget, fig in (cand.get("budgets") or {}).items():
                if fig.get(kind) is not None and fig.get("billed_vs_full") is not None:
                    points.append((label, int(budget), float(fig["billed_vs_full"]), float(fig[kind])))
        return points, kind.replace("_", " ")
    except (OSError, ValueError, TypeError, AttributeError):
        return [], ""


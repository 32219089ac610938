"""The per-turn query planner: which slice of the past to load, at what fidelity.

Invariants:
- The budget is hard: the returned messages, counted exactly with the configured
  tokenizer (`tiers.tokens.messages_tokens`), never exceed it. Items are estimated while
  packing, then the rendered result is counted exactly and trimmed until it fits.
- The latest user message is always present verbatim; if it alone does not fit, the
  call fails with `BudgetTooSmall` unless the caller opted into truncating it.
- An assistant message with tool calls is never separated from its tool results.
- Order is prefix-stable, what changes least first: system, pinned, summary, the recent
  tail, then the per-turn part: the retrieved turns, then the latest user message
  (`retrieved_placement="before_tail"` gives docs/design.md's literal order and no epochs).
  The stable layers are sized by the budget alone (`layer_shares`, the same for every
  query class); what a class needs more of goes into the per-turn part.
- Within an epoch the context is append-only (planner.epoch): the previous call's
  context stays byte for byte, the turns that arrived since and this query's retrieved
  turns not yet shown are appended. When the room runs out, the retrieved blocks of
  earlier calls give way newest first (a rewind: the prefix before them still caches);
  when that is not enough, a pin or summary line shown as current stops being current,
  or the caller's budget or system prompt changes, a new epoch rebuilds the context.
  The plan reports which (`plan.cache`) and where the stable prefix ends
  (`plan.breakpoints`).
- Superseded constraints are never presented as current: they are left out, and the
  plan says which turn superseded them. A superseded turn that is shown is marked, with
  its validity interval (valid from its own time until the superseding turn's), in the
  line and in the plan item's reason; a question about the past (`about_past`) ranks
  superseded turns up instead of down.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tiermem.planner.classify import QueryClassifier, about_past
from tiermem.planner.dates import query_windows
from tiermem.planner.epoch import EpochCache, EpochKey, EpochState, Segment, key_change
from tiermem.planner.plan import (
    MAX_BREAKPOINTS,
    Breakpoint,
    CacheReport,
    Context,
    Plan,
    PlanItem,
    ViewStaleness,
)
from tiermem.planner.rank import BM25_DEPTH, MISSING_Z, TurnScores, score_turns
from tiermem.planner.statements import StatementView
from tiermem.tiers.cold import TurnRow
from tiermem.tiers.errors import BudgetTooSmall, ValidationError
from tiermem.tiers.formats import (
    call_ids,
    fold_system,
    hidden_positions,
    is_control,
    is_reasoning,
    result_id,
    result_text_field,
    to_chat,
    to_responses,
    wire_body,
)
from tiermem.tiers.models import StoredMessage, canonical_role, message_text
from tiermem.tiers.store import ColdLog
from tiermem.tiers.tokens import REPLY_PRIMING_TOKENS, TokenCounter, message_tokens, messages_tokens
from tiermem.tiers.turncache import TurnCache, TurnTable

TAIL_SCAN_TURNS = 400  # the tail never needs more turns than this to fill any share
LINE_SEP_TOKENS = 1
HEADING_SHARE_TOKENS = 4  # a session heading (~12 tokens) is shared by a few lines; the exact count fixes the rest
# Adjustments on the scale of planner.rank's scores (z-score sums: the best turns of a
# conversation score about 5-10): small nudges, except that a superseded value sinks.
RECENCY_WEIGHT = 0.15
INTENT_BOOST = {"instruction": 0.25, "correction": 0.25, "statement": 0.1, "question": 0.0,
                "tool_result": 0.0, "chitchat": -0.2}
LOAD_BEARING_BOOST = 0.2
SUPERSEDED_PENALTY = -1.5
# A question about the past ("what was my budget before?") is answered by the superseded
# value: it rises instead of sinking, and is shown with its validity interval.
PAST_SUPERSEDED_BOOST = 0.5
OTHER_CONVERSATION_PENALTY = 1.0
MAX_RETRIEVED_CANDIDATES = 400
TOP_UP_ROUNDS = 2
PLAN_LEFT_OUT_PER_SLICE = 50  # left-out items listed per slice (the plan stays small)
# The namespace's other conversations are scored from the turn cache when there are at
# most this many (each costs an index seek per call) and they would fill at most half of
# it, at about this many bytes a turn (a 384-float vector, the keyword postings, facts).
NAMESPACE_IN_MEMORY_CONVERSATIONS = 32
TURN_BYTES_ESTIMATE = 2048
PIN_CACHE_CONVERSATIONS = 1024  # conversations whose pin candidates are kept between calls
MIN_PIN_TOKENS = 8  # the smallest message a pin can be: bounds how many could fit
# Load-bearing turns at or above this priority are pinned automatically: constraints (85),
# decisions (75), entities (70), corrections (90). One-shot tasks (65) are not.
AUTO_PIN_MIN_PRIORITY = 70
# Outside recall questions only turns this close to the message come back (cosine 0.55:
# clearly the same topic), or turns from a period the message names.
STRONG_COSINE = 0.55
RECALL_CLASSES = frozenset({"targeted_recall", "temporal", "summarize"})
RECENT_RECALL_TURNS = 12  # newest turns a recent-recall question may bring back in its per-turn part
RECENT_RECALL_BOOST = 10.0  # on the scale of planner.rank's scores: above any match
DEFAULT_LAYER_SHARES = {"pinned": 0.1, "summary": 0.1, "tail": 0.1}
# Extending an epoch may leave out the lowest-scored of this call's retrieved turns for
# room, as long as what it shows holds at least this share of their tokens; below it a
# rewind or a new epoch gives the call its whole room.
EXTEND_MIN_NEED_SHARE = 0.8
# A context whose own part (this call's retrieved turns and user message) is more than
# this share of it gets no breakpoint at its end (see _breakpoints).
BROAD_OWN_SHARE = 0.25


@dataclass(frozen=True)
class HotView:
    """What the hot tier answered: payloads of hot turns and which are pinned."""

    payloads: dict[int, str]
    pinned: dict[int, int]  # position -> priority
    degraded: bool = False
    rebuilt: bool = False
    overflow_tokens: int = 0
    demoted: tuple[int, ...] = ()


@dataclass(frozen=True)
class SummaryBlock:
    """A warm view to show in the summary slice, with its staleness."""

    kind: str
    version: int
    start: int
    end: int
    lines: list[tuple[str, tuple[int, ...]]]  # sentence, source positions
    turns_behind: int
    seconds_behind: float
    over_budget: bool
    tier: str = "warm"


@dataclass
class PlannerSettings:
    shares: dict[str, dict[str, float]]
    retrieval_k: int = 20
    tool_trim_tokens: int = 400
    tail_anchor: int = 8
    namespace_recall: bool = True
    retrieved_placement: str = "before_latest"  # or "before_tail" (DESIGN's literal order)
    system_messages: str = "as_is"  # or "merge": one leading system message (strict chat templates)
    context_format: str = "as_stored"  # or "chat" / "responses": convert every message to that family
    # the stable layers' budget shares, the same for every query class
    layers: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_LAYER_SHARES))
    epochs: bool = True  # append-only contexts within an epoch (planner.epoch)


@dataclass
class _Cand:
    slice: str
    conversation_id: str
    position: int
    score: float
    reason: str
    text: str = ""  # rendered line (block slices) or ""
    body: dict[str, Any] | None = None  # tail messages
    tokens: int = 0
    fidelity: str = "verbatim"
    tier: str = "cold"
    group: list[int] = field(default_factory=list)  # tail: positions kept together (tool pairs)
    header: str = ""  # retrieved: the session/date heading this line is shown under


@dataclass(frozen=True)
class _PinSet:
    """One conversation's pin candidates at a pin version (see ColdLog.pin_version)."""

    version: int
    room: int  # read for a pinned share of up to this many tokens
    rows: tuple[tuple[TurnRow, str, bool, int], ...]  # row, rendered line ("" not shown), trimmed, tokens
    superseded: tuple[TurnRow, ...]
    intervals: tuple[str, ...] = ()  # each superseded row's validity interval, for the plan


@dataclass(frozen=True)
class _Extension:
    """The previous context extended within its epoch."""

    segments: list[Segment]
    total: int
    reason: str


@dataclass(frozen=True)
class _Lexical:
    here: list[tuple[str, int, float]]  # bm25 hits in this conversation
    others: list[str]  # the namespace's other conversations, up to one past the in-memory limit


def _when(ts: float) -> str:
    """A turn's time for a validity interval: date and minute (UTC)."""
    try:
        return dt.datetime.fromtimestamp(ts, tz=dt.UTC).strftime("%d %b %Y %H:%M")
    except (OverflowError, OSError, ValueError):  # a stored time no calendar can show
        return "unknown time"


def _date(ts: float) -> str:
    try:
        return dt.datetime.fromtimestamp(ts, tz=dt.UTC).strftime("%d %b %Y")
    except (OverflowError, OSError, ValueError):  # a stored time no calendar can show
        return "unknown date"


class Planner:
    def __init__(
        self,
        cold: ColdLog,
        tokens: TokenCounter,
        embed: Callable[[list[str]], np.ndarray] | None,
        settings: PlannerSettings,
        classifier: QueryClassifier | None = None,
        turns: TurnCache | None = None,
    ) -> None:
        self.cold = cold
        self.turns = turns if turns is not None else TurnCache(cold)
        self.tokens = tokens
        self.embed = embed
        self.settings = settings
        self.classifier = classifier or QueryClassifier()
        self._pins: OrderedDict[str, _PinSet] = OrderedDict()
        self._pins_lock = threading.Lock()
        self.statements = StatementView(cold)  # turns current in part (planner/statements.py)
        self._epochs = EpochCache()

    # -- rendering helpers -----------------------------------------------------------------

    def _trim(self, text: str, limit: int, position: int) -> tuple[str, bool]:
        """Long tool output: keep head and tail, say what was cut and how to get it back."""
        ids = self.tokens.encode(text)
        if len(ids) <= limit:
            return text, False
        head = int(limit * 0.6)
        tail = max(0, limit - head)
        cut = len(ids) - head - tail
        marker = (f"\n[... trimmed {cut} tokens of this output; the full text is position #{position} "
                  f"in the log (history/get) ...]\n")
        return self.tokens.decode(ids[:head]) + marker + self.tokens.decode(ids[len(ids) - tail:]), True

    def _line(self, conv: str, m: StoredMessage, this_conv: str, *, dated: bool = True) -> tuple[str, bool]:
        who = m.body.get("name") or m.role
        # no position numbers in the text: they cost tokens on every line and the model
        # cannot use them; the plan carries every item's positions
        parts = [str(who)]
        if dated:
            parts.append(_date(m.created_at))
        gone = self.statements.parts(conv, m.position) if m.role in ("user", "assistant") else ()
        if gone:  # some of its statements were superseded: they are marked, on lines of their own
            current, old = self.statements.render(m.text, gone, m.created_at)
            lines = [f"[{' '.join(parts)}] {current}"] if current else []
            return "\n".join(lines + [f"[{who} · SUPERSEDED, not current: {when}] {stmt}" for stmt, when in old]), False
        text = m.text.replace("\n", " ").strip() if m.role != "tool" else m.text
        trimmed = False
        if m.role == "tool":
            text, trimmed = self._trim(text, self.settings.tool_trim_tokens, m.position)
        return f"[{' '.join(parts)}] {text}", trimmed

    @staticmethod
    def _heading(conv: str, m: StoredMessage, this_conv: str) -> str:
        """Retrieved lines are grouped under one heading per session (its date and id),
        so that a date costs tokens once per group, not once per line."""
        where = "" if conv == this_conv else f"conversation {conv}, "
        session = f", {m.session_id}" if m.session_id else ""
        return f"({where}{_date(m.created_at)}{session})"

    def _line_tokens(self, line: str) -> int:
        return self.tokens.count(line) + LINE_SEP_TOKENS

    # -- the plan --------------------------------------------------------------------------

    def build(
        self,
        conversation_id: str,
        query: str | None,
        budget: int,
        *,
        namespace: str,
        system: str | None = None,
        hot: HotView | None = None,
        summaries: Sequence[SummaryBlock] = (),
        namespace_recall: bool = True,
        truncate_latest: bool = False,
        table: TurnTable | None = None,
    ) -> Context:
        """`table`: the conversation's turn table when the caller just read it."""
        t0 = time.perf_counter()
        timings: dict[str, float] = {}
        self.statements.begin()
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
            raise ValidationError("budget", "must be a positive integer number of tokens")
        conv = conversation_id
        table = table if table is not None else self.turns.get(conv)
        timings["turns"] = (time.perf_counter() - t0) * 1000
        hot = hot or HotView({}, {}, degraded=True)
        plan = Plan(conv, query, "default", "", budget)
        plan.degraded = hot.degraded
        plan.tiers = {"cold": "ok", "hot": "degraded" if hot.degraded else ("rebuilt" if hot.rebuilt else "ok"),
                      "warm": "ok" if summaries else "unused"}

        # -- fixed part: the caller's system message and the latest user message -------------
        fixed_msgs: list[dict[str, Any]] = []
        if system:
            fixed_msgs.append({"role": "system", "content": system})
        tail_rows = self.cold.tail_turns(conv, self._tail_scan(table, budget))
        tail_msgs = {m.position: m for m in self._messages(conv, [r.position for r in tail_rows], hot)}
        # control rows (tiers.formats: a retraction, a clear) hide items from the tail and
        # are never sent themselves
        hidden, cleared = hidden_positions([(p, tail_msgs[p].body) for p in sorted(tail_msgs)])
        if hidden or cleared >= 0:
            tail_rows = [r for r in tail_rows if r.position > cleared and r.position not in hidden]
        latest_user = next((r.position for r in reversed(tail_rows) if r.role == "user"), None)
        if latest_user is None and cleared < 0:
            latest_user = self.cold.latest_position(conv, "user")
            if latest_user in hidden:
                latest_user = None
        if latest_user is not None and latest_user not in tail_msgs:
            tail_msgs.update({m.position: m for m in self._messages(conv, [latest_user], hot)})
        base = REPLY_PRIMING_TOKENS + sum(message_tokens(self.tokens, m) for m in fixed_msgs)
        latest_body: dict[str, Any] | None = None
        latest_truncated = False
        if latest_user is not None and latest_user in tail_msgs:
            latest_body = wire_body(tail_msgs[latest_user].body)
            need = message_tokens(self.tokens, latest_body)
            if base + need > budget:
                if not truncate_latest:
                    raise BudgetTooSmall(budget, base + need)
                latest_truncated = True
                room = budget - base - message_tokens(self.tokens, {"role": "user", "content": ""}) - 1
                if room < 1:
                    raise BudgetTooSmall(budget, base + need)
                ids = self.tokens.encode(message_text(latest_body))
                latest_body = {"role": "user", "content": self.tokens.decode(ids[:room])}
                while message_tokens(self.tokens, latest_body) + base > budget and room > 0:
                    room -= 1
                    latest_body = {"role": "user", "content": self.tokens.decode(ids[:room])}
        elif base > budget:
            raise BudgetTooSmall(budget, base)
        room = budget - base - (message_tokens(self.tokens, latest_body) if latest_body else 0)
        timings["fixed"] = (time.perf_counter() - t0) * 1000

        # -- candidates per slice -----------------------------------------------------------------
        pinned = [c for c in self._pinned_candidates(conv, hot, plan, room)
                  if c.position != latest_user and c.position not in hidden]
        tail = self._tail_candidates(conv, tail_rows, tail_msgs, latest_user)
        taken_positions = ({latest_user} if latest_user is not None else set()) | hidden
        summary = self._summary_candidates(conv, summaries, plan)
        lexical = self._lexical(conv, namespace, query, namespace_recall, table)
        timings["candidates"] = (time.perf_counter() - t0) * 1000
        # The query is embedded here, on this thread. Embedding it on a worker while this
        # thread read the log measured slower on a 2-core machine (32.6 against 29.4 ms
        # p50 at 20k turns): the model and the reads contend for the GIL and for memory
        # bandwidth, so the overlap saved nothing and the handover cost.
        qvec = (self.embed([without_names(query, table.names)])[0]
                if query and query.strip() and self.embed is not None else None)
        timings["embed"] = (time.perf_counter() - t0) * 1000  # when the vector was there
        qclass = self.classifier.classify(query, query_vec=qvec, embed=self.embed)
        plan.query_class, plan.class_reason = qclass.name, qclass.reason
        plan.retrieval = ("none: no query" if not query or not query.strip()
                          else f"broad: a {qclass.name} turn needs the past, the best turns fill the room left"
                          if qclass.name in RECALL_CLASSES
                          else f"narrow: a {qclass.name} turn brings back only clearly related turns (cosine >= "
                               f"{STRONG_COSINE}) or turns of a period it names")
        shares = self.settings.shares.get(qclass.name) or self.settings.shares["default"]
        # the stable layers are sized by the budget alone, whatever the class or this
        # turn's message: what a class needs more of goes into the per-turn part
        layers = self.settings.layers
        caps = {s: int(budget * layers[s]) for s in ("pinned", "summary", "tail")}
        caps["retrieved"] = int(room * shares["retrieved"])
        plan.shares = dict(caps)
        retrieved = self._retrieved_candidates(conv, namespace, query, qvec, qclass.name, room,
                                               exclude=taken_positions, lexical=lexical, table=table)
        timings["retrieve"] = (time.perf_counter() - t0) * 1000

        # -- packing: each slice up to its cap, then leftovers in class order -----------------
        chosen: dict[str, list[_Cand]] = {s: [] for s in ("pinned", "summary", "retrieved", "tail")}
        pools = {"pinned": pinned, "summary": summary, "retrieved": retrieved, "tail": tail}
        header = {s: 3 + self.tokens.count(_HEADERS[s]) + LINE_SEP_TOKENS for s in ("pinned", "summary", "retrieved")}
        header["tail"] = 0
        used = {s: 0 for s in chosen}
        remaining = room

        def take(slice_: str, limit: int) -> None:
            nonlocal remaining
            pool = pools[slice_]
            i = 0
            while i < len(pool):
                c = pool[i]
                extra = c.tokens + (header[slice_] if not chosen[slice_] else 0)
                if extra <= min(limit - used[slice_], remaining):
                    chosen[slice_].append(c)
                    used[slice_] += extra
                    remaining -= extra
                    pool.pop(i)
                    continue
                if slice_ == "tail":
                    break  # the tail is contiguous: an older turn cannot jump a gap
                i += 1

        def withdraw(slice_: str, positions: set[int]) -> None:
            """Take this conversation's `positions` out of a slice (chosen and pool), so a
            turn shown verbatim elsewhere is not shown twice; their tokens go back."""
            nonlocal remaining
            for c in [c for c in chosen[slice_] if c.conversation_id == conv and c.position in positions]:
                chosen[slice_].remove(c)
                used[slice_] -= c.tokens
                remaining += c.tokens
            if not chosen[slice_] and used[slice_]:  # the block's header goes back too
                remaining += used[slice_]
                used[slice_] = 0
            pools[slice_] = [c for c in pools[slice_] if not (c.conversation_id == conv and c.position in positions)]

        def shown_verbatim() -> set[int]:
            return {p for c in chosen["tail"] for p in c.group} | {c.position for c in chosen["pinned"]}

        # what may be presented as current right now (an epoch's pinned block and summary
        # lines are checked against these before it is extended)
        pin_current = {c.position for c in pinned}
        summary_current = {c.text for c in summary}
        if pools["pinned"]:
            # at least the highest-priority pin fits (a constraint left out is an answer
            # gone wrong): still a function of the pins and the budget, not of the class
            caps["pinned"] = max(caps["pinned"], pools["pinned"][0].tokens + header["pinned"])
            plan.shares["pinned"] = caps["pinned"]
        take("pinned", caps["pinned"])
        # cap and grid from the budget, not from what is left after this turn's latest
        # message: both must not move from one turn to the next
        chosen["tail"] = self._stable_tail(conv, pools["tail"], tail_rows, min(caps["tail"], remaining),
                                           max(1, caps["tail"] // 2), table)
        used["tail"] = sum(c.tokens for c in chosen["tail"])
        remaining -= used["tail"]
        # a pinned turn that the tail shows verbatim is not repeated in the pinned block
        withdraw("pinned", {p for c in chosen["tail"] for p in c.group})
        take("pinned", caps["pinned"])  # the room a pin in the tail freed goes to the next pin
        take("summary", caps["summary"])
        withdraw("retrieved", shown_verbatim())
        take("retrieved", caps["retrieved"])
        # leftovers go to the per-turn part only: the stable layers keep their sizes, so
        # their bytes do not depend on what this query retrieved. (Non-recall classes only
        # retrieve what is clearly related, so most of their room stays free: it is what
        # an epoch grows into.)
        take("retrieved", used["retrieved"] + remaining)
        timings["pack"] = (time.perf_counter() - t0) * 1000

        # -- render, count exactly, drop lowest-value items until it fits -------------------------
        while True:
            messages, kinds, where = self._render(fixed_msgs, chosen, latest_body, latest_user)
            total = messages_tokens(self.tokens, self._out(messages))
            if total <= budget:
                break
            if not self._drop_one(chosen, plan):
                raise BudgetTooSmall(budget, total)
        # packing estimated a shared session heading per line; what the exact count left
        # over goes to the next retrieved candidates, as long as the exact count still
        # fits (only retrieved: it sits last, so the slack, which varies from turn to
        # turn, never changes the cacheable prefix)
        for _ in range(TOP_UP_ROUNDS):
            added = self._top_up(chosen, pools, ["retrieved"], budget - total, header)
            if not added:
                break
            more, more_kinds, more_where = self._render(fixed_msgs, chosen, latest_body, latest_user)
            more_total = messages_tokens(self.tokens, self._out(more))
            if more_total > budget:
                for s, c in added:
                    chosen[s].remove(c)
                break
            messages, kinds, where, total = more, more_kinds, more_where, more_total
        items: list[PlanItem] = []
        if system:
            items.append(PlanItem("system", conv, [], "caller", "verbatim",
                                  message_tokens(self.tokens, fixed_msgs[0]), 1.0, "system prompt from the caller"))
        for s in ("pinned", "summary", "retrieved", "tail"):
            for c in chosen[s]:
                items.append(self._item(c))
        latest_item: PlanItem | None = None
        if latest_body is not None and latest_user is not None:
            fid = "verbatim" if latest_body == wire_body(tail_msgs[latest_user].body) else "trimmed"
            latest_item = PlanItem("tail", conv, [latest_user], self._tier_of(latest_user, hot), fid,
                                   message_tokens(self.tokens, latest_body), 1.0,
                                   "the latest user message is always kept")
            items.append(latest_item)

        segments = _segments(messages, kinds, where, items, latest_item)

        # -- the epoch: extend the previous context when it can, else this is a new one ---------
        key = EpochKey(budget, system or "", (int(table.positions[0]), float(table.created[0])) if len(table) else None,
                       bool(namespace_recall))
        prev = self._epochs.get(conv)
        why_new = ("first context of this conversation in this process" if prev is None
                   else key_change(prev.key, key))
        ext: _Extension | None = None
        if prev is not None and not why_new:
            if self._converting():
                # an epoch extends messages as stored; a conversion (context_format,
                # system_messages = "merge") may merge them, so every call starts anew
                why_new = "epochs are off (messages are converted: context_format / system_messages)"
            elif self.settings.epochs and self.settings.retrieved_placement == "before_latest":
                ext, why_new = self._extend(prev, conv, chosen, pin_current, summary_current, tail_rows, tail_msgs,
                                            latest_user, latest_body, latest_item, latest_truncated, budget)
            else:
                why_new = "epochs are off (context_epochs=false or retrieved turns before the tail)"
        if ext is not None and prev is not None:
            segments, total = ext.segments, ext.total
            plan.cache = CacheReport(prev.epoch, prev.calls + 1, False, ext.reason)
        else:
            plan.cache = CacheReport((prev.epoch + 1) if prev else 1, 1, True, why_new)
        messages = [g.message for g in segments]
        kinds = [g.kind for g in segments]
        items = [it for g in segments for it in g.items]
        tokens_each = [message_tokens(self.tokens, m) for m in messages]
        if prev is not None:
            k = 0
            for a, b in zip(prev.segments, segments, strict=False):
                if a.message != b.message:
                    break
                k += 1
            plan.cache.prefix_messages = k
            plan.cache.expected_cached_tokens = sum(tokens_each[:k])
            # the layer of the previous context where it stops being reused ("" when all of it is)
            plan.cache.boundary = prev.segments[k].kind if k < len(prev.segments) else ""
        plan.breakpoints = _breakpoints(kinds, tokens_each)
        shown = _shown(segments)
        self._epochs.put(conv, EpochState(
            key, plan.cache.epoch, plan.cache.epoch_calls, tuple(segments),
            prev.pinned if ext is not None and prev is not None
            else frozenset(p for c in chosen["pinned"] for p in (c.group or [c.position])),
            prev.summary_lines if ext is not None and prev is not None
            else frozenset(c.text for c in chosen["summary"]),
            max([p for it in items if it.slice == "tail" for p in it.positions], default=-1),
            latest_user if latest_body is not None else None, latest_truncated))

        timings["total"] = (time.perf_counter() - t0) * 1000
        plan.tokens = total
        plan.timings_ms = {k: round(v, 3) for k, v in timings.items()}
        plan.items = items
        for s in ("pinned", "summary", "retrieved", "tail"):
            for c in pools[s][:PLAN_LEFT_OUT_PER_SLICE]:
                if (c.conversation_id, c.position) in shown:
                    continue
                plan.left_out.append(PlanItem(s, c.conversation_id, c.group or [c.position], c.tier, c.fidelity,
                                              c.tokens, c.score, "did not fit its share of the budget: " + c.reason))
        for view in summaries:
            plan.views.append(ViewStaleness(view.kind, view.version, (view.start, view.end), view.turns_behind,
                                            view.seconds_behind, view.over_budget))
        return Context(self._out(messages), total, plan)

    def _extend(self, prev: EpochState, conv: str, chosen: dict[str, list[_Cand]], pin_current: set[int],
                summary_current: set[str], tail_rows: list[TurnRow], tail_msgs: dict[int, StoredMessage],
                latest_user: int | None, latest_body: dict[str, Any] | None, latest_item: PlanItem | None,
                latest_truncated: bool, budget: int) -> tuple[_Extension | None, str]:
        """The previous context extended by what arrived since and what this query needs
        that it does not show, or None and why a new epoch starts.

        When the room left cannot hold that, the retrieved blocks of earlier calls give
        way, newest first (the prefix before them stays cached), before an epoch ends;
        the log turns shown stay, so the context keeps growing only by appends."""
        if latest_user is None or latest_body is None or latest_item is None or prev.latest_user is None:
            return None, "no latest user message to extend after"
        if latest_truncated or prev.latest_truncated:
            return None, "the latest user message had to be truncated"
        at = next((i for i, g in enumerate(prev.segments) if g.kind == "latest"), None)
        if at is None:
            return None, "the previous context has no user message to extend after"
        if latest_user < prev.latest_user or (tail_rows and tail_rows[-1].position < prev.last_position):
            return None, "the log no longer extends the previous context"
        gone = prev.pinned - pin_current
        if gone:
            return None, f"pin changed: #{min(gone)} is no longer a current pin"
        if prev.summary_lines - summary_current:
            return None, "summary view refreshed: a shown line is no longer in it"
        retrieved_here = sorted({p for g in prev.segments if g.kind == "retrieved" for it in g.items
                                 if it.conversation_id == conv for p in it.positions})
        if retrieved_here:
            gone_by = [r.position for r in self.cold.turns_at(conv, retrieved_here) if r.superseded_by is not None]
            marked = {p for g in prev.segments if g.kind == "retrieved" for it in g.items
                      if "superseded by" in it.reason for p in it.positions}
            late = [p for p in gone_by if p not in marked]
            if late:
                # shown before its correction arrived, unmarked: a rebuild marks it
                return None, f"a shown turn was superseded since: #{late[0]}"
        # a shown turn of which a statement was superseded since (planner/statements.py)
        shown_lines = {p for g in prev.segments if g.kind != "tail" for it in g.items
                       if it.conversation_id == conv for p in it.positions} | set(prev.pinned)
        part_late = sorted(p for p in shown_lines
                           if any(x.by > prev.last_position for x in self.statements.parts(conv, p)))
        if part_late:
            return None, f"a shown turn was superseded in part since: #{part_late[0]}"
        new_rows = [r for r in tail_rows if r.position > prev.last_position]
        if new_rows and (not tail_rows or tail_rows[0].position > prev.last_position + 1):
            return None, "more turns arrived than the tail can show"
        new_positions = {r.position for r in new_rows}
        shown_here = {p for c, p in _shown(prev.segments) if c == conv} | new_positions
        fresh_pins = {p for c in chosen["pinned"] for p in (c.group or [c.position])} - shown_here
        if fresh_pins:
            return None, f"pin changed: #{min(fresh_pins)} is pinned now and not shown"
        epoch = prev.epoch
        before: list[Segment] = []  # new turns before this call's user message, then after it
        after: list[Segment] = []
        for c in sorted(self._tail_candidates(conv, new_rows, tail_msgs, latest_user), key=lambda c: c.position):
            assert c.body is not None
            c.reason = f"arrived since the previous call; appended within epoch {epoch}"
            for i, body in enumerate(c.body["messages"]):
                (before if c.position < latest_user else after).append(
                    Segment("tail", body, (self._item(c),) if i == 0 else ()))
        latest = Segment("latest", latest_body, (latest_item,))
        # head: what stays as it was (its earlier retrieved blocks may give way); then
        # this call's retrieved turns; then `rest`
        tool_loop = False
        if latest_user != prev.latest_user:  # a new user message: the old one is a tail turn now
            old = prev.segments[at]
            it = old.items[0]
            head = [*prev.segments[:at], Segment("tail", old.message, (PlanItem(
                it.slice, it.conversation_id, it.positions, it.tier, it.fidelity, it.tokens, it.score,
                "an earlier user message, kept in place"),)), *prev.segments[at + 1:], *before]
            rest = [latest, *after]
        elif new_rows:  # the same user message, more turns after it (a tool loop): append
            head, rest = [*prev.segments, *before, *after], []
            # the same question was retrieved for already, and the newest tool result
            # must stay last for the model to answer it: no retrieved block after it
            tool_loop = True
        else:
            # the same log asked again (another query for this turn): its user message and
            # what follows it move after this call's retrieved turns
            head, rest = list(prev.segments[:at]), list(prev.segments[at:])
        wanted = [] if tool_loop else chosen["retrieved"]
        wanted_tokens = sum(c.tokens for c in wanted)
        dropped = 0
        cut: int | None = None
        fits: list[_Cand] = []
        while True:
            shown = _shown(head + rest) | {(conv, p) for p in new_positions}
            need = [c for c in wanted if (c.conversation_id, c.position) not in shown]
            fixed_part = [g.message for g in head + rest]
            fixed_total = messages_tokens(self.tokens, fixed_part)
            if fixed_total <= budget:
                fits = self._fit_need(fixed_part, fixed_total, need, budget, conv)
                kept_tokens = wanted_tokens - sum(c.tokens for c in need) + sum(c.tokens for c in fits)
                if len(fits) == len(need) or kept_tokens >= EXTEND_MIN_NEED_SHARE * wanted_tokens:
                    break
            blocks = [i for i, g in enumerate(head) if g.kind == "retrieved"]
            if not blocks:
                over = fixed_total + sum(c.tokens for c in need)
                return None, (f"room used up: {len(before) + len(after)} new message(s) and {len(need)} retrieved "
                              f"turn(s) would make about {over} of {budget} tokens")
            cut = blocks[-1] if cut is None else min(cut, blocks[-1])
            del head[blocks[-1]]
            dropped += 1
        segs = list(head)
        if fits:
            segs.append(Segment("retrieved", self._block("retrieved", fits, conv), tuple(self._item(c) for c in fits)))
        segs.extend(rest)
        appended = before + after
        total = messages_tokens(self.tokens, [g.message for g in segs])
        if total > budget:  # _fit_need counted exactly; this guards the invariant
            return None, f"room used up: {total} of {budget} tokens"
        reason = (f"extends the previous context: {len(appended)} new message(s), {len(fits)} retrieved turn(s)"
                  + (f", {len(wanted) - len(need)} more already shown" if len(wanted) > len(need) else "")
                  + (f", {len(need) - len(fits)} left out for room" if len(need) > len(fits) else ""))
        if dropped:
            reason = (f"rewinds to message {cut}: the retrieved turns of {dropped} earlier call(s) give way; "
                      + reason)
        return _Extension(segs, total, reason), ""

    def _fit_need(self, fixed_part: list[dict[str, Any]], base: int, need: list[_Cand], budget: int,
                  conv: str) -> list[_Cand]:
        """The best of `need` (score order) whose block fits beside `fixed_part` (`base`
        tokens), counted exactly."""
        if not need:
            return []
        ranked = sorted(need, key=lambda c: (-c.score, c.conversation_id, c.position))
        room = budget - base
        out: list[_Cand] = []
        est = 3 + self.tokens.count(_HEADERS["retrieved"]) + LINE_SEP_TOKENS
        headings: set[str] = set()
        for c in ranked:
            cost = c.tokens
            if c.header:  # a heading is paid once per session shown, not a share per line
                cost += -HEADING_SHARE_TOKENS + (0 if c.header in headings
                                                 else self.tokens.count(c.header) + LINE_SEP_TOKENS)
            if est + cost <= room:
                out.append(c)
                headings.add(c.header)
                est += cost
        while out and base + message_tokens(self.tokens, self._block("retrieved", out, conv)) > budget:
            out.pop()  # the estimate shared a heading a line; the exact count decides
        return out

    # -- candidates ---------------------------------------------------------------------------

    def _messages(self, conv: str, positions: Sequence[int], hot: HotView) -> list[StoredMessage]:
        """Render from the hot tier where it holds the turn, else from the cold log."""
        out: list[StoredMessage] = []
        missing: list[int] = []
        for p in positions:
            payload = hot.payloads.get(p)
            if payload is None:
                missing.append(p)
                continue
            try:
                body = json.loads(payload)
            except ValueError:
                missing.append(p)
                continue
            out.append(StoredMessage(conv, p, canonical_role(body), body, None, None, 0.0,
                                     extra={"tier": "hot"}))
        if missing:
            out.extend(self.cold.get(conv, missing))
        # the hot payload lacks the envelope (session, time): take it from the turn index
        rows = {r.position: r for r in self.cold.turns_at(conv, [m.position for m in out if m.extra.get("tier")])}
        fixed: list[StoredMessage] = []
        for m in out:
            r = rows.get(m.position)
            if r is not None:
                m = StoredMessage(conv, m.position, m.role, m.body, r.session_id, None, r.created_at, r.tokens,
                                  extra={"tier": "hot"})
            fixed.append(m)
        fixed.sort(key=lambda m: m.position)
        return fixed

    @staticmethod
    def _tier_of(position: int, hot: HotView) -> str:
        return "hot" if position in hot.payloads else "cold"

    def _pinned_candidates(self, conv: str, hot: HotView, plan: Plan, room: int) -> list[_Cand]:
        # only as many as could ever fit, highest priority then newest first: a long
        # conversation has hundreds of load-bearing turns, and reading them all would
        # cost more than the rest of the plan
        limit = max(PLAN_LEFT_OUT_PER_SLICE, room // MIN_PIN_TOKENS)
        pins = self._pin_set(conv, room)
        for r, interval in zip(pins.superseded, pins.intervals, strict=True):
            plan.left_out.append(PlanItem("pinned", conv, [r.position], "cold", "reference", 0, 0.0,
                                          f"superseded by #{r.superseded_by}: not presented as current "
                                          f"({interval})"))
        out = []
        used = 0
        for r, line, trimmed, tokens in pins.rows[:limit + 1]:
            if used > room:
                plan.left_out.append(PlanItem("pinned", conv, [r.position], "cold", "verbatim", r.tokens,
                                              r.priority / 100.0, "pinned, but higher-priority pins fill the budget"))
                break
            used += r.tokens
            if not line:
                continue  # its message could not be read (salvaged away)
            prio = r.pinned_priority if r.pinned_priority is not None else r.priority
            why = "pinned by the caller" if r.pinned_priority is not None else f"load-bearing {r.intent or ''}".strip()
            if gone := self.statements.parts(conv, r.position):
                why += "; " + self.statements.reason(r.position, gone, r.created_at)
            out.append(_Cand("pinned", conv, r.position, prio / 100.0, f"{why} (priority {prio})", line,
                             tokens=tokens, fidelity="trimmed" if trimmed else "verbatim",
                             tier=self._tier_of(r.position, hot)))
        # highest priority first for packing; rendered in log order
        out.sort(key=lambda c: (-c.score, -c.position))
        return out

    def forget(self, conv: str) -> None:
        """Drop what is kept between calls for a conversation key (it was erased)."""
        with self._pins_lock:
            self._pins.pop(conv, None)
        self.statements.forget(conv)
        self._epochs.drop(conv)  # the previous context's messages are kept for the epoch

    def _intervals(self, conv: str, rows: Sequence[TurnRow]) -> dict[int, tuple[str, str]]:
        """For superseded rows: (the plan's wording, the line's wording) of their validity
        interval, from their own time until the superseding turn's (the turn index's
        `superseded_by` and the turn times: derived, nothing stored)."""
        if not rows:
            return {}
        ends = {r.position: r for r in self.cold.turns_at(conv, sorted({r.superseded_by for r in rows
                                                                       if r.superseded_by is not None}))}
        out: dict[int, tuple[str, str]] = {}
        for r in rows:
            end = ends.get(r.superseded_by) if r.superseded_by is not None else None
            until = _when(end.created_at) if end is not None else "a later message"
            how = "retracted" if end is not None and "retraction" in (end.label_reason or "") else "replaced"
            out[r.position] = (f"valid #{r.position} {_when(r.created_at)} until #{r.superseded_by} {until}, {how}",
                               f"valid {_when(r.created_at)} until {until}, then {how}")
        return out

    def _pin_set(self, conv: str, room: int) -> _PinSet:
        """The conversation's pin candidates (best first) with their rendered lines, for
        a pinned share of up to `room` tokens, and its superseded pins: kept between
        calls and re-read only when the log's pin version moved (a load-bearing turn, a
        relabel, a supersession, a pin), not on every appended turn, or when a call has
        more room than the kept set was read for."""
        version = self.cold.pin_version(conv)
        with self._pins_lock:
            got = self._pins.get(conv)
            if got is not None:
                self._pins.move_to_end(conv)
        if got is not None and got.version == version:
            if room <= got.room:
                return got
            room = max(room, got.room)
        limit = max(PLAN_LEFT_OUT_PER_SLICE, room // MIN_PIN_TOKENS)
        rows = self.cold.pin_candidates(conv, min_priority=AUTO_PIN_MIN_PRIORITY, limit=limit + 1)
        superseded = self.cold.superseded_pins(conv, min_priority=AUTO_PIN_MIN_PRIORITY,
                                               limit=PLAN_LEFT_OUT_PER_SLICE)
        # the messages of the rows a call with this much room can reach (packing stops
        # at the first row that starts past it), not of every candidate read
        reach: list[int] = []
        used = 0
        for r in rows:
            if used > room:
                break
            reach.append(r.position)
            used += r.tokens
        msgs = {m.position: m for m in self.cold.get(conv, reach)}
        rendered: list[tuple[TurnRow, str, bool, int]] = []
        for r in rows:
            m = msgs.get(r.position)
            if m is None:  # past the reach, or unreadable (salvaged away): never shown
                rendered.append((r, "", False, 0))
                continue
            line, trimmed = self._line(conv, m, conv)
            rendered.append((r, line, trimmed, self._line_tokens(line)))
        intervals = self._intervals(conv, superseded)
        got = _PinSet(version, room, tuple(rendered), tuple(superseded),
                      tuple(intervals[r.position][0] for r in superseded))
        with self._pins_lock:
            self._pins[conv] = got
            while len(self._pins) > PIN_CACHE_CONVERSATIONS:
                self._pins.popitem(last=False)
        return got

    def _tail_candidates(self, conv: str, rows: list[TurnRow], msgs: dict[int, StoredMessage],
                         latest_user: int | None) -> list[_Cand]:
        """Newest first, in units that are never split: a call and every result that
        answers it (chat `tool_calls` and `tool` messages, Responses `function_call` items
        and their `*_output` by `call_id`, parallel calls included), and a reasoning
        item with the item after it."""
        groups = _units([msgs.get(r.position) if r.position != latest_user else None for r in rows],
                        [r.position == latest_user for r in rows])
        out = []
        for g in groups:
            bodies = []
            fid = "verbatim"
            for m in g:
                body = wire_body(m.body)
                key = result_text_field(m.body)
                if key is not None:
                    text, trimmed = self._trim(m.text, self.settings.tool_trim_tokens, m.position)
                    if trimmed:
                        body[key] = text
                        fid = "trimmed"
                bodies.append(body)
            toks = sum(message_tokens(self.tokens, b) for b in bodies)
            c = _Cand("tail", conv, g[0].position, 1.0, "recent turn", tokens=toks, fidelity=fid,
                      tier=g[0].extra.get("tier", "cold"), group=[m.position for m in g])
            c.body = {"messages": bodies}
            out.append(c)
        return out

    def _tail_scan(self, table: TurnTable, budget: int) -> int:
        """How many of the newest turns the tail could ever use at this budget: enough
        that their tokens (tool outputs counted as trimmed) exceed it, plus the latest user
        message's row."""
        if not len(table):
            return TAIL_SCAN_TURNS
        newest = np.minimum(table.tokens[::-1][:TAIL_SCAN_TURNS], self.settings.tool_trim_tokens + 64)
        return min(TAIL_SCAN_TURNS, int(np.searchsorted(np.cumsum(newest), budget)) + 2)

    def _stable_tail(self, conv: str, pool: list[_Cand], rows: list[TurnRow], cap: int, grid: int,
                     table: TurnTable) -> list[_Cand]:
        """The recent tail, with a start that stays put for several turns.

        Starts may only fall where the conversation's running token count crosses a
        multiple of `grid` (half the tail's nominal share, fixed by the budget). The tail
        starts at the earliest such point from which it fits `cap`: it grows by appends,
        and when it no longer fits, its start jumps forward by about half a share. Between
        jumps consecutive contexts share the whole tail as a byte-identical prefix. Falls
        back to the plain newest-first tail when no grid point fits (a huge last turn).
        """
        if not pool or cap <= 0:
            return []
        if self.settings.tail_anchor <= 1 or not rows:
            return self._newest_first(pool, cap)
        before = table.tokens_before(rows[0].position)
        cum: dict[int, int] = {}
        for r in rows:
            cum[r.position] = before
            before += r.tokens
        units = sorted(pool, key=lambda c: c.position)  # oldest first
        suffix = 0
        best: int | None = None
        for i in range(len(units) - 1, -1, -1):
            suffix += units[i].tokens
            if suffix > cap:
                break
            p = units[i].position
            prev = cum.get(p - 1)
            if p in cum and (prev is None or cum[p] // grid != prev // grid or p == 0):
                best = i
        if best is None:
            return self._newest_first(pool, cap)
        chosen = units[best:]
        for c in chosen:
            pool.remove(c)
        return sorted(chosen, key=lambda c: -c.position)

    @staticmethod
    def _newest_first(pool: list[_Cand], cap: int) -> list[_Cand]:
        out: list[_Cand] = []
        used = 0
        for c in list(pool):  # pool is newest first; contiguous, so stop at the first misfit
            if used + c.tokens > cap:
                break
            out.append(c)
            used += c.tokens
            pool.remove(c)
        return out

    def _summary_candidates(self, conv: str, summaries: Sequence[SummaryBlock], plan: Plan) -> list[_Cand]:
        out = []
        for s in summaries:
            for i, (text, positions) in enumerate(s.lines):
                line = f"- {text}"
                score = 1.0 - i / max(1, len(s.lines))
                reason = f"{s.kind} summary v{s.version} (#{s.start}..#{s.end})"
                if s.over_budget:
                    reason += f", {s.turns_behind} turns behind"
                c = _Cand("summary", conv, positions[0] if positions else s.end, score, reason, line,
                          tokens=self._line_tokens(line), fidelity="summary", tier=s.tier,
                          group=list(positions))
                out.append(c)
        return out

    def _retrieved_candidates(
        self, conv: str, namespace: str, query: str | None, qvec: np.ndarray | None, qclass: str,
        room: int, *, exclude: set[int], lexical: _Lexical, table: TurnTable,
    ) -> list[_Cand]:
        if not query or not query.strip() or not len(table):
            return []
        # enough candidates to fill the whole remaining room (a LoCoMo-like turn is ~30
        # tokens; shorter ones leave room that more candidates fill), not just the share
        depth = max(self.settings.retrieval_k, min(MAX_RETRIEVED_CANDIDATES, room // 25 + 20))
        bm25 = [(p, s) for _c, p, s in lexical.here]
        windows = query_windows(query, float(table.created[-1]))
        scores = score_turns(table, qvec, bm25, windows)
        eligible = np.ones(len(table), dtype=bool)
        # Recall questions fill their share with the best candidates; other turns (a
        # statement, a new request) only bring back what is clearly related, so the
        # retrieved block stays empty or unchanged on most turns and the prefix caches.
        boost = np.zeros(len(table))
        if qclass not in RECALL_CLASSES:
            cos = scores.cosine if scores.cosine is not None else np.full(len(table), np.nan)
            eligible = np.nan_to_num(cos, nan=-1.0) >= STRONG_COSINE
            if windows:
                eligible |= scores.date >= 1.0
        if qclass == "recent_recall":
            # "what did I just say?" needs the newest turns: the tail's share does not
            # depend on the class, so those it does not reach come in the per-turn part
            n = min(RECENT_RECALL_TURNS, len(table))
            eligible[len(table) - n:] = True
            boost[len(table) - n:] = RECENT_RECALL_BOOST * np.linspace(0.5, 1.0, n)
        for p in exclude:
            i = table.index_of(p)
            if i is not None:
                eligible[i] = False
        idx = np.flatnonzero(eligible)
        total = scores.total + boost
        top = idx[np.argpartition(-total[idx], depth - 1)[:depth]] if idx.shape[0] > depth else idx
        top = top[np.argsort(-total[top], kind="stable")]
        positions = [int(table.positions[i]) for i in top]
        rows = {r.position: r for r in self.cold.turns_at(conv, positions)}
        intervals = self._intervals(conv, [r for r in rows.values() if r.superseded_by is not None])
        past = about_past(query)
        last = int(table.positions[-1])
        scored: dict[tuple[str, int], tuple[float, str]] = {}
        for i, p in zip(top, positions, strict=True):
            s = float(total[i])
            why = scores.reason(int(i)) + (", one of the newest turns" if boost[i] else "")
            r = rows.get(p)
            if r is not None:
                s += INTENT_BOOST.get(r.intent or "", 0.0)
                if r.load_bearing and r.superseded_by is None:
                    s += LOAD_BEARING_BOOST
                if r.superseded_by is None and past and self.statements.parts(conv, p):
                    s += PAST_SUPERSEDED_BOOST  # it holds a superseded statement the question asks about
                if r.superseded_by is not None:
                    s += PAST_SUPERSEDED_BOOST if past else SUPERSEDED_PENALTY
                    why += f", superseded by #{r.superseded_by} ({intervals[p][0]})"
                    if past:
                        why += f", asked about the past ({past})"
            s += RECENCY_WEIGHT * (p / max(1, last))
            scored[(conv, p)] = (s, why)
        if lexical.others and qclass != "recent_recall":
            scored.update(self._namespace_hits(conv, namespace, lexical.others, query, qvec, scores,
                                               qclass in RECALL_CLASSES))
        if not scored:
            return []
        superseded = {(conv, p): r.superseded_by for p, r in rows.items() if r.superseded_by is not None}
        msgs = {(m.conversation_id, m.position): m for m in self.cold.get_many(list(scored))}
        out = []
        for key, (score, why) in scored.items():
            m = msgs.get(key)
            if m is None or is_control(m.body):
                continue
            line, trimmed = self._line(key[0], m, conv, dated=False)
            if gone := self.statements.parts(key[0], key[1]):
                why += "; " + self.statements.reason(key[1], gone, m.created_at)
            elif key in superseded:
                # shown for the history it carries, never as a current value: with what
                # was true when
                line = line.replace("] ", f" · SUPERSEDED, not current: {intervals[key[1]][1]}] ", 1)
            heading = self._heading(key[0], m, conv)
            out.append(_Cand("retrieved", key[0], key[1], score, f"{qclass}: {why}", line,
                             tokens=self._line_tokens(line) + HEADING_SHARE_TOKENS,
                             fidelity="trimmed" if trimmed else "verbatim", tier="cold", header=heading))
        out.sort(key=lambda c: (-c.score, c.conversation_id, c.position))
        return out

    def _lexical(self, conv: str, namespace: str, query: str | None, namespace_recall: bool,
                 table: TurnTable) -> _Lexical:
        """bm25 over this conversation (the turn cache's keyword index, which ranks a
        query against 10k turns faster than FTS5 can), and whether the namespace has
        other conversations to search once the query's class is known."""
        if not query or not query.strip():
            return _Lexical([], [])
        if table.lexical is not None:
            here = [(conv, p, s) for p, s in table.bm25(query, BM25_DEPTH)]
        else:
            here = self.cold.search_bm25(query, BM25_DEPTH, conversation_id=conv)
        # one more than the in-memory limit: enough to choose how to search them
        others = (self.cold.list_conversations(namespace, exclude=conv, limit=NAMESPACE_IN_MEMORY_CONVERSATIONS + 1)
                  if namespace_recall and self.settings.namespace_recall else [])
        return _Lexical(here, others)

    def _namespace_hits(self, conv: str, namespace: str, others: list[str], query: str, qvec: np.ndarray | None,
                        scores: TurnScores, recall: bool) -> dict[tuple[str, int], tuple[float, str]]:
        """The user's other conversations: the best few hits, on this conversation's scale
        (their cosines and bm25 standardised with this conversation's statistics), less
        OTHER_CONVERSATION_PENALTY, since another session is less likely to be meant.

        Recall questions search by meaning and by keyword; other messages, like this
        conversation's own turns for them, only bring back what is close in meaning
        (STRONG_COSINE), so they skip the keyword search, whose FTS5 doclists span the
        whole database and cost more than the rest of the plan.

        A namespace of a few conversations that fit the turn cache is searched there
        (the same exact cosine and bm25 as this conversation's); a larger one through
        the cold tier's indexes (sqlite-vec, FTS5)."""
        k = self.settings.retrieval_k
        tables = self._tables_in_memory(others)
        dense: list[tuple[str, int, float]] = []
        bm25: list[tuple[str, int, float]] = []
        if tables is not None:
            dense, bm25 = _search_tables(tables, qvec, query if recall else None, k)
        else:
            if qvec is not None:
                dense = [(c, p, 1.0 - dist * dist / 2.0)  # unit vectors: cosine from L2
                         for c, p, dist in self.cold.search_dense(qvec, k, namespace=namespace, exclude=conv)]
            if recall:
                bm25 = self.cold.search_bm25(query, k, namespace=namespace, exclude=conv)
        found: dict[tuple[str, int], dict[str, float]] = {}
        for c, p, cosine in dense:
            if recall or cosine >= STRONG_COSINE:
                found.setdefault((c, p), {})["cosine"] = cosine
        if recall:
            for rank, (c, p, bm) in enumerate(bm25, start=1):
                found.setdefault((c, p), {}).update({"bm25": bm, "rank": rank})
        out: dict[tuple[str, int], tuple[float, str]] = {}
        # reasons name a conversation by the id its owner knows, not by its internal key
        names = self.cold.names_of([k[0] for k in found]) if found else {}
        for key, f in found.items():
            s = (scores.z_dense(f["cosine"]) if "cosine" in f else MISSING_Z) + scores.z_bm25(f.get("bm25"))
            parts = [f"cosine {f['cosine']:.2f}"] if "cosine" in f else []
            if "rank" in f:
                parts.append(f"bm25 rank {int(f['rank'])}")
            out[key] = (s - OTHER_CONVERSATION_PENALTY,
                        f"from {names.get(key[0], key[0])} in this namespace: " + ", ".join(parts))
        return out

    def _tables_in_memory(self, others: list[str]) -> list[TurnTable] | None:
        """The other conversations' turn tables, when they are few and would take at
        most half the turn cache (else loading them would evict the conversation being
        answered, call after call); None: search the cold tier instead."""
        if len(others) > NAMESPACE_IN_MEMORY_CONVERSATIONS:
            return None
        turns = 0
        for c in others:
            census = self.cold.turn_census(c)
            turns += 0 if census is None else census[2] + 1
        if turns * TURN_BYTES_ESTIMATE > self.turns.max_bytes // 2:
            return None
        return [self.turns.get(c) for c in others]

    # -- render ---------------------------------------------------------------------------------

    def _block(self, s: str, cands: Sequence[_Cand], conv: str) -> dict[str, Any]:
        """One block slice as a system message: its header, then its lines in log order
        (this conversation's first), each retrieved run under its session heading."""
        items = sorted(cands, key=lambda c: (c.conversation_id != conv, c.conversation_id, c.position))
        lines = [_HEADERS[s]]
        heading = ""
        for c in items:
            if c.header and c.header != heading:
                heading = c.header
                lines.append(heading)
            lines.append(c.text)
        return {"role": "system", "content": "\n".join(lines)}

    def _render(self, fixed: list[dict[str, Any]], chosen: dict[str, list[_Cand]],
                latest_body: dict[str, Any] | None, latest_user: int | None
                ) -> tuple[list[dict[str, Any]], list[str], list[int | None]]:
        """The messages, each one's layer (planner.plan.LAYERS), and the log position of
        each tail message (None for blocks)."""
        msgs = list(fixed)
        kinds = ["system"] * len(fixed)
        where: list[int | None] = [None] * len(fixed)
        blocks: dict[str, dict[str, Any]] = {}
        for s in ("pinned", "summary", "retrieved"):
            if chosen[s]:
                blocks[s] = self._block(s, chosen[s], chosen_conv(chosen, s))
        late = self.settings.retrieved_placement == "before_latest" and latest_body is not None
        for s in ("pinned", "summary", "retrieved"):
            if s in blocks and not (s == "retrieved" and late):
                msgs.append(blocks[s])
                kinds.append(s)
                where.append(None)
        tail_bodies: list[tuple[int, dict[str, Any]]] = []
        for c in chosen["tail"]:
            assert c.body is not None
            for p, b in zip(c.group, c.body["messages"], strict=True):
                tail_bodies.append((p, b))
        if latest_body is not None and latest_user is not None:
            tail_bodies.append((latest_user, latest_body))
        tail_bodies.sort(key=lambda t: t[0])
        for p, b in tail_bodies:
            is_latest = latest_body is not None and p == latest_user
            if late and is_latest and "retrieved" in blocks:
                # retrieval changes with every query, the anchored tail only grows: what
                # changes most goes last, just before the message it was retrieved for
                msgs.append(blocks["retrieved"])
                kinds.append("retrieved")
                where.append(None)
            msgs.append(b)
            kinds.append("latest" if is_latest else "tail")
            where.append(p)
        return msgs, kinds, where

    def _converting(self) -> bool:
        return self.settings.context_format != "as_stored" or self.settings.system_messages == "merge"

    def _out(self, msgs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The messages as returned: converted to one family and system messages folded
        when configured. Counted exactly, so the budget holds for what is returned."""
        if self.settings.context_format == "chat":
            msgs = to_chat(msgs)
        elif self.settings.context_format == "responses":
            msgs = to_responses(msgs)
        if self.settings.system_messages == "merge":
            msgs = fold_system(msgs)
        return msgs

    def _top_up(self, chosen: dict[str, list[_Cand]], pools: dict[str, list[_Cand]], order: list[str],
                slack: int, header: dict[str, int]) -> list[tuple[str, _Cand]]:
        """Candidates (best first, slices in `order`) whose exact line cost fits `slack`."""
        added: list[tuple[str, _Cand]] = []
        for s in order:
            headings = {c.header for c in chosen[s]}
            for c in list(pools[s]):
                cost = c.tokens + (header[s] if not chosen[s] else 0)
                if c.header:
                    cost -= HEADING_SHARE_TOKENS
                    if c.header not in headings:
                        cost += self.tokens.count(c.header) + LINE_SEP_TOKENS
                if cost <= slack:
                    chosen[s].append(c)
                    pools[s].remove(c)
                    headings.add(c.header)
                    added.append((s, c))
                    slack -= cost
        return added

    def _drop_one(self, chosen: dict[str, list[_Cand]], plan: Plan) -> bool:
        """Drop the lowest-value item: retrieved (lowest score), summary, the oldest tail
        unit, then the lowest-priority pin."""
        for s in ("retrieved", "summary"):
            if chosen[s]:
                victim = min(chosen[s], key=lambda c: c.score)
                chosen[s].remove(victim)
                plan.left_out.append(self._item(victim, "dropped to meet the exact budget"))
                return True
        if chosen["tail"]:
            victim = min(chosen["tail"], key=lambda c: c.position)
            chosen["tail"].remove(victim)
            plan.left_out.append(self._item(victim, "dropped to meet the exact budget"))
            return True
        if chosen["pinned"]:
            victim = min(chosen["pinned"], key=lambda c: (c.score, c.position))
            chosen["pinned"].remove(victim)
            plan.left_out.append(self._item(victim, "dropped to meet the exact budget"))
            return True
        return False

    @staticmethod
    def _item(c: _Cand, reason: str | None = None) -> PlanItem:
        return PlanItem(c.slice, c.conversation_id, c.group or [c.position], c.tier, c.fidelity, c.tokens,
                        round(c.score, 4), reason or c.reason)


def _search_tables(tables: list[TurnTable], qvec: np.ndarray | None, query: str | None,
                   k: int) -> tuple[list[tuple[str, int, float]], list[tuple[str, int, float]]]:
    """The k nearest turns (conversation, position, cosine) over `tables`, best first,
    and with a query the k best keyword matches (conversation, position, bm25)."""
    dense: list[tuple[str, int, float]] = []
    bm25: list[tuple[str, int, float]] = []
    for t in tables:
        if qvec is not None and t.vectors is not None and len(t) and t.vectors.shape[1] == qvec.shape[0]:
            cos = t.vectors @ np.asarray(qvec, dtype=np.float32)
            cos[~t.has_vec] = -np.inf  # no vector yet: not a neighbour
            best = np.argpartition(-cos, k - 1)[:k] if cos.shape[0] > k else np.arange(cos.shape[0])
            dense.extend((t.conversation_id, int(t.positions[i]), float(cos[i])) for i in best if cos[i] > -np.inf)
        if query is not None:
            bm25.extend((t.conversation_id, p, s) for p, s in t.bm25(query, k))
    dense.sort(key=lambda h: (-h[2], h[0], h[1]))
    bm25.sort(key=lambda h: (h[2], h[0], h[1]))
    return dense[:k], bm25[:k]


def _units(msgs: list[StoredMessage | None], skip: list[bool]) -> list[list[StoredMessage]]:
    """Group the tail's messages (oldest first; None: unreadable) into units, newest
    unit first. Walking back from the newest, results wait for their calls: a unit
    closes when every result it holds has met its call (or a message that is neither
    arrives: results whose call is not there form a unit of their own). A result whose
    call cannot be read is dropped with it; a reasoning item joins the unit after it."""
    groups: list[list[StoredMessage]] = []
    pending: list[StoredMessage] = []
    waiting: set[str] = set()

    def close() -> None:
        nonlocal pending, waiting
        if pending:
            groups.append(list(reversed(pending)))
        pending, waiting = [], set()

    for m, skipped in zip(reversed(msgs), reversed(skip), strict=True):
        if m is None:
            if skipped:
                close()
            else:  # unreadable: results waiting for it cannot be shown without their call
                pending, waiting = [], set()
            continue
        rid = result_id(m.body)
        ids = call_ids(m.body)
        if rid is not None:
            if pending and not waiting:
                close()  # the previous unit was complete: this result starts a new one
            pending.append(m)
            waiting.add(rid)
            continue
        if ids and (waiting & set(ids)):
            pending.append(m)
            waiting -= set(ids)
            if not waiting:
                close()
            continue
        if is_reasoning(m.body):
            if pending:
                pending.append(m)
            elif groups:
                groups[-1].insert(0, m)  # it precedes the unit just closed
            else:
                groups.append([m])
            continue
        close()
        groups.append([m])
    close()
    return groups


def without_names(query: str, names: frozenset[str]) -> str:
    """The query without the conversation's speaker names, for its embedding. Turns are
    embedded as "name: text", so a participant's name is in nearly every vector: in the
    query it discriminates nothing and only pulls toward turns that repeat it. bm25,
    which weighs a word by its rarity, still gets the whole query."""
    usable = sorted((n for n in names if len(n.strip()) >= 2), key=len, reverse=True)
    if not usable:
        return query
    pattern = re.compile(r"\b(?:" + "|".join(re.escape(n.strip()) for n in usable) + r")(?:'s)?\b", re.IGNORECASE)
    stripped = " ".join(pattern.sub(" ", query).split())
    return stripped if any(ch.isalnum() for ch in stripped) else query


def _segments(messages: Sequence[dict[str, Any]], kinds: Sequence[str], where: Sequence[int | None],
              items: Sequence[PlanItem], latest: PlanItem | None) -> list[Segment]:
    """A fresh context as segments: each message with the plan items it shows."""
    by_slice: dict[str, list[PlanItem]] = {}
    by_first: dict[int, list[PlanItem]] = {}
    for it in items:
        if it is latest:
            continue
        if it.slice == "tail" and it.positions:
            by_first.setdefault(it.positions[0], []).append(it)
        else:
            by_slice.setdefault(it.slice, []).append(it)
    out: list[Segment] = []
    for i, (m, k, p) in enumerate(zip(messages, kinds, where, strict=True)):
        if k == "latest":
            got: list[PlanItem] = [latest] if latest is not None else []
        elif k == "tail":
            got = by_first.pop(p, []) if p is not None else []
        elif k == "system" and i == 0:
            got = by_slice.pop("system", [])
        else:
            got = by_slice.pop(k, [])
        out.append(Segment(k, m, tuple(got)))
    return out


def _shown(segments: Sequence[Segment]) -> set[tuple[str, int]]:
    """(conversation, position) of every turn the segments show verbatim or trimmed."""
    return {(it.conversation_id, p) for g in segments for it in g.items
            if it.slice in ("pinned", "tail", "retrieved") and it.fidelity in ("verbatim", "trimmed")
            for p in it.positions}


def _breakpoints(kinds: Sequence[str], tokens_each: Sequence[int]) -> list[Breakpoint]:
    """Where the stable layers end (the last message of system, pinned, summary), where
    the part before this call's own (its retrieved turns and user message) ends
    (`stable`), and the whole context (`context`: within an epoch, the next call's
    prefix) unless this call's own part is most of it (a broad retrieval, which the next
    call is likely to rewind: writing it to a cache would cost a premium never read
    back). Latest last, at most MAX_BREAKPOINTS (the earliest layers give way)."""
    if not kinds:
        return []
    cum = [0]
    for t in tokens_each:
        cum.append(cum[-1] + t)
    ends: list[tuple[int, str]] = []
    for layer in ("system", "pinned", "summary"):
        idx = [i for i, k in enumerate(kinds) if k == layer]
        if idx:
            ends.append((idx[-1], layer))
    at = kinds.index("latest") if "latest" in kinds else len(kinds)
    own = at - 1 if 0 < at < len(kinds) and kinds[at - 1] == "retrieved" else at
    if own - 1 >= 0:
        ends.append((own - 1, "stable"))
    own_tokens = cum[-1] - cum[own] if own < len(kinds) else 0
    if own_tokens <= BROAD_OWN_SHARE * cum[-1]:
        ends.append((len(kinds) - 1, "context"))
    out: list[Breakpoint] = []
    rank = {"system": 0, "pinned": 1, "summary": 2, "stable": 3, "context": 4}
    for i, layer in sorted(ends, key=lambda e: (e[0], rank[e[1]])):
        if out and out[-1].index == i:
            out[-1] = Breakpoint(i, layer, cum[i + 1])  # the later name says more
        else:
            out.append(Breakpoint(i, layer, cum[i + 1]))
    return out[-MAX_BREAKPOINTS:]


def chosen_conv(chosen: dict[str, list[_Cand]], s: str) -> str:
    """The conversation being answered (its items sort before other conversations')."""
    for c in chosen["tail"]:
        return c.conversation_id
    return chosen[s][0].conversation_id if chosen[s] else ""


_HEADERS = {
    "pinned": "Standing instructions and facts from this conversation (pinned, current values):",
    "summary": "Summary of earlier parts of this conversation:",
    "retrieved": "Earlier turns relevant to the current message (retrieved from the log, in order):",
}

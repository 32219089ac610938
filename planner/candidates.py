"""The candidates of one context, per slice: the pinned turns, the recent tail (in units
that are never split), the warm summary's lines and the turns retrieved for the query
(this conversation's, scored exhaustively, and the namespace's other conversations').

Invariants:
- Candidates are read from the store interface (tiers.store.ColdLog) and the turn cache
  only; a turn the hot tier holds is rendered from it, its envelope from the turn index.
- A call and every result that answers it, and a reasoning item with the item after it,
  form one tail unit (`tool_units`; calls sharing an id, as Responses items of one round
  may, each take a result of it), and every unit shown is complete, as both provider
  APIs require: a result whose call is not shown (retracted, unreadable, before the tail)
  and a call that later messages follow before its results (a crash mid-loop, a
  retracted result, a fork cut mid-unit) are left out, and the plan says why; a Responses
  item that joined such a call's round (`joins_round`: the reply's text, a hosted call)
  stays, a unit of its own with the reasoning right before it (`_split_round`). Only a call
  at the very end of the log may wait for its result: the agent is mid-loop and
  appends it next. A reasoning item whose own item is not shown (retracted, cleared,
  left out, not appended yet) is left out with it: the Responses API refuses one last
  or before a user or system message.
- Superseded turns are never pinned as current; a superseded turn that is retrieved, or
  that the caller pinned (the store still offers it: the caller's pin stands), is marked
  with its validity interval, in its line and its reason (`Candidate.current` False), and
  a retrieved one ranks down unless the question is about the past (then up). A turn
  recalled from another conversation of the namespace is shown as that conversation left
  it: superseded there, it is marked and ranks the same way (`other_supersessions`: its
  rows read for all the hits at once); a correction in one conversation never marks
  another's turn.
- Outside recall classes only clearly related turns (`STRONG_COSINE`) or turns of a
  period the message's question names (not a remark's: planner.classify.question_text)
  are eligible, so the retrieved block stays unchanged on most turns and the prefix caches.
  Without a query vector (the embedding model cannot be used) clearly related means a
  strong keyword hit instead (`STRONG_KEYWORD_SHARE`), here and in the namespace's other
  conversations; with one, keyword hits alone never make a turn eligible.
- Only as many candidates are read as could ever fit the room (`MIN_PIN_TOKENS`,
  `TYPICAL_LINE_TOKENS`, or the conversation's own shorter lines: `typical_line_tokens`,
  `TAIL_SCAN_TURNS`): a long conversation's reads stay bounded. What the shorter lines
  read past the read of TYPICAL_LINE_TOKENS lines is `fill_only`: it fills the room, and
  an extension does not count it among the query's needs (the epoch rule is as before).
"""

from __future__ import annotations

import re
import threading
from collections import Counter, OrderedDict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from tiermem.planner.classify import about_past, question_text
from tiermem.planner.dates import query_windows
from tiermem.planner.density import pack_order
from tiermem.planner.excerpt import Focus
from tiermem.planner.excerpt import enabled as excerpt_enabled
from tiermem.planner.family import Copies, copied_prefixes
from tiermem.planner.plan import Plan, PlanItem
from tiermem.planner.prior import length_prior
from tiermem.planner.rank import BM25_DEPTH, MISSING_Z, TurnScores, replies_apply, score_turns
from tiermem.planner.render import HEADING_SHARE_TOKENS, LINE_SEP_TOKENS, Renderer, label_superseded, when
from tiermem.planner.rounds import more_rounds
from tiermem.planner.speakers import speaker_boost
from tiermem.planner.statements import Part, StatementView
from tiermem.planner.timeline import timeline_boost
from tiermem.planner.unanswered import UNANSWERED_QUESTION_PENALTY, unanswered
from tiermem.tiers.embed import cosine_from_l2
from tiermem.tiers.formats import (
    call_ids,
    call_item_id,
    hidden_positions,
    is_control,
    is_foreign_reasoning,
    is_reasoning,
    joins_round,
    result_id,
    result_text_field,
    wire_body,
)
from tiermem.tiers.models import StoredMessage, canonical_role, loads_stored, message_text
from tiermem.tiers.statements import Hidden, hidden_many, remaining_text
from tiermem.tiers.store import ColdLog
from tiermem.tiers.tokens import TokenCounter, message_tokens
from tiermem.tiers.turncache import TurnCache, TurnTable
from tiermem.tiers.vectors import row_dots
from tiermem.tiers.zones import UTC, Zone

if TYPE_CHECKING:
    from tiermem.planner.build import HotView, PlannerSettings, SummaryBlock
    from tiermem.tiers.models import TurnRow

TAIL_SCAN_TURNS = 400  # the tail never needs more turns than this to fill any share
# Turns read past the point where the newest turns exceed the budget: the turn that
# crosses it (searchsorted gives its index, not a count) and the latest user message's row.
TAIL_SCAN_EXTRA_ROWS = 2
TAIL_SCORE = 1.0  # every tail unit: the tail is packed newest first, not by score
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
# Retrieved candidates read per call: enough lines of about TYPICAL_LINE_TOKENS to fill
# the whole room, plus EXTRA_RETRIEVED_CANDIDATES for lines the packing skips. Packed
# retrieved lines on the LoCoMo dev conversations average 42 tokens (median 39, heading
# share included); below that, shorter lines still find candidates. 35 against 25 before:
# the same recall on every conversation at 500-4,000 tokens (+0.6 points on one at
# 2,000), 7-13% faster context() at 2,000-4,000 (README, Results, 2026-12-03 11:27).
TYPICAL_LINE_TOKENS = 35
EXTRA_RETRIEVED_CANDIDATES = 20
# A conversation of shorter lines (the pressure eval's generated ones, 20-25 tokens) had
# its whole pool fit with room left empty (mean context 1,834 of 2,000): its own typical
# line is the median of its newest TYPICAL_LINE_SAMPLE_TURNS turns' message tokens (the
# turn cache holds them: a bounded, cheap read; they include the message overhead, about
# what the line's "- " and speaker cost) plus RETRIEVED_LINE_OVERHEAD_TOKENS (the
# separator; no heading share: the top-up pays headings exactly, once a session), never
# above TYPICAL_LINE_TOKENS (a floor for the read) nor below MIN_TYPICAL_LINE_TOKENS
# (MAX_RETRIEVED_CANDIDATES bounds the read too). LoCoMo dev medians 30-38: conv-30 and
# conv-42 read a few more, same recall at 500-4,000, cost replay identical.
TYPICAL_LINE_SAMPLE_TURNS = 1000
RETRIEVED_LINE_OVERHEAD_TOKENS = LINE_SEP_TOKENS
MIN_TYPICAL_LINE_TOKENS = 8
PLAN_LEFT_OUT_PER_SLICE = 50  # left-out items listed per slice (the plan stays small)
# The namespace's other conversations are scored from the turn cache when there are at
# most this many (each costs an index seek per call) and they would fill at most half of
# it, at about this many bytes a turn (a 384-float vector, the keyword postings, facts).
NAMESPACE_IN_MEMORY_CONVERSATIONS = 32
NAMESPACE_MAX_CACHE_SHARE = 0.5
TURN_BYTES_ESTIMATE = 2048
PIN_CACHE_CONVERSATIONS = 1024  # conversations whose pin candidates are kept between calls
MIN_PIN_TOKENS = 8  # the smallest message a pin can be: bounds how many could fit
# Load-bearing turns at or above this priority are pinned automatically: constraints (85),
# decisions (75), entities (70), corrections (90). One-shot tasks (65) are not.
AUTO_PIN_MIN_PRIORITY = 70
PRIORITY_SCALE = 100.0  # priorities run 0..100; a pin's score is its priority on 0..1
# Outside recall questions only turns this close to the message come back (cosine 0.55:
# clearly the same topic), or turns from a period the message names.
STRONG_COSINE = 0.55
MISSING_COSINE = -1.0  # a turn without a vector yet: the lowest cosine, never clearly related
# Without a query vector (the embedding model cannot be used) there is no cosine: outside
# recall questions a keyword hit is then clearly related when its BM25 score is at least
# this share of the best hit's. BM25 adds up the message's words a turn holds, each
# weighted by its rarity, so half the best score means sharing about as much of what the
# message is about as the best match; a turn that shares one common word scores far
# below and stays out, and the retrieved block stays small, as STRONG_COSINE keeps it.
STRONG_KEYWORD_SHARE = 0.5
RECALL_CLASSES = frozenset({"targeted_recall", "temporal", "summarize"})
RECENT_RECALL_TURNS = 12  # newest turns a recent-recall question may bring back in its per-turn part
RECENT_RECALL_BOOST = 10.0  # on the scale of planner.rank's scores: above any match
# the newest of those turns gets the whole boost, the oldest this share of it, linearly
RECENT_RECALL_OLDEST_SHARE = 0.5
# Rounds of choosing the best candidates again after unanswered questions among them
# sank (planner.unanswered): each reads the rows of the newcomers only.
UNANSWERED_ROUNDS = 3
SCORE_DECIMALS = 4  # a plan item's score is rounded to this many decimals
# hits the cold tier's indexes are asked for at most, when a fork family's shared turns
# (planner.family) crowd the namespace's other conversations out of the k best: past it a
# recall may find fewer than k others (a family sharing over a thousand turns)
FAMILY_SEARCH_MAX_K = 1024
# corrections a caller's checkpoint written before them names (its line and plan); the
# rest counted: a summary line stays a line
WRITTEN_BEFORE_NAMED = 3
# steps of a correction's own chain of supersessions followed to the current value's turn
# (a correction replaced later, and so on; one read each); a guard against a cycle a
# hand-edited row could record: a longer chain is named where it was cut
CORRECTION_CHAIN_MAX_STEPS = 256
COVERED_KEPT_CONVERSATIONS = 256  # conversations whose checkpoint's superseded turns are kept (LRU)
_HAS_WORD = re.compile(r"\w")  # a summary line cut to nothing but joiners says nothing
MIN_NAME_CHARS = 2  # shorter speaker names are kept in the query's embedding (too ambiguous to strip)


def typical_line_tokens(table: TurnTable) -> int:
    """Tokens of a typical retrieved line of `table`'s conversation, for sizing the read:
    TYPICAL_LINE_TOKENS, or less when its newest turns are shorter (see the constants)."""
    sample = table.tokens[max(0, len(table) - TYPICAL_LINE_SAMPLE_TURNS):len(table)]
    if not len(sample):
        return TYPICAL_LINE_TOKENS
    own = int(np.median(sample)) + RETRIEVED_LINE_OVERHEAD_TOKENS
    return max(MIN_TYPICAL_LINE_TOKENS, min(TYPICAL_LINE_TOKENS, own))


def retrieved_depth(retrieval_k: int, room: int, line_tokens: int) -> int:
    """Retrieved candidates read for `room` tokens of lines of `line_tokens` tokens each."""
    return max(retrieval_k, min(MAX_RETRIEVED_CANDIDATES, room // line_tokens + EXTRA_RETRIEVED_CANDIDATES))


def strong_keywords(bm25: Sequence[float]) -> np.ndarray:
    """Which of these keyword hits' scores (bm25, lower is better, as FTS5's) are
    strong: at least STRONG_KEYWORD_SHARE of the best one's."""
    strength = -np.asarray(bm25, dtype=np.float64)
    if not strength.size or float(strength.max()) <= 0.0:
        return np.zeros(strength.size, dtype=bool)
    return strength >= STRONG_KEYWORD_SHARE * float(strength.max())


@dataclass
class Candidate:
    """One item a slice may show: a line (block slices) or a tail unit's messages."""

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
    # retrieved: the turn's text and the query's keyword weights, for an excerpt of it
    # (planner.excerpt; "" / None: it is shown whole or not at all)
    source: str = ""
    focus: Focus | None = None
    # pinned: presented as a current value (False: a caller pin superseded since, shown
    # marked; an epoch's `pinned` set and late pins hold current ones only)
    current: bool = True
    # retrieved from another conversation of the namespace: the id its owner knows ("" for
    # the conversation asked about). Orderings use it, never `conversation_id` (the key):
    # a key's spelling tells whether the id is, or was, used in another namespace
    other: str = ""
    # retrieved: read only because the conversation's lines are short (past the read of
    # TYPICAL_LINE_TOKENS lines, `Candidates.retrieved`): it fills a context's room, but an
    # extension does not count it among the query's needs (planner.build._extend), so an
    # epoch that extended before still extends
    fill_only: bool = False

    def tie_order(self) -> tuple[str, int]:
        """Where this candidate goes among equals: the conversation asked about first,
        then other conversations by the id their owner knows, each in log order."""
        return self.other, self.position

    def item(self, reason: str | None = None) -> PlanItem:
        """This candidate as a plan item (with `reason` instead of its own, when given)."""
        return PlanItem(self.slice, self.conversation_id, self.group or [self.position], self.tier, self.fidelity,
                        self.tokens, round(self.score, SCORE_DECIMALS), reason or self.reason)


@dataclass(frozen=True)
class PinSet:
    """One conversation's pin candidates at a pin version (see ColdLog.pin_version)."""

    version: int
    room: int  # read for a pinned share of up to this many tokens
    rows: tuple[tuple[TurnRow, str, bool, int], ...]  # row, rendered line ("" not shown), trimmed, tokens
    superseded: tuple[TurnRow, ...]
    zone: Zone  # whose clock its lines' dates and intervals show (a call's zone)
    intervals: tuple[str, ...] = ()  # each superseded row's validity interval, for the plan
    # caller pins superseded since (shown, marked): position -> their interval, for the plan
    marked: dict[int, str] = field(default_factory=dict)
    hidden: frozenset[int] = frozenset()  # what control rows hid when it was read (a pop moves no pin version)


@dataclass(frozen=True)
class Lexical:
    """The query's keyword hits here, and the other conversations to search."""

    here: list[tuple[str, int, float]]  # bm25 hits in this conversation
    others: list[str]  # the namespace's other conversations, up to one past the in-memory limit


def tier_of(position: int, hot: HotView) -> str:
    return "hot" if position in hot.payloads else "cold"


class Candidates:
    """Reads one call's candidates from the log, the turn cache and the hot tier's view;
    keeps each conversation's pin candidates between calls (`pins`)."""

    def __init__(self, cold: ColdLog, turns: TurnCache, tokens: TokenCounter, settings: PlannerSettings,
                 render: Renderer, statements: StatementView) -> None:
        self.cold = cold
        self.statements = statements
        self.turns = turns
        self.tokens = tokens
        self.settings = settings
        self.render = render
        self.pins: OrderedDict[str, PinSet] = OrderedDict()
        self._pins_lock = threading.Lock()
        # a caller checkpoint's covered turns superseded as recorded (`_written_before`):
        # key -> (supersession version, start, end, rows), so a call reads one counter,
        # not the range, while no supersession changed
        self._covered: OrderedDict[str, tuple[int, int, int, list[TurnRow]]] = OrderedDict()

    def forget(self, conv: str | None) -> None:
        """Drop the pin candidates (and a checkpoint's superseded turns) kept for a
        conversation key (None: for every one)."""
        with self._pins_lock:
            if conv is None:
                self.pins.clear()
                self._covered.clear()
            else:
                self.pins.pop(conv, None)
                self._covered.pop(conv, None)

    def messages(self, conv: str, positions: Sequence[int], hot: HotView) -> list[StoredMessage]:
        """Render from the hot tier where it holds the turn, else from the cold log."""
        out: list[StoredMessage] = []
        missing: list[int] = []
        for p in positions:
            payload = hot.payloads.get(p)
            if payload is None:
                missing.append(p)
                continue
            try:
                body = loads_stored(payload)  # one an older version cached past json's depth too
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

    def pinned(self, conv: str, hot: HotView, plan: Plan, room: int, zone: Zone) -> list[Candidate]:
        """The pin candidates; `zone`: the call's, whose clock their dates and validity
        intervals show."""
        # only as many as could ever fit, highest priority then newest first: a long
        # conversation has hundreds of load-bearing turns, and reading them all would
        # cost more than the rest of the plan
        limit = max(PLAN_LEFT_OUT_PER_SLICE, room // MIN_PIN_TOKENS)
        pins = self.pin_set(conv, room, zone)
        for r, interval in zip(pins.superseded, pins.intervals, strict=True):
            plan.left_out.append(PlanItem("pinned", conv, [r.position], "cold", "reference", 0, 0.0,
                                          f"superseded by #{r.superseded_by}: not presented as current "
                                          f"({interval})"))
        out = []
        used = 0
        for r, line, trimmed, tokens in pins.rows[:limit + 1]:
            if used > room:
                plan.left_out.append(PlanItem("pinned", conv, [r.position], "cold", "verbatim", r.tokens,
                                              r.priority / PRIORITY_SCALE, "pinned, but higher-priority pins fill the budget"))
                break
            used += r.tokens
            if not line:
                continue  # its message could not be read (salvaged away)
            prio = r.pinned_priority if r.pinned_priority is not None else r.priority
            why = "pinned by the caller" if r.pinned_priority is not None else f"load-bearing {r.intent or ''}".strip()
            if gone := self.statements.parts(conv, r.position):
                why += "; " + self.statements.reason(r.position, gone, r.created_at, zone)
            marked = pins.marked.get(r.position)
            if marked is not None:
                why += f"; superseded by #{r.superseded_by} ({marked}): shown marked, not as a current value"
            out.append(Candidate("pinned", conv, r.position, prio / PRIORITY_SCALE, f"{why} (priority {prio})", line,
                             tokens=tokens, fidelity="trimmed" if trimmed else "verbatim",
                             tier=tier_of(r.position, hot), current=marked is None))
        # highest priority first for packing; rendered in log order
        out.sort(key=lambda c: (-c.score, -c.position))
        return out

    def intervals(self, conv: str, rows: Sequence[TurnRow], zone: Zone) -> dict[int, tuple[str, str]]:
        """For superseded rows: (the plan's wording, the line's wording) of their validity
        interval, from their own time until the superseding turn's (the turn index's
        `superseded_by` and the turn times: derived, nothing stored), on `zone`'s clock."""
        if not rows:
            return {}
        ends = {r.position: r for r in self.cold.turns_at(conv, sorted({r.superseded_by for r in rows
                                                                       if r.superseded_by is not None}))}
        return {r.position: validity(r, ends.get(r.superseded_by) if r.superseded_by is not None else None, zone)
                for r in rows}

    def pin_set(self, conv: str, room: int, zone: Zone) -> PinSet:
        """The conversation's pin candidates (best first) with their rendered lines, for
        a pinned share of up to `room` tokens, and its superseded pins: kept between
        calls and re-read only when the log's pin version moved (a load-bearing turn, a
        relabel, a supersession, a pin) or what control rows hide, not on every appended
        turn, or when a call has more room than the kept set was read for. A pin
        superseded only by a popped turn is a pin again (tiers.statements.Hidden). The kept
        lines show `zone`'s dates: a call in another zone reads them again. The version is
        the call's one read (planner.statements `StatementView.version`), which the
        statements its lines render are kept under too."""
        version = self.statements.version(conv)
        hid = self.statements.hidden(conv)
        with self._pins_lock:
            got = self.pins.get(conv)
            if got is not None:
                self.pins.move_to_end(conv)
        if got is not None and got.version == version and got.hidden == hid.positions and got.zone == zone:
            if room <= got.room:
                return got
            room = max(room, got.room)
        limit = max(PLAN_LEFT_OUT_PER_SLICE, room // MIN_PIN_TOKENS)
        rows = self.cold.pin_candidates(conv, min_priority=AUTO_PIN_MIN_PRIORITY, limit=limit + 1)
        superseded = self.cold.superseded_pins(conv, min_priority=AUTO_PIN_MIN_PRIORITY,
                                               limit=limit + 1 if hid.positions else PLAN_LEFT_OUT_PER_SLICE)
        if hid.positions:
            # what only a popped turn superseded is current again: back among the candidates
            superseded = [hid.row(r) for r in superseded]
            rows = sorted([*(hid.row(r) for r in rows), *(r for r in superseded if r.superseded_by is None)],
                          key=lambda t: (-(t.pinned_priority if t.pinned_priority is not None else t.priority),
                                         -t.position))[:limit + 1]
            superseded = [r for r in superseded if r.superseded_by is not None][:PLAN_LEFT_OUT_PER_SLICE]
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
        # a caller pin stays the caller's to show after a correction superseded it (the
        # store's candidates keep it), but never as a current value: its line carries the
        # marker and validity interval that a superseded retrieved line carries
        gone_by = self.intervals(conv, [r for r in rows if r.superseded_by is not None and r.position in msgs], zone)
        rendered: list[tuple[TurnRow, str, bool, int]] = []
        for r in rows:
            m = msgs.get(r.position)
            if m is None:  # past the reach, or unreadable (salvaged away): never shown
                rendered.append((r, "", False, 0))
                continue
            line, trimmed = self.render.line(m, zone=zone)
            if r.position in gone_by:
                line = label_superseded(line, gone_by[r.position][1])  # one label a line
            rendered.append((r, line, trimmed, self.render.line_tokens(line)))
        intervals = self.intervals(conv, superseded, zone)
        got = PinSet(version, room, tuple(rendered), tuple(superseded), zone,
                      tuple(intervals[r.position][0] for r in superseded),
                      {p: v[0] for p, v in gone_by.items()}, hid.positions)
        with self._pins_lock:
            self.pins[conv] = got
            while len(self.pins) > PIN_CACHE_CONVERSATIONS:
                self.pins.popitem(last=False)
        return got

    def tail(self, conv: str, rows: list[TurnRow], msgs: dict[int, StoredMessage],
             latest_user: int | None, plan: Plan | None = None) -> list[Candidate]:
        """Newest first, in units that are never split: a call and every result that
        answers it (chat `tool_calls` and `tool` messages, Responses `function_call` items
        and their `*_output` by `call_id`, parallel calls included), and a reasoning
        item with the item after it. Incomplete units are left out (`tool_units`), with
        why in `plan.left_out` when a plan is given."""
        return self.tail_units(conv, rows, msgs, latest_user, plan=plan)[0]

    def tail_units(self, conv: str, rows: list[TurnRow], msgs: dict[int, StoredMessage],
                   latest_user: int | None, *, open_calls: Sequence[str] = (),
                   call_items: Mapping[str, str] | None = None,
                   plan: Plan | None = None) -> tuple[list[Candidate], Units]:
        """`tail`, and the grouping it came from; `open_calls`: call ids the context the
        rows are appended to left waiting (an epoch's extension; an id once per call),
        whose results continue that context's last unit; `call_items`: those calls' item
        ids a result may name them by, each to its call id (`render.open_call_items`)."""
        got = tool_units([msgs.get(r.position) if r.position != latest_user else None for r in rows],
                         [r.position == latest_user for r in rows], open_calls,
                         foreign_reasoning_out=self.settings.context_format == "responses",
                         call_items=call_items)
        if plan is not None:
            for g, why in got.dropped:
                plan.left_out.append(PlanItem("tail", conv, [m.position for m in g], g[0].extra.get("tier", "cold"),
                                              "verbatim", sum(m.tokens for m in g), 0.0, why))
        return [self.unit(conv, g, self.settings.tool_trim_tokens) for g in got.groups], got

    def unit(self, conv: str, g: Sequence[StoredMessage], limit: int, reason: str = "recent turn",
             encoded: dict[int, list[int]] | None = None) -> Candidate:
        """One tail unit's candidate, each tool output in it trimmed to `limit` tokens (its
        head and tail, a marker between: planner.render.Render.trim). `encoded`: each
        output's tokens by position, filled here and read on the next call (a round
        trimmed at several allowances, pack.Packing.fit_round, encodes each output once:
        re-encoding 10 outputs of 100 kB at each bisection step took most of a second)."""
        bodies = []
        fid = "verbatim"
        for m in g:
            body = wire_body(m.body)
            key = result_text_field(m.body)
            if key is not None:
                ids = None
                if encoded is not None:
                    ids = encoded.get(m.position)
                    if ids is None:
                        ids = encoded[m.position] = self.tokens.encode(m.text)
                text, trimmed = self.render.trim(m.text, limit, m.position, ids)
                if trimmed:
                    body[key] = text
                    fid = "trimmed"
            bodies.append(body)
        toks = sum(message_tokens(self.tokens, b) for b in bodies)
        c = Candidate("tail", conv, g[0].position, TAIL_SCORE, reason, tokens=toks, fidelity=fid,
                      tier=g[0].extra.get("tier", "cold"), group=[m.position for m in g])
        c.body = {"messages": bodies}
        return c

    def tail_scan(self, table: TurnTable, budget: int) -> int:
        """How many of the newest turns the tail could ever use at this budget: enough
        that their tokens exceed it, plus the latest user message's row. A long tool
        output is counted at its trim allowance, the least it costs trimmed (its head and
        tail are kept whole, a marker added): counted at more, as before, fewer turns were
        read than fit (of a tool loop at 1,200 tokens, 7 rounds of 143 where 8 fit)."""
        if not len(table):
            return TAIL_SCAN_TURNS
        newest = np.minimum(table.tokens[::-1][:TAIL_SCAN_TURNS], self.settings.tool_trim_tokens)
        return min(TAIL_SCAN_TURNS, int(np.searchsorted(np.cumsum(newest), budget)) + TAIL_SCAN_EXTRA_ROWS)

    def summary(self, conv: str, summaries: Sequence[SummaryBlock], hidden: set[int],
                plan: Plan | None = None, zone: Zone = UTC) -> list[Candidate]:
        """The views' lines; a line drawn from an item a control row hides now (a view
        built before the retraction) is left out, as the item is everywhere else. A line
        is never presented as current once what it says was superseded (a view built
        before the correction, or not refreshed since): a line citing a superseded turn
        (and not the turn that superseded it) is left out, with why in `plan.left_out`,
        as a superseded pin is; a line holding a superseded statement of a turn current
        in part is shown without it, or left out when it can not be found in its turn
        (an abstractive line) and its view was built before the correction.

        A caller's checkpoint without per-line sources (`SummaryBlock.whole`) is one
        text standing in for every turn up to its position, so the rule is read over all
        of them: a turn it covers that a turn past its end superseded, whole or a
        statement of it (`_written_before`). Such a text is not left out (its other facts
        would go with the old value, and nothing refreshes it) but shown marked as written
        before the correction, naming it by its time (`zone`'s clock), the plan by
        position; the correction itself is a turn like any other (tail, pins, retrieval)."""
        cited = sorted({p for s in summaries if not s.whole for _t, ps in s.lines for p in ps} - hidden)
        hid = self.statements.hidden(conv)
        rows = {r.position: hid.row(r) for r in self.cold.turns_at(conv, cited)} if cited else {}
        parted = {p: parts for p in cited if (parts := self.statements.parts(conv, p))}
        texts = {m.position: m.text for m in self.cold.get(conv, sorted(parted))} if parted else {}
        out = []
        for s in summaries:
            # a caller's checkpoint: the same rule over every turn it stands in for
            before = self._written_before(conv, s, hidden, zone) if s.whole else None
            for i, (text, positions) in enumerate(s.lines):
                if hidden and not hidden.isdisjoint(positions):
                    continue
                score = 1.0 - i / max(1, len(s.lines))
                why_gone = ""
                if before is None:
                    gone = next((r for p in positions if (r := rows.get(p)) is not None
                                 and r.superseded_by is not None and r.superseded_by not in positions), None)
                    why_gone = (f"superseded by #{gone.superseded_by}: not presented as current"
                                if gone is not None else "")
                if not why_gone and before is None:
                    seen = None if s.seen_superseded is None else s.seen_superseded[i]
                    text, why_gone = self._current_part(text, positions, parted, texts, s.end, seen)
                if why_gone:
                    if plan is not None:
                        plan.left_out.append(PlanItem("summary", conv, list(positions), s.tier, "summary", 0,
                                                      round(score, SCORE_DECIMALS),
                                                      f"{s.kind} summary v{s.version}: {why_gone}"))
                    continue
                line = f"- {text}"
                reason = f"{s.kind} summary v{s.version} (#{s.start}..#{s.end})"
                if before:
                    # one text holding several facts, which no refresh rewrites: left out,
                    # its other facts would be lost with the old value; shown, it says
                    # which later message holds where the two differ
                    line = f"- {before[1]} {text}"
                    reason += f", {before[0]}: shown marked, not as current where the correction differs"
                if s.over_budget:
                    reason += f", {s.turns_behind} turns behind"
                c = Candidate("summary", conv, positions[0] if positions else s.end, score, reason, line,
                          tokens=self.render.line_tokens(line), fidelity="summary", tier=s.tier,
                          group=list(positions))
                out.append(c)
        return out

    def _written_before(self, conv: str, s: SummaryBlock, hidden: set[int], zone: Zone
                        ) -> tuple[str, str] | None:
        """For a caller's checkpoint `s` (`SummaryBlock.whole`): (the plan's wording, the
        line's label) naming the corrections past its end of turns it covers (a turn's
        `superseded_by`, read past popped turns, or a statement's), None when there is
        none: what a line citing all of them would be left out for (`summary`'s rule
        and `_current_part`'s for a fold's line: a correction past the view's end). A
        hidden turn is no turn it stands in for (`Memory._fold`). One range read; the
        turn rows of only the superseded turns, the corrections' rows when some.

        A correction is named by the end of its chain (`_chain_ends`: #6 replaced in
        turn by #9 is named #9, the current value's turn, the plan saying via #6),
        whenever the checkpoint was written: one covering turns up to its position
        summarises them, which a correction past it is never among, and a checkpoint
        written late by a summariser catching up says their old value (a message's
        `created_at` is the caller's clock, no witness of what the text knew). A text
        that already holds the current value gets a label that costs nothing ("where
        they differ"); an unlabelled old value would be read as current."""
        late: dict[int, set[int]] = {}  # correction -> the covered turns it superseded
        hid = self.statements.hidden(conv)
        for r in self._superseded_covered(conv, s.start, s.end):
            if r.position in hidden:
                continue
            by = hid.row(r).superseded_by
            if by is not None and by > s.end:
                late.setdefault(by, set()).add(r.position)
        for p in sorted(self.statements.positions(conv)):
            if s.start <= p <= s.end and p not in hidden:
                for x in self.statements.parts(conv, p):
                    if x.by > s.end:
                        late.setdefault(x.by, set()).add(p)
        if not late:
            return None
        rows, chains = self._chain_ends(conv, late, hid)
        # the chain's end -> (the covered turns, the corrections it replaced on the way)
        named_by: dict[int, tuple[set[int], set[int]]] = {}
        for b, covered in late.items():
            end, via = chains[b]
            got = named_by.setdefault(end, (set(), set()))
            got[0].update(covered)
            got[1].update(via)
        if not named_by:
            return None
        named = sorted(named_by)[:WRITTEN_BEFORE_NAMED]

        def cites(end: int) -> str:
            covered, via = named_by[end]
            steps = sorted(via)
            if len(steps) > WRITTEN_BEFORE_NAMED:  # a long chain: its first and last, counted
                through = f" via #{steps[0]} ... #{steps[-1]} ({len(steps)})"
            else:
                through = f" via #{', #'.join(map(str, steps))}" if steps else ""
            return f"#{end} (of #{', #'.join(map(str, sorted(covered)))}{through})"

        plan = ("written before the correction" + ("s" if len(named_by) > 1 else "") + " "
                + ", ".join(cites(b) for b in named))
        times = [when(rows[b].created_at, zone) if b in rows else "a later message" for b in named]
        more = len(named_by) - len(named)
        plan += f" and {more} more" if more else ""
        label = (f"[written before {'corrections' if len(named_by) > 1 else 'a correction'} of "
                 f"{', '.join(times)}{f' and {more} more' if more else ''}: where they differ, the "
                 f"{'corrections hold' if len(named_by) > 1 else 'correction holds'}]")
        return plan, label

    def _chain_ends(self, conv: str, corrections: Collection[int], hid: Hidden
                    ) -> tuple[dict[int, TurnRow], dict[int, tuple[int, list[int]]]]:
        """The turn rows read (`superseded_by` past popped turns) and, per correction, the
        end of its chain of supersessions (a correction itself replaced later, and so on:
        the turn holding the current value) with the corrections passed on the way. One
        read per step of the longest chain, up to CORRECTION_CHAIN_MAX_STEPS (a longer
        chain is named where it was cut); a step goes forward only (a hand-edited
        `superseded_by` pointing back ends it)."""
        rows: dict[int, TurnRow] = {}
        ask = set(corrections)
        for _ in range(CORRECTION_CHAIN_MAX_STEPS):
            got = {r.position: hid.row(r) for r in self.cold.turns_at(conv, sorted(ask))}
            rows.update(got)
            ask = {r.superseded_by for r in got.values()
                   if r.superseded_by is not None and r.superseded_by > r.position} - rows.keys()
            if not ask:
                break
        chains: dict[int, tuple[int, list[int]]] = {}
        for b in corrections:
            at, via = b, []
            for _ in range(CORRECTION_CHAIN_MAX_STEPS):
                r = rows.get(at)
                nxt = r.superseded_by if r is not None else None
                if nxt is None or nxt <= at or nxt not in rows:
                    break
                via.append(at)
                at = nxt
            chains[b] = (at, via)
        return rows, chains

    def _superseded_covered(self, conv: str, start: int, end: int) -> list[TurnRow]:
        """The turn rows from `start` to `end` whose `superseded_by` is recorded: read
        again only when the conversation's supersession version moved (a trigger on the
        turns' `superseded_by` and on statement rows keeps it, in both engines)."""
        version = self.cold.supersession_version(conv)
        with self._pins_lock:
            kept = self._covered.get(conv)
        if kept is not None and kept[:3] == (version, start, end):
            return kept[3]
        recorded = [p for p, _by in self.cold.superseded_within(conv, start=start, end=end)]
        rows = self.cold.turns_at(conv, recorded) if recorded else []
        with self._pins_lock:
            self._covered[conv] = (version, start, end, rows)
            self._covered.move_to_end(conv)
            while len(self._covered) > COVERED_KEPT_CONVERSATIONS:
                self._covered.popitem(last=False)
        return rows

    @staticmethod
    def _current_part(text: str, positions: Sequence[int], parted: Mapping[int, tuple[Part, ...]],
                      texts: Mapping[int, str], view_end: int,
                      seen: Sequence[tuple[int, int]] | None = None) -> tuple[str, str]:
        """(what of a summary line still holds, why it is left out: "" when it is not):
        the line less the superseded statements of the turns it cites (found in the turn's
        text: an extractive line is a substring of it), the turn that superseded a
        statement cited too aside. A line not found in its turn (an abstractive one) is
        left out when a statement of it was recorded as superseded after the line was
        written: one not in `seen` (the line's `seen_superseded`, as consolidation.views
        `_line_outdated` reads it), so also a correction decided after the view was
        built at a position within it; without `seen` (a fold's line), one superseded by
        a turn past the view's end `view_end`."""
        for p in positions:
            parts = [x for x in parted.get(p, ()) if x.by not in positions]
            source = texts.get(p)
            if not parts or source is None:
                continue
            at = source.find(text)
            if at < 0:
                # not found in its turn (an abstractive line): it may state the old value
                # if it was written before the correction was recorded. Known by what the
                # line kept of that, not by positions: a correction decided late (an owed
                # decision, a label landing after the view's refresh) sits before the
                # view's end, and the line showed the old value until the next refresh
                late = ([x for x in parts if (p, x.start) not in seen] if seen is not None
                        else [x for x in parts if x.by > view_end])
                if late:
                    return "", (f"cites #{p}, of which a statement was superseded by #{late[0].by} after the line "
                                "was written: not presented as current")
                continue
            cut = [(max(x.start, at) - at, min(x.end, at + len(text)) - at) for x in parts
                   if x.start < at + len(text) and x.end > at]
            if cut:
                text = remaining_text(text, cut)
                if not _HAS_WORD.search(text):
                    return "", f"its statement of #{p} was superseded by #{parts[0].by}: not presented as current"
        return text, ""

    def retrieved(
        self, conv: str, namespace: str, query: str | None, qvec: np.ndarray | None, qclass: str,
        room: int, *, exclude: set[int], lexical: Lexical, table: TurnTable, zone: Zone,
    ) -> list[Candidate]:
        """The turns retrieved for `query`; `zone`: the call's, the
        calendar of the days it names and the clock its lines' dates show (`table`'s told
        periods are that zone's: TurnCache.get)."""
        if not query or not query.strip() or not len(table):
            return []
        # enough candidates to fill the whole remaining room, not just the share; those
        # past the read of TYPICAL_LINE_TOKENS lines are marked fill_only
        depth = retrieved_depth(self.settings.retrieval_k, room, typical_line_tokens(table))
        needs_depth = retrieved_depth(self.settings.retrieval_k, room, TYPICAL_LINE_TOKENS)
        bm25 = [(p, s) for _c, p, s in lexical.here]
        windows = query_windows(query, float(table.created[-1]), zone=zone)
        scores = score_turns(table, qvec, bm25, windows,
                             replies=qclass in RECALL_CLASSES and replies_apply(room))
        eligible = np.ones(len(table), dtype=bool)
        # Recall questions fill their share with the best candidates; other turns (a
        # statement, a new request) only bring back what is clearly related, so the
        # retrieved block stays empty or unchanged on most turns and the prefix caches.
        boost = np.zeros(len(table))
        if qclass not in RECALL_CLASSES and qvec is None:  # no cosine: the strong keyword hits
            eligible = np.zeros(len(table), dtype=bool)
            for (p, _s), strong in zip(bm25, strong_keywords([s for _p, s in bm25]), strict=True):
                i = table.index_of(p)
                if strong and i is not None:
                    eligible[i] = True
            if windows and query_windows(question_text(query), float(table.created[-1]), zone=zone):
                eligible |= scores.in_period()
        elif qclass not in RECALL_CLASSES:
            cos = scores.cosine if scores.cosine is not None else np.full(len(table), np.nan)
            eligible = np.nan_to_num(cos, nan=MISSING_COSINE) >= STRONG_COSINE
            # the turns of a period only when the message asks about it: a remark that
            # names one ("I went hiking last week") tells, and the tail carries it
            if windows and query_windows(question_text(query), float(table.created[-1]), zone=zone):
                eligible |= scores.in_period()
        if qclass == "recent_recall":
            # "what did I just say?" needs the newest turns: the tail's share does not
            # depend on the class, so those it does not reach come in the per-turn part
            n = min(RECENT_RECALL_TURNS, len(table))
            eligible[len(table) - n:] = True
            boost[len(table) - n:] = RECENT_RECALL_BOOST * np.linspace(RECENT_RECALL_OLDEST_SHARE, 1.0, n)
        for p in exclude:
            i = table.index_of(p)
            if i is not None:
                eligible[i] = False
        idx = np.flatnonzero(eligible)
        # what the turns say happened when (planner.timeline), whose turns it asks about (planner.speakers)
        told = timeline_boost(table, query, windows, scores.date)
        spoke = speaker_boost(table, query) if qclass in RECALL_CLASSES else np.zeros(len(table))
        # how much a turn says (planner.prior; off unless set)
        prior = length_prior(table, room, period=bool(windows)) if qclass in RECALL_CLASSES else np.zeros(len(table))
        total = scores.total + boost + told + spoke + prior
        # episode keys and a second round seeded by the best turns (planner.rounds)
        more = (more_rounds(table, query, scores.cosine, total, eligible,
                            lambda ps: {m.position: message_text(m.body) for m in self.cold.get(conv, ps)},
                            period=bool(windows), room=room)
                if qclass in RECALL_CLASSES else None)
        if more is not None:
            total = total + more.boost
        top, rows, sunk = self._top(conv, table, total, idx, depth)
        hid = self.statements.hidden(conv)  # a supersession by a popped turn counts as absent
        rows = {p: hid.row(r) for p, r in rows.items()}
        positions = [int(table.positions[i]) for i in top]
        fill_only = set(positions[needs_depth:])  # `top` is best first
        intervals = self.intervals(conv, [r for r in rows.values() if r.superseded_by is not None], zone)
        past = about_past(query)
        last = int(table.positions[-1])
        scored: dict[tuple[str, int], tuple[float, str]] = {}
        for i, p in zip(top, positions, strict=True):
            s = float(total[i])
            why = scores.reason(int(i)) + (", one of the newest turns" if boost[i] else "")
            if told[i]:
                why += f", tells when {told[i]:+.2f}"
            if spoke[i]:
                why += f", the named speaker's {spoke[i]:+.2f}"
            if prior[i]:
                why += f", its length {prior[i]:+.2f}"
            if more is not None:
                why += more.reason(int(i))
            if p in sunk:
                why += f", a question no reply followed {-UNANSWERED_QUESTION_PENALTY:+.2f}"
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
        # superseded turns -> their validity interval, as their line shows it
        marks = {(conv, p): intervals[p][1] for p, r in rows.items() if r.superseded_by is not None}
        names: dict[str, str] = {}  # other conversations' keys -> their ids
        if lexical.others and qclass != "recent_recall":
            hits, names = self.namespace_hits(conv, namespace, lexical.others, query, qvec, scores,
                                              qclass in RECALL_CLASSES)
            # an item another conversation's control rows hide is hidden here too (this
            # conversation's are in `exclude`)
            hidden: dict[str, set[int]] = {}
            for other, controls in self.cold.control_rows(sorted({c for c, _p in hits})).items():
                hidden[other] = hidden_positions(controls)[0]
                for p in hidden[other]:
                    hits.pop((other, p), None)
            marks.update(self.other_supersessions(hits, hidden, past, zone))
            scored.update(hits)
        if not scored:
            return []
        msgs = {(m.conversation_id, m.position): m for m in self.cold.get_many(list(scored))}
        # excerpts (recall only) weigh the query's words without the speakers' names: a name
        # matches the sentence that addresses someone, not the one that answers
        focus = (Focus.of(without_names(query, table.names), table)
                 if qclass in RECALL_CLASSES and excerpt_enabled() else None)
        out = []
        for key, (score, why) in scored.items():
            m = msgs.get(key)
            if m is None or is_control(m.body):
                continue
            line, trimmed = self.render.line(m, dated=False, zone=zone)
            source = m.text if m.role in ("user", "assistant") and not trimmed else ""
            if gone := self.statements.parts(key[0], key[1]):
                why += "; " + self.statements.reason(key[1], gone, m.created_at, zone)
                source = ""  # its superseded statements are marked line by line: shown whole
            if key in marks:
                # shown for the history it carries, never as a current value: with what
                # was true when; superseded whole after in part, what its statements' labels
                # leave (its current part) is labelled too, each line once
                line = label_superseded(line, marks[key])
                source = ""
            # another conversation is named by its id: its internal key would tell that the
            # id is (or was) used in another namespace (tiers.cold, incarnations)
            heading = self.render.heading(m, None if key[0] == conv else names[key[0]], zone)
            out.append(Candidate("retrieved", key[0], key[1], score, f"{qclass}: {why}", line,
                             tokens=self.render.line_tokens(line) + HEADING_SHARE_TOKENS,
                             fidelity="trimmed" if trimmed else "verbatim", tier="cold", header=heading,
                             source=source if key[0] == conv else "", focus=focus,
                             other="" if key[0] == conv else names[key[0]],
                             fill_only=key[0] == conv and key[1] in fill_only))
        out.sort(key=lambda c: (-c.score, *c.tie_order()))
        return pack_order(out)  # value per token (planner.density; rank order at weight 0)

    def _top(self, conv: str, table: TurnTable, total: np.ndarray, idx: np.ndarray, depth: int
             ) -> tuple[np.ndarray, dict[int, TurnRow], set[int]]:
        """The `depth` best of `idx` by `total`, best first, their turn rows, and which of
        them are unanswered questions (planner.unanswered): those sink in `total` (in
        place) and the best are chosen again, so the room they took goes to turns that
        say something."""
        rows: dict[int, TurnRow] = {}
        sunk: set[int] = set()
        for _ in range(UNANSWERED_ROUNDS):
            top = idx[np.argpartition(-total[idx], depth - 1)[:depth]] if idx.shape[0] > depth else idx
            top = top[np.argsort(-total[top], kind="stable")]
            fresh = [int(table.positions[i]) for i in top if int(table.positions[i]) not in rows]
            read = {r.position: r for r in self.cold.turns_at(conv, fresh)}
            rows.update(read)
            found = unanswered(self.cold, conv, read)
            if not found:
                break
            for p in found:
                i = table.index_of(p)
                if i is not None:
                    total[i] -= UNANSWERED_QUESTION_PENALTY
            sunk |= found
        else:  # the last round sank some: choose once more (their rows are read)
            top = idx[np.argpartition(-total[idx], depth - 1)[:depth]] if idx.shape[0] > depth else idx
            top = top[np.argsort(-total[top], kind="stable")]
            rows.update({r.position: r for r in self.cold.turns_at(
                conv, [int(table.positions[i]) for i in top if int(table.positions[i]) not in rows])})
        return top, rows, sunk

    def lexical(self, conv: str, namespace: str, query: str | None, namespace_recall: bool,
                 table: TurnTable) -> Lexical:
        """bm25 over this conversation (the turn cache's keyword index, which ranks a
        query against 10k turns faster than FTS5 can), and whether the namespace has
        other conversations to search once the query's class is known."""
        if not query or not query.strip():
            return Lexical([], [])
        if table.lexical is not None:
            here = [(conv, p, s) for p, s in table.bm25(query, BM25_DEPTH)]
        else:
            here = self.cold.search_bm25(query, BM25_DEPTH, conversation_id=conv)
        # one more than the in-memory limit: enough to choose how to search them
        others = (self.cold.list_conversations(namespace, exclude=conv, limit=NAMESPACE_IN_MEMORY_CONVERSATIONS + 1)
                  if namespace_recall and self.settings.namespace_recall else [])
        return Lexical(here, others)

    def namespace_hits(self, conv: str, namespace: str, others: list[str], query: str, qvec: np.ndarray | None,
                        scores: TurnScores, recall: bool
                        ) -> tuple[dict[tuple[str, int], tuple[float, str]], dict[str, str]]:
        """The user's other conversations: the best few hits, on this conversation's scale
        (their cosines and bm25 standardised with this conversation's statistics), less
        OTHER_CONVERSATION_PENALTY, since another session is less likely to be meant; and
        the ids of the conversations they are from, by key.

        Recall questions search by meaning and by keyword; other messages, like this
        conversation's own turns for them, only bring back what is close in meaning
        (STRONG_COSINE), so they skip the keyword search, which reads and scores every
        match in the namespace (its own statistics: tiers.cold `search_bm25`) and costs
        more than the rest of the plan. Without a query vector they take its strong hits
        instead (`strong_keywords`), as for this conversation's turns.

        A namespace of a few conversations that fit the turn cache is searched there
        (the same exact cosine and bm25 as this conversation's); a larger one through
        the cold tier's indexes (sqlite-vec, FTS5)."""
        k = self.settings.retrieval_k
        tables = self.tables_in_memory(others)
        dense: list[tuple[str, int, float]] = []
        bm25: list[tuple[str, int, float]] = []
        keywords = recall or qvec is None  # without a vector the strong keyword hits stand in
        if tables is not None:
            # a fork's copy of this conversation's turns is not another conversation's, nor
            # is a second member's copy of another's turn a second hit (planner.family):
            # masked before the k best are taken
            dense, bm25 = search_tables(tables, qvec, query if keywords else None, k,
                                        skip=copied_prefixes(self.cold, conv, others))
        else:
            dense, bm25 = self._namespace_search(conv, namespace, qvec, query if keywords else None, k)
        found: dict[tuple[str, int], dict[str, float]] = {}
        for c, p, cosine in dense:
            if recall or cosine >= STRONG_COSINE:
                found.setdefault((c, p), {})["cosine"] = cosine
        if keywords:
            strong = strong_keywords([bm for _c, _p, bm in bm25])
            for rank, (c, p, bm) in enumerate(bm25, start=1):
                if recall or strong[rank - 1]:
                    found.setdefault((c, p), {}).update({"bm25": bm, "rank": rank})
        out: dict[tuple[str, int], tuple[float, str]] = {}
        # reasons and headings name a conversation by the id its owner knows, not by its
        # internal key; a conversation erased since it was found has none and is left out
        names = self.cold.names_of(sorted({k[0] for k in found})) if found else {}
        for key, f in found.items():
            if key[0] not in names:
                continue
            s = (scores.z_dense(f["cosine"]) if "cosine" in f else MISSING_Z) + scores.z_bm25(f.get("bm25"))
            parts = [f"cosine {f['cosine']:.2f}"] if "cosine" in f else []
            if "rank" in f:
                parts.append(f"bm25 rank {int(f['rank'])}")
            out[key] = (s - OTHER_CONVERSATION_PENALTY,
                        f"from {names[key[0]]} in this namespace: " + ", ".join(parts))
        return out, names

    def _namespace_search(self, conv: str, namespace: str, qvec: np.ndarray | None, query: str | None, k: int
                          ) -> tuple[list[tuple[str, int, float]], list[tuple[str, int, float]]]:
        """The k nearest (conversation, position, cosine) and k best keyword matches
        (conversation, position, bm25) of the namespace's other conversations, through the
        cold tier's indexes, less the turns a conversation of `conv`'s fork family shares
        with it and all but one member's copy of a turn other members share
        (planner.family `copied_prefixes`). The indexes cannot leave those out, so they are asked
        for more until k others remain or they have no more, up to FAMILY_SEARCH_MAX_K: a
        namespace without forks asks once, as before."""
        ask = k
        while True:
            dense = ([(c, p, cosine_from_l2(dist))  # unit vectors
                      for c, p, dist in self.cold.search_dense(qvec, ask, namespace=namespace, exclude=conv)]
                     if qvec is not None else [])
            bm25 = self.cold.search_bm25(query, ask, namespace=namespace, exclude=conv) if query is not None else []
            shared = copied_prefixes(self.cold, conv, {c for c, _p, _s in [*dense, *bm25]})
            kept_dense = [h for h in dense if not (h[0] in shared and shared[h[0]].skips(h[1]))]
            kept_bm25 = [h for h in bm25 if not (h[0] in shared and shared[h[0]].skips(h[1]))]
            short = ((len(kept_dense) < k and len(dense) >= ask) or (len(kept_bm25) < k and len(bm25) >= ask))
            if not short or ask >= FAMILY_SEARCH_MAX_K:
                return kept_dense[:k], kept_bm25[:k]
            # at least what the family's copies could take, and twice as many as before
            ask = min(FAMILY_SEARCH_MAX_K, max(2 * ask, k + sum(c.last + 1 for c in shared.values())))

    def other_supersessions(self, hits: dict[tuple[str, int], tuple[float, str]], hidden: Mapping[str, set[int]],
                            past: str | None, zone: Zone) -> dict[tuple[str, int], str]:
        """Another conversation's hits (`namespace_hits`, changed in place) as a turn of
        this one's: superseded in its own conversation, a hit ranks down
        (SUPERSEDED_PENALTY; up, PAST_SUPERSEDED_BOOST, for a question about the past) and
        its reason names its validity interval; one superseded in part rises for such a
        question too. Returned: each superseded hit's interval as its line shows it (`zone`'s
        clock). `hidden`: what each conversation's control rows hide now, so a turn only a
        popped correction superseded is current again, in its rows and its statements
        (`StatementView.hide`), as in the conversation asked about.

        The hits' turn rows are read in one statement for every conversation (with the
        hidden turns', whose own `superseded_by` a chain past a popped step follows), not
        one per hit or per conversation; the statement rows of the hits wholly superseded
        in a conversation with popped turns in one more, only when there are such hits
        (tiers.statements `hidden_many`: a statement only a popped turn superseded makes
        its turn current in part again); the superseding turns' times in a second, only
        when some hit was superseded."""
        if not hits:
            return {}
        hid_keys = [(c, p) for c, ps in hidden.items() for p in sorted(ps)]
        rows = {(r.conversation_id, r.position): r for r in self.cold.turns_at_many([*hits, *hid_keys])}
        hid = hidden_many(self.cold, hidden, rows, hits)
        for c, h in hid.items():
            self.statements.hide(c, h)
        gone: dict[tuple[str, int], TurnRow] = {}
        for key in hits:
            r = rows.get(key)
            if r is not None and key[0] in hid:
                r = hid[key[0]].row(r)
            if r is not None and r.superseded_by is not None:
                gone[key] = r
        ends = ({(r.conversation_id, r.position): r
                 for r in self.cold.turns_at_many(sorted({(c, r.superseded_by) for (c, _p), r in gone.items()
                                                          if r.superseded_by is not None}))}
                if gone else {})
        marks: dict[tuple[str, int], str] = {}
        for key, (s, why) in hits.items():
            r = gone.get(key)
            if r is None:
                if past and self.statements.parts(*key):
                    hits[key] = (s + PAST_SUPERSEDED_BOOST, why)  # a superseded statement the question asks about
                continue
            interval = validity(r, ends.get((key[0], r.superseded_by)) if r.superseded_by is not None else None, zone)
            why += f", superseded by #{r.superseded_by} ({interval[0]})"
            if past:
                why += f", asked about the past ({past})"
            hits[key] = (s + (PAST_SUPERSEDED_BOOST if past else SUPERSEDED_PENALTY), why)
            marks[key] = interval[1]
        return marks

    def tables_in_memory(self, others: list[str]) -> list[TurnTable] | None:
        """The other conversations' turn tables, when they are few and would take at
        most half the turn cache (else loading them would evict the conversation being
        answered, call after call); None: search the cold tier instead."""
        if len(others) > NAMESPACE_IN_MEMORY_CONVERSATIONS:
            return None
        turns = 0
        for c in others:
            census = self.cold.turn_census(c)
            turns += 0 if census is None else census[2] + 1
        if turns * TURN_BYTES_ESTIMATE > self.turns.max_bytes * NAMESPACE_MAX_CACHE_SHARE:
            return None
        return [self.turns.get(c) for c in others]


def validity(r: TurnRow, end: TurnRow | None, zone: Zone) -> tuple[str, str]:
    """A superseded turn's validity interval (the plan's wording, the line's wording):
    from its own time until the superseding turn's, `end` (the turn index's
    `superseded_by` and the turn times: derived, nothing stored; None: not readable), on
    `zone`'s clock."""
    until = when(end.created_at, zone) if end is not None else "a later message"
    how = "retracted" if end is not None and "retraction" in (end.label_reason or "") else "replaced"
    return (f"valid #{r.position} {when(r.created_at, zone)} until #{r.superseded_by} {until}, {how}",
            f"valid {when(r.created_at, zone)} until {until}, then {how}")


def search_tables(tables: list[TurnTable], qvec: np.ndarray | None, query: str | None,
                  k: int, skip: Mapping[str, Copies] | None = None
                  ) -> tuple[list[tuple[str, int, float]], list[tuple[str, int, float]]]:
    """The k nearest turns (conversation, position, cosine) over `tables`, best first,
    and with a query the k best keyword matches (conversation, position, bm25). Ties
    keep the tables' order (`list_conversations` gives it by name), never the keys'.
    `skip`: conversation -> the positions not to find there (a fork family's copies of
    the asker's turns or of another member's turn it still shows: planner.family
    `copied_prefixes`)."""
    dense: list[tuple[int, str, int, float]] = []
    bm25: list[tuple[int, str, int, float]] = []
    for n, t in enumerate(tables):
        copies = (skip or {}).get(t.conversation_id)
        # how many of its turns are skipped at most (positions ascend): a keyword search
        # asks for as many more, so k remain
        cut = int(np.searchsorted(t.positions, copies.last, side="right")) if copies is not None else 0
        if qvec is not None and t.vectors is not None and len(t) and t.vectors.shape[1] == qvec.shape[0]:
            cos = row_dots(t.vectors, np.asarray(qvec, dtype=np.float32))
            cos[~t.has_vec] = -np.inf  # no vector yet: not a neighbour
            if copies is not None:  # a copy of the asker's turns, or one another member shows
                copied = np.ones(cut, dtype=bool)
                if copies.shown:
                    copied &= ~np.isin(t.positions[:cut], np.fromiter(copies.shown, dtype=t.positions.dtype))
                cos[:cut][copied] = -np.inf
            best = np.argpartition(-cos, k - 1)[:k] if cos.shape[0] > k else np.arange(cos.shape[0])
            dense.extend((n, t.conversation_id, int(t.positions[i]), float(cos[i]))
                         for i in best if cos[i] > -np.inf)
        if query is not None:
            bm25.extend((n, t.conversation_id, p, s) for p, s in t.bm25(query, k + cut)
                        if copies is None or not copies.skips(p))
    dense.sort(key=lambda h: (-h[3], h[0], h[2]))
    bm25.sort(key=lambda h: (h[3], h[0], h[2]))
    return [h[1:] for h in dense[:k]], [h[1:] for h in bm25[:k]]


# A unit left out of the tail, and why (the plan says it)
UNANSWERED_CALL = ("a tool call no result answers, and later messages follow it (an agent that stopped "
                   "mid-loop, a retracted result, a fork cut between call and result): both APIs refuse "
                   "a call without its result, so it is left out")
ORPHAN_RESULT = ("a tool result whose call is not shown (retracted, unreadable, or older than the tail): "
                 "both APIs refuse a result without its call, so it is left out")
UNREADABLE_PART = "a tool call whose unit holds an unreadable message: left out whole"
FOREIGN_REASONING = ("a reasoning item another provider's model wrote (its provider_data, as the Agents SDK "
                     "marks a Chat Completions model's reasoning): the OpenAI Responses API cannot read it, and "
                     "the Agents SDK leaves such items out of a Responses request itself, so a Responses-form "
                     "context (context_format=\"responses\") leaves it out; history keeps it")
ORPHAN_REASONING = ("a reasoning item whose item after it is not shown (retracted, cleared, left out, unreadable, "
                    "or not appended yet): the Responses API refuses a reasoning item last or before a user or "
                    "system message, so it is left out")


@dataclass
class Units:
    """The tail's messages grouped into units (`tool_units`), newest unit first; the units left
    out with why; and whether calls left open by the previous context (`open_calls`)
    were followed by a message that is not their result (an extension must not show
    that: the call would stand unanswered mid-context)."""

    groups: list[list[StoredMessage]]
    dropped: list[tuple[list[StoredMessage], str]]
    interrupted: bool = False


def _item_round(m: StoredMessage) -> bool:
    """Whether call `m` joins the calls still waiting as a parallel call: a Responses item
    does (each parallel call is an item of its own, also one that followed a chat reply's
    calls: an SDK that stores a reply's parallel call as an item). A chat assistant
    message holds all of its round's calls, so one after calls still waiting is a new
    model turn: the round before it was abandoned, and Chat Completions refuses a
    `tool_calls` message not followed by its results."""
    return isinstance(m.body.get("type"), str)


def _split_round(unit: list[StoredMessage], joined: set[int]) -> tuple[list[StoredMessage], list[list[StoredMessage]]]:
    """A unit left out for calls no result answers, split: what goes (its calls, their
    results, the reasoning leading them) and what stays, each item that joined the round
    (`joined`: positions of `joins_round` items, the reply's text, a hosted call) a group
    of its own with the reasoning right before it, oldest first. The text a model wrote
    with calls never answered stays in the tail as it would without them (an assistant
    message between user messages); a reasoning item with nothing after it goes."""
    gone: list[StoredMessage] = []
    kept: list[list[StoredMessage]] = []
    lead: list[StoredMessage] = []  # reasoning items waiting for the item after them
    for m in unit:
        if is_reasoning(m.body):
            lead.append(m)
        elif m.position in joined:
            kept.append([*lead, m])
            lead = []
        else:
            gone.extend([*lead, m])
            lead = []
    gone.extend(lead)
    return gone, kept


def tool_units(msgs: Sequence[StoredMessage | None], skip: Sequence[bool],
               open_calls: Sequence[str] = (), *, foreign_reasoning_out: bool = False,
               call_items: Mapping[str, str] | None = None) -> Units:
    """Group the tail's messages (oldest first; None: unreadable, or with `skip` the
    latest user message, which the planner places itself) into units that both provider
    APIs accept: a call and every result that answers it (parallel calls included: the
    calls of one unit come before any of its results), a reasoning item with the unit
    after it, any other message alone. A Responses item the model writes among its
    calls (`joins_round`: an assistant message item, a hosted tool's call) before any
    of their results joins their unit: the Responses API pairs by `call_id`, and a reply
    `[reasoning, function_call, message]` is one round (the Agents SDK sends it so). A
    unit left out for its calls keeps such items, each a unit of its own with the
    reasoning right before it (`_split_round`): the text the model wrote stays.

    A reasoning item goes with the model's own item after it (an assistant message, a
    call, a hosted tool's item); where what follows it is not one (a user or system
    message, an unreadable one, the latest user message, the end of `msgs`: its own
    item is hidden or left out) it is left out too (`ORPHAN_REASONING`).

    With `foreign_reasoning_out` (a Responses-form context) a reasoning item another
    provider's model wrote (`is_foreign_reasoning`) is left out (`FOREIGN_REASONING`),
    as the Agents SDK leaves it out of a Responses request; the item after it goes on.

    Calls of one id in one unit (Responses items of one round may share a `call_id`)
    wait for a result each, in order: a second result of the id answers the second call
    (the forms sent rename the pair, `tiers.formats.SentCallIds`), not an orphan.

    Complete units only: a result whose call is not among `msgs` (nor open from the
    previous context, `open_calls`; one naming an open call by its item id, `call_items`),
    or whose calls are all answered, is left out; a call
    that a later message (a user or assistant message, the latest user message included)
    follows before all its results is left out with its results; so is one a chat assistant message with calls follows
    (Chat Completions puts a round's parallel calls in one message: the next one is a new
    turn, the round before it abandoned). A call still waiting at the very end of `msgs` is kept:
    the agent is mid-loop and appends the result next (an epoch then appends the result
    right after it). A unit holding an unreadable message while a call waits is left out
    (the unreadable one may be its result)."""
    groups: list[list[StoredMessage]] = []  # oldest first
    dropped: list[tuple[list[StoredMessage], str]] = []
    cur: list[StoredMessage] = []
    # call ids of `cur` (or the previous context) without a result yet, once per call:
    # Responses items of one round may share an id, each call answered by a result of it
    waiting: Counter[str] = Counter(open_calls)
    answered = False  # a result is in `cur`: a later call starts a new round
    cont = bool(open_calls)  # `cur` continues the previous context's open unit
    lead: list[StoredMessage] = []  # reasoning items waiting for the unit after them
    interrupted = False
    # a call's item id -> its call id, for a result naming it so (`call_item_id`); an open
    # call's from the previous context (`call_items`)
    aliases: dict[str, str] = dict(call_items or {})
    # positions of `cur`'s items that joined it through `joins_round` (the reply's text, a
    # hosted call): a unit left out for its calls keeps them (`end`)
    joined: set[int] = set()

    def end(why: str = UNANSWERED_CALL) -> None:
        nonlocal cur, waiting, answered, cont, interrupted, joined
        if waiting:
            interrupted = interrupted or cont
            if cur:
                gone, kept = _split_round(cur, joined)
                groups.extend(kept)
                if gone:
                    dropped.append((gone, why))
        elif cur:
            groups.append(cur)
        cur, waiting, answered, cont, joined = [], Counter(), False, False, set()

    for m, skipped in zip(msgs, skip, strict=True):
        if m is None:
            # the latest user message is text after any open call; an unreadable message
            # may be the result an open call waits for
            end(UNREADABLE_PART if waiting and not skipped else UNANSWERED_CALL)
            if lead:  # a reasoning item never joins a unit across it
                dropped.append((lead, ORPHAN_REASONING))
                lead = []
            continue
        rid = result_id(m.body)
        ids = call_ids(m.body)
        if rid is not None and waiting[rid] == 0 and rid in aliases:
            rid = aliases[rid]  # a result naming its call by the call's item id (`call_item_id`)
        if (iid := call_item_id(m.body)) is not None and ids:
            aliases[iid] = ids[0]
        if rid is not None:
            if waiting[rid] > 0:
                cur.append(m)
                waiting -= Counter([rid])  # keeps counts above 0 only: an empty Counter is falsy
                answered = True
            else:  # its call is not shown (or was answered already): never alone
                dropped.append(([m], ORPHAN_RESULT))
            continue
        if ids:
            if waiting and not answered and _item_round(m):  # parallel calls (Responses items): one round
                cur.append(m)
                waiting.update(ids)
                continue
            end()
            cur, waiting, lead = [*lead, m], Counter(ids), []
            continue
        if is_reasoning(m.body):
            if foreign_reasoning_out and is_foreign_reasoning(m.body):
                dropped.append(([m], FOREIGN_REASONING))
                continue
            if waiting:
                cur.append(m)
            else:
                end()
                lead.append(m)
            continue
        if waiting and not answered and joins_round(m.body):
            # a Responses item the model wrote among its round's calls (a message, a
            # hosted tool's call): the API pairs calls and outputs by call_id, the round
            # goes on through it (a chat message ends it: results follow their calls)
            cur.append(m)
            joined.add(m.position)
            continue
        end()
        if lead and m.role != "assistant":
            # not what the reasoning produced (that item is hidden or left out): the
            # Responses API refuses a reasoning item before a user or system message
            dropped.append((lead, ORPHAN_REASONING))
            lead = []
        groups.append([*lead, m])
        lead = []
    if cur:  # the newest unit: a call still waiting here is the agent's pending round
        groups.append(cur)
    if lead:  # nothing after it: the Responses API refuses a reasoning item last
        dropped.append((lead, ORPHAN_REASONING))
    return Units(list(reversed(groups)), dropped, interrupted)



def without_names(query: str, names: frozenset[str]) -> str:
    """The query without the conversation's speaker names, for its embedding. Turns are
    embedded as "name: text", so a participant's name is in nearly every vector: in the
    query it discriminates nothing and only pulls toward turns that repeat it. bm25,
    which weighs a word by its rarity, still gets the whole query."""
    usable = sorted((n for n in names if len(n.strip()) >= MIN_NAME_CHARS), key=len, reverse=True)
    if not usable:
        return query
    pattern = re.compile(r"\b(?:" + "|".join(re.escape(n.strip()) for n in usable) + r")(?:'s)?\b", re.IGNORECASE)
    stripped = " ".join(pattern.sub(" ", query).split())
    return stripped if any(ch.isalnum() for ch in stripped) else query

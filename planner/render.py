"""Rendering a plan into messages: log turns as lines, slices as blocks, the blocks and
the tail in layer order, and the result converted to the configured message family.

Invariants:
- Dates and times are the user's (the call's zone, by default `PlannerSettings.timezone`;
  tiers.zones): in UTC (the default) exactly as before zones existed, no zone shown; in
  any other zone the local date or time with its UTC offset ("04 Dec 2026 21:00 -08:00"),
  so the model reads the user's clock.
- A line carries no position numbers (they cost tokens on every line and the model cannot
  use them; the plan carries every item's positions); retrieved lines are grouped under
  one heading per session, so a date costs tokens once per group (and, with TERSE, the
  heading is the date alone).
- A long tool output keeps its head (`TRIM_HEAD_SHARE` of the allowance) and its tail, and
  says what was cut and where the full text is in the log.
- Layer order (planner.plan.LAYERS): system, pinned, summary, the tail, then the per-turn
  part; with `retrieved_placement="before_latest"` the retrieved block sits just before
  the latest user message, since it changes most; with `system_messages="before_latest"`
  every memory block is one message just before the latest user message, or with none
  at the end, before the agent's pending tool round if the tail ends with one: never
  inside a round.
- What is counted is what is returned: `out` converts and folds exactly as the context
  that is handed back, and breakpoints index the returned messages
  (`converted_breakpoints`), not the planned ones.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from tiermem.planner.epoch import Segment
from tiermem.planner.plan import MAX_BREAKPOINTS, Breakpoint, PlanItem
from tiermem.tiers.formats import (
    call_ids,
    call_item_id,
    fold_system,
    is_reasoning,
    joins_round,
    result_id,
    to_chat,
    to_responses,
    unique_chat_call_ids,
)
from tiermem.tiers.models import StoredMessage
from tiermem.tiers.tokens import MESSAGE_OVERHEAD_TOKENS, TokenCounter, message_tokens
from tiermem.tiers.zones import UTC, Zone, shown_day, shown_time

if TYPE_CHECKING:
    from tiermem.planner.build import PlannerSettings
    from tiermem.planner.candidates import Candidate
    from tiermem.planner.statements import StatementView

LINE_SEP_TOKENS = 1
HEADING_SHARE_TOKENS = 4  # a session heading (~12 tokens) is shared by a few lines; the exact count fixes the rest
# A trimmed tool output keeps this share of its token allowance from its head, the rest
# from its tail (where an error or a result usually is).
TRIM_HEAD_SHARE = 0.6
# A context whose own part (this call's retrieved turns and user message) is more than
# this share of it gets no breakpoint at its end (see breakpoints).
BROAD_OWN_SHARE = 0.25
BLOCK_SLICES = ("pinned", "summary", "retrieved")  # the slices shown as one system message each
MEMORY_BLOCK_SEPARATOR = "\n\n"  # between the blocks of the one memory message (before_latest)
HEADERS = {
    "pinned": "Standing instructions and facts from this conversation (pinned, current values):",
    "summary": "Summary of earlier parts of this conversation:",
    "retrieved": "Earlier turns retrieved for this message (log order):",
}
# TERSE = 1 (the default): the retrieved block's header above, in fewer tokens than the
# verbose one, and a session heading carries the date only (the session id cost tokens on
# every group and the model cannot use it; the plan carries every item's positions). At
# 500 tokens that is most of one more retrieved turn; TERSE = 0 renders as before (the
# recall harness measures both: evals/recall_rounds.py, knob `terse`).
TERSE = 1
VERBOSE_RETRIEVED_HEADER = "Earlier turns relevant to the current message (retrieved from the log, in order):"


def when(ts: float, zone: Zone = UTC) -> str:
    """A turn's time for a validity interval: date and minute in `zone` (its offset shown
    unless UTC)."""
    return shown_time(ts, zone) or "unknown time"  # None: a stored time no calendar can show


def day(ts: float, zone: Zone = UTC) -> str:
    """A turn's date in `zone` (its offset shown unless UTC: whose day it is)."""
    return shown_day(ts, zone) or "unknown date"  # None: a stored time no calendar can show


SUPERSEDED_LABEL = " · SUPERSEDED, not current: "  # a superseded line's label, before its validity


def label_superseded(line: str, valid: str) -> str:
    """`line` (a turn's, `Renderer.line`) labelled as a turn superseded whole, valid
    `valid`: each of its lines that carries no label yet. A turn superseded in part first
    has its statements' lines labelled already (with their own validity), and the rest of
    it (its current part) is first: labelling only the first line gave a turn whose
    current part was empty two labels on one line, and leaving the lines alone left its
    current part unlabelled, shown as current (planner.marks `marks` does the same)."""
    return "\n".join(ln if SUPERSEDED_LABEL in ln else ln.replace("] ", f"{SUPERSEDED_LABEL}{valid}] ", 1)
                     for ln in line.split("\n"))


def header(s: str) -> str:
    """A block slice's first line."""
    return VERBOSE_RETRIEVED_HEADER if s == "retrieved" and not TERSE else HEADERS[s]


def open_calls(messages: Sequence[dict[str, Any]]) -> tuple[str, ...]:
    """The call ids messages leave waiting at their end (their last unit is the agent's
    pending tool round), once per call waiting (Responses items of one round may share
    an id): their results, when they arrive, go right after it."""
    waiting: Counter[str] = Counter()
    for m in messages:
        rid = result_id(m)
        if rid is not None:
            waiting -= Counter([rid])  # a result answers one call; `-=` keeps counts above 0 only
        elif call_ids(m):
            waiting.update(call_ids(m))
        elif not is_reasoning(m) and not joins_round(m):
            # text: in a valid context no call is open before it (a Responses item of the
            # round, `joins_round`, is no such text: the round goes on through it)
            waiting = Counter()
    return tuple(sorted(waiting.elements()))


def open_call_items(messages: Sequence[dict[str, Any]]) -> dict[str, str]:
    """The item ids of the calls `open_calls` finds waiting that a result may name instead
    of their call id (`call_item_id`: a local shell call's), each to its call id: a typed
    `local_shell_call_output` arriving after an epoch's pending round names its call so."""
    waiting = set(open_calls(messages))
    found: dict[str, str] = {}
    for m in messages:
        ids = call_ids(m)
        if (iid := call_item_id(m)) is not None and ids and ids[0] in waiting:
            found[iid] = ids[0]
    return found


class Renderer:
    """Lines, blocks and messages, counted with the planner's tokenizer."""

    def __init__(self, tokens: TokenCounter, settings: PlannerSettings,
                 statements: StatementView | None = None) -> None:
        self.tokens = tokens
        self.settings = settings
        self.statements = statements  # turns current in part (planner/statements.py)

    # -- lines ---------------------------------------------------------------------------------

    def trim(self, text: str, limit: int, position: int, ids: Sequence[int] | None = None) -> tuple[str, bool]:
        """Long tool output: keep head and tail, say what was cut and how to get it back.
        `ids`: `text` encoded, where the caller has it (a round trimmed at several
        allowances encodes each output once: planner.candidates `unit`'s `encoded`)."""
        if ids is None:
            ids = self.tokens.encode(text)
        if len(ids) <= limit:
            return text, False
        head = int(limit * TRIM_HEAD_SHARE)
        tail = max(0, limit - head)
        cut = len(ids) - head - tail
        marker = (f"\n[... trimmed {cut} tokens of this output; the full text is position #{position} "
                  f"in the log (history/get) ...]\n")
        return self.tokens.decode(list(ids[:head])) + marker + self.tokens.decode(list(ids[len(ids) - tail:])), True

    def line(self, m: StoredMessage, *, dated: bool = True, zone: Zone, trim_to: int | None = None
             ) -> tuple[str, bool]:
        """`m` as a line of a block; `zone`: the call's, whose clock its dates show;
        `trim_to`: a tool output's token allowance (`tool_trim_tokens` when None)."""
        who = m.body.get("name") or m.role
        # no position numbers in the text: they cost tokens on every line and the model
        # cannot use them; the plan carries every item's positions
        parts = [str(who)]
        if dated:
            parts.append(day(m.created_at, zone))
        gone = (self.statements.parts(m.conversation_id, m.position)
                if self.statements is not None and m.role in ("user", "assistant") else ())
        if gone and self.statements is not None:
            # some of its statements were superseded: they are marked, on lines of their own
            current, old = self.statements.render(m.text, gone, m.created_at, zone)
            lines = [f"[{' '.join(parts)}] {current}"] if current else []
            return "\n".join(lines + [f"[{who}{SUPERSEDED_LABEL}{valid}] {stmt}" for stmt, valid in old]), False
        text = m.text.replace("\n", " ").strip() if m.role != "tool" else m.text
        trimmed = False
        if m.role == "tool":
            text, trimmed = self.trim(text, self.settings.tool_trim_tokens if trim_to is None else trim_to,
                                      m.position)
        return f"[{' '.join(parts)}] {text}", trimmed

    def heading(self, m: StoredMessage, other: str | None, zone: Zone) -> str:
        """Retrieved lines are grouped under one heading per session (its date; and its
        id unless TERSE), so that a date costs tokens once per group, not once per line.
        `other`: the id (never the internal key) of the conversation the line is from,
        when it is not the one answered. `zone`: the call's."""
        where = f"conversation {other}, " if other is not None else ""
        session = f", {m.session_id}" if m.session_id and not TERSE else ""
        return f"({where}{day(m.created_at, zone)}{session})"

    def line_tokens(self, line: str) -> int:
        return self.tokens.count(line) + LINE_SEP_TOKENS

    def block_header_tokens(self, s: str) -> int:
        """What a block slice's message costs before its first line: the message overhead
        and its header line."""
        return MESSAGE_OVERHEAD_TOKENS + self.tokens.count(header(s)) + LINE_SEP_TOKENS

    # -- messages ------------------------------------------------------------------------------

    def block(self, s: str, cands: Sequence[Candidate], conv: str) -> dict[str, Any]:
        """One block slice as a system message: its header, then its lines in log order
        (this conversation's first), each retrieved run under its session heading."""
        items = sorted(cands, key=lambda c: c.tie_order())
        lines = [header(s)]
        heading = ""
        for c in items:
            if c.header and c.header != heading:
                heading = c.header
                lines.append(heading)
            lines.append(c.text)
        return {"role": "system", "content": "\n".join(lines)}

    def render(self, fixed: list[dict[str, Any]], chosen: dict[str, list[Candidate]],
                latest_body: dict[str, Any] | None, latest_user: int | None
                ) -> tuple[list[dict[str, Any]], list[str], list[int | None]]:
        """The messages, each one's layer (planner.plan.LAYERS), and the log position of
        each tail message (None for blocks)."""
        msgs = list(fixed)
        kinds = ["system"] * len(fixed)
        where: list[int | None] = [None] * len(fixed)
        blocks: dict[str, dict[str, Any]] = {}
        for s in BLOCK_SLICES:
            if chosen[s]:
                blocks[s] = self.block(s, chosen[s], chosen_conv(chosen, s))
        if self.settings.system_messages == "before_latest":
            return self.render_memory_last(msgs, kinds, where, blocks, chosen, latest_body, latest_user)
        late = self.settings.retrieved_placement == "before_latest" and latest_body is not None
        for s in BLOCK_SLICES:
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

    def render_memory_last(self, msgs: list[dict[str, Any]], kinds: list[str], where: list[int | None],
                           blocks: dict[str, dict[str, Any]], chosen: dict[str, list[Candidate]],
                           latest_body: dict[str, Any] | None, latest_user: int | None,
                           ) -> tuple[list[dict[str, Any]], list[str], list[int | None]]:
        """`system_messages="before_latest"`: the caller's system messages, the tail turns
        in log order, then every memory block (pinned, summary, retrieved) in ONE system
        message just before the latest user message, then the latest user message and what
        follows it (a tool loop). Pins and summaries change less than retrieval, but a pin
        added or a summary refreshed then changes only that last message: everything
        before it stays the provider's cached prefix.

        With no latest user message (an agent's own log) the memory message goes at the
        end, or just before the agent's pending tool round when the tail ends with one:
        a system message between a call and its results splits the round, which both
        APIs refuse."""
        units = sorted((c.group, c.body["messages"]) for c in chosen["tail"] if c.body is not None)
        tail_bodies = [(p, b) for group, bodies in units for p, b in zip(group, bodies, strict=True)]
        if latest_body is not None and latest_user is not None:
            tail_bodies.append((latest_user, latest_body))
        tail_bodies.sort(key=lambda t: t[0])
        memory = ({"role": "system", "content": MEMORY_BLOCK_SEPARATOR.join(
            str(blocks[s]["content"]) for s in BLOCK_SLICES if s in blocks)}
            if blocks else None)
        # where the memory message goes: before the latest user message, else before a
        # pending round at the end (its first position), else at the end (None)
        before = latest_user if latest_body is not None else None
        if before is None and units and open_calls(units[-1][1]):
            before = units[-1][0][0]
        placed = False
        for p, b in tail_bodies:
            if memory is not None and p == before:
                msgs.append(memory)
                kinds.append("memory")
                where.append(None)
                placed = True
            msgs.append(b)
            kinds.append("latest" if latest_body is not None and p == latest_user else "tail")
            where.append(p)
        if memory is not None and not placed:
            msgs.append(memory)
            kinds.append("memory")
            where.append(None)
        return msgs, kinds, where

    def converting(self) -> bool:
        """Whether the messages returned are not the ones planned: a conversion
        (`context_format`), a fold (`system_messages="merge"`), or the memory blocks moved
        last (`"before_latest"`, which has no epochs). An epoch is planned on the stored
        form and extended there; a conversion or fold keeps the extension only where it
        keeps its prefix as sent (`conversion_break`)."""
        return self.settings.context_format != "as_stored" or self.settings.system_messages != "as_is"

    def describe_conversion(self) -> str:
        """The settings that convert the returned messages, as a plan reason names them."""
        named = [f'context_format="{self.settings.context_format}"'] if self.settings.context_format != "as_stored" else []
        if self.settings.system_messages == "merge":
            named.append('system_messages="merge"')
        return " and ".join(named)

    def out(self, msgs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The messages as returned: converted to one family and system messages folded
        when configured. Counted exactly, so the budget holds for what is returned."""
        if self.settings.context_format == "chat":
            msgs = unique_chat_call_ids(to_chat(msgs))
        elif self.settings.context_format == "responses":
            msgs = to_responses(msgs)
        if self.settings.system_messages == "merge":
            msgs = fold_system(msgs)
        return msgs


def fresh_segments(messages: Sequence[dict[str, Any]], kinds: Sequence[str], where: Sequence[int | None],
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
        elif k == "memory":  # system_messages="before_latest": every memory block in one message
            got = [*by_slice.pop("pinned", []), *by_slice.pop("summary", []), *by_slice.pop("retrieved", [])]
        else:
            got = by_slice.pop(k, [])
        out.append(Segment(k, m, tuple(got)))
    return out


def shown(segments: Sequence[Segment]) -> set[tuple[str, int]]:
    """(conversation, position) of every turn the segments show verbatim or trimmed."""
    return {(it.conversation_id, p) for g in segments for it in g.items
            if it.slice in ("pinned", "tail", "retrieved") and it.fidelity in ("verbatim", "trimmed")
            for p in it.positions}


def breakpoints(kinds: Sequence[str], tokens_each: Sequence[int], *, whole: bool = False) -> list[Breakpoint]:
    """Where the stable layers end (the last message of system, pinned, summary), where
    the part before this call's own (its retrieved turns and user message) ends
    (`stable`), and the whole context (`context`: within an epoch, the next call's
    prefix) unless this call's own part is most of it (a broad retrieval, which the next
    call is likely to rewind: writing it to a cache would cost a premium never read
    back) and `whole` is False (`whole`: the context left room for the next calls to
    append, planner.epoch_policy, so it is likely read back). Latest last, at most
    MAX_BREAKPOINTS (the earliest layers give way)."""
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
    # this call's own part: its retrieved block (or the one memory message) before its user message
    own = at
    if at > 0 and (kinds[at - 1] == "memory" or (at < len(kinds) and kinds[at - 1] == "retrieved")):
        own = at - 1
    if own - 1 >= 0:
        ends.append((own - 1, "stable"))
    own_tokens = cum[-1] - cum[own] if own < len(kinds) else 0
    if whole or own_tokens <= BROAD_OWN_SHARE * cum[-1]:
        ends.append((len(kinds) - 1, "context"))
    out: list[Breakpoint] = []
    rank = {"system": 0, "pinned": 1, "summary": 2, "stable": 3, "context": 4}
    for i, layer in sorted(ends, key=lambda e: (e[0], rank[e[1]])):
        if out and out[-1].index == i:
            out[-1] = Breakpoint(i, layer, cum[i + 1])  # the later name says more
        else:
            out.append(Breakpoint(i, layer, cum[i + 1]))
    return out[-MAX_BREAKPOINTS:]


def converted_breakpoints(marks: Sequence[Breakpoint], messages: Sequence[dict[str, Any]],
                          returned: Sequence[dict[str, Any]], convert: Callable[[list[dict[str, Any]]],
                                                                               list[dict[str, Any]]],
                          tokens: TokenCounter) -> list[Breakpoint]:
    """`marks` (indexes into `messages`, as planned) as indexes into `returned`, the
    messages the caller receives (`convert(messages)`: a format conversion may split one
    message into several items or merge several into one; a fold moves every system
    message into the first).

    A breakpoint after message i lands after the last returned message that converting
    `messages[:i + 1]` gives, if those returned messages are exactly what converting the
    prefix gives (nothing planned after i was merged into them); else after the last
    returned message that still is, or nowhere (a merge folded this call's retrieved
    block into the first message: nothing before it is stable). Tokens are recounted
    on the returned messages; two marks that land on one message keep the later name."""
    cum = [0]
    for m in returned:
        cum.append(cum[-1] + message_tokens(tokens, m))
    out: list[Breakpoint] = []
    for b in marks:
        prefix = convert(list(messages[:b.index + 1]))
        k = 0
        for a, r in zip(prefix, returned, strict=False):
            if a != r:
                break
            k += 1
        if k == 0:
            continue
        at = k - 1
        if out and out[-1].index == at:
            out[-1] = Breakpoint(at, b.layer, cum[at + 1])
        elif not out or out[-1].index < at:
            out.append(Breakpoint(at, b.layer, cum[at + 1]))
    return out


def reused_prefix(prev: Sequence[Segment], returned: Sequence[dict[str, Any]],
                  convert: Callable[[list[dict[str, Any]]], list[dict[str, Any]]],
                  tokens: TokenCounter) -> tuple[int, int, str]:
    """How much of the previous context (`prev`, as planned) this one (`returned`, as the
    caller receives it) repeats, compared as both were sent (`convert`, render.out: a
    conversion merges or splits messages, a fold puts every system block into the first
    message, so two plans sharing their first segments may share no message sent):
    the leading returned messages identical to the previous call's, their tokens
    (message accounting, as planner.plan.CacheReport counts them) and the layer of the
    previous context's first message not reused ("" when all of it is): the first layer
    of its plan whose messages, converted, are not all within the shared ones (a fold
    that changed the first message: "system")."""
    before = convert([g.message for g in prev])
    k = 0
    for a, b in zip(before, returned, strict=False):
        if a != b:
            break
        k += 1
    cached = sum(message_tokens(tokens, m) for m in returned[:k])
    if k == len(before):
        return k, cached, ""
    # one conversion per layer (a run of one kind), not per message: the tail's turns
    # are one run
    for end, g in enumerate(prev):
        if end + 1 < len(prev) and prev[end + 1].kind == g.kind:
            continue
        part = convert([s.message for s in prev[:end + 1]])
        if len(part) > k or part != before[:len(part)]:
            return k, cached, g.kind
    return k, cached, prev[-1].kind if prev else ""


def conversion_break(prev: Sequence[Segment], segments: Sequence[Segment],
                     convert: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]) -> str:
    """Empty when converting (`convert`, render.out) keeps an extension's prefix as it was
    sent, else which earlier message of the previous request the conversion changed. An
    extension (planned on the stored form, `segments`) keeps the previous context's (`prev`) leading segments that it
    shares message for message (all of them when it only appends; fewer after a rewind or
    a middle eviction); converted, those must give the same leading messages in the
    previous request and in this one. A conversion that changes what came before does
    not: a fold whose merged system text takes this call's new system block (a retrieved
    block under "merge"), or a call item that joins the assistant message before it
    (`to_chat`). Then the extension would claim a prefix the provider never reads back."""
    k = 0
    for a, b in zip(prev, segments, strict=False):
        if a.message != b.message:
            break
        k += 1
    kept = convert([g.message for g in prev[:k]])
    sent = convert([g.message for g in prev])
    now = convert([g.message for g in segments])
    at = next((j for j, m in enumerate(kept) if j >= len(sent) or j >= len(now) or m != sent[j] or m != now[j]),
              None)
    if at is None:
        return ""
    # the layer of the first kept segment whose converted run reaches the changed message
    layer = prev[k - 1].kind if k else ""
    for end in range(k):
        if end + 1 < k and prev[end + 1].kind == prev[end].kind:
            continue  # one conversion per run of a kind
        if len(convert([g.message for g in prev[:end + 1]])) > at:
            layer = prev[end].kind
            break
    role = kept[at].get("role") or kept[at].get("type") or "item"
    return f"message {at} ({role}, {layer} layer)"


def chosen_conv(chosen: dict[str, list[Candidate]], s: str) -> str:
    """The conversation being answered (its items sort before other conversations')."""
    for c in chosen["tail"]:
        return c.conversation_id
    return chosen[s][0].conversation_id if chosen[s] else ""

"""Keeping warm views fresh: compute, store and fold the summary views of the log.

Three kinds per conversation (docs/design.md, "Warm"):

- `rolling` (key ''): the conversation so far, positions 0..end. Refreshed
  incrementally: the source turns cited by the previous version plus the turns after
  it go to the summarizer (in chunks of about `chunk_tokens` for a long backlog), so a
  refresh costs what is new, not the whole log. So do the turns of its range that a
  retraction recorded since made current again (`_restored`: a popped correction's
  targets, wholly or a statement of them): no version cites a turn left out for its
  supersession, so the old value, current again, would never come back. A retraction
  that undoes no supersession adds nothing (it costs a read of the range's turns in the
  database, `ColdLog.turns_superseded_by`). After each write, a fold (a checkpoint
  at `end_position` holding the summary text) is committed in the same transaction
  (DESIGN invariant 4; `fold=False` turns it off). It deletes nothing.
- `constraints` (key ''): the current instructions, constraints, entities and
  decisions: the sentences of load-bearing turns (turn labels), plus the turns that
  supersede them, each pointing at its source position and labeled with the turn's
  intent; a superseded one is kept with status 'superseded', and so is a superseded
  statement of a turn that holds in part (the rest of its sentence stays current). A
  supersession by a popped turn counts as absent. Refreshed from the
  previous version's sources (labels and supersession re-read) plus the load-bearing
  turns after it (`full=True` reconsiders all of them). Nothing is cut unless the
  rendering is over the target; then superseded sentences go first, then current ones
  by priority.
- `session` (key = session id): one summary per session, refreshed incrementally like
  the rolling one over that session's turns.

Every sentence's positions are positions of the log; with the extractive summarizer
(and always for constraints) its text is an exact substring of its source turn.

Freshness: a view is over budget when more than `max_turns_behind` turns, or a turn
older than `max_seconds_behind` seconds (by `clock`), are not covered. A refresh does
not cover a trailing run of unlabeled turns younger than `label_grace_s`: when labels
are written after the append rather than with it, a view that covered a turn before
its labels (or the supersession it causes) landed would carry the old reading until
the next refresh.

Outdated lines: a view built before a correction or a retraction of what it cites (a
correction in another session, a retraction row without a session, a supersession
decided after the view covered its turn) gets nothing appended to its own range, so
coverage alone never refreshes it. A view with a current line citing an item a control
row hides now, a turn a later turn superseded, or a superseded statement the line holds
(`outdated_views`, the planner's rules for a summary line) is refreshed from its sources
again over the same range, as a new version: by `refresh` and `refresh_all` (each
session's view checked, not only those with new turns), and by the sweep, which puts it
first (`OUTDATED_SEVERITY`) whatever its budgets. The sweep checks a conversation's views
only when its supersession version (tiers.store `supersession_version`: moved by every
write of supersession and by nothing else; such a write also bumps the conversation's
`views_seq`, so a decision landing after the sweep marked it current brings it back) or
its hidden positions differ from its last check (`_stale_outdated`); an append alone,
load-bearing or not, costs the check two index reads. (Keyed on the pin version, which
every load-bearing append moves, each such append cost the check of every view: 169 ms
at 20,000 turns / 2,000 sessions.) A line found in its turn (extractive)
is outdated when it overlaps a superseded statement; one not found in it (an LLM's
rewording) cannot show which statement it holds, so it keeps those of its cited turns
already recorded as superseded when it was written (`Sentence.seen_superseded`: the
summarizer got the turns without them), and is outdated when one more was recorded
since. Not by positions: a session view's end stays at its session's last turn, so a
correction in a later session is past it however often the view is rebuilt (every sweep
refreshed it again, an LLM call each, ahead of every other view). A refresh that still
leaves such a line (a summarizer that restates the old value) is recorded as a failed
one (`_settle`), backed off and reported like one (`Swept.FAILED`, `refresh_all`'s
failures: not counted as refreshed though its version is stored), so the sweeps do not
pick it first every run;
not so one outdated by a correction or retraction decided while the summarizer ran (the
pin version or hidden positions moved since the refresh read its sources): that view
is left to the next sweep, which finds it outdated and refreshes it first.

Values that come back: a popped correction makes current again what it superseded
(`_restored`), which a view built before the pop lacks. The rolling view is behind the
retraction row and gets those turns at its refresh. A session view whose session ended
before the pop (the correction and its retraction in later sessions) has no turn after
its end and cites no popped line, so neither coverage nor `outdated_views` picked it:
its summary never got the old value back. `restorable_views` picks a view lacking such a
turn (cited by none of its lines) or such a statement of a cited turn: the sweep's check
of a conversation whose hidden positions moved (`_stale_outdated`, at OUTDATED_SEVERITY,
checked again after a failed refresh), `refresh_all` (each covering session view) and
`refresh` itself (`_covering`). A view whose latest version this maintainer built with
those turns given to its summarizer, which left them out (its budget), is not picked
again (`_restore_given`, at most RESTORES_KEPT views; another process may pick it once).

A summarizer failure never raises: the error is recorded (`WarmStore.record_error`),
the previous version stays current and is returned. The view is then held back from
the sweeps (`stale_views`, so every process's scheduler) for a backoff that grows with
its failures in a row: FAILED_VIEW_BACKOFF_S, doubling to FAILED_VIEW_BACKOFF_MAX_S, or
the endpoint's Retry-After when longer (up to RETRY_AFTER_MAX_S). The state is a
`view_failures` row (counts and times, no text) read by every process; its times are the
database's clock (`ColdLog.database_now`, as the leases' expiry), so hosts whose clocks
disagree hold a view back alike. The view's next
successful refresh deletes it, and a refresh asked for by name (`refresh`,
`refresh_all`: `Memory.consolidate(conv)`) is never held back. `failing()` gives the
operator's figures from those rows. A sweep's refresh that failed so ends as
`Swept.FAILED`, its cause from `take_failure` (the message only), and `refresh_all`
lists such failures to a caller that asks: a one-shot sweep reports them (`tiermem
consolidate` exits 1) rather than counting the view as unchanged. The log gets the error's message
only, never what the endpoint answered (`SummarizerError.excerpt`, which may quote the
turns): that is stored with the view's error, which is erased with the conversation.
A conversation erased while its refresh waited on the summarizer gets neither row (each
is written only while the conversation exists, checked in the write's own transaction),
nor the summary (`put_summary` refuses a conversation that is gone), nor a lease row: a
backlog's refresh stops at its next chunk, before paying for it (the lease's renewal,
`ColdLog.renew_view`, checks the conversation in its own transaction). Either way the
refresh raises ConversationNotFound. A sweep (the scheduler's run, `Memory.consolidate()`)
refreshes each view through `sweep_refresh`, which takes that as the refresh's normal end
(one debug line, the key and kind only) and lets the sweep go on with its next view; a
refresh asked for by name (`refresh`, `refresh_all`) raises it to its caller.

One refresher per view, also across processes (two service workers each with its
scheduler, or `tiermem serve` beside `consolidate --watch`): a refresh takes the view's
lease (`ColdLog.claim_view`, a `view_claims` row) before it reads the view's frontier,
so the summarizer runs once per stretch of log; a refresh that finds the lease held
returns the current version. The lease outlives the refresh: it lasts
`VIEW_CLAIM_TTL_S` plus the most one summarizer call can take
(`summarize.call_bound_s`: an LLM's (retries + 1) x llm_timeout_s and backoff, 0 for
the extractive summarizer), and is renewed before each chunk of a long backlog, so no
second process starts the same (paid) refresh while the first still runs. A refresh
that finds its lease taken at a renewal (this process stalled past it) stops there and
returns the current version. A lease whose holder is
a process of this host that no longer runs (killed mid-refresh; the restarted service is
a new holder, also when it runs under the killed one's pid, as a restarted container's
PID 1 does: the holder records its process's start time) is taken over at once rather
than waited out. (Containers that share a host name but not a pid namespace may see a
live holder as dead: the cost is one duplicate refresh, which `put_summary` stores only
if it differs.)

A sweep counts as its own refresh (Swept.NEW_VERSION: the scheduler's `refreshed_total`
and `last_refreshed`, the `consolidate --watch` line, `tiermem consolidate`'s count) only a
version that refresh stored itself (`stored`, from `WarmStore.put_stored`): one another
process stored after the sweep picked the view (found covering, or its lease held) is
that process's refresh. Summed over processes, the counts are the versions stored.

Every refresh computes within its conversation's memo scope (`tiers.memo`), whoever
asked for it (a sweep, the scheduler's thread): what it remembers of a conversation's
text answers only that conversation's calls.
"""

from __future__ import annotations

import enum
import logging
import math
import os
import socket
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from tiermem.consolidation.summarize import Packer, SourceTurn, Summarizer, call_bound_s, split_sentences
from tiermem.tiers.errors import ConversationNotFound, SummarizerError
from tiermem.tiers.formats import hidden_positions
from tiermem.tiers.memo import memo_scope, remembered_for
from tiermem.tiers.models import TurnRow
from tiermem.tiers.redis_watchdog import pid_alive, process_start_ticks
from tiermem.tiers.statements import Hidden, StatementRow, read_hidden
from tiermem.tiers.store import ColdLog, ViewFailureRow
from tiermem.tiers.tokens import TokenCounter
from tiermem.tiers.warm import (
    Frontier,
    Sentence,
    Staleness,
    SummaryView,
    WarmStore,
    check_view_key,
    render,
    staleness,
    stamped_ahead,
)

log = logging.getLogger("tiermem.views")

ViewKey = tuple[str, str, str]  # (conversation_id, kind, key)
CONSTRAINTS_SUMMARIZER = "constraints"
DEFAULT_CHUNK_TOKENS = 8000
DEFAULT_LABEL_GRACE_S = 10.0
SOURCE_CHUNK_TURNS = 500  # turns fetched per store call when loading a view's sources
# turns per read when refresh_all looks for each session's last turn: a read of a
# 20,000-turn conversation's turn times at once held the store's lock ~140 ms (load 5)
SESSION_SCAN_PAGE_TURNS = 2000
_TAIL_WINDOW = 256  # positions looked at for a trailing run of unlabeled turns
_LOCK_STRIPES = 64
_FILLER_INTENTS = frozenset({"chitchat"})
# how long a refresh's lease on its view lasts past the summarizer's own bound on one
# call (summarize.call_bound_s; the lease is renewed before each chunk of a backlog):
# room for the store's reads and writes around the call. A holder that died holds the
# view no longer than this plus that bound (one of this host is taken over at once)
VIEW_CLAIM_TTL_S = 600.0
# how long the sweeps leave a view alone after its refresh failed: this after the first
# failure, doubling with each further one in a row, up to the cap (a 401 forever costs a
# request an hour per view, not retries+1 every scheduler run)
FAILED_VIEW_BACKOFF_S = 30.0
FAILED_VIEW_BACKOFF_MAX_S = 3600.0
# an endpoint's Retry-After longer than the backoff is honoured up to this: a date years
# ahead would otherwise stop the view's refreshes for good
RETRY_AFTER_MAX_S = 86400.0
_START_MARK = "~"  # between the maintainer id (hex) and its process's start time
# a view presenting a superseded or retracted line as current goes before every view
# that is only behind: it says something false, the others only lack something new
OUTDATED_SEVERITY = math.inf
# conversations whose views' check for such lines (`ViewMaintainer.outdated_views`) a
# sweep remembers, with what supersession and the control rows said then, so an append
# alone (no correction, no retraction) costs the check two index seeks: at ~100 bytes an
# entry, ~1 MB; a conversation past it is checked once more when it is next appended to
CHECKED_CONVERSATIONS_KEPT = 10_000
# views whose latest version a refresh built with the turns a popped correction made
# current again given to its summarizer (`ViewMaintainer.restorable_views`), remembered
# so that one the summarizer left out for the budget is not picked by every sweep: at
# ~200 bytes an entry, ~2 MB; one past it costs at most one more refresh
RESTORES_KEPT = 10_000
# the error recorded for a refresh that left such a line (`ViewMaintainer._settle`)
STILL_OUTDATED_ERROR = "refreshed, yet a line shown as current is still superseded or retracted"


def lease_holder(maintainer: str) -> str:
    """This process's name in `view_claims`: `host:maintainer~start:pid`, the start being
    the process's start time in clock ticks (0 where procfs is missing). The pid tells a
    pre-fork server's workers apart; the start time tells this process from a killed one
    that had its pid (a restarted container's PID 1). The pid stays the last field, where
    every earlier version reads it, so a process of one during a rolling upgrade does not
    take a start time for a pid and a live lease for a dead one."""
    pid = os.getpid()
    start = process_start_ticks(pid) or 0
    return f"{socket.gethostname()}:{maintainer}{_START_MARK}{start}:{pid}"


def dead_holder(holder: str) -> bool:
    """Whether a lease `holder` is a process of this host that no longer runs: its pid
    runs no process, or one that started at another time. It reads every form written:
    `host:maintainer~start:pid` (now), `host:maintainer:pid:start` and
    `host:maintainer:pid` (earlier versions)."""
    host, _, rest = holder.partition(":")
    if host != socket.gethostname():
        return False
    parts = rest.split(":")
    if len(parts) == 2:
        start = parts[0].partition(_START_MARK)[2]
        pid = parts[1]
    elif len(parts) == 3:
        pid, start = parts[1], parts[2]
    else:
        return False
    if not pid.isdigit():
        return False
    if not pid_alive(int(pid)):
        return True
    if start.isdigit() and int(start):
        started = process_start_ticks(int(pid))
        return started is not None and started != int(start)
    return False


def _message_only(exc: Exception) -> Exception:
    """A summarizer's failure as a sweep may keep it: a SummarizerError anew without
    what the endpoint answered (`excerpt`), anything else without its traceback and
    what it was raised from (their frames hold the refresh's locals: the turns)."""
    if isinstance(exc, SummarizerError):
        return SummarizerError(exc.summarizer, exc.detail, retry_after_s=exc.retry_after_s)
    exc.__traceback__ = None
    exc.__cause__ = exc.__context__ = None
    return exc


def failed_view_backoff_s(failures: int, retry_after_s: float | None = None) -> float:
    """Seconds the sweeps leave a view alone after `failures` failed refreshes in a row
    (module docstring), at least the endpoint's `retry_after_s` up to RETRY_AFTER_MAX_S."""
    doublings = min(max(failures, 1) - 1, math.ceil(math.log2(FAILED_VIEW_BACKOFF_MAX_S / FAILED_VIEW_BACKOFF_S)))
    backoff = min(FAILED_VIEW_BACKOFF_S * 2 ** doublings, FAILED_VIEW_BACKOFF_MAX_S)
    if retry_after_s is not None and retry_after_s > backoff:
        backoff = min(retry_after_s, RETRY_AFTER_MAX_S)
    return backoff


class Swept(enum.Enum):
    """How a sweep's refresh of one view ended (`ViewMaintainer.sweep_refresh`)."""

    NEW_VERSION = "new_version"  # this refresh stored a new version of the view (not another process)
    UNCHANGED = "unchanged"  # already current, or another stored it meanwhile
    # another process holds its lease (its refresh under way, perhaps a slow LLM call) and
    # the view is still behind the log or has no version yet: not refreshed, and not
    # "unchanged" either (a one-shot sweep reported such a view refreshed and complete);
    # a sweep reports it skipped, and the next one picks it again
    HELD = "held"
    # its summarizer failed: the failure recorded and backed off, the previous version kept
    # (`ViewMaintainer.take_failure` says why). A failure, not "unchanged": a one-shot
    # sweep (`tiermem consolidate`, `Memory.consolidate()`) reported such a run complete
    FAILED = "failed"
    ERASED = "erased"  # its conversation was erased meanwhile: the refresh's normal end, not an error


@dataclass(frozen=True)
class _Lease:
    """The lease a refresh holds on its view (`view_claims`)."""

    conversation_id: str
    kind: str
    key: str
    holder: str


# (supersession version, hidden positions) of a conversation (`ViewMaintainer._log_marks`)
_LogMarks = tuple[int, frozenset[int]]


class _LeaseLost(Exception):
    """A renewal found the view's lease held by another: the refresh stops."""


@dataclass
class _SessionScan:
    """What `stale_views` remembers per conversation about session coverage: turns up
    to `through` have been scanned; `pending` holds, per session, the scanned turns its
    view did not cover at the last look (position, created_at)."""

    created_at: float  # the conversation's, to notice an id pruned and created again
    through: int = -1
    pending: dict[str, list[tuple[int, float]]] = field(default_factory=dict)


class ViewMaintainer:
    """Computes and stores the warm views of conversations. Thread-safe; refreshes of
    one view are serialized within the process, and across processes by a lease on the
    view (`ColdLog.claim_view`); `WarmStore.put` still refuses a write that would move a
    view backwards or store the same version twice (a lease that expired mid-refresh)."""

    def __init__(
        self,
        cold: ColdLog,
        warm: WarmStore,
        summarizer: Summarizer,
        tokens: TokenCounter,
        *,
        target_tokens: int,
        max_turns_behind: int,
        max_seconds_behind: float,
        clock: Callable[[], float] = time.time,
        fold: bool = True,
        constraint_target_tokens: int | None = None,
        chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
        label_grace_s: float = DEFAULT_LABEL_GRACE_S,
        backoff_clock: Callable[[], float] | None = None,
    ) -> None:
        if target_tokens < 1 or max_turns_behind < 0 or max_seconds_behind < 0 or chunk_tokens < 1:
            raise ValueError("target_tokens and chunk_tokens must be >= 1, budgets >= 0")
        self.cold = cold
        self.warm = warm
        self.summarizer = summarizer
        self.tokens = tokens
        self.target_tokens = int(target_tokens)
        self.constraint_target_tokens = int(constraint_target_tokens or target_tokens)
        self.max_turns_behind = int(max_turns_behind)
        self.max_seconds_behind = float(max_seconds_behind)
        self.clock = clock
        self.fold = fold
        self.chunk_tokens = int(chunk_tokens)
        self.label_grace_s = float(label_grace_s)
        # None: the database's clock (module docstring); a test moves time with its own
        self.backoff_clock = backoff_clock
        self._locks = [threading.Lock() for _ in range(_LOCK_STRIPES)]
        self._scan_lock = threading.Lock()
        self._maintainer = uuid.uuid4().hex[:12]  # this maintainer, in view_claims
        self._sessions: dict[str, _SessionScan] = {}
        # conversation -> (its created_at, supersession version, hidden positions) at the sweep's
        # last check for outdated lines (`_stale_outdated`), least recently checked first
        self._checked: OrderedDict[str, tuple[float, int, frozenset[int]]] = OrderedDict()
        # view -> (the version a refresh stored, the positions its summarizer was given) for
        # the refreshes given restored turns (`restorable_views`), least recent first
        self._restore_given: OrderedDict[ViewKey, tuple[int, frozenset[int]]] = OrderedDict()
        self._given_lock = threading.Lock()
        self.failures = 0
        # the summarizer failure the thread's latest refresh recorded (`take_failure`)
        self._recorded = threading.local()

    # -- loading source turns ------------------------------------------------------------

    def _sources(self, conversation_id: str, rows: Sequence[TurnRow], *,
                 embeddings: bool = True) -> list[SourceTurn]:
        """SourceTurns (text, labels, stored embedding, superseded statements) for turn
        rows, in log order. Rows whose message cannot be decoded are skipped (salvaged by
        the cold tier), and so are items a control row hides (a popped item: no view may
        show it); a supersession by a popped turn counts as absent (tiers.statements.Hidden)."""
        hidden = read_hidden(self.cold, conversation_id)
        rows = sorted({r.position: hidden.row(r) for r in rows if r.position not in hidden.positions}.values(),
                      key=lambda r: r.position)
        out: list[SourceTurn] = []
        for i in range(0, len(rows), SOURCE_CHUNK_TURNS):
            chunk = rows[i:i + SOURCE_CHUNK_TURNS]
            positions = [r.position for r in chunk]
            texts = {m.position: m.text for m in self.cold.get(conversation_id, positions)}
            vecs = self.cold.embeddings(conversation_id, positions) if embeddings else {}
            gone: dict[int, list[tuple[int, int]]] = {}
            for st in hidden.statements(self.cold.superseded_statements(conversation_id, positions)):
                gone.setdefault(st.position, []).append((st.start, st.end))
            for r in chunk:
                if r.position not in texts:
                    continue
                v = vecs.get(r.position)
                out.append(SourceTurn(
                    position=r.position, role=r.role, text=texts[r.position], intent=r.intent,
                    load_bearing=r.load_bearing, priority=r.priority, superseded_by=r.superseded_by,
                    embedding=None if v is None else np.asarray(v, dtype=np.float32),
                    session_id=r.session_id, created_at=r.created_at,
                    superseded_spans=tuple(sorted(gone.get(r.position, ()))),
                ))
        return out

    def _coverage_end(self, conversation_id: str, last: int, now: float) -> int:
        """`last`, less a trailing run of unlabeled turns younger than the grace."""
        if self.label_grace_s <= 0:
            return last
        young = {p for p, at in self.warm.unlabeled_tail(conversation_id, max(-1, last - _TAIL_WINDOW))
                 if now - at < self.label_grace_s}
        end = last
        while end in young:
            end -= 1
        return end

    # -- summarizing -------------------------------------------------------------------------

    def lease_ttl_s(self) -> float:
        """Seconds a refresh's lease lasts from its claim or renewal: VIEW_CLAIM_TTL_S past
        the most one summarizer call can take (module docstring)."""
        return VIEW_CLAIM_TTL_S + call_bound_s(self.summarizer)

    def _renew(self, lease: _Lease) -> None:
        """Extend `lease` by `lease_ttl_s` from now; `_LeaseLost` when another holds the
        view (this refresh stalled past its lease, and that one redoes its work),
        ConversationNotFound when the conversation was erased meanwhile (the chunks left
        would be paid for a summary `put_summary` refuses; no lease row is written)."""
        if not self.cold.renew_view(lease.conversation_id, lease.kind, lease.key, lease.holder,
                                    self.lease_ttl_s()):
            raise _LeaseLost(lease)

    def _incremental(self, conversation_id: str, carried: Sequence[TurnRow], new: Sequence[TurnRow],
                     lease: _Lease) -> list[Sentence]:
        """Summarize carried + new turns; a long `new` goes in chunks of ~chunk_tokens,
        each chunk summarized together with the turns the previous step cited, the lease
        renewed before each chunk after the first (the claim covered the first)."""
        state = list(carried)
        chunks: list[list[TurnRow]] = [[]]
        size = 0
        for r in new:
            if chunks[-1] and size + r.tokens > self.chunk_tokens:
                chunks.append([])
                size = 0
            chunks[-1].append(r)
            size += r.tokens
        sentences: list[Sentence] = []
        for i, chunk in enumerate(chunks):
            if i:
                self._renew(lease)
            rows = {r.position: r for r in (*state, *chunk)}
            sources = self._sources(conversation_id, list(rows.values()))
            sentences = self._check(self.summarizer.summarize(sources, target_tokens=self.target_tokens),
                                    {s.position for s in sources}, self.target_tokens)
            cited = {p for s in sentences for p in s.positions}
            state = [rows[p] for p in sorted(cited) if p in rows]
            sentences = self._with_seen(sentences, sources)
        return sentences

    @staticmethod
    def _with_seen(sentences: Sequence[Sentence], sources: Sequence[SourceTurn]) -> list[Sentence]:
        """`sentences` with, on each current line not found in a cited turn that had a
        statement recorded as superseded (an abstractive line), those statements
        (`Sentence.seen_superseded`): the summarizer got the turn without them, so the
        line was written after their correction (`_line_outdated`)."""
        parted = {t.position: t for t in sources if t.superseded_spans}
        if not parted:
            return list(sentences)
        out: list[Sentence] = []
        for s in sentences:
            turns = [parted[p] for p in s.positions if p in parted]
            if s.status == "current" and any(t.text.find(s.text) < 0 for t in turns):
                s = replace(s, seen_superseded=tuple(sorted((t.position, a) for t in turns
                                                            for a, _e in t.superseded_spans)))
            out.append(s)
        return out

    def _check(self, sentences: Sequence[Sentence], valid: set[int], target: int) -> list[Sentence]:
        """Defend the invariants against a misbehaving summarizer: drop sentences
        citing positions it was not given, and cut from the end to the target."""
        out = [s for s in sentences if s.positions and set(s.positions) <= valid and s.text.strip()
               and "\n" not in s.text]
        if len(out) < len(sentences):
            log.warning("views: dropped %d sentences without valid provenance", len(sentences) - len(out))
        while out and self.tokens.count(render(out)) > target:
            out.pop()
        return out

    def constraint_sentences(self, sources: Sequence[SourceTurn], target: int) -> list[Sentence]:
        """The constraint extract of load-bearing source turns (see module docstring)."""
        cands: list[tuple[tuple[int, int], Sentence, tuple[int, int, int, int, int]]] = []
        for t in sources:
            if t.intent in _FILLER_INTENTS and not t.load_bearing:
                continue
            whole = "superseded" if t.superseded_by is not None else "current"
            # a sentence holding a superseded statement: that statement is marked, what
            # is left of the sentence stays current (statement rows, tiers/statements.py)
            pieces = [(a, e, whole) for span in split_sentences(t.text)
                      for a, e in (t.current_spans(span) if whole == "current" else [span])]
            if whole == "current":
                pieces += [(a, e, "superseded") for a, e in t.superseded_spans if "\n" not in t.text[a:e]]
            pieces.sort()
            for idx, (s, e, status) in enumerate(pieces):
                text = t.text[s:e]
                if not text.strip():
                    continue
                sent = Sentence(text, (t.position,), status, t.intent or "constraint")
                # keep-preference: current first, then priority, load-bearing, newer, earlier in turn
                pref = (int(status == "current"), t.priority, int(t.load_bearing), t.position, -idx)
                cands.append(((t.position, s), sent, pref))
        cands.sort(key=lambda c: c[0])
        everything = [c[1] for c in cands]
        if self.tokens.count(render(everything)) <= target:
            return everything
        packer = Packer(self.tokens, target)
        for order, sent, _pref in sorted(cands, key=lambda c: c[2], reverse=True):
            packer.offer(order, sent)
        return packer.sentences()

    # -- refresh ---------------------------------------------------------------------------------

    def refresh(self, conversation_id: str, kind: str, key: str = "", *, full: bool = False
                ) -> SummaryView | None:
        """Bring one view up to date; returns the current version (None when the
        conversation has nothing to summarize yet). A view already covering the log
        is returned as is. `full` recomputes from the whole log instead of from the
        previous version (after a relabeling, e.g. `Memory.rebuild`), as a new version.
        A summarizer failure is recorded and the previous version returned; it never
        raises for one. ConversationNotFound when the conversation is erased while the
        refresh runs (at its next chunk, or at the write)."""
        check_view_key(kind, key)
        self._recorded.failure = None  # a failure is this refresh's only (`take_failure`)
        self._recorded.stored = False  # and so is a version stored (`stored`)
        self._recorded.held = False  # and the lease found held by another (`lease_held`)
        # the summarizer's token counts and parses are remembered for this conversation
        # only (tiers.memo), whoever asks: a sweep and the scheduler's thread set no scope
        with remembered_for(memo_scope(self.cold.db_uuid, conversation_id)):
            return self._refresh(conversation_id, kind, key, full)

    def _refresh(self, conversation_id: str, kind: str, key: str, full: bool) -> SummaryView | None:
        """`refresh`, within the conversation's memo scope."""
        if not full:
            # a view that covers the log is answered as is, before the lease: claiming
            # and releasing it are two write transactions, which every other writer of
            # the store (another tenant's append too) would wait behind for nothing
            current = self._covering(conversation_id, kind, key)
            if current is not None:
                return current
        lock = self._locks[hash((conversation_id, kind, key)) % _LOCK_STRIPES]
        with lock:
            # and across processes: under the view's lease the refresh reads the view's
            # frontier afresh, so a second process finds it covered instead of running
            # the summarizer (perhaps a paid LLM) again; while another holds it, the
            # current version is answered as is
            holder = lease_holder(self._maintainer)
            ttl = self.lease_ttl_s()
            if not self.cold.claim_view(conversation_id, kind, key, holder, ttl):
                other = self.cold.view_holder(conversation_id, kind, key)
                if other is None or not dead_holder(other) or not self.cold.claim_view(
                        conversation_id, kind, key, holder, ttl, replacing=other):
                    self._recorded.held = True
                    return self.warm.latest(conversation_id, kind, key)
            lease = _Lease(conversation_id, kind, key, holder)
            try:
                # what the log's corrections and retractions were before the refresh reads
                # its sources: `_settle` judges the refresh only against those
                marks = self._log_marks(conversation_id)
                if kind == "rolling":
                    return self._refresh_rolling(conversation_id, full, lease, marks)
                if kind == "constraints":
                    return self._refresh_constraints(conversation_id, full, marks)
                return self._refresh_session(conversation_id, key, full, lease, marks)
            except _LeaseLost:
                log.info("views: the lease on %s/%s/%s passed to another refresher mid-refresh; it goes on",
                         conversation_id, kind, key)
                self._recorded.held = True
                return self.warm.latest(conversation_id, kind, key)
            finally:
                try:
                    self.cold.release_view(conversation_id, kind, key, holder)
                except Exception:  # the lease expires on its own; the refresh's answer stands
                    log.exception("views: could not release the lease on %s/%s/%s", conversation_id, kind, key)

    def sweep_refresh(self, conversation_id: str, kind: str, key: str = "") -> Swept:
        """`refresh` for a sweep over views nobody named (the scheduler's run,
        `Memory.consolidate()`): a conversation erased since the sweep picked the view
        (perhaps while its summarizer ran) ends the refresh there, with one debug line
        (the key and kind only: no traceback, no text), and the sweep goes on with its
        next view. A summarizer failure (recorded and backed off, the previous version
        kept) ends as Swept.FAILED, its cause for `take_failure`. Anything else
        `refresh` raises is the caller's to handle."""
        try:
            self.refresh(conversation_id, kind, key)
        except ConversationNotFound:
            log.debug("refresh of %s/%s stopped: the conversation was erased", conversation_id, kind)
            return Swept.ERASED
        if getattr(self._recorded, "failure", None) is not None:
            # checked again by the next sweep, for a view picked for what a retraction
            # made current again (`restorable_views`) as for an outdated one
            with self._scan_lock:
                self._checked.pop(conversation_id, None)
            return Swept.FAILED  # the caller takes the cause (`take_failure`)
        # this refresh's own write only: a version another process stored while this one
        # waited (its lease, or found covering after that one's write) is that one's
        # refresh, and counted there (two workers' refreshed_total summed 1,279 for 1,166
        # versions stored)
        if self.stored():
            return Swept.NEW_VERSION
        return Swept.HELD if self.lease_held(conversation_id, kind, key) else Swept.UNCHANGED

    def lease_held(self, conversation_id: str, kind: str, key: str = "") -> bool:
        """Whether this thread's latest refresh (of this view) left it to another
        process holding its lease (found so at the claim, or lost at a renewal) while
        the view is still behind the log or has no version yet: its answer is the
        previous version (or None), which covers not what the log holds. A view that
        holder stored meanwhile, covering the log, is not held: it is current."""
        if not getattr(self._recorded, "held", False):
            return False
        return self._covering(conversation_id, kind, key) is None

    def stored(self) -> bool:
        """Whether this thread's latest refresh stored a new version itself
        (`WarmStore.put_stored`): not when it found the view current, another process
        holding its lease or having stored it meanwhile, or its summarizer failed."""
        return bool(getattr(self._recorded, "stored", False))

    def _put(self, view: SummaryView, *, fold: bool = False) -> SummaryView:
        """`WarmStore.put`, noting for `stored` whether this refresh stored the version."""
        out, stored = self.warm.put_stored(view, fold=fold)
        if stored:
            self._recorded.stored = True
        return out

    def take_failure(self) -> Exception | None:
        """The summarizer failure that this thread's latest refresh recorded (then it
        returned the previous version), None when it recorded none; cleared by the
        taking. Its message only (no traceback, no `SummarizerError.excerpt`: those may
        hold the conversation's text, which an erasure must leave nowhere), for a sweep
        to report it (`Swept.FAILED`)."""
        failure: Exception | None = getattr(self._recorded, "failure", None)
        self._recorded.failure = None
        return failure

    def _covering(self, conversation_id: str, kind: str, key: str) -> SummaryView | None:
        """The view's current version if it covers every turn a refresh could add to it
        (then a refresh would return it unchanged), else None. Reads only."""
        prev = self.warm.latest(conversation_id, kind, key)
        if prev is None:
            return None
        if kind == "session":
            # the session's turns after the view's end: none, nothing to add
            later = self.warm.turn_times(conversation_id, prev.end_position, session_id=key, limit=1)
            if later:
                return None
        elif prev.end_position < self.cold.last_position(conversation_id):
            return None
        # covering, but built before a correction or a retraction of what it cites, or
        # lacking what a retraction made current again: the refresh re-reads its sources
        # (module docstring, "Outdated lines")
        return None if self._stale_lines(conversation_id, prev) else prev

    def _stale_lines(self, conversation_id: str, view: SummaryView) -> bool:
        """Whether `view`, covering its range, still needs its sources again: a line shown
        as current was corrected or retracted since (`outdated_views`), or a value a
        popped correction made current again is missing (`restorable_views`)."""
        return bool(self.outdated_views(conversation_id, [view])
                    or self.restorable_views(conversation_id, [view]))

    def _summarize_or_record(self, conversation_id: str, kind: str, key: str,
                             fn: Callable[[], list[Sentence]]
                             ) -> tuple[list[Sentence] | None, ViewFailureRow | None]:
        """(what `fn` summarized, None when it failed: recorded and backed off; the
        view's failure row before it). The caller stores the view and settles the
        failure row (`_settle`)."""
        before = self.cold.view_failure(conversation_id, kind, key)
        try:
            out = fn()
        except (_LeaseLost, ConversationNotFound):
            # not a failure: the lease's new holder refreshes the view, or the
            # conversation was erased (the refresh raises as put_summary would)
            raise
        except Exception as exc:
            self.failures += 1
            # the message says what failed; what the endpoint answered may quote the turns,
            # so it goes only to the view's stored error, erased with the conversation
            log.warning("views: %s refresh of %s/%s failed: %s", kind, conversation_id, key, exc)
            error = f"{type(exc).__name__}: {exc}"
            excerpt = exc.excerpt if isinstance(exc, SummarizerError) else ""
            self.warm.record_error(conversation_id, kind, key, f"{error}; answer: {excerpt}" if excerpt else error)
            wait = exc.retry_after_s if isinstance(exc, SummarizerError) else None
            self._back_off(conversation_id, kind, key, before, wait)
            self._recorded.failure = _message_only(exc)
            return None, before
        return out, before

    def _log_marks(self, conv: str) -> _LogMarks:
        """The conversation's supersession version (moved by every write of supersession,
        and only by those) and its hidden positions: what `_settle` compares to tell a
        correction or retraction decided while the refresh ran, and what the sweep's
        `_stale_outdated` keys its last check on."""
        return self._marks(conv, read_hidden(self.cold, conv))

    def _marks(self, conv: str, hidden: Hidden) -> _LogMarks:
        return self.cold.supersession_version(conv), frozenset(hidden.positions)

    def _settle(self, conv: str, kind: str, key: str, view: SummaryView | None,
                before: ViewFailureRow | None, marks: _LogMarks) -> SummaryView | None:
        """After a refresh stored `view`: a view still presenting a superseded or
        retracted line as current (a summarizer that restates it) is a failed refresh,
        recorded and backed off as one, so the sweeps do not pick it again at
        OUTDATED_SEVERITY on every run (each a summarizer call, ahead of every other
        view), and reported as one (`take_failure`: a sweep counts it Swept.FAILED, not
        a new version, though the version is stored); otherwise the view's failure row,
        if any, is deleted.

        Only what the summarizer was given counts: when the log's marks (`_log_marks`,
        read before the sources) moved since, a correction or retraction was decided
        while it ran (an LLM call takes seconds), so an outdated view is outdated for a
        reason it never saw. That is no failure: nothing is recorded, the failure row
        stays as it was, and the next sweep finds the view outdated (the marks moved, so
        it checks the conversation again) and refreshes it first. A storage failure of
        these reads (a PostgreSQL connection lost after the write) leaves the view
        unsettled too: it is stored, so the refresh returns it rather than raising."""
        try:
            outdated = view is not None and bool(self.outdated_views(conv, [view]))
            moved = outdated and self._log_marks(conv) != marks
        except Exception as exc:  # the write stands; the next refresh settles the view
            log.debug("views: %s refresh of %s/%s stored, not settled: %s", kind, conv, key, exc)
            return view
        if moved:
            log.debug("views: %s refresh of %s/%s is outdated by a correction decided while it ran",
                      kind, conv, key)
            return view
        if outdated:
            self.failures += 1
            log.warning("views: %s refresh of %s/%s left a superseded or retracted line shown as current",
                        kind, conv, key)
            self.warm.record_error(conv, kind, key, STILL_OUTDATED_ERROR)
            self._back_off(conv, kind, key, before, None)
            # and reported as one: a sweep counts it FAILED (not a new version: the
            # scheduler's refreshed_total, `Memory.consolidate()`'s count and `complete`),
            # refresh_all lists it (`take_failure`)
            self._recorded.failure = SummarizerError(
                view.summarizer if view is not None else self.summarizer.name, STILL_OUTDATED_ERROR)
            # the sweep's last check of the conversation may predate this version: it is
            # checked again (and the view, once its backoff ends, refreshed), not skipped
            # until the next correction. A single pop: atomic under the GIL, no lock
            self._checked.pop(conv, None)
        elif before is not None:
            self._keep_failure_state(lambda: self.cold.clear_view_failure(conv, kind, key))
        return view

    def _back_off(self, conv: str, kind: str, key: str, before: ViewFailureRow | None,
                  retry_after_s: float | None) -> None:
        """Record one more failed refresh of the view in a row, and when the sweeps may
        retry it."""
        now = self._backoff_now()
        failures = 1 if before is None else before[3] + 1
        first_at = now if before is None else before[4]
        retry_at = now + failed_view_backoff_s(failures, retry_after_s)
        self._keep_failure_state(lambda: self.cold.put_view_failure((conv, kind, key, failures, first_at, retry_at)))

    def _keep_failure_state(self, write: Callable[[], None]) -> None:
        """A write of `view_failures`, which only spares requests and informs the
        operator: a store that cannot take it (read-only storage, a database busy past
        its timeout) leaves the view in the sweeps, and the refresh's answer stands."""
        if getattr(self.cold, "read_only", False):
            return
        try:
            write()
        except Exception as exc:
            log.warning("views: could not record the refresh state of a view (%s)", exc)

    def held_back(self) -> set[ViewKey]:
        """The views the sweeps leave alone now: their latest refresh failed and their
        backoff has not run out (every process's, from the store)."""
        return set(self.cold.views_held_back(self._backoff_now()))

    def failing(self) -> tuple[int, float | None]:
        """(views whose latest refresh failed, seconds since the oldest of their runs of
        failures began; None when none fails): the operator's figures, no text or ids."""
        count, oldest = self.cold.view_failure_stats()
        return count, None if oldest is None else max(0.0, self._backoff_now() - oldest)

    def _backoff_now(self) -> float:
        """Now by the clock the `view_failures` times are kept in: the database's, which
        every process and host sharing the log reads alike (module docstring)."""
        return self.backoff_clock() if self.backoff_clock is not None else self.cold.database_now()

    def _refresh_rolling(self, conv: str, full: bool, lease: _Lease, marks: _LogMarks) -> SummaryView | None:
        prev = self.warm.latest(conv, "rolling")
        last = self.cold.last_position(conv)
        now = self.clock()
        end = self._coverage_end(conv, last, now)
        start_new = prev.end_position + 1 if prev is not None and not full else 0
        if end < start_new or end < 0:
            if prev is None or full or not self._stale_lines(conv, prev):
                return prev
            end = prev.end_position  # outdated: its sources again, over the same range
        restored = [] if full else self._restored(conv, prev)
        carried = [] if full else [*self.warm.turn_rows(conv, self._cited(prev)), *restored]
        new = self.cold.turns(conv, start=start_new, end=end) if end >= start_new else []
        sentences, before = self._summarize_or_record(
            conv, "rolling", "", lambda: self._incremental(conv, carried, new, lease))
        if sentences is None:
            return prev
        view = SummaryView(conv, "rolling", "", 0, 0, end, tuple(sentences), 0, self.summarizer.name, now)
        stored = self._put(view, fold=self.fold and bool(sentences))
        if restored:
            self._given(conv, stored, carried)
        return self._settle(conv, "rolling", "", stored, before, marks)

    def _refresh_constraints(self, conv: str, full: bool, marks: _LogMarks) -> SummaryView | None:
        """Incremental: the previous version's sources (their labels and supersession
        re-read) plus the load-bearing turns after it. A constraint once cut for the
        token target does not come back when others are later superseded; a `full`
        refresh reconsiders every load-bearing turn."""
        prev = self.warm.latest(conv, "constraints")
        last = self.cold.last_position(conv)
        now = self.clock()
        end = self._coverage_end(conv, last, now)
        if end < 0 or (prev is not None and prev.end_position >= end and not full):
            if prev is None or not self.outdated_views(conv, [prev]):
                return prev
            end = prev.end_position  # outdated: its sources again (labels and supersession re-read)
        if prev is None or full:
            rows = self.warm.load_bearing_turns(conv, end)
        else:
            cited = sorted({p for s in prev.sentences for p in s.positions})
            rows = self.warm.load_bearing_turns(conv, end, after=prev.end_position, include=cited)
        sources = self._sources(conv, rows, embeddings=False)
        sentences, before = self._summarize_or_record(
            conv, "constraints", "",
            lambda: self.constraint_sentences(sources, self.constraint_target_tokens))
        if sentences is None:
            return prev
        view = SummaryView(conv, "constraints", "", 0, 0, end, tuple(sentences), 0,
                           CONSTRAINTS_SUMMARIZER, now)
        return self._settle(conv, "constraints", "", self._put(view), before, marks)

    def _refresh_session(self, conv: str, session_id: str, full: bool, lease: _Lease,
                         marks: _LogMarks) -> SummaryView | None:
        prev = self.warm.latest(conv, "session", session_id)
        last = self.cold.last_position(conv)
        now = self.clock()
        end = self._coverage_end(conv, last, now)
        after = prev.end_position if prev is not None and not full else -1
        new = self.warm.session_turns(conv, session_id, after, end)
        if not new and (prev is None or full or not self._stale_lines(conv, prev)):
            return prev
        # new turns, or none but a line of the view is outdated or a value a retraction
        # made current again is missing: its sources again
        restored = [] if full else self._restored(conv, prev, session_id)
        carried = [] if full else [*self.warm.turn_rows(conv, self._cited(prev)), *restored]
        sentences, before = self._summarize_or_record(
            conv, "session", session_id, lambda: self._incremental(conv, carried, new, lease))
        if sentences is None:
            return prev
        start = prev.start_position if prev is not None and not full else new[0].position
        stop = new[-1].position if new else prev.end_position if prev is not None else start
        view = SummaryView(conv, "session", session_id, 0, start, stop, tuple(sentences), 0,
                           self.summarizer.name, now)
        stored = self._put(view)
        if restored:
            self._given(conv, stored, carried)
        return self._settle(conv, "session", session_id, stored, before, marks)

    def _restored(self, conv: str, prev: SummaryView | None, session_id: str | None = None) -> list[TurnRow]:
        """The turns of `prev`'s range (of session `session_id` only, when given) that a
        retraction recorded after `prev` was built made current again, wholly or a
        statement of them: the targets of a popped correction. An incremental refresh
        reads only the previous version's cited turns and the later ones, and no version
        cites a turn left out for its supersession, so without these the old value,
        current again for `facts()` and the context, never comes back to the view.

        Only retractions past `prev.end_position` count (one at or before it was in force
        when `prev` was built, and its turns are in `prev` or dropped for the budget).
        Without one this costs the control-row read; with one, a read of the turns of
        `prev`'s range superseded by a popped turn (`ColdLog.turns_superseded_by`, in the
        database: no index answers "superseded by") and of the statement rows, then the
        rows of those turns. A turn still superseded past the popped one (a chain
        A -> B -> C with B popped reads A -> C) is not restored."""
        return self._restorations(conv, prev, session_id)[0]

    def _restorations(self, conv: str, prev: SummaryView | None, session_id: str | None = None,
                      controls: list[tuple[int, dict[str, object]]] | None = None
                      ) -> tuple[list[TurnRow], list[StatementRow]]:
        """`_restored`'s turns, and the statements of them current again (each turn holding
        one is among the turns); `controls`: the conversation's control rows, when read."""
        if prev is None:
            return [], []
        if controls is None:
            controls = self.cold.control_rows([conv]).get(conv, [])
        popped = hidden_positions([(p, b) for p, b in controls if p > prev.end_position])[0]
        if not popped:
            return [], []
        start, stop = prev.start_position, prev.end_position
        whole = set(self.cold.turns_superseded_by(conv, popped, start=start, end=stop))
        hidden = read_hidden(self.cold, conv, hidden_positions(controls)[0])
        statements = [st for st in self.cold.superseded_statements(conv)
                      if st.superseded_by in popped and start <= st.position <= stop
                      and hidden.by(st.superseded_by) is None]
        parts = {st.position for st in statements}
        if not whole and not parts:
            return [], []
        rows = [r for r in self.warm.turn_rows(conv, sorted(whole | parts))
                if r.position not in hidden.positions
                and (r.position in parts or hidden.row(r).superseded_by is None)
                and (session_id is None or r.session_id == session_id)]
        kept = {r.position for r in rows}
        return rows, [st for st in statements if st.position in kept]

    def restorable_views(self, conversation_id: str, views: Sequence[SummaryView]) -> set[tuple[str, str]]:
        """(kind, key) of the rolling and session views among `views` that lack what a
        popped correction made current again in their range (`_restored`): a turn none
        of their lines cites, or a statement of a cited turn that no current line of it
        holds. Coverage alone never refreshes such a view when the retraction is past
        its session (a session view's end stays at its session's last turn, so the old
        value never came back to a closed session's summary), and neither does
        `outdated_views`, which looks for lines that must go, not values that must come
        back.

        A view whose current version this maintainer built from those very turns
        (`_restore_given`: the summarizer was given them and left them out for the
        budget) does not count, so the sweeps do not pick it again on every run. Costs
        the control-row read; with a retraction, one read of what every popped correction
        had superseded over the views' ranges (`ColdLog.turns_superseded_by`) and of the
        statement rows; `_restored` runs only for a view with such a turn in its range
        (and its session)."""
        views = [v for v in views if v.kind in ("rolling", "session")]
        if not views:
            return set()
        conv = conversation_id
        controls = self.cold.control_rows([conv]).get(conv, [])
        popped = hidden_positions(controls)[0]
        if not popped:
            return set()
        lo, hi = min(v.start_position for v in views), max(v.end_position for v in views)
        candidates = set(self.cold.turns_superseded_by(conv, popped, start=lo, end=hi))
        candidates |= {st.position for st in self.cold.superseded_statements(conv)
                       if st.superseded_by in popped and lo <= st.position <= hi}
        if not candidates:
            return set()
        session_of = {r.position: r.session_id for r in self.warm.turn_rows(conv, sorted(candidates))}
        out: set[tuple[str, str]] = set()
        for v in views:
            sid = v.key if v.kind == "session" else None
            if not any(v.start_position <= p <= v.end_position and (sid is None or session_of.get(p) == sid)
                       for p in candidates):
                continue
            rows, statements = self._restorations(conv, v, sid, controls)
            if not rows:
                continue
            given = self._restore_given.get((conv, v.kind, v.key))
            if given is not None and given[0] == v.version and {r.position for r in rows} <= given[1]:
                continue
            if self._lacks(conv, v, rows, statements):
                out.add((v.kind, v.key))
        return out

    def _lacks(self, conv: str, view: SummaryView, rows: Sequence[TurnRow],
               statements: Sequence[StatementRow]) -> bool:
        """Whether `view` lacks one of the restored `rows` (cited by none of its lines) or
        `statements` (held by no current line citing its turn: one found in the turn at
        an overlapping offset, or one not found in it, an abstractive line, written
        without the statement recorded as superseded, `Sentence.seen_superseded`)."""
        cited = {p for s in view.sentences for p in s.positions}
        if any(r.position not in cited for r in rows):
            return True
        if not statements:
            return False
        texts = {m.position: m.text for m in self.cold.get(conv, sorted({st.position for st in statements}))}
        for st in statements:
            source = texts.get(st.position)
            if source is None:
                continue
            if not any(self._holds(s, source, st) for s in view.sentences):
                return True
        return False

    @staticmethod
    def _holds(s: Sentence, source: str, st: StatementRow) -> bool:
        """Whether line `s` holds statement `st` of its turn (text `source`): found in it
        at an overlapping offset, or not found (an abstractive line) and written when the
        statement was not recorded as superseded (the summarizer got the turn with it)."""
        if s.status != "current" or st.position not in s.positions:
            return False
        at = source.find(s.text)
        if at < 0:
            return (st.position, st.start) not in set(s.seen_superseded)
        return at < st.end and at + len(s.text) > st.start

    def _given(self, conv: str, stored: SummaryView | None, carried: Sequence[TurnRow]) -> SummaryView | None:
        """Remember that `stored` was built with the restored turns among `carried` given
        to the summarizer (`restorable_views`), bounded; returns `stored`."""
        if stored is None:
            return None
        key = (conv, stored.kind, stored.key)
        positions = frozenset(r.position for r in carried)
        with self._given_lock:
            self._restore_given[key] = (stored.version, positions)
            self._restore_given.move_to_end(key)
            while len(self._restore_given) > RESTORES_KEPT:
                self._restore_given.popitem(last=False)
        return stored

    @staticmethod
    def _cited(view: SummaryView | None) -> list[int]:
        if view is None:
            return []
        return sorted({p for s in view.sentences if s.status == "current" for p in s.positions})

    def outdated_views(self, conversation_id: str, views: Sequence[SummaryView], *,
                       hidden: Hidden | None = None) -> set[tuple[str, str]]:
        """(kind, key) of those of `views` (versions of `conversation_id`'s views) with a
        line shown as current that the log no longer holds as current: it cites an item a
        control row hides now, or a turn a later turn superseded (that turn not cited in
        the same line), or it holds a statement a later turn superseded (for a line not
        found in its turn, an abstractive one: a statement recorded as superseded after the
        line was written, `Sentence.seen_superseded`). The planner's read of a summary line
        (planner.candidates `summary`) by the same rules, but for an abstractive line it
        takes a supersession past the view's end as later than the line (it reads only the
        rolling view, whose end moves past the correction); a supersession by a hidden turn
        counts as absent (`Hidden`). Reads the
        cited turns' rows and statement rows by position, the texts of the turns with a
        superseded statement, and the control rows (or takes `hidden`): what the views
        cite, never the log."""
        cited = sorted({p for v in views for s in v.sentences if s.status == "current" for p in s.positions})
        if not cited:
            return set()
        if hidden is None:
            hidden = read_hidden(self.cold, conversation_id)
        rows = {r.position: hidden.row(r) for r in self.warm.turn_rows(conversation_id, cited)}
        parts: dict[int, list[StatementRow]] = {}
        for i in range(0, len(cited), SOURCE_CHUNK_TURNS):
            chunk = cited[i:i + SOURCE_CHUNK_TURNS]
            for st in hidden.statements(self.cold.superseded_statements(conversation_id, chunk)):
                parts.setdefault(st.position, []).append(st)
        texts = ({m.position: m.text for m in self.cold.get(conversation_id, sorted(parts))} if parts else {})
        out: set[tuple[str, str]] = set()
        for v in views:
            for s in v.sentences:
                if s.status != "current":
                    continue
                if self._line_outdated(s, hidden, rows, parts, texts):
                    out.add((v.kind, v.key))
                    break
        return out

    @staticmethod
    def _line_outdated(s: Sentence, hidden: Hidden, rows: dict[int, TurnRow],
                       parts: dict[int, list[StatementRow]], texts: dict[int, str]) -> bool:
        """Whether one current line presents what the log no longer holds (`outdated_views`)."""
        if not hidden.positions.isdisjoint(s.positions):
            return True
        for p in s.positions:
            row = rows.get(p)
            if row is not None and row.superseded_by is not None and row.superseded_by not in s.positions:
                return True
            gone = [x for x in parts.get(p, ()) if x.superseded_by not in s.positions]
            source = texts.get(p)
            if not gone or source is None:
                continue
            at = source.find(s.text)
            if at < 0:
                # not in its turn (an abstractive line): it may state the old value unless
                # the statement was recorded as superseded before the line was written
                # (the summarizer then got the turn without it). Known by what the line
                # kept of that, not by positions: a session view's end stays at its own
                # session's last turn, before a correction in a later session however
                # often it is rebuilt. A line written before lines kept it (an older
                # version) counts as written before: one refresh gives it its record
                seen = set(s.seen_superseded)
                if any((x.position, x.start) not in seen for x in gone):
                    return True
                continue
            if any(x.start < at + len(s.text) and x.end > at for x in gone):
                return True
        return False

    def refresh_all(self, conversation_id: str,
                    failed: list[tuple[str, str, Exception]] | None = None,
                    held: list[tuple[str, str]] | None = None) -> list[SummaryView]:
        """Refresh the rolling and constraint views and every session view that is
        behind (regardless of budgets); returns the current versions. A refresh whose
        summarizer failed (its previous version returned) is added to `failed` as
        (kind, key, cause: `take_failure`), when given; one whose lease another process
        holds while the view is still behind (`lease_held`: its previous version
        returned, or none) to `held` as (kind, key), when given."""
        out: list[SummaryView] = []

        def refresh(kind: str, key: str = "") -> SummaryView | None:
            v = self.refresh(conversation_id, kind, key)
            cause = self.take_failure()
            if cause is not None and failed is not None:
                failed.append((kind, key, cause))
            elif held is not None and self.lease_held(conversation_id, kind, key):
                held.append((kind, key))
            return v

        for kind in ("rolling", "constraints"):
            v = refresh(kind)
            if v is not None:
                out.append(v)
        # each session's last turn against its view's end: only a session with turns
        # after it is refreshed (a refresh of each of a long conversation's thousand
        # sessions cost two write transactions apiece even when nothing was new); the
        # others' current versions come from one read
        last: dict[str, int] = {}
        after = -1
        while True:  # in pages: each read holds the store's lock for one page, not the whole log
            page = self.warm.turn_times(conversation_id, after, limit=SESSION_SCAN_PAGE_TURNS)
            for pos, sid, _ in page:
                if sid is not None:
                    last[sid] = pos
            if len(page) < SESSION_SCAN_PAGE_TURNS:
                break
            after = page[-1][0]
        current = {v.key: v for v in self.warm.sessions(conversation_id)}
        # and a session whose view shows as current a line corrected or retracted since
        # (perhaps in another session), or lacks a value a retraction made current again
        # (a correction in a later session popped): one check of every session's cited
        # turns, and one read of what popped corrections had superseded
        covering = [v for sid, v in current.items() if sid in last and last[sid] <= v.end_position]
        outdated = (self.outdated_views(conversation_id, covering)
                    | self.restorable_views(conversation_id, covering))
        for sid in sorted(last):
            v = current.get(sid)
            if v is None or last[sid] > v.end_position or ("session", sid) in outdated:
                v = refresh("session", sid)
            if v is not None:
                out.append(v)
        return out

    # -- freshness -------------------------------------------------------------------------------

    def staleness(self, conversation_id: str, kind: str, key: str = "",
                  view: SummaryView | None = None) -> Staleness:
        """How far one view is behind the log now (for a read to report its lag). A
        session view's costs a seek of its session's turns after the view's end (the
        turns_by_session index), not a walk of every later turn of the log."""
        check_view_key(kind, key)
        if view is None:
            view = self.warm.latest(conversation_id, kind, key)
        now = self.clock()
        end = view.end_position if view is not None else -1
        if kind == "session":
            behind = self.warm.turn_times(conversation_id, end, session_id=key)
            first = behind[0][2] if behind else None
            return staleness(view, last_position=end + len(behind), last_message_at=first or now,
                             max_turns=self.max_turns_behind, max_seconds=self.max_seconds_behind, now=now,
                             first_uncovered_at=first, turns_behind=len(behind),
                             bound_at=self._bound_at(conversation_id, view, first, now))
        last = self.cold.last_position(conversation_id)
        first = self.warm.created_at(conversation_id, end + 1) if last > end else None
        return staleness(view, last_position=last, last_message_at=first or now,
                         max_turns=self.max_turns_behind, max_seconds=self.max_seconds_behind, now=now,
                         first_uncovered_at=first, bound_at=self._bound_at(conversation_id, view, first, now))

    def _bound_at(self, conversation_id: str, view: SummaryView | None, first: float | None,
                  now: float) -> float | None:
        """For a view with no version whose first uncovered turn is stamped ahead of
        `now` (tiers.warm `staleness`: then unknown), when the conversation was created
        (by the server's clock), an upper bound of its wait; None otherwise (one read,
        only then)."""
        if view is not None or first is None or not stamped_ahead(first, now):
            return None
        row = self.cold.conversation(conversation_id)
        return None if row is None else float(row["created_at"])

    def stale_views(self, limit: int) -> list[ViewKey]:
        """Views over their freshness budget, most behind first (by the larger of
        turns/max_turns and seconds/max_seconds), at most `limit`.

        Only conversations appended to since their views were last found current are
        read (`WarmStore.frontier`); a conversation whose every view covers its log is
        marked current and costs nothing more until its next append, so a sweep follows
        the conversations being written, not the store's size. Rolling and constraint
        views cost index seeks per such conversation. Session coverage is tracked
        incrementally: each call reads only the turns appended since the previous call,
        or since the position the conversation was last marked current at (a new
        maintainer, e.g. after a restart, scans from there), so the state is derived
        from the database. Views in a failure backoff (`held_back`) are left out before
        the cut, so they take no place from the others."""
        held = self.held_back()
        return [k for k, _ in self.stale_views_detailed(limit + len(held)) if k not in held][:limit]

    def stale_views_detailed(self, limit: int) -> list[tuple[ViewKey, Staleness]]:
        """`stale_views` with each view's staleness."""
        if limit <= 0:
            return []
        now = self.clock()
        found: list[tuple[float, ViewKey, Staleness]] = []
        with self._scan_lock:
            seen: set[str] = set()
            for f in self.warm.frontier():
                conv, last = f.conversation_id, f.last_position
                seen.add(conv)
                behind = False
                for kind, end in (("rolling", f.rolling_end), ("constraints", f.constraints_end)):
                    e = -1 if end is None else end
                    if last <= e:
                        continue
                    behind = True
                    first = self.warm.created_at(conv, e + 1)
                    # a first uncovered turn stamped ahead of the clock: the view's age
                    # bounds the wait instead (tiers.warm `staleness`), read only then and
                    # only when the frontier says a version exists (none: bound_at does)
                    ahead = end is not None and first is not None and stamped_ahead(first, now)
                    st = staleness(self.warm.latest(conv, kind) if ahead else None, last_position=last,
                                   last_message_at=now, max_turns=self.max_turns_behind,
                                   max_seconds=self.max_seconds_behind,
                                   now=now, first_uncovered_at=first if first is not None else now,
                                   turns_behind=last - e, bound_at=f.created_at)
                    if st.over_budget:
                        found.append((st.severity(self.max_turns_behind, self.max_seconds_behind),
                                      (conv, kind, ""), st))
                found.extend(self._stale_sessions(conv, last, f.created_at, now, f.checked_through))
                outdated = self._stale_outdated(conv, f.created_at)
                found.extend((OUTDATED_SEVERITY, (conv, kind, key), Staleness(0, 0.0, True))
                             for kind, key in sorted(outdated))
                if not behind and not self._sessions[conv].pending and not outdated and self._mark_current(f):
                    # out of the next sweeps until its next append; the position it was
                    # current at is where a later session scan of it starts
                    seen.discard(conv)
            for gone in set(self._sessions) - seen:
                del self._sessions[gone]
        found.sort(key=lambda f: (-f[0], f[1]))
        return [(k, st) for _, k, st in found[:limit]]

    def _stale_outdated(self, conv: str, created_at: float) -> set[tuple[str, str]]:
        """The views of `conv` a sweep refreshes because a line shown as current was
        corrected or retracted since the view was built (`outdated_views`), which no
        append to the view's own range tells: a correction in another session, a
        retraction row without a session, a supersession decided after the view covered
        its turn. Checked when the conversation's supersession version (moved by every
        write of supersession and nothing else, tiers.store `supersession_version`) or its
        hidden positions differ from the last check's; otherwise this costs those two
        reads, whatever was appended. Every view is checked then: their bodies and the
        turns they cite."""
        hidden = read_hidden(self.cold, conv)
        seen = (created_at, *self._marks(conv, hidden))
        if self._checked.get(conv) == seen:
            self._checked.move_to_end(conv)
            return set()
        views = [v for kind in ("rolling", "constraints") if (v := self.warm.latest(conv, kind)) is not None]
        views += self.warm.sessions(conv)
        # and the views lacking a value a retraction made current again (a popped
        # correction's targets): the retraction moved the hidden positions, so this check
        # runs; a closed session's view is past no append and cites no popped line, so
        # nothing else would pick it
        outdated = self.outdated_views(conv, views, hidden=hidden) | self.restorable_views(conv, views)
        if outdated:
            self._checked.pop(conv, None)  # checked again at the next sweep, after their refresh
        else:
            self._checked[conv] = seen
            self._checked.move_to_end(conv)
            while len(self._checked) > CHECKED_CONVERSATIONS_KEPT:
                self._checked.popitem(last=False)
        return outdated

    def _mark_current(self, f: Frontier) -> bool:
        """`WarmStore.mark_current`, which is only a saving: a store that cannot take the
        write (read-only storage, a database busy past its timeout) keeps the
        conversation in the sweep, and the sweep goes on."""
        if getattr(self.cold, "read_only", False):
            return False
        try:
            return self.warm.mark_current(f)
        except Exception as exc:
            log.debug("views of %s are current but could not be marked so (%s)", f.conversation_id, exc)
            return False

    def _stale_sessions(
        self, conv: str, last: int, created_at: float, now: float, checked_through: int
    ) -> list[tuple[float, ViewKey, Staleness]]:
        scan = self._sessions.get(conv)
        if scan is None or scan.created_at != created_at or scan.through > last:  # new, or pruned and reused
            # every session view covered the turns through `checked_through` when the
            # conversation was last marked current: only the turns after it can be pending
            scan = self._sessions[conv] = _SessionScan(created_at, through=min(checked_through, last))
        if last > scan.through:
            for pos, sid, at in self.warm.turn_times(conv, scan.through):
                if sid is not None:
                    scan.pending.setdefault(sid, []).append((pos, at))
            scan.through = last
        if not scan.pending:
            return []
        ends = self.warm.session_ends(conv)
        out: list[tuple[float, ViewKey, Staleness]] = []
        for sid in list(scan.pending):
            e = ends.get(sid, -1)
            items = [(p, a) for p, a in scan.pending[sid] if p > e]
            if not items:
                del scan.pending[sid]
                continue
            scan.pending[sid] = items
            # stamped ahead of the clock: the view's age bounds it, read only when the
            # session has a version (none: the conversation's creation does)
            ahead = sid in ends and stamped_ahead(items[0][1], now)
            st = staleness(self.warm.latest(conv, "session", sid) if ahead else None, last_position=0,
                           last_message_at=now, max_turns=self.max_turns_behind,
                           max_seconds=self.max_seconds_behind, now=now, first_uncovered_at=items[0][1],
                           turns_behind=len(items), bound_at=created_at)
            if st.over_budget:
                severity = st.severity(self.max_turns_behind, self.max_seconds_behind)
                out.append((severity, (conv, "session", sid), st))
        return out

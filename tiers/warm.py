"""Warm tier: summaries as materialized views over the cold log (storage only).

A view is one of three kinds per conversation: `rolling` (the whole conversation so
far, key ''), `constraints` (the current instructions, constraints, entities and
decisions, key '') and `session` (one per session id, key = the session id). The
consolidation layer computes views; this module stores, reads and caches them.

Invariants:

- Views are derived (DESIGN invariant 2): everything here can be recomputed from the
  log. They live in `summaries`, which `ColdStore.prune` clears with the conversation.
- Versioned rows, never rewritten: `put` inserts version = previous + 1 in one
  transaction. Nothing ever UPDATEs a summary row. A write whose `end_position` is
  behind the current version (a slower concurrent refresher) is refused and the
  current version is returned, so the latest version never moves backwards.
- Every sentence keeps the log positions it came from. `put` refuses (ValidationError,
  nothing written) a view whose positions are not inside 0..last position of the
  conversation, a view outside its own range, an unknown kind, or a key that does
  not match the kind.
- A failed refresh never becomes a summary: the previous version stays current and
  the error goes to the separate `summary_errors` table (bounded per view).
- A fold (DESIGN invariant 4) written with a rolling view (`put(..., fold=True)`) is a
  `checkpoints` row at the view's `end_position` holding the view's text, committed in
  the same transaction as the summary row; it deletes nothing.
- Redis, when given, caches only the latest version per view, under keys that share
  the conversation's hash tag `{tm:<escaped id>}` with the hot tier. Cold is the truth:
  a cache write only ever raises the cached version (one Lua script, so two processes
  cannot regress it), entries carry the database's uuid and expire, and any Redis
  error falls back to SQLite. The client is the caller's and is never closed here.
  While the caller says Redis is not usable (`usable`: the hot tier's link is
  degraded, so its read has just waited out Redis's timeout), reads skip the cache and
  do not fill it after a miss, so a call waits for a slow or dead Redis once, not again
  here; writes that keep the cache right (a new version raising it, `invalidate`) are
  still tried. Reads use it again as soon as the caller does.
- A cached view is served only while the log holds the very turn its `end_position`
  names (the entry records that turn's fingerprint, tiers.keys.turn_fingerprint): after
  a backup is restored, the uuid is the same but a view cached from the discarded
  timeline covers turns the log no longer has (it is ahead of the log, or its last turn
  differs). Such an entry is deleted, so the log's own version, perhaps a lower version
  number, is cached in its place. A fingerprint that matches proves every turn the view
  covers is in this log (the timelines agree up to that append).
- A cached view is served only while it is the store's newest row of the view (the same
  version and created_at), read in the statement that reads that turn
  (`ColdLog.turn_and_newest_view`: a hit costs one Redis read and one SQL statement, as
  before). A cache write that failed (Redis down), or one Redis lost (back from older
  data: a restart from its snapshot, a failover to a replica behind), leaves an older
  entry: a miss, whose fill raises it. An entry for a version the store does not hold (a
  restored store: a higher one, or that number made again) is deleted. `put` refusing
  the very version again (or one behind) raises the entry to the store's too. While the
  newest row cannot be read (salvaged), the view is read from the store on every call.
- A stored row that cannot be decoded (`tiers.models.loads_stored`: corrupt, or nested
  past what json decodes; a column or a sentence of the wrong type, or a sentence
  position outside 0..MAX_POSITION; a version, range or count out of range:
  `tiers.dialect.summary_problem`) is logged once, counted once (`salvaged`: distinct
  rows, by conversation, kind, key and version) and skipped; `latest` then
  answers the newest version that decodes, or none, as for a view never written (a
  refresh then writes a new version: `put` is not held back by a version it cannot
  read). A cache entry that cannot be decoded is a miss.

Rendering: `SummaryView.text()` is one sentence per line; a superseded sentence is
prefixed with `SUPERSEDED_PREFIX`. `render()` is the one implementation, and stored
`tokens` are the exact count of that text with the store's TokenCounter, so
summarizers that count `render(sentences)` agree with what is stored.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tiermem.tiers.dialect import SUMMARY_LOOKBACK, SalvagedRows, summary_problem
from tiermem.tiers.errors import ValidationError
from tiermem.tiers.keys import escape_id, hash_tag, turn_fingerprint
from tiermem.tiers.models import MAX_POSITION, TurnRow, loads_stored
from tiermem.tiers.store import ColdLog, SummaryRow

log = logging.getLogger("tiermem.warm")

KINDS: tuple[str, ...] = ("rolling", "constraints", "session")
STATUSES: tuple[str, ...] = ("current", "superseded")
SUPERSEDED_PREFIX = "(superseded) "
MAX_ERROR_CHARS = 2000
ERRORS_KEPT_PER_VIEW = 20
CACHE_TTL_S = 3600
# A turn's created_at at most this far ahead of the sweeper's `now` counts as stamped
# now (0 s waited), not as unknown: clocks of two hosts drift by well under a second
# under NTP, and `now` is read once before a frontier scan that can take seconds while
# turns are appended. Counted unknown, such a stamp fell back to the view's age and a
# current view built 10 minutes ago read "600 s behind, over budget" and was refreshed
# early, an LLM call (review r_c4). The price: a turn stamped within a minute ahead can
# delay its view's seconds budget by that much at most.
FUTURE_STAMP_TOLERANCE_S = 60.0


# ----------------------------------------------------------------------------------
# Schema: `summaries` and `summary_errors` are created by the cold tier's migration
# m010_create_summaries, so every process agrees on one ordered schema whatever it
# imports. (The constraint extract reads load-bearing turns through the cold tier's
# partial index `turns_load_bearing`.)




# ----------------------------------------------------------------------------------
# Values


@dataclass(frozen=True)
class Sentence:
    """One line of a view and the log positions it came from."""

    text: str
    positions: tuple[int, ...]
    status: str = "current"  # or "superseded"
    label: str | None = None  # e.g. the source turn's intent
    # (position, start) of the statements of its cited turns that were already recorded
    # as superseded when the line was written (the summarizer got those turns without
    # them): kept for a line not found in its turn (an abstractive one), whose text
    # cannot show which statement it holds, so a later reader tells a line written
    # before a correction from one written after it (consolidation.views
    # `outdated_views`); empty (and absent from the JSON) otherwise
    seen_superseded: tuple[tuple[int, int], ...] = ()

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"text": self.text, "positions": list(self.positions), "status": self.status}
        if self.label is not None:
            d["label"] = self.label
        if self.seen_superseded:
            d["seen_superseded"] = [list(x) for x in self.seen_superseded]
        return d

    @classmethod
    def from_json(cls, d: Any) -> Sentence:
        if not isinstance(d, dict):
            raise ValueError("sentence is not an object")
        text, positions, status = d.get("text"), d.get("positions"), d.get("status", "current")
        label = d.get("label")
        if not isinstance(text, str) or not isinstance(positions, list) or status not in STATUSES:
            raise ValueError("sentence has the wrong shape")
        if not all(isinstance(p, int) and not isinstance(p, bool) for p in positions):
            raise ValueError("sentence positions are not integers")
        # `put` admits only positions of the log; one past any (written behind its back)
        # would reach SQL as an integer no engine holds
        if not all(0 <= p <= MAX_POSITION for p in positions):
            raise ValueError(f"sentence positions are not within 0..{MAX_POSITION}")
        if label is not None and not isinstance(label, str):
            raise ValueError("sentence label is not a string")
        seen = d.get("seen_superseded", [])
        if not isinstance(seen, list) or not all(
                isinstance(x, list) and len(x) == 2 and all(isinstance(v, int) and not isinstance(v, bool)
                                                             and 0 <= v <= MAX_POSITION for v in x) for x in seen):
            raise ValueError("sentence seen_superseded is not a list of [position, start] pairs")
        return cls(text, tuple(positions), status, label, tuple((x[0], x[1]) for x in seen))


def render_sentence(s: Sentence) -> str:
    return (SUPERSEDED_PREFIX + s.text) if s.status == "superseded" else s.text


def render(sentences: Sequence[Sentence]) -> str:
    """The text of a view: one sentence per line (see module docstring)."""
    return "\n".join(render_sentence(s) for s in sentences)


@dataclass(frozen=True)
class SummaryView:
    """One version of one view. `version` and `tokens` are assigned by `WarmStore.put`."""

    conversation_id: str
    kind: str
    key: str
    version: int
    start_position: int
    end_position: int
    sentences: tuple[Sentence, ...]
    tokens: int
    summarizer: str
    created_at: float

    def text(self) -> str:
        return render(self.sentences)

    def current_text(self) -> str:
        """Only the current sentences (what a prompt that must not see retracted
        constraints should use)."""
        return render([s for s in self.sentences if s.status == "current"])

    def positions(self) -> list[int]:
        """Every log position behind this view, sorted, for re-expansion."""
        return sorted({p for s in self.sentences for p in s.positions})

    def body_json(self) -> str:
        return json.dumps([s.to_json() for s in self.sentences], ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class Frontier:
    """Where a conversation's log and its rolling/constraint views end (`frontier()`)."""

    conversation_id: str
    last_position: int
    last_message_at: float
    created_at: float  # the conversation's: a pruned and re-created id gets a new one
    rolling_end: int | None
    constraints_end: int | None
    seq: int  # the conversation's views_seq when read (`mark_current`)
    checked_through: int  # every view covered the log through here when last marked current


@dataclass(frozen=True)
class Staleness:
    """How far a view is behind the log. `turns_behind` counts positions after the
    view's `end_position` (all of them for a missing view); `seconds_behind` is how
    long the oldest of those has waited (0 when none)."""

    turns_behind: int
    seconds_behind: float
    over_budget: bool

    def severity(self, max_turns: int, max_seconds: float) -> float:
        """max(turns/max_turns, seconds/max_seconds): > 1 means over budget."""
        return max(self.turns_behind / max(1, max_turns), self.seconds_behind / max(1e-9, max_seconds))


def stamped_ahead(at: float, now: float) -> bool:
    """Whether a turn stamped `at` is ahead of `now` by more than
    `FUTURE_STAMP_TOLERANCE_S` (then how long it waited is unknown); one within the
    tolerance counts as stamped now."""
    return at > now + FUTURE_STAMP_TOLERANCE_S


def staleness(
    view: SummaryView | None,
    *,
    last_position: int,
    last_message_at: float,
    max_turns: int,
    max_seconds: float,
    now: float,
    first_uncovered_at: float | None = None,
    turns_behind: int | None = None,
    bound_at: float | None = None,
) -> Staleness:
    """See `WarmStore.staleness`. The one rule for a stamp ahead of `now`: a
    `first_uncovered_at` later than `now` by more than `FUTURE_STAMP_TOLERANCE_S` (a
    client's clock ahead of the server's, its `created_at` taken as given; within the
    tolerance it counts as stamped now, 0 s waited) says nothing of how long the turn
    has waited, so it counts as unknown: the upper bound stands in (now - the view's
    created_at; for a view with no version, now - `bound_at`, the conversation's
    creation or its first turn's stamp, when given). Taken as is it made every such view 0 s behind, never
    over its seconds budget, for as long as the stamp stayed ahead."""
    end = view.end_position if view is not None else -1
    behind = max(0, last_position - end) if turns_behind is None else max(0, turns_behind)
    if first_uncovered_at is not None and stamped_ahead(first_uncovered_at, now):
        first_uncovered_at = None
    if behind == 0:
        seconds = 0.0
    elif first_uncovered_at is not None:
        seconds = max(0.0, now - first_uncovered_at)
    elif view is not None:
        # upper bound: the log moved on some time after the view was made
        seconds = max(0.0, now - view.created_at)
    elif bound_at is not None:
        # upper bound: no turn of it was written before the conversation began
        seconds = max(0.0, now - bound_at)
    else:
        # lower bound: at least the newest message has waited this long
        seconds = max(0.0, now - last_message_at)
    over = behind > 0 and (behind > max_turns or seconds > max_seconds)
    return Staleness(behind, seconds, over)


# ----------------------------------------------------------------------------------
# Redis cache

# Raise the cached version only: KEYS[1] hash; ARGV version, payload, ttl seconds.
_CACHE_SET = """
local cur = redis.call('HGET', KEYS[1], 'v')
if cur and tonumber(cur) >= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'v', ARGV[1], 'j', ARGV[2])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]))
return 1
"""


# ----------------------------------------------------------------------------------
# Store


def check_view_key(kind: str, key: str) -> None:
    if kind not in KINDS:
        raise ValidationError("kind", f"must be one of {KINDS}, got {kind!r}")
    if not isinstance(key, str):
        raise ValidationError("key", "must be a string")
    if kind == "session" and not key:
        raise ValidationError("key", "a session view needs the session id as key")
    if kind != "session" and key:
        raise ValidationError("key", f"a {kind} view has key '', got {key!r}")



class WarmStore:
    """Versioned summary views in the cold database, optionally cached in Redis.

    Thread-safe through the cold store. `redis_client` is the caller's (a
    redis-py Redis or RedisCluster); it is used, never closed.
    """

    def __init__(self, cold: ColdLog, redis_client: Any = None, *, key_prefix: str = "tm",
                 keep_versions: int | None = None, usable: Callable[[], bool] = lambda: True) -> None:
        """`usable()`: whether cache reads may go to Redis now (module docstring)."""
        self.cold = cold
        # versions kept per view (and consolidation folds per conversation); None keeps all
        self.keep_versions = keep_versions
        self.redis = redis_client
        self.usable = usable
        self.key_prefix = key_prefix
        self._salvaged_rows = SalvagedRows()  # (conversation, kind, key, version)
        self.cache_errors = 0
        self._cache_script: Any = None

    @property
    def salvaged(self) -> int:
        """How many distinct stored view rows could not be decoded (this process has met),
        as the cold store counts its rows: one read again is not counted again."""
        return len(self._salvaged_rows)

    def forget(self, conversation_ids: Sequence[str]) -> None:
        """After an erasure or prune: these incarnations' bad rows no longer exist, so they
        leave the count (as the cold store's do)."""
        self._salvaged_rows.forget(conversation_ids)

    # -- decoding ------------------------------------------------------------------------

    def _decode(self, row: Sequence[Any]) -> SummaryView | None:
        conv, kind, key, version, start, end, body, tokens, summarizer, created = row
        try:
            problem = summary_problem(row)  # a column of the wrong type or out of its range
            if problem is not None:
                raise ValueError(problem)
            data = loads_stored(body)  # nested past what json decodes: salvaged, not a RecursionError
            if not isinstance(data, list):
                raise ValueError("body is not a list")
            sentences = tuple(Sentence.from_json(d) for d in data)
            return SummaryView(conv, kind, key, int(version), int(start), int(end), sentences, int(tokens),
                               str(summarizer), float(created))
        except (ValueError, TypeError) as exc:
            # warn the first time; every refresh and read of the view meets the row again
            level = logging.WARNING if self._salvaged_rows.add(conv, kind, key, repr(version)) else logging.DEBUG
            log.log(level, "salvage: skipped summary conversation=%s kind=%s key=%s version=%r: %s",
                    conv, kind, key, version, exc)
            return None

    # -- cache ---------------------------------------------------------------------------

    def cache_key(self, conversation_id: str, kind: str, key: str = "") -> str:
        return f"{hash_tag(self.key_prefix, conversation_id)}:warm:{kind}:{escape_id(key)}"

    def _cache_get(self, conversation_id: str, kind: str, key: str) -> SummaryView | None:
        if self.redis is None or not self.usable():
            return None
        try:
            raw = self.redis.hget(self.cache_key(conversation_id, kind, key), "j")
        except Exception as exc:  # any Redis failure: cold answers
            self.cache_errors += 1
            log.debug("warm cache read failed: %s", exc)
            return None
        if raw is None:
            return None
        try:
            d = loads_stored(raw)  # anyone with access to Redis could have written it
            if d.get("db") != self.cold.db_uuid:
                return None
            sentences = tuple(Sentence.from_json(s) for s in d["sentences"])
            view = SummaryView(conversation_id, kind, key, int(d["version"]), int(d["start"]), int(d["end"]),
                               sentences, int(d["tokens"]), str(d["summarizer"]), float(d["created_at"]))
            tip = d.get("tip")
        except (ValueError, TypeError, KeyError, AttributeError):
            return None
        # the log's turn and the view's newest stored row, in the one statement a hit costs
        turn, newest = self.cold.turn_and_newest_view(conversation_id, view.end_position, kind, key)
        if tip is None or turn is None or tip != turn_fingerprint(turn.content_hash, turn.created_at):
            # derived from another timeline of this log (module docstring), or written
            # before entries named their turn: delete it, or the raise-only cache write
            # would keep refusing the log's own (lower-numbered) version
            self.invalidate(conversation_id, kind, key)
            return None
        if newest != (view.version, view.created_at):
            # not the store's newest row: behind it (its cache write failed, or Redis came
            # back from older data), a miss whose fill raises the entry; or a version the
            # store does not hold as cached (none at all, a higher one, or the same number
            # made again after a restore), deleted, as the raise-only write would refuse
            # the store's own
            if newest is None or newest[0] <= view.version:
                self.invalidate(conversation_id, kind, key)
            return None
        return view

    def _log_tip(self, conversation_id: str, position: int) -> str | None:
        """The log's fingerprint of the turn at `position`; None when it holds none."""
        rows = self.cold.turns_at(conversation_id, [position])
        return turn_fingerprint(rows[0].content_hash, rows[0].created_at) if rows else None

    def _cache_set(self, view: SummaryView) -> None:
        if self.redis is None:
            return
        tip = self._log_tip(view.conversation_id, view.end_position)
        if tip is None:  # the log no longer holds the view's last turn (erased): nothing to cache
            return
        payload = json.dumps({
            "db": self.cold.db_uuid, "version": view.version, "start": view.start_position,
            "end": view.end_position, "tip": tip, "tokens": view.tokens, "summarizer": view.summarizer,
            "created_at": view.created_at, "sentences": [s.to_json() for s in view.sentences],
        }, ensure_ascii=False)
        try:
            cache_key = self.cache_key(view.conversation_id, view.kind, view.key)
            self.redis.eval(_CACHE_SET, 1, cache_key, view.version, payload, CACHE_TTL_S)
            if self.cold.conversation(view.conversation_id) is None:
                # erased since the view was read: the erasure may have deleted its keys
                # before this write (it commits first, then deletes), so delete it here
                self.redis.delete(cache_key)
        except Exception as exc:
            self.cache_errors += 1
            log.debug("warm cache write failed: %s", exc)

    def invalidate(self, conversation_id: str, kind: str, key: str = "") -> None:
        """Drop a cached view (e.g. after prune, when an id may be reused)."""
        if self.redis is None:
            return
        try:
            self.redis.delete(self.cache_key(conversation_id, kind, key))
        except Exception as exc:
            self.cache_errors += 1
            log.debug("warm cache delete failed: %s", exc)

    # -- reads ---------------------------------------------------------------------------

    def latest(self, conversation_id: str, kind: str, key: str = "") -> SummaryView | None:
        """The newest version of a view, or None if it was never written."""
        check_view_key(kind, key)
        cached = self._cache_get(conversation_id, kind, key)
        if cached is not None:
            return cached
        view = self._latest_cold(conversation_id, kind, key)
        if view is not None and self.usable():  # a fill only saves later reads: not worth a wait
            self._cache_set(view)
        return view

    def _latest_cold(self, conversation_id: str, kind: str, key: str) -> SummaryView | None:
        rows = self.cold.latest_summaries(conversation_id, kind, key, SUMMARY_LOOKBACK)
        for r in rows:
            view = self._decode(r)
            if view is not None:
                return view
        return None

    def version(self, conversation_id: str, kind: str, key: str, version: int) -> SummaryView | None:
        """One stored version (versions are immutable)."""
        row = self.cold.summary_version(conversation_id, kind, key, version)
        return self._decode(row) if row is not None else None

    def versions(self, conversation_id: str, kind: str, key: str = "") -> list[int]:
        return self.cold.summary_versions(conversation_id, kind, key)

    def sessions(self, conversation_id: str) -> list[SummaryView]:
        """The latest version of every session view, in order of first position."""
        rows = self.cold.latest_session_summaries(conversation_id)
        out = [v for v in map(self._decode, rows) if v is not None]
        if len(out) < len(rows):  # a newest row did not decode: fall back per key
            have = {v.key for v in out}
            for r in rows:
                if r[2] not in have:
                    v = self._latest_cold(conversation_id, "session", r[2])
                    if v is not None:
                        out.append(v)
            out.sort(key=lambda v: (v.start_position, v.key))
        return out

    def session_keys_page(self, conversation_id: str, *, after: str | None = None,
                          limit: int) -> tuple[list[str], str | None]:
        """A page of the session ids that have a stored view, in order of id: at most
        `limit`, those after the id `after` (None: from the first), and the next page's
        cursor (its last id), None when this page reaches the end. It reads the page's
        entries of the summaries index, never every session's rows (`sessions` reads them
        all), so a conversation of many sessions costs a page what a few do."""
        if limit < 1:
            raise ValidationError("limit", f"must be at least 1, got {limit}")
        keys = self.cold.session_summary_keys(conversation_id, after, limit + 1)  # one more: a next page?
        return (keys[:limit], keys[limit - 1]) if len(keys) > limit else (keys, None)

    def session_ends(self, conversation_id: str) -> dict[str, int]:
        """session id -> end_position of its latest view (cheap; no bodies decoded)."""
        return self.cold.session_summary_ends(conversation_id)

    def errors(self, conversation_id: str, kind: str, key: str = "",
               limit: int = 10) -> list[tuple[str, float]]:
        """Recent refresh errors of a view, newest first: (error, at)."""
        return self.cold.summary_errors(conversation_id, kind, key, limit)

    # -- log-side reads the view maintainer needs ------------------------------------------

    def turn_rows(self, conversation_id: str, positions: Sequence[int]) -> list[TurnRow]:
        """Turn-index rows (labels included) for scattered positions, in log order."""
        out: list[TurnRow] = []
        uniq = sorted(set(positions))
        for i in range(0, len(uniq), 500):
            chunk = uniq[i:i + 500]
            out.extend(self.cold.turns_at(conversation_id, chunk))
        return out

    def load_bearing_turns(self, conversation_id: str, end: int, *, after: int = -1,
                           include: Sequence[int] = ()) -> list[TurnRow]:
        """Load-bearing turns in (after, end], the turns at `include`, and the turns that
        supersede any of them, transitively (a correction is the current value even when
        it is not itself labeled load-bearing). In log order."""
        out = {t.position: t for t in self.cold.load_bearing_between(conversation_id, after, end)}
        out.update((t.position, t) for t in self.turn_rows(conversation_id, [p for p in include if p <= end]))
        frontier = list(out.values())
        while frontier:  # follow chains: A superseded by B, B by C
            nxt = sorted({t.superseded_by for t in frontier
                          if t.superseded_by is not None and t.superseded_by <= end} - set(out))
            frontier = self.turn_rows(conversation_id, nxt) if nxt else []
            out.update((t.position, t) for t in frontier)
        return [out[p] for p in sorted(out)]

    def session_turns(self, conversation_id: str, session_id: str, after: int, end: int) -> list[TurnRow]:
        return self.cold.session_turns(conversation_id, session_id, after, end)

    def frontier(self) -> list[Frontier]:
        """One row per conversation with messages whose views may be behind (appended to
        since they were last marked current, `mark_current`): its last position and the
        end of its rolling and constraint views. Index seeks per such conversation; the
        conversations whose views are current cost nothing."""
        return [Frontier(*r) for r in self.cold.view_frontier()]

    def mark_current(self, f: Frontier) -> bool:
        """Record that every view of `f`'s conversation covered its log through
        `f.last_position` as `frontier()` read it, so the next `frontier()` leaves it out
        until it is appended to again. False (nothing recorded) if it was appended to
        since the read."""
        return self.cold.mark_views_current(f.conversation_id, f.seq, f.last_position)

    def turn_times(self, conversation_id: str, after: int, *, session_id: str | None = None,
                   limit: int | None = None) -> list[tuple[int, str | None, float]]:
        """(position, session id, created_at) of turns after `after`, in log order."""
        return self.cold.turn_times(conversation_id, after, session_id=session_id, limit=limit)

    def created_at(self, conversation_id: str, position: int) -> float | None:
        return self.cold.turn_created_at(conversation_id, position)

    def unlabeled_tail(self, conversation_id: str, after: int) -> list[tuple[int, float]]:
        """Unlabeled turns after `after`: (position, created_at), in log order."""
        return self.cold.unlabeled_tail(conversation_id, after)

    # -- writes --------------------------------------------------------------------------

    def put(self, view: SummaryView, *, fold: bool = False) -> SummaryView:
        """Store `view` as the next version of its view, in one transaction, and return
        it with its version and exact token count. With `fold`, the same transaction
        writes a checkpoint at `end_position` holding the view's text.

        If the current version already covers more of the log than `view`, nothing is
        written and the current version is returned."""
        return self.put_stored(view, fold=fold)[0]

    def put_stored(self, view: SummaryView, *, fold: bool = False) -> tuple[SummaryView, bool]:
        """`put`, and whether this call stored the version it returns (False: the
        current version, another writer's perhaps, returned as it was): what a sweep
        counts as its own refresh (consolidation.views `sweep_refresh`)."""
        check_view_key(view.kind, view.key)
        if view.start_position < 0 or view.end_position < view.start_position:
            raise ValidationError(
                "end_position", f"range {view.start_position}..{view.end_position} is empty")
        for s in view.sentences:
            if not s.positions:
                raise ValidationError("sentences", f"sentence {s.text[:40]!r} has no source positions")
            if s.status not in STATUSES:
                raise ValidationError("sentences", f"status must be one of {STATUSES}, got {s.status!r}")
            if "\n" in s.text:
                raise ValidationError("sentences", "a sentence is one line (no newline)")
            if min(s.positions) < view.start_position or max(s.positions) > view.end_position:
                raise ValidationError(
                    "sentences",
                    f"positions {list(s.positions)} fall outside the view's range "
                    f"{view.start_position}..{view.end_position}",
                )
        text = view.text()
        if fold and not text:
            raise ValidationError("fold", "an empty summary cannot stand in for turns")
        tokens = self.cold.tokens.count(text)
        body = view.body_json()
        def keep_current(prev: SummaryRow) -> bool:
            current = self._decode(prev)
            if current is not None:
                log.info("warm: refused a write behind the current version (%s %s %s v%s)",
                         view.conversation_id, view.kind, view.key, prev[3])
            return current is not None

        version, prev = self.cold.put_summary(
            (view.conversation_id, view.kind, view.key, 0, view.start_position, view.end_position, body, tokens,
             view.summarizer, view.created_at),
            fold_text=text if fold else None, keep_versions=self.keep_versions, keep_current=keep_current)
        if prev is not None:
            current = self._decode(prev)
            assert current is not None  # keep_current accepted it
            # the cache may lag the store (a cache write that failed, Redis back from older
            # data): the very version again is the moment to raise it (a no-op if it is there)
            self._cache_set(current)
            return current, False
        stored = replace(view, version=version, tokens=tokens)
        self._cache_set(stored)
        return stored, True

    def record_error(self, conversation_id: str, kind: str, key: str, error: str) -> None:
        """Record a failed refresh; the previous version stays current. Keeps the
        newest `ERRORS_KEPT_PER_VIEW` errors per view."""
        check_view_key(kind, key)
        text = str(error)[:MAX_ERROR_CHARS] or "unknown error"
        self.cold.record_summary_error(conversation_id, kind, key, text, keep=ERRORS_KEPT_PER_VIEW)

    # -- freshness -----------------------------------------------------------------------

    def staleness(
        self,
        view: SummaryView | None,
        *,
        last_position: int,
        last_message_at: float,
        max_turns: int,
        max_seconds: float,
        now: float,
        first_uncovered_at: float | None = None,
    ) -> Staleness:
        """How far `view` (None: never written) is behind a log whose last position is
        `last_position`. Turns behind = last_position - end_position. Seconds behind =
        now - `first_uncovered_at` (when the oldest message the view lacks was
        written); without it, or when it is later than `now` by more than
        `FUTURE_STAMP_TOLERANCE_S` (a client's clock ahead),
        the view's age bounds it (now - created_at), and for a missing view
        now - `last_message_at` is used. Over budget when some turn is
        uncovered and turns > max_turns or seconds > max_seconds."""
        if not (max_turns >= 0 and max_seconds >= 0 and math.isfinite(now)):
            raise ValidationError("staleness", "budgets must be >= 0 and now finite")
        return staleness(view, last_position=last_position, last_message_at=last_message_at,
                         max_turns=max_turns, max_seconds=max_seconds, now=now,
                         first_uncovered_at=first_uncovered_at)

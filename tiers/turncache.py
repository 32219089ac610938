"""An in-process copy of each conversation's turn facts and vectors, for the planner.

The planner scores every turn of a conversation for each query (exact cosine to all of
them, then neighbour, session and date context, see planner/rank.py). That needs all of
a conversation's vectors at once: reading 10k vectors out of vec0 per query would cost
more than the scoring, so this cache keeps them as one float32 matrix per conversation,
next to the positions, token counts, times and session groups.

Invariants:
- Derived, never authoritative. Everything here is re-read from the cold log and nothing
  is written back; a miss or a reload costs time, never a turn.
- It follows the log's shape: on every `get` a census (the first turn's id and time,
  the last position) says whether the conversation only grew (read the new turns), did
  not change (nothing to read) or was emptied, or pruned and re-created (its first turn
  is another row: reload it whole). The log is append-only, so nothing else can happen
  to a conversation's turns. A conversation pruned by another process and re-created
  between two calls with a first turn of the same id and the same time to the
  microsecond would pass; this process's own prune drops the entry.
- A turn stored before its vector is re-read until the vector exists; until then its
  dense score is "unknown", never a stale or zero-similarity guess.
- Bounded: past `max_bytes`, least recently used conversations are dropped. A conversation
  larger than `OVERSIZE_SHARE` of `max_bytes` evicts none of the others: it is kept past
  its own call only until another conversation's call stores its entry (which drops it
  first), so the memory held past `max_bytes` is at most that one entry, held by its
  caller during its load anyway; the next call on it after another conversation's reads
  it whole again (seconds at 50k turns). It used to be the newest entry kept whatever its
  size, each load of it evicting every other conversation (a 114 MiB one against
  turn_cache_mb=32 left the cache holding only itself, every other tenant reloading;
  scale review of 2026-12-07). One warning per conversation per cache names
  `turn_cache_mb` and the size it needs; `stats` counts such loads (`oversize_loads`).
- Thread-safe: one lock guards the map of entries, held only to look up, insert and
  trim; a conversation's own lock is held while it is read from the log and derived, so
  the first call on a 20,000-turn conversation (seconds: its dates and keyword postings
  derived per turn) delays calls on that conversation only, not every other tenant's
  (it did: 3.5-7.8 s for another conversation's context(), audit of 2026-12-05). The
  log is read in pages of `FACTS_PAGE_TURNS` turns, each its own read: the store's lock
  (every tenant's reads and writes wait on it) is held a page at a time, not for the
  whole conversation. Turns appended between two pages are read by the later page; a
  conversation emptied or re-created meanwhile is caught by the next `get`'s census. An
  entry read while it was dropped (an erasure's `drop`) is handed out but not kept. A
  turn-index row the store cannot use is not in the table (the store salvages it), as a
  turn not indexed yet; an entry is known by the census's first turn all the same. A
  `TurnTable` handed out is a consistent snapshot (arrays are views of append-only
  buffers; rows below `n` are written before `n` moves past them, and a vector row is
  written before its `has_vec` flag).
- Told periods (`derive`) depend on the user's time zone ("yesterday" is another day in
  Tokyo than in Los Angeles): a table handed out for a zone holds only spans derived in
  that zone. Each turn is derived at load in the cache's own zone (`zone`, the config's);
  a call in another zone derives, on its first use of the conversation, only the turns
  whose text names a time (`derive`'s flag, kept per turn: whether a text names one does
  not depend on the zone, whether what it names falls inside the accepted years does),
  reading their texts back from the log, and from then on each loaded turn that names a
  time in that zone as well; a turn that names none has no period in any zone. At most
  `MAX_ZONES_PER_CONVERSATION` other zones are kept per conversation, least recently used
  dropped (derived, re-read on their next use).
"""

from __future__ import annotations

import logging
import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tiermem.tiers.lexical import LexicalIndex
from tiermem.tiers.store import ColdLog
from tiermem.tiers.zones import UTC_NAME, Zone
from tiermem.tiers.zones import zone as zone_named

DEFAULT_TURN_CACHE_MB = 256  # the planner's in-process copy of conversations' vectors
BYTES_PER_MB = 1024 * 1024
DEFAULT_TURN_CACHE_BYTES = DEFAULT_TURN_CACHE_MB * BYTES_PER_MB
# An entry above this share of `max_bytes` evicts no other conversation (module docstring):
# half, so that such a conversation still leaves room for the rest of the tenants
OVERSIZE_SHARE = 0.5
# A conversation without session ids is cut into groups where the talk paused this long,
# or after this many turns: the planner's session context needs some notion of episode.
SESSION_GAP_S = 30 * 60.0
MAX_GROUP_TURNS = 50
# turns without a vector a get() looks at again (whether they have one now), first in log
# order: a caller that embedded more gets again once per this many (Memory._context)
PENDING_RECHECK_TURNS = 512
# turns per read of the log while a conversation loads: the store's lock is held about
# 50 ms per 1,000 turns (vectors and texts included), which bounds what one tenant's first
# call costs the others
FACTS_PAGE_TURNS = 1000
MAX_NAMES = 64  # speaker names kept per conversation (a group chat has a few, not hundreds)
# A derived per-turn period (planner.timeline.told): (text, created, the user's zone) ->
# ((start, end) or None, whether the text names a time at all: the same in every zone)
Derive = Callable[[str | None, float, Zone], tuple[tuple[float, float] | None, bool]]
# zones other than the cache's own whose told periods are kept per conversation: a service's
# users of one conversation are in one or a few zones; 16 bytes a turn each
MAX_ZONES_PER_CONVERSATION = 8
log = logging.getLogger("tiermem.turncache")
FactRow = tuple[int, int, int, float, str | None, bytes | None, str | None, str | None]  # pending vectors re-read per call (the rest on the next calls)


@dataclass(frozen=True)
class TurnTable:
    """One conversation's turns, in log order, as arrays (a snapshot)."""

    conversation_id: str
    positions: np.ndarray  # int64
    tokens: np.ndarray  # int64, the turn index's message tokens
    created: np.ndarray  # float64, POSIX seconds
    groups: np.ndarray  # int64 episode id: the session, or a time-gap group
    vectors: np.ndarray | None  # float32 (n, dim), unit rows; zeros where has_vec is False
    has_vec: np.ndarray  # bool
    names: frozenset[str] = frozenset()  # the `name`s speakers carry in this conversation
    lexical: LexicalIndex | None = None  # keyword postings of (at least) these turns
    # the period each turn tells of (`derive`, NaN: none), POSIX seconds; None without `derive`
    told_start: np.ndarray | None = None
    told_end: np.ndarray | None = None
    # each turn's speaker as an index into `speaker_names` (first seen first), -1: none or past MAX_NAMES
    speaker: np.ndarray | None = None
    speaker_names: tuple[str, ...] = ()
    # bool per turn: its text holds a question mark (the turn after it may be the answer)
    asks: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.positions.shape[0])

    def index_of(self, position: int) -> int | None:
        n = len(self)
        if n:
            # positions are dense from the first one unless the log has gaps
            i = position - int(self.positions[0])
            if 0 <= i < n and int(self.positions[i]) == position:
                return i
        i = int(np.searchsorted(self.positions, position))
        return i if i < len(self) and int(self.positions[i]) == position else None

    def bm25(self, query: str, k: int) -> list[tuple[int, float]]:
        """(position, bm25) of the k best keyword matches, best first (lower is better,
        as FTS5's); empty without an index."""
        if self.lexical is None:
            return []
        return [(int(self.positions[i]), s) for i, s in self.lexical.search(query, k, len(self))]

    def tokens_before(self, position: int) -> int:
        """Token total of the turns before `position` (the tail's stable grid)."""
        i = int(np.searchsorted(self.positions, position))
        return int(self.tokens[:i].sum())


class _Zoned:
    """A conversation's told periods derived in a zone other than the cache's own."""

    def __init__(self, tz: Zone, capacity: int) -> None:
        self.zone = tz
        self.start = np.full(capacity, np.nan)
        self.end = np.full(capacity, np.nan)
        self.n = 0  # turns derived so far: the entry's first n

    def grow(self, capacity: int, n: int) -> None:
        for name in ("start", "end"):
            new = np.full(capacity, np.nan)
            new[:n] = getattr(self, name)[:n]
            setattr(self, name, new)


class _Entry:
    """Capacity-doubling buffers behind a conversation's snapshots."""

    def __init__(self, conversation_id: str, derive: Derive | None = None, zone: Zone | None = None) -> None:
        self.conversation_id = conversation_id
        self.derive = derive
        self.zone = zone if zone is not None else zone_named(UTC_NAME)  # the cache's own (derived at load)
        # zone name -> periods derived in it (TurnCache.get with another zone), least recently used first
        self.zoned: OrderedDict[str, _Zoned] = OrderedDict()
        self.n = 0
        self.last = -1
        self.first: tuple[int, float] | None = None  # (id, created_at) of the first turn
        cap = 64
        self.positions = np.zeros(cap, dtype=np.int64)
        self.tokens = np.zeros(cap, dtype=np.int64)
        self.created = np.zeros(cap, dtype=np.float64)
        self.groups = np.zeros(cap, dtype=np.int64)
        self.has_vec = np.zeros(cap, dtype=bool)
        self.told_start = np.full(cap, np.nan)
        self.told_end = np.full(cap, np.nan)
        self.speaker = np.full(cap, -1, dtype=np.int16)
        self.asks = np.zeros(cap, dtype=bool)
        # bool per turn: its text names a time (`derive`'s flag), the turns derived again in another zone
        self.tells = np.zeros(cap, dtype=bool)
        self.speaker_names: dict[str, int] = {}
        self.vectors: np.ndarray | None = None
        self.pending: list[int] = []  # indexes whose vector has not been stored yet
        # vectors of two widths in the log itself: every turn kept, none scored by meaning
        self.no_dense = False
        self.names: set[str] = set()
        self.lexical = LexicalIndex()
        self._group = -1
        self._group_session: str | None = None
        self._group_len = 0
        self._group_last_time = 0.0

    @property
    def capacity(self) -> int:
        return int(self.positions.shape[0])

    def nbytes(self) -> int:
        vec = 0 if self.vectors is None else self.vectors.nbytes
        zoned = len(self.zoned) * self.capacity * 8 * 2
        return vec + zoned + self.capacity * (8 * 6 + 2 + 1 + 1) + self.lexical.nbytes()

    def _grow(self, need: int) -> None:
        cap = self.capacity
        if need <= cap:
            return
        while cap < need:
            cap *= 2
        fill = {"told_start": np.nan, "told_end": np.nan, "speaker": -1}
        for name in ("positions", "tokens", "created", "groups", "has_vec", "told_start", "told_end", "speaker",
                     "asks", "tells"):
            old = getattr(self, name)
            new = np.full(cap, fill.get(name, 0), dtype=old.dtype)
            new[: self.n] = old[: self.n]
            setattr(self, name, new)
        if self.vectors is not None:
            nv = np.zeros((cap, self.vectors.shape[1]), dtype=np.float32)
            nv[: self.n] = self.vectors[: self.n]
            self.vectors = nv
        for z in self.zoned.values():
            z.grow(cap, z.n)

    def _set_vector(self, i: int, blob: bytes) -> bool:
        v = np.frombuffer(blob, dtype=np.float32)
        if self.vectors is None:
            self.vectors = np.zeros((self.capacity, v.shape[0]), dtype=np.float32)
        if v.shape[0] != self.vectors.shape[1]:
            return False  # another model's vectors: the caller reloads the whole entry
        self.vectors[i] = v
        self.has_vec[i] = True
        return True

    def _group_of(self, session: str | None, created: float) -> int:
        if session is not None:
            if self._group < 0 or session != self._group_session:
                self._group += 1
                self._group_len = 0
        elif (self._group < 0 or self._group_session is not None or created - self._group_last_time > SESSION_GAP_S
              or self._group_len >= MAX_GROUP_TURNS):
            self._group += 1
            self._group_len = 0
        self._group_session = session
        self._group_len += 1
        self._group_last_time = created
        return self._group

    def add(self, rows: list[FactRow]) -> bool:
        """Append rows in log order; False when a vector does not fit (reload)."""
        self._grow(self.n + len(rows))
        texts: list[str | None] = []
        try:
            for _pid, pos, toks, created, session, blob, name, text in rows:
                if name and len(self.names) < MAX_NAMES:
                    self.names.add(name)
                i = self.n
                if name and (name in self.speaker_names or len(self.speaker_names) < MAX_NAMES):
                    self.speaker[i] = self.speaker_names.setdefault(name, len(self.speaker_names))
                self.positions[i] = pos
                self.tokens[i] = toks
                self.created[i] = created
                self.groups[i] = self._group_of(session, created)
                self.asks[i] = text is not None and "?" in text
                if self.derive is not None:
                    told, tells = self.derive(text, created, self.zone)
                    self.tells[i] = tells
                    if told is not None:
                        self.told_start[i], self.told_end[i] = told
                    for z in self.zoned.values():
                        if z.n == i:  # in step (a zone is backfilled whole before it is kept)
                            # a text that names no time has no period in any zone
                            told = self.derive(text, created, z.zone)[0] if tells else None
                            if told is not None:
                                z.start[i], z.end[i] = told
                            z.n = i + 1
                if self.no_dense:
                    pass
                elif blob is not None:
                    if not self._set_vector(i, blob):
                        return False
                else:
                    self.pending.append(i)
                texts.append(text)
                self.n = i + 1
                self.last = pos
            return True
        finally:
            self.lexical.add_many(texts)  # the keyword index holds exactly the first n turns

    def fill(self, rows: list[FactRow]) -> bool:
        """Store vectors that arrived for pending turns; False when one does not fit."""
        got: set[int] = set()
        by_pos = {int(self.positions[i]): i for i in self.pending}
        for _i, pos, _t, _c, _s, blob, _n, _x in rows:
            i = by_pos.get(pos)
            if i is not None and blob is not None:
                if not self._set_vector(i, blob):
                    return False
                got.add(i)
        if got:
            self.pending = [i for i in self.pending if i not in got]
        return True

    def snapshot(self, zoned: _Zoned | None = None) -> TurnTable:
        """The table; `zoned`: with the told periods derived in that zone."""
        n = self.n
        start, end = (self.told_start, self.told_end) if zoned is None else (zoned.start, zoned.end)
        return TurnTable(
            self.conversation_id,
            self.positions[:n],
            self.tokens[:n],
            self.created[:n],
            self.groups[:n],
            None if self.vectors is None else self.vectors[:n],
            self.has_vec[:n],
            frozenset(self.names),
            self.lexical,
            start[:n] if self.derive is not None else None,
            end[:n] if self.derive is not None else None,
            self.speaker[:n],
            tuple(self.speaker_names),
            self.asks[:n],
        )


class TurnCache:
    """Read-through, size-bounded cache of `TurnTable`s over one cold store (`ColdLog`).

    It does not own the store: closing the store is its owner's business.
    """

    def __init__(self, cold: ColdLog, *, max_bytes: int = DEFAULT_TURN_CACHE_BYTES,
                 derive: Derive | None = None, zone: str = UTC_NAME) -> None:
        self.cold = cold
        self.derive = derive  # computed per turn as it is loaded: derived, rebuilt on every reload
        self.zone = zone  # the zone `derive` runs in at load (Config.timezone); others on demand
        self._zone = zone_named(zone)  # ValueError for an unknown name
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()  # the map of entries (and the per-conversation locks)
        # conversation -> (its lock, callers holding or waiting for it): one per
        # conversation in use, removed when its last caller leaves
        self._conv_locks: dict[str, tuple[threading.Lock, int]] = {}
        # conversations dropped while a caller held their lock: that caller's entry,
        # read across the drop (an erasure forgetting it), is handed out but not kept
        self._dropped: set[str] = set()
        self.reloads = 0
        self.loads = 0  # conversations read whole from the log (not held here, or reloaded)
        self.oversize_loads = 0  # of those, entries past OVERSIZE_SHARE of max_bytes
        self._oversize: str | None = None  # the one kept entry past OVERSIZE_SHARE, if any
        self._warned: set[str] = set()  # oversize conversations already logged (once each)

    def holds(self, conversation_id: str) -> bool:
        """Whether the conversation's table is kept here (its next `get` reads only the turns
        appended since, not the whole conversation)."""
        with self._lock:
            return conversation_id in self._entries

    def _conversation_lock(self, conversation_id: str, delta: int) -> threading.Lock:
        with self._lock:
            lock, users = self._conv_locks.get(conversation_id) or (threading.Lock(), 0)
            if users + delta:
                self._conv_locks[conversation_id] = (lock, users + delta)
            else:
                self._conv_locks.pop(conversation_id, None)
                self._dropped.discard(conversation_id)  # nobody left to read it
            return lock

    def get(self, conversation_id: str, zone: str | None = None) -> TurnTable:
        """The conversation as the log holds it now (an empty table when it has no turns),
        its told periods derived in `zone` (an IANA name; None: the cache's own)."""
        tz = None if zone is None or zone == self.zone else zone_named(zone)  # refused before any read
        lock = self._conversation_lock(conversation_id, +1)
        try:
            with lock:
                return self._get(conversation_id, (zone, tz) if zone is not None and tz is not None else None)
        finally:
            self._conversation_lock(conversation_id, -1)

    def _get(self, conversation_id: str, other: tuple[str, Zone] | None = None) -> TurnTable:
        """`get`, under the conversation's lock: only this thread changes its entry."""
        census = self.cold.turn_census(conversation_id)
        first, last = (None, -1) if census is None else ((census[0], census[1]), census[2])
        with self._lock:
            self._dropped.discard(conversation_id)
            e = self._entries.get(conversation_id)
            if e is not None and e.n and (first != e.first or last < e.last):
                e = None  # emptied, shrank, or pruned and re-created: reload
                self.reloads += 1
        # read and derived outside the map's lock: other conversations' calls go on
        loaded = e is None  # read whole from the log by this call
        if e is None:
            e = _Entry(conversation_id, self.derive, self._zone)
        ok = True
        if last > e.last:
            ok = self._read_after(e)
        if ok and e.pending and self.cold.embedder is not None:
            want = [int(e.positions[i]) for i in e.pending[:PENDING_RECHECK_TURNS]]
            ok = e.fill(self.cold.turn_facts(conversation_id, positions=want))
        if not ok:
            with self._lock:
                self.reloads += 1
            loaded = True
            e = _Entry(conversation_id, self.derive, self._zone)
            if not self._read_after(e):  # mixed dimensions in the log itself: no dense scores
                e = _Entry(conversation_id, self.derive, self._zone)
                e.no_dense = True
                self._read_after(e)
        if first is not None and e.n:
            # the census's first turn, not the first one read: a first row the index cannot
            # use is left out of the table, and must not make every call reload it
            e.first = first
        zoned = self._zoned(e, *other) if other is not None and self.derive is not None else None
        with self._lock:
            if conversation_id in self._dropped:  # dropped meanwhile: not kept
                self._dropped.discard(conversation_id)
                self._entries.pop(conversation_id, None)
            else:
                self._store(conversation_id, e, loaded)
        return e.snapshot(zoned)

    def _zoned(self, e: _Entry, name: str, tz: Zone) -> _Zoned:
        """`e`'s told periods in zone `name`, derived now for the turns not derived in it
        yet: only those whose text names a time (`_Entry.tells`), their texts read back from
        the log a page at a time. Under the conversation's lock."""
        z = e.zoned.get(name)
        if z is None:
            z = _Zoned(tz, e.capacity)
            while len(e.zoned) >= MAX_ZONES_PER_CONVERSATION:
                e.zoned.popitem(last=False)
        e.zoned[name] = z
        e.zoned.move_to_end(name)
        if z.n < e.n and self.derive is not None:
            lo, n = z.n, e.n
            # a text that names no time has no period in any zone: only the others are derived
            at = {int(e.positions[i]): int(i) for i in lo + np.flatnonzero(e.tells[lo:n])}
            todo = list(at)
            for k in range(0, len(todo), FACTS_PAGE_TURNS):
                # the very text the load derived from (the keyword index's), not the bodies
                for position, text in self.cold.indexed_texts(e.conversation_id, todo[k:k + FACTS_PAGE_TURNS]).items():
                    i = at[position]
                    told = self.derive(text, float(e.created[i]), tz)[0]
                    if told is not None:
                        z.start[i], z.end[i] = told
            z.n = n
        return z

    def _read_after(self, e: _Entry) -> bool:
        """Add the turns after `e.last` to `e`, a page per read; False when a vector does not
        fit (`_Entry.add`)."""
        while True:
            page = self.cold.turn_facts(e.conversation_id, after=e.last, limit=FACTS_PAGE_TURNS)
            if not e.add(page):
                return False
            if len(page) < FACTS_PAGE_TURNS:
                return True

    def _store(self, conversation_id: str, e: _Entry, loaded: bool) -> None:
        """Keep `e` as the newest entry and trim to `max_bytes`; under the map's lock.
        `loaded`: this call read it whole from the log."""
        size = e.nbytes()
        oversize = size > self.max_bytes * OVERSIZE_SHARE
        if loaded:
            self.loads += 1
            self.oversize_loads += oversize
        if self._oversize is not None and self._oversize != conversation_id:
            # another conversation needs the room: the oversize entry goes first
            self._entries.pop(self._oversize, None)
            self._oversize = None
        self._entries[conversation_id] = e
        self._entries.move_to_end(conversation_id)
        if oversize:
            self._oversize = conversation_id  # not counted against the others' room
            self._warn_oversize(conversation_id, size)
        elif self._oversize == conversation_id:
            self._oversize = None  # the budget was raised past it (not today: fixed per cache)
        self._trim()

    def _warn_oversize(self, conversation_id: str, size: int) -> None:
        if conversation_id in self._warned:
            return
        self._warned.add(conversation_id)
        need_mb = math.ceil(size / OVERSIZE_SHARE / BYTES_PER_MB)
        log.warning("conversation %r needs %.0f MiB of the turn cache, more than %.0f%% of turn_cache_mb=%g: it "
                    "evicts no other conversation and is read whole from the log again on its next call after "
                    "another conversation's (seconds for tens of thousands of turns); turn_cache_mb=%d or more "
                    "keeps it", conversation_id, size / BYTES_PER_MB, OVERSIZE_SHARE * 100,
                    self.max_bytes / BYTES_PER_MB, need_mb)

    def _trim(self) -> None:
        """Drop the least recently used entries past `max_bytes`, the oversize one not
        counted (it is dropped by the next other conversation's `_store` instead)."""
        kept = [c for c in self._entries if c != self._oversize]
        total = sum(self._entries[c].nbytes() for c in kept)
        for conv in kept:
            if total <= self.max_bytes:
                break
            total -= self._entries.pop(conv).nbytes()

    def drop(self, conversation_id: str | None = None) -> None:
        """Forget one conversation, or all of them."""
        with self._lock:
            if conversation_id is None:
                self._entries.clear()
                self._oversize = None
                self._dropped.update(self._conv_locks)
            else:
                self._entries.pop(conversation_id, None)
                if self._oversize == conversation_id:
                    self._oversize = None
                if conversation_id in self._conv_locks:
                    self._dropped.add(conversation_id)

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"conversations": len(self._entries), "bytes": sum(e.nbytes() for e in self._entries.values()),
                    "reloads": self.reloads, "loads": self.loads, "oversize_loads": self.oversize_loads}

"""Epoch state: what the planner sent last time for a conversation, so that the next
context can extend it instead of rebuilding it (DESIGN invariant 6).

Within an epoch the context is append-only: the previous call's messages stay as they
were, byte for byte, and the next call appends the log turns that arrived since, the
turns retrieved for its own query that are not shown yet, and its latest user message.
A provider's prompt cache then serves the whole previous context. When the room left
cannot hold what the call needs, when a pin shown as current stops being current, when
a shown summary line leaves its view, or when the caller changes the budget, the
system prompt or the time zone (the dates shown are another clock's), a new epoch starts: the context is rebuilt from the stable layers (one
planned cache miss, reported in the plan with its reason). So does a call that comes longer
after the previous one than a provider keeps a prompt cache (`PlannerSettings.cache_ttl_s`,
by the latest created_at of the log messages the calls read, a clock that never goes
backwards and that a stamp more than a day ahead of the wall clock moves only to the wall
clock: `EpochState.at`, planner.build `_log_time`): every token is
a miss then anyway, and a new epoch is smaller and fresher than the old one extended.

Invariants:
- The state is derived: losing it (an expiry, the LRU dropping a conversation, a
  restart without the hot tier) costs one new epoch, never a wrong context.
- With a hot tier it is shared by every process on that Redis (`RedisEpochs`), so the
  turns of one conversation that a load balancer spreads over several processes, or
  that straddle a restart, extend one lineage: each process extends the context the
  previous call sent, whichever process made it. Without one, or while Redis fails, each
  process keeps its own (`EpochCache`, which `RedisEpochs` also fills as its fallback).
  Two processes planning one conversation at once: the last writer wins, and either
  context is one a single process could have built (the call that extends a state
  re-checks what it presents as current, below).
  Of this process's copy and the shared one, the later written is used (`written_at`,
  the writer's wall clock): a copy kept while Redis failed does not outlive a newer
  shared state, whatever the epochs' numbers.
- The shared copy holds message text, so it is one more key under the conversation's
  hash tag (tiers.keys): erasure deletes it with the hot set, or later when Redis was
  unreachable (the deferred purge). A state is written only beside a live hot set of the
  conversation, and after writing it the writer checks the log still holds the
  conversation (deleting the key if not): an erasure commits before it deletes, so either
  its deletion runs after the write, or the writer sees it. A call that raced an erasure
  does not leave its text behind.
- A state that shows turns of other conversations (namespace recall) holds their text
  too: before writing it, the writer adds its conversation to each shown one's
  `SHOWN_IN_SUFFIX` set (under the shown conversation's hash tag, so erasure deletes the
  set with its keys; no text, only keys), and after writing it checks the log still holds
  every one of them. The erasure of a conversation, in the erasing process (or its
  deferred purge), reads that set before deleting the tag's keys and deletes each listed
  state that shows the erased turns (`drop_showing`): the same two-sided order as above,
  so no shared state keeps an erased turn past the erasure's return (or Redis's
  recovery). The set lives as long as the states it lists (the idle TTL, and
  `SHOWN_IN_TTL_MARGIN_MS` more, since it is written first). A writer whose check finds
  a shown conversation erased takes its own listing out of that one's set too
  (`_unlist`): a listing added after the erasure deleted the set re-creates it, and
  with no idle TTL (`hot_idle_ttl_s = 0`) it would name the erased conversation's key
  in Redis for good; so does a writer whose own conversation was erased before its
  write (the script refuses it) with its listings under the shown ones. The same
  two-sided order: the erasure deletes the set after its commit, the writer checks after
  its listing.
- The shared copy costs ~7 bytes of Redis per context token and expires after the hot
  tier's idle TTL (`hot_idle_ttl_s`). A state over `EPOCH_STATE_MAX_BYTES`, or one JSON
  cannot carry, stays in the process that built it: Redis gets a marker without text
  instead, so another process starts a new epoch saying why rather than extending an
  older state. The JSON is ASCII (a lone surrogate of an older row travels as `\\uXXXX`).
- A state records the fingerprint of the log turn at its `read_position`
  (tiers.keys.turn_fingerprint), checked with one index seek before it is extended: a
  state from another timeline of the log (a backup restored under a running Redis, or
  a process that outlived the restore) is a missing state, never extended.
- Reading the shared copy never raises: a value that is not a state this database wrote
  (another layout, garbled, out of range) is a missing state.
- It is keyed by the conversation and an incarnation stamp (the first turn's position
  and time), so a conversation pruned and created again under the same id never
  continues an epoch of its predecessor.
- Nothing in it is presented as current unless the call that extends it has checked
  that it still is (pins, summary lines).
- What arrived since is what the log holds past the newest position the previous call
  read (`read_position`), not past the newest one its context shows (`last_position`):
  a turn the previous context left out for room is not new, so a call with nothing new
  extends the previous context by what its query needs and nothing else (the same call
  again gives the same context: a rebuild is a fixed point, not one side of a cycle).
  Once something new arrives, the appended turns start right after `last_position`, so
  the raw tail stays contiguous (a tool result is never appended without its call).
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from tiermem.planner.plan import PlanItem
from tiermem.tiers.models import loads_stored
from tiermem.tiers.zones import UTC_NAME

if TYPE_CHECKING:
    from tiermem.tiers.hot import HotTier

log = logging.getLogger("tiermem.epoch")

EPOCH_CACHE_CONVERSATIONS = 1024  # conversations whose last context is kept (~4 bytes a token each)
# The shared copy's layout; a copy of another (an older or newer process during a rolling
# deploy) is ignored: one new epoch, not a misread state
STATE_FORMAT = 3  # 2: the read turn's fingerprint, the write time, the withheld marker; 3: the call's log time
# a state's fields (state_json); one fewer: written before `cached` was kept (read with
# none), which a process of that version reads as no state (a new epoch) in return
STATE_FIELDS = 18
EPOCH_KEY_SUFFIX = ":epoch"  # after the conversation's hash tag (tiers.keys)
# After a Redis failure the shared copy is left alone this long: a call whose read failed
# must not wait out the timeout again on its write, nor every later call while Redis is down
REDIS_RETRY_AFTER_S = 5.0
# The most a state takes in Redis, in bytes of JSON (~7 bytes per context token: about a
# 36,000-token context). Past it the state stays in the process that built it, so one
# conversation at a large budget holds no more than this of Redis's memory.
EPOCH_STATE_MAX_BYTES = 256 * 1024
# The marker written in place of a state kept in process only; its size field for a state
# that JSON could not carry at all
WITHHELD = "withheld"
# why a new epoch starts where this process dropped the previous state, which showed
# turns of a conversation erased or pruned since (`EpochCache.drop_local`)
SHOWED_ERASED = "the previous context showed turns of another conversation that was erased or pruned since"
UNENCODABLE = -1
# after a shown conversation's hash tag: the set of the conversation keys whose shared
# states show its turns (namespace recall), read by its erasure (`drop_showing`)
SHOWN_IN_SUFFIX = ":shownin"
# how much longer than a state the set listing it lives: it is written before the state
# (whose TTL starts at its own write), so a slow write of the state still expires first
SHOWN_IN_TTL_MARGIN_MS = 60_000

# The segments of a context that show log turns raw, in log order (the tail, and the
# user message an extension keeps in place as a tail turn): a correction that arrived
# after one of them follows it in the same order, as a rebuilt context's tail shows it
# too, so a statement of theirs superseded since ends no epoch (a pinned, summary or
# retrieved line presented out of order does).
RAW_KINDS = frozenset({"tail", "latest"})


@dataclass(frozen=True)
class EpochKey:
    """What must not change for a context to extend the previous one."""

    budget: int
    system: str
    stamp: tuple[int, float] | None  # first turn's position and time: the incarnation
    namespace_recall: bool
    timezone: str = UTC_NAME  # the user's zone: the context's dates and headings are its clock's


@dataclass(frozen=True)
class Segment:
    """One message of a context, its layer (planner.plan.LAYERS) and the plan items it shows."""

    kind: str
    message: dict[str, Any]
    items: tuple[PlanItem, ...] = ()


@dataclass(frozen=True)
class EpochState:
    key: EpochKey
    epoch: int
    calls: int
    segments: tuple[Segment, ...]  # the context sent, message by message
    pinned: frozenset[int]  # positions in the pinned block, presented as current
    summary_lines: frozenset[str]  # lines of the summary block, presented as current
    last_position: int  # the newest log position the context shows
    # The newest log position the call read (its tail rows): a turn after last_position
    # and not after this one was in the log and left out for room, not "arrived since".
    read_position: int
    latest_user: int | None
    latest_truncated: bool
    head: int = 0  # leading segments kept across a middle eviction (planner.middle), marked for caching
    late_paid: int = 0  # late-pin tokens sent so far in this epoch, summed over its calls (planner.late_pins)
    # tiers.keys.turn_fingerprint of the log turn at read_position ("" when it read none):
    # a log that holds another turn there is another timeline (a restored backup)
    read_tip: str = ""
    written_at: float = 0.0  # Unix seconds when RedisEpochs stored it: of two copies, the later wins
    # the epoch clock (Unix seconds): the latest created_at of the log messages this call and
    # the earlier ones read, never going backwards (a message stamped behind must not make the
    # next call look like a gap); the next call's gap from it tells whether the provider's
    # prompt cache can still hold this context (PlannerSettings.cache_ttl_s); None when no
    # call read one
    at: float | None = None
    # the prefixes of this call's request Anthropic is expected to hold after it (rendered
    # tokens, and when each was last written or read: planner.cache_rules), those an
    # earlier request wrote included while this one shares them; what the next call's
    # plan reads back (CacheReport.anthropic_cached_tokens). A state written before they
    # were kept: none
    cached: tuple[tuple[int, float | None], ...] = ()


@dataclass(frozen=True)
class Withheld:
    """What Redis holds for a state kept only by the process that built it."""

    size_bytes: int  # its JSON's size, or UNENCODABLE
    written_at: float

    def reason(self) -> str:
        what = ("JSON cannot carry it" if self.size_bytes == UNENCODABLE
                else f"its state ({self.size_bytes} bytes) is over the {EPOCH_STATE_MAX_BYTES} bytes kept in Redis")
        return f"the previous context was planned by another process and only that one keeps it: {what}"


@dataclass(frozen=True)
class Found:
    """A store's answer: the previous state, or None and, when the store knows, why."""

    state: EpochState | None
    why_none: str = ""


class EpochStore(Protocol):
    """Where the planner keeps each conversation's last context, by conversation key."""

    def get(self, conversation_id: str) -> EpochState | None: ...

    def lookup(self, conversation_id: str) -> Found: ...

    def put(self, conversation_id: str, state: EpochState) -> None: ...

    def drop(self, conversation_id: str) -> None: ...

    def drop_local(self, erased: Collection[str] | None) -> None: ...


def _shows(state: EpochState, keys: Collection[str]) -> bool:
    """Whether a context shows an item of one of these conversations (namespace recall)."""
    return any(it.conversation_id in keys for seg in state.segments for it in seg.items)


def _shown_others(state: EpochState, conversation_id: str) -> set[str]:
    """The other conversations whose turns a context shows (namespace recall)."""
    return {it.conversation_id for seg in state.segments for it in seg.items} - {conversation_id}


def drop_showing(tier: HotTier, db_uuid: str, erased: Collection[str]) -> int:
    """Delete the shared states that show turns of these erased conversations (module
    docstring): those listed in their `SHOWN_IN_SUFFIX` sets, unless the state there now
    is known to show none (a later context of the sibling) or is a marker without text.
    A value that is no state of this database (another layout, another database sharing
    the Redis) cannot be read for what it shows and is deleted: one new epoch for it.
    Run before the erased tags' keys (the sets) are deleted. Returns how many states
    went; raises Redis's errors, a refused DEL as the tier names it (HotReadOnly on a
    replica), so the caller degrades and defers the erasure's Redis keys."""
    from tiermem.tiers.hot import refusals  # lazy, as HotTier: the planner imports no Redis client

    keys = set(erased)
    listed: set[str] = set()
    # the reads too, refusals named as the tier names them (a BUSY Redis: HotBusy), so the
    # caller degrades and the erasure's keys stay owed for the recovery's purge
    for key in keys:
        with refusals("epoch state read"):
            members = tier.client.smembers(tier.tag(key) + SHOWN_IN_SUFFIX)
        listed.update(m.decode() if isinstance(m, bytes) else str(m) for m in members)
    gone = 0
    for conv in sorted(listed - keys):  # an erased conversation's own state goes with its tag
        state_key = tier.tag(conv) + EPOCH_KEY_SUFFIX
        with refusals("epoch state read"):
            raw = tier.client.get(state_key)
        if raw is None:
            continue
        st = state_from_json(raw, db_uuid)
        if isinstance(st, Withheld) or (isinstance(st, EpochState) and not _shows(st, keys)):
            continue
        gone += tier.delete_key(state_key)
    return gone


class EpochCache:
    """The last context per conversation, least recently used dropped; thread-safe."""

    def __init__(self, capacity: int = EPOCH_CACHE_CONVERSATIONS) -> None:
        self.capacity = capacity
        self._states: OrderedDict[str, EpochState] = OrderedDict()
        # why a state `drop_local` dropped for what it showed is gone (no text): the next
        # call's new epoch says so, as `_shown_gone` would have; as bounded as the states
        self._ended: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, conversation_id: str) -> EpochState | None:
        with self._lock:
            st = self._states.get(conversation_id)
            if st is not None:
                self._states.move_to_end(conversation_id)
            return st

    def lookup(self, conversation_id: str) -> Found:
        state = self.get(conversation_id)
        if state is not None:
            return Found(state)
        with self._lock:
            return Found(None, self._ended.get(conversation_id, ""))

    def put(self, conversation_id: str, state: EpochState) -> None:
        with self._lock:
            self._ended.pop(conversation_id, None)
            self._states[conversation_id] = state
            self._states.move_to_end(conversation_id)
            while len(self._states) > self.capacity:
                self._states.popitem(last=False)

    def drop(self, conversation_id: str) -> None:
        with self._lock:
            self._states.pop(conversation_id, None)

    def drop_local(self, erased: Collection[str] | None) -> None:
        """Drop the states of these (erased) conversations and every state that shows one
        of their turns: no copy of erased text stays in this process. A state dropped
        for what it showed would have ended at its next call anyway (`_shown_gone`).
        None: every state (`Memory._drop_copies`: where the erased keys are not known),
        no reason kept."""
        if erased is None:
            with self._lock:
                self._states.clear()
                self._ended.clear()
            return
        keys = set(erased)
        if not keys:
            return
        with self._lock:
            for conv, st in list(self._states.items()):
                if conv in keys:
                    del self._states[conv]
                elif _shows(st, keys):
                    del self._states[conv]
                    self._ended[conv] = SHOWED_ERASED
                    while len(self._ended) > self.capacity:
                        self._ended.popitem(last=False)


# Write the state only beside the conversation's hot set (KEYS[2], its meta hash): an
# erasure deletes the set, so a call that planned before it does not write the text back.
# KEYS[1] the state's key; ARGV[1] the state's JSON, ARGV[2] idle TTL in ms (0: none).
_PUT_LUA = """
if redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
if tonumber(ARGV[2]) > 0 then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
else
  redis.call('SET', KEYS[1], ARGV[1])
end
return 1
"""


class RedisEpochs:
    """The epoch states in the hot tier's Redis, shared by every process on it, with an
    `EpochCache` of this process's own as the fallback while Redis fails (module
    docstring). Uses the hot tier's client and its timeouts: a call pays at most one of
    them here, then the cache answers for `REDIS_RETRY_AFTER_S`. Never raises."""

    def __init__(self, tier: HotTier, db_uuid: str, *, live: Callable[[Collection[str]], bool],
                 usable: Callable[[], bool] = lambda: True, local: EpochCache | None = None) -> None:
        """`live(conversation keys)`: whether the log still holds every one of these
        conversations (an erasure racing a write is caught by it, module docstring)."""
        self.tier = tier
        # a Redis shared by two databases may hold a conversation key of each: a state is
        # read only by the database that wrote it
        self.db_uuid = db_uuid
        self.live = live
        self.usable = usable  # False while the hot tier is degraded: its own read waited already
        self.local = local if local is not None else EpochCache()
        self.errors = 0
        self.withheld = 0  # states kept in this process only (over EPOCH_STATE_MAX_BYTES, or not JSON)
        self._down_until = 0.0

    def key(self, conversation_id: str) -> str:
        return self.tier.tag(conversation_id) + EPOCH_KEY_SUFFIX

    def _up(self) -> bool:
        return time.monotonic() >= self._down_until and self.usable()

    def _failed(self, what: str, exc: BaseException) -> None:
        self.errors += 1
        self._down_until = time.monotonic() + REDIS_RETRY_AFTER_S
        log.warning("epoch state %s failed, this process's copy answers meanwhile: %s", what, exc)

    def get(self, conversation_id: str) -> EpochState | None:
        return self.lookup(conversation_id).state

    def lookup(self, conversation_id: str) -> Found:
        mine = self.local.lookup(conversation_id)
        own = mine.state
        if not self._up():
            return mine
        try:
            raw = self.tier.client.get(self.key(conversation_id))
        except Exception as exc:  # any Redis failure: this process's copy answers
            self._failed("read", exc)
            return mine
        shared = state_from_json(raw, self.db_uuid) if raw is not None else None
        if shared is None:
            return mine
        if own is not None and own.written_at >= shared.written_at:
            # this process's copy is the later one: it went on alone while Redis failed (or
            # wrote what Redis holds, or only a marker of it)
            return Found(own)
        if isinstance(shared, Withheld):
            return Found(None, shared.reason())
        self.local.put(conversation_id, shared)
        return Found(shared)

    def put(self, conversation_id: str, state: EpochState) -> None:
        state = replace(state, written_at=time.time())
        self.local.put(conversation_id, state)
        if not self._up():
            return
        # encoded outside the Redis try: a state Redis cannot be given is no Redis failure,
        # which would leave every conversation of this process unshared for a while
        # a marker holds no text: only a state that shows others' turns is listed under them
        shown = _shown_others(state, conversation_id)
        try:
            value = state_json(state, self.db_uuid)
        except (ValueError, TypeError, RecursionError) as exc:  # nested deeper than the encoder goes
            log.warning("an epoch state could not be encoded, this process keeps it alone: %s", exc)
            value = withheld_json(Withheld(UNENCODABLE, state.written_at), self.db_uuid)
            self.withheld += 1
            shown = set()
        if len(value) > EPOCH_STATE_MAX_BYTES:  # ASCII: its length is its size in bytes
            value = withheld_json(Withheld(len(value), state.written_at), self.db_uuid)
            self.withheld += 1
            shown = set()
        key = self.key(conversation_id)
        try:
            if shown:
                self._list_under(conversation_id, shown)
            written = self.tier.client.eval(_PUT_LUA, 2, key, self.tier.keys(conversation_id)[0],
                                            value, self.tier.idle_ttl_ms)
            if written and not self.live([conversation_id, *sorted(shown)]):
                # this conversation or one it shows was erased between the script's check
                # and now: the erasure's deletion may have run before this write (module
                # docstring), so it is deleted here, and this process's copy with it (its
                # check of erasures may have run before this call put it)
                self.tier.client.delete(key)
                self.local.drop(conversation_id)
                self._unlist(conversation_id, shown)
            elif not written and shown and not self.live([conversation_id]):
                # this conversation was erased before the write (the script found no hot
                # set): the listings this call added under the shown ones list nothing
                self._unlist(conversation_id, shown)
        except Exception as exc:  # any Redis failure: this process's copy
            self._failed("write", exc)

    def _list_under(self, conversation_id: str, shown: Collection[str]) -> None:
        """Add this conversation to each shown one's `SHOWN_IN_SUFFIX` set (module
        docstring), in one round trip (a cluster pipeline routes each set to its node)."""
        ttl_ms = self.tier.idle_ttl_ms
        pipe = self.tier.client.pipeline(transaction=False)
        for other in sorted(shown):
            listing = self.tier.tag(other) + SHOWN_IN_SUFFIX
            pipe.sadd(listing, conversation_id)
            if ttl_ms > 0:
                pipe.pexpire(listing, ttl_ms + SHOWN_IN_TTL_MARGIN_MS)
        pipe.execute()

    def _unlist(self, conversation_id: str, shown: Collection[str]) -> None:
        """After a state refused for an erasure (`put`): take this conversation out of the
        `SHOWN_IN_SUFFIX` sets of the shown conversations that are erased (of every shown
        one when it is itself erased: no state of it may stay listed), so a set this
        call's listing re-created after the erasure deleted it does not stay (module
        docstring; Redis keeps no empty set). Only its own listing: another state listed
        there is the erasure's to delete. One statement per shown conversation to tell
        which went (this path is rare), one pipelined round trip."""
        if not shown:
            return
        gone = set(shown) if not self.live([conversation_id]) else {c for c in shown if not self.live([c])}
        pipe = self.tier.client.pipeline(transaction=False)
        for other in sorted(gone):
            pipe.srem(self.tier.tag(other) + SHOWN_IN_SUFFIX, conversation_id)
        pipe.execute()

    def drop_local(self, erased: Collection[str] | None) -> None:
        """This process's copies only (`EpochCache.drop_local`): the shared ones went
        with the erasure's Redis keys, deleted by the process that erased (those of other
        conversations that showed them too: `drop_showing`)."""
        self.local.drop_local(erased)

    def drop(self, conversation_id: str) -> None:
        self.local.drop(conversation_id)
        if not self._up():
            return  # an erasure's deferred purge deletes it with the conversation's other keys
        try:
            self.tier.client.delete(self.key(conversation_id))
        except Exception as exc:
            self._failed("delete", exc)


def _dumps(value: object) -> str:
    # ASCII: a lone surrogate (older rows may hold one) round-trips as an escape, where
    # UTF-8 cannot carry it, and the length is the size Redis stores
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"))


def state_json(state: EpochState, db_uuid: str) -> str:
    """`state` as compact ASCII JSON (positional arrays), for the shared copy. Raises
    RecursionError (or ValueError) for a message nested deeper than the encoder goes."""
    k = state.key
    return _dumps([
        STATE_FORMAT, db_uuid, [k.budget, k.system, list(k.stamp) if k.stamp is not None else None,
                                k.namespace_recall, k.timezone],
        state.epoch, state.calls,
        [[g.kind, g.message, [[it.slice, it.conversation_id, it.positions, it.tier, it.fidelity, it.tokens,
                               it.score, it.reason] for it in g.items]] for g in state.segments],
        sorted(state.pinned), sorted(state.summary_lines), state.last_position, state.read_position,
        state.latest_user, state.latest_truncated, state.head, state.late_paid, state.read_tip, state.written_at,
        state.at, [list(c) for c in state.cached],
    ])


def withheld_json(marker: Withheld, db_uuid: str) -> str:
    """The marker Redis holds for a state kept in process only (no text of it)."""
    return _dumps([STATE_FORMAT, db_uuid, WITHHELD, marker.size_bytes, marker.written_at])


# What decoding a value of the wrong shape or range raises: a wrong type or count
# (TypeError, ValueError), a missing part (IndexError, KeyError), 1e400 in an int field
# (OverflowError, an ArithmeticError), a nesting deeper than the stack (RecursionError)
_DECODE_ERRORS = (ValueError, TypeError, IndexError, KeyError, AttributeError, ArithmeticError, RecursionError)


def _when(value: object, what: str = "written_at") -> float:
    """A time as stored: a finite number, else not a state (ValueError)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{what} is not a finite time")
    return float(value)


def state_from_json(raw: str | bytes, db_uuid: str) -> EpochState | Withheld | None:
    """The state (or marker) `state_json` (`withheld_json`) wrote for database `db_uuid`;
    None for anything else (another layout or database, or a value that is not one: anyone
    with access to Redis could have written it). Never raises."""
    try:
        d = loads_stored(raw)
        if not isinstance(d, list) or len(d) < 2 or d[0] != STATE_FORMAT or d[1] != db_uuid:
            return None
        if len(d) == 5 and d[2] == WITHHELD:
            return Withheld(int(d[3]), _when(d[4]))
        if len(d) not in (STATE_FIELDS - 1, STATE_FIELDS):  # one field fewer: written before `cached`
            return None
        (_fmt, _db, key, epoch, calls, segments, pinned, summary_lines, last_position, read_position,
         latest_user, latest_truncated, head, late_paid, read_tip, written_at, at) = d[:STATE_FIELDS - 1]
        cached = d[STATE_FIELDS - 1] if len(d) == STATE_FIELDS else []
        budget, system, stamp, namespace_recall, timezone = key
        segs = []
        for kind, message, items in segments:
            if not isinstance(message, dict):
                return None
            segs.append(Segment(str(kind), message, tuple(
                PlanItem(str(sl), str(conv), [int(p) for p in positions], str(tier), str(fid), int(tokens),
                         float(score), str(reason))
                for sl, conv, positions, tier, fid, tokens, score, reason in items)))
        return EpochState(
            EpochKey(int(budget), str(system), (int(stamp[0]), float(stamp[1])) if stamp is not None else None,
                     bool(namespace_recall), str(timezone)),
            int(epoch), int(calls), tuple(segs), frozenset(int(p) for p in pinned),
            frozenset(str(t) for t in summary_lines), int(last_position), int(read_position),
            int(latest_user) if latest_user is not None else None, bool(latest_truncated), head=int(head),
            late_paid=int(late_paid), read_tip=str(read_tip), written_at=_when(written_at),
            at=_when(at, "at") if at is not None else None,
            cached=tuple((int(n), _when(t, "cached") if t is not None else None) for n, t in cached))
    except _DECODE_ERRORS:
        log.warning("an epoch state in Redis could not be read; a new epoch starts", exc_info=True)
        return None


def key_change(old: EpochKey, new: EpochKey) -> str:
    """Why `new` cannot extend an epoch begun under `old` ("" when it can)."""
    if old.stamp != new.stamp:
        return "the conversation was re-created or its log rewritten"
    if old.budget != new.budget:
        return f"budget changed ({old.budget} -> {new.budget} tokens)"
    if old.system != new.system:
        return "system prompt changed"
    if old.namespace_recall != new.namespace_recall:
        return "namespace recall switched"
    if old.timezone != new.timezone:
        return f"time zone changed ({old.timezone} -> {new.timezone}): the dates shown are another clock's"
    return ""

"""Glue between `Memory` and the Redis hot tier: which server, when to rebuild, and
what to do when Redis is gone.

- With `Config.redis_url` unset, an embedded redis-server is started (or reused) on a
  unix socket in the data dir; the server is shared by every process on that data dir.
  This link holds a pooled connection open while it lives, which keeps the server up;
  once no process holds one, the server stops after `redis_idle_timeout_s`
  (tiers/redis_watchdog.py), or at once with `tiermem stop-redis`.
- Every hot set carries a generation marker, `<db uuid>:<conversation created_at>`. A
  missing or foreign marker (Redis restarted, flushed, evicted the keys, or points at
  another database) triggers a deterministic rebuild from the cold log; a hot set
  behind the log (appends made while Redis was down) is caught up by admitting the
  missing turns in order, which is what live appends would have done.
- The generation does not tell two timelines of one database apart: a backup restored
  while Redis kept the sets of the newer, discarded timeline. So a set also records the
  fingerprint of its last turn (tiers.keys.turn_fingerprint), and a read trusts it only
  when the log holds that very append at that position: a set ahead of the log, or one
  whose last turn the log does not hold, is rebuilt. An append (or a read's catch-up)
  extends a set only if it ends with the log's turn just before the new ones (checked
  in the same script, else rebuilt), so a set never grows from a discarded timeline into
  the restored one. A restore thus needs no `tiermem rebuild`: the next read of each
  conversation rebuilds what is stale.
- Nor does a Redis restarted from a snapshot taken before an erasure keep the erased
  conversations' keys it has back: after the first command Redis answers on a new
  connection (the link's own clients; a caller's or a Cluster client: at most every
  RESTORED_RECHECK_S), the link compares the Redis's erasure marker with the store's
  newest tombstone and, when it is missing or older, deletes the keys of the
  conversations tombstoned since, with a log line (tiermem.hot_restored).
- A set built under another `hot_budget_tokens`, `head_protect`, `tail_protect` or
  `eviction_bias` (a setting changed between runs; the set's meta records the four) is
  rebuilt on its next read, so the rules in force are the configured ones from then on;
  a set whose meta lacks the last three (written by a version before they were
  recorded) is rebuilt so too. Once per conversation and process: two processes sharing
  a Redis with different settings (a rolling deploy, a misconfigured worker) would
  otherwise rebuild each other's sets on every read. After that one rebuild each
  process's own writes evict under its own settings, and the mismatch is logged once.
- Pin and unpin write into a set only of this log's generation: in a Redis shared with
  another database, a set under the same key that is not ours is left alone (the next
  read rebuilds ours from the log, pin included). Stats count only our sets. The
  price of such sharing (two stores pointed at one Redis by mistake) is a rebuild per
  call of every like-named conversation, each overwriting the other's set: a process
  warns of it once per conversation (`_note_foreign`), naming the cause and the remedy
  (a Redis database or server per store), only when a set it rebuilt over another
  database's is found another's AGAIN: one found once is what a store that no longer runs
  left (the source of `migrate-store`, a data dir reset on the same Redis), not two live
  stores.
- Redis errors never escape: appends stay committed in the cold log, reads fall back
  to the log and report `degraded`, and the next successful call recovers. A Redis at
  `maxmemory` under noeviction is one of them: it refuses each writing script whole
  (tiers.hot OOM_PROBE_LUA, HotOutOfMemory), reads of the sets go on, and only a
  successful write ends that degradation (a read, a PING or stats would not tell). So
  is a replica answering READONLY (HotReadOnly: a failover left this client on the old
  primary), which PINGs and stats do not end either. Each is one warning. A READONLY
  also closes the client's idle connections (`_reconnect`), so the next command connects
  and looks the URL's host up again: a failover that moved the name (DNS, a service
  address) to the new primary is followed, where redis-py's pooled connections would
  have stayed on the old one for good. While Redis
  refuses writes so (RECHECKED_REFUSALS), reads, appends, /metrics' counters and stats
  ask it themselves, at most once per WRITES_RECHECK_INTERVAL_S: the writing scripts'
  first step alone (HotTier.check_writes) succeeding ends it, so a process whose reads
  write nothing recovers too, once memory frees or the replica is a primary again
  (a failover back, REPLICAOF NO ONE). A Redis that cannot persist (MISCONF: a failed
  RDB save under stop-writes-on-bgsave-error, an AOF it cannot write) is handled as a
  replica is (HotNotPersisting): it refuses every write, DEL included, answers reads
  (though the read script, which renews the sets' TTL, is a write), and recovers once a
  save succeeds. Until then, out of memory, they run the deferred
  purge of erased conversations' keys (`on_recover`: Redis lets DEL through when full,
  and it frees memory); a replica refuses DEL too, so there the purge waits for the
  recovery.
- A wrong or missing password (NOAUTH, WRONGPASS) or an ACL user without a command or
  key the hot tier needs (NOPERM, HotAccessDenied) is a misconfiguration, not an
  outage: the link checks for it when it opens (tiers.hot `HotTier.check_access`) and
  whenever Redis answers so, logs it once at ERROR naming `redis_url` (password
  redacted) and Redis's reply, and reports it as `misconfigured` (stats, /healthz: the
  hot tier down, with that reason); calls degrade meanwhile as in an outage, and only
  a write that succeeds ends it (an ACL user may still PING and read). Opening never
  fails for Redis: one that cannot be reached then degrades as later. That holds for a
  Redis Cluster too, whose client redis-py cannot build while no node answers: the
  link opens with a stand-in (tiers.hot DeferredCluster) that builds it at the first
  command the cluster answers, and until then each call degrades to the log.
- Redis refusing every command for a while (HotBusy: BUSY, another client's script
  running past lua-time-limit; TRYAGAIN, a Cluster slot migrating) is an outage too: one
  warning, calls answer from the log, and the next command Redis answers ends it. Such
  refusals say nothing against a set: none is dropped or rebuilt for them, however they
  come (a script's, a plain command's, a pipeline's).
- A degraded link recovers without traffic too: a health check (/healthz, `stats()`)
  asks Redis itself (`probe`: one PING, and the writing scripts' first step while Redis
  refused writes), at most PROBE_TIMEOUT_S of the caller's time and one probe in flight
  (a Redis that does not answer leaves it running on its own thread, within the client's
  timeouts); before, the hot tier read degraded until some request read a hot set. A
  misconfiguration is not ended by it (a PING is no write: module docstring above).
- While the link is degraded, the other users of its Redis (the warm tier's view cache,
  the planner's epoch states) leave it alone (`healthy`), so a call waits out a slow or
  dead Redis once, in its hot read, not once per user.
- Nor does any other failure of the hot tier (a reply no code path expects: a script
  error on a key of the wrong type, a garbled field): the
  conversation's set cannot be trusted, so it is dropped and rebuilt from the log, and
  should that fail too the call degrades as in an outage. Not so a rebuild's set that
  Redis dropped before the rebuild read it back (HotStale STALE_DROPPED: evicted under
  maxmemory, volatile-lru, flushed): Redis is up and nothing was wrong with it; the
  call answers from the log and the next read rebuilds it (one INFO line). An append is acknowledged
  once the log has committed it, whatever the hot tier does after.
- The cold log busy (a lock held past busy_timeout_ms: an operator's LOCK TABLE, an
  erasure's VACUUM FULL; `cold_busy`) is neither: it is not Redis's failure and says
  nothing against the set. A read raises it to its caller (503 busy, after that one
  wait: no rebuild and no fallback read waits for the same lock again); after a log
  write (an append's admit, a pin) the set is left as it is, and its next read catches
  up with the log. The link is not marked degraded and the set is not dropped.
  So is the cold store down while the hot path reads it (`cold_failure`: closed,
  PostgreSQL unreachable or silent, a lost connection): StoreUnavailable is a
  ConnectionError, hence an OSError, yet it is handled before REDIS_ERRORS, so the
  caller gets the store's own error (503) and Redis is not reported down.
- An unpin follows the log's pin state: a turn the log still pins once the caller's
  pin is gone (the classifier's pin of a load-bearing turn nothing superseded,
  `pin_state`) stays pinned in the set at the classifier's priority.
- A pin or unpin of a turn another process has committed to the log and not yet
  admitted (tiers.hot HotStale 'ahead') catches the set up with the log and is made
  again, rather than being taken for a failure of the set (dropped and rebuilt).
- A pin or unpin of another process is never lost to a rebuild: a rebuild reads the hot
  tier's pin stamp before the log's rows, and a set loaded while a pin or unpin landed
  in between reads as `pins_behind` (tiers.hot, pin stamps), so it is rebuilt at once
  (PIN_RACE_REBUILDS in all) and, should pins keep landing, on its next read.
- Nor is a pin or unpin whose hot script never ran (the process died between the log
  write and the script, or Redis refused that one script), nor a pin change of the log
  that no script follows (a relabel outside a supersession): the next admit, pin or unpin of the
  conversation checks the log's pin version against the set's (tiers.hot, pin versions;
  HotStale 'pins') and its next read compares them, and either rebuilds the set from
  the log. An append or read reads the version in the statement that reads its new
  turns (tiers.store `turns_and_pin_version`), a pin or unpin in its log write's
  transaction (`set_pin`; a supersession's unpins name the changes its write made,
  `set_superseded`, and only one with neither, a replay's, reads it alone): no round
  trip to the log of its own, and no rebuild while every change reached the set (a
  correction included: the append admits its turn before its supersession is recorded).
- Nor is a pin or unpin rebuilt for only reaching Redis before another process's pin
  whose log write came first (tiers.hot PinChangeGap): it waits for that pin's script,
  up to PIN_GAP_WAIT_S, and is made again; only a change no script follows in that time
  rebuilds the set. One whose change the set holds already (a rebuild read it) changes
  nothing, so an older pin never undoes a newer one of the same turn.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import redis

from tiermem.hot_restored import (
    RESTORED_RECHECK_S,
    RESTORED_SCAN_KEYS_PER_CALL,
    RestoredPurge,
    begin_check,
    mark_purged,
    step,
    watch_connects,
)
from tiermem.tiers.errors import (
    STALE_AHEAD,
    STALE_DROPPED,
    STALE_GAP,
    STALE_PINS,
    HotAccessDenied,
    HotBusy,
    HotNotPersisting,
    HotOutOfMemory,
    HotReadOnly,
    HotStale,
    HotStateLost,
    PinChangeGap,
    StoreUnavailable,
)
from tiermem.tiers.files import storage_problem
from tiermem.tiers.hot import (
    SUMMARY_DEMOTED_LISTED,
    AdmitResult,
    HotSet,
    HotTier,
    HotTurn,
    LogPins,
    RedisClient,
    make_client,
    refusal,
    simulate_replay,
)
from tiermem.tiers.keys import turn_fingerprint
from tiermem.tiers.models import TurnRow
from tiermem.tiers.redis_server import EmbeddedRedis
from tiermem.tiers.redis_url import redacted_url
from tiermem.tiers.statements import read_hidden

if TYPE_CHECKING:
    from tiermem.config import Config
    from tiermem.planner.epoch import RedisEpochs
    from tiermem.tiers.store import ColdLog

log = logging.getLogger("tiermem.hot")
# conversations a HotLink remembers having rebuilt for a budget or eviction rule mismatch
# (the memory is cleared when full: at worst one more rebuild each)
MAX_BUDGET_REBUILDS_TRACKED = 100_000
# positions whose bodies one read of a rebuild fetches: well under the bound parameters
# of a statement (SQLite 32,766, PostgreSQL 65,535) for a set of any budget
PAYLOAD_READ_POSITIONS = 1000
# turn rows one read of a rebuild fetches (each read holds the store's lock): ~25 ms of
# lock at a time rather than the whole log's ~0.5 s at 20,000 turns
TURN_READ_ROWS = 1000
# rebuilds one `_rebuild` runs while pins or unpins of other processes keep landing in
# its window (the loaded set `pins_behind`); past them the set stays marked and the next
# read rebuilds it again, so pins arriving faster than a rebuild cannot hold a call up
PIN_RACE_REBUILDS = 3
# How long a pin or unpin waits, in all, for the script of an earlier pin change of the log
# that its set lacks (tiers.hot PinChangeGap: another process's pin whose log write came
# first) before it rebuilds the set from the log. The missing script follows its log
# write by one turn read and one script (about a millisecond; tens under load), while a
# rebuild reads the whole log (~60 ms at 2,000 turns, 0.8 s at 20,000): a change no
# script follows (a process killed in between, a relabel) costs this much once more
PIN_GAP_WAIT_S = 0.05
PIN_GAP_FIRST_WAIT_S = 0.0005  # the first wait; each next one doubles, up to what is left
# conversations whose hot set and epoch state one pipelined round trip deletes after the
# store recounted its turns' tokens (`drop_counted`): 7 keys each, one DEL per conversation
DROP_COUNTED_PIPELINE = 500
# `staleness`'s reasons (besides tiers.errors STALE_PINS): a set whose last turn is not
# the log's at its position (rebuilt), and one the log has turns past (caught up)
STALE_DIVERGED = "diverged"
# conversations whose set, written by another database, a HotLink warns of overwriting
# (`_note_foreign`: two stores sharing one Redis); past them it warns of no more, so the
# memory and the log lines stay bounded however many conversations the stores share
FOREIGN_WARNED_MAX = 100
# conversations whose set of another database a HotLink rebuilt over once, remembered
# (least recent forgotten) so that finding one another's again warns (`_note_foreign`)
FOREIGN_REBUILT_MAX = 10_000
STALE_BEHIND = "behind"

# Failures that mean "Redis cannot be relied on right now": the hot tier degrades to the
# log for this call and recovers on a later one. HotStateLost is Redis losing a rebuild's
# scratch keys to a FLUSHALL or a restart mid-rebuild (seen once in 833 context calls of
# the Redis-failure soak, as an HTTP 500 before it was listed here). HotOutOfMemory is a
# Redis at `maxmemory` under noeviction refusing a script whole: the sets wait, as
# written, for the memory to free. HotReadOnly is a replica refusing a write (a failover
# left this client on the old primary): the sets wait for a primary. The misconfigurations
# below are among them too (redis-py's AuthenticationError is a ConnectionError). So is a
# Redis Cluster no node of which answers (RedisClusterUnreachableError, which is no
# RedisError: a command's, or building the client's while it opened down, tiers.hot
# DeferredCluster), as a single Redis that refuses connections is. HotBusy is Redis
# refusing every command for now (BUSY: another client's script past lua-time-limit;
# TRYAGAIN: a Cluster slot migrating), HotNotPersisting every write while it cannot save
# (MISCONF): before they were listed, each call logged them at ERROR with a traceback, twice
# (the set taken for corrupt, dropped and rebuilt, which Redis refused too; review r_redis).
REDIS_ERRORS: tuple[type[BaseException], ...] = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError,
                                                 redis.exceptions.ClusterDownError,
                                                 redis.exceptions.RedisClusterUnreachableError, OSError, HotStateLost,
                                                 HotOutOfMemory, HotReadOnly, HotAccessDenied, HotBusy,
                                                 HotNotPersisting, redis.exceptions.NoPermissionError)
# ... and a pipeline's refusal, which comes as a plain reply error (`drop_counted`)
DROP_COUNTED_ERRORS: tuple[type[BaseException], ...] = (*REDIS_ERRORS, redis.exceptions.ResponseError)
# Redis refusing tiermem itself (a wrong or missing password, an ACL user without a
# command or key pattern the hot tier needs): the operator has to act (module docstring)
MISCONFIGURED: tuple[type[BaseException], ...] = (redis.exceptions.AuthenticationError,
                                                  redis.exceptions.AuthorizationError,
                                                  redis.exceptions.NoPermissionError, HotAccessDenied)
# While Redis refuses writes for want of memory or as a replica, the link asks it whether
# it takes them again at most once per this many seconds (one EVALSHA; module docstring):
# soon enough for /healthz and the deferred purge, rare enough to cost nothing per read
WRITES_RECHECK_INTERVAL_S = 2.0
# How long a health check (/healthz, stats) waits for `probe`'s answer from a Redis the
# link found failing: a load balancer's probe times out in 1-10 s, and a PING of a Redis
# that answers takes a millisecond; past it the check reports the link as it stands and
# the probe ends by itself on its thread (the client's socket timeouts bound it)
PROBE_TIMEOUT_S = 1.0
# The refusals of writes that end without the operator touching tiermem (memory frees, a
# failover back, a save that succeeds again), which the link therefore rechecks by itself;
# a misconfiguration waits for a write, as the operator has to act first
RECHECKED_REFUSALS: tuple[type[BaseException], ...] = (HotOutOfMemory, HotReadOnly, HotNotPersisting)
# Redis refusing writes while it may still answer reads (out of memory, a replica, a
# Redis that cannot persist, an ACL user allowed only some commands): only a write ends
# them. A Redis that cannot persist is handled as a replica is: it serves reads (the sets
# as written before, which the tips and pin versions check against the log as ever) and
# refuses every write, DEL included (so the deferred purge of erased conversations'
# keys waits for the recovery), and it ends by itself. Busy (HotBusy) is not among them:
# it refuses reads too, so the next read Redis answers ends it, as after an outage.
WRITES_REFUSED: tuple[type[BaseException], ...] = (HotOutOfMemory, HotReadOnly, HotNotPersisting, *MISCONFIGURED)


@dataclass(frozen=True)
class HotRead:
    hot: HotSet | None
    degraded: bool
    rebuilt: bool = False
    error: str | None = None


class HotLink:
    def __init__(self, config: Config, cold: ColdLog, *, redis_client: RedisClient | None = None) -> None:
        self.cold = cold
        cfg = config
        self.embedded: EmbeddedRedis | None = None
        self._owns_client = redis_client is None
        # whether the next command Redis answers first checks it for erased conversations'
        # keys (tiermem.hot_restored): the first, then the first on each new connection
        # of a client this link watches (`_watching`), else one per RESTORED_RECHECK_S
        self._restored_due = True
        self._restored_checked_at = time.monotonic()
        self._restored_retry_at = 0.0  # after a check Redis failed: not before then
        self._restored_lock = threading.Lock()
        self._restored: RestoredPurge | None = None  # a check under way (`_check_restored`)
        self._restored_fresh = False  # a new connection since it began: begin again
        self.restored_scan_keys = RESTORED_SCAN_KEYS_PER_CALL
        self._watching = False
        self.restored_purges = 0  # conversations whose keys the checks found and deleted
        # how log lines name this Redis: never its password
        self.shown_url = redacted_url(cfg.redis_url) if cfg.redis_url is not None else "the caller's Redis client"
        if redis_client is None:
            url = cfg.redis_url
            if url is None:
                self.embedded = EmbeddedRedis(cfg.data_dir, idle_timeout_s=cfg.redis_idle_timeout_s)
                url = self.embedded.ensure()
                self.shown_url = url
            redis_client = make_client(url)
            self._watching = watch_connects(redis_client, self._connected)
            if self.embedded is not None:
                self._hold(redis_client)
        self.client = redis_client
        self.tier = HotTier(
            redis_client,
            budget_tokens=cfg.hot_budget_tokens,
            head_protect=cfg.head_protect,
            tail_protect=cfg.tail_protect,
            eviction_bias=cfg.eviction_bias,
            idle_ttl_s=cfg.hot_idle_ttl_s,
        )
        self.degraded_since: float | None = None
        # whether the failure that degraded this link was Redis refusing writes (out of
        # memory, a replica): reads still answer, only a write tells it is over
        self._writes_refused = False
        # that refusal's class while it is one the link rechecks (RECHECKED_REFUSALS), and
        # when Redis was last asked whether it takes writes again (time.monotonic;
        # `_recheck_writes`)
        self._refused: type[BaseException] | None = None
        self._writes_checked_at = 0.0
        self.last_error: str | None = None
        # Redis's refusal of tiermem itself (MISCONFIGURED), while it lasts: no URL in it
        self.misconfigured: str | None = None
        self.rebuilds = 0
        self.pin_gap_waits = 0  # waits of pins and unpins for an earlier pin's script (`_in_order`)
        self.pin_gap_wait_s = PIN_GAP_WAIT_S  # how long, in all, one pin or unpin waits for them
        # turns this process's admits, pins and unpins evicted, and pins they demoted,
        # counted as the scripts report them: what /metrics exports, without visiting
        # every conversation's set (stats() does that, per namespace, on demand)
        self.evictions = 0
        self.demotions = 0
        # conversations rebuilt once for a set stored under another budget or other
        # eviction rules (_sync)
        self._rules_rebuilt: set[str] = set()
        self._rules_mismatch_logged = False
        # conversations whose set of another database this process overwrote, warned of
        # once each (`_note_foreign`), up to FOREIGN_WARNED_MAX
        self._foreign_warned: set[str] = set()
        # ... and those it overwrote once, not yet warned of (`_note_foreign`)
        self._foreign_rebuilt: OrderedDict[str, None] = OrderedDict()
        # the hot sets and epoch states hold counts of the store's former tokenizer, not yet
        # dropped (`drop_counted`: Redis failed it)
        self._counted_owed = False
        self._lock = threading.Lock()
        # held while a health probe of a degraded link is in flight (`probe`): one at a time
        self._probing = threading.Lock()
        # called once each time Redis answers again after a failure (Memory: delete the
        # keys of conversations erased while it could not be reached)
        self.on_recover: Callable[[], None] | None = None
        if self.embedded is None:  # ours has no password nor ACL, and is never a replica
            self._check_access()

    def _check_access(self) -> None:
        """Whether Redis lets tiermem in and run its scripts, found now rather than at
        the first call (module docstring). Opening never fails for it."""
        try:
            self.tier.check_access()
        except REDIS_ERRORS as exc:
            self._fail(exc)
        except Exception as exc:  # a reply no check expects: the first call meets it again
            log.warning("could not check the hot tier's access to %s: %s", self.shown_url, exc)

    def _hold(self, client: Any) -> None:
        """Open the pool's first connection now and keep it: an open connection is what
        tells the embedded server's watchdog that this process still uses it. Should the
        server have stopped between `ensure()` and now (idle), start it again."""
        assert self.embedded is not None
        for attempt in range(2):
            try:
                client.ping()
                return
            except REDIS_ERRORS:
                if attempt == 0:
                    try:
                        self.embedded.ensure()
                    except Exception as exc:  # reads degrade to the log; _fail retries later
                        log.warning("could not restart the embedded redis-server: %s", exc)
                        return

    def close(self) -> None:
        """Close the client if this link created it; the embedded server keeps running
        for the other processes that share the data dir."""
        if self._owns_client:
            try:
                self.client.close()
            except Exception:
                pass

    def epochs(self) -> RedisEpochs:
        """The planner's epoch states kept in this Redis, shared by every process on it
        (planner.epoch), left alone while this link is degraded: a context call whose hot
        read waited out Redis's timeout does not wait again for them."""
        # lazy: a process that only appends never imports the planner
        from tiermem.planner.epoch import RedisEpochs

        return RedisEpochs(self.tier, self.cold.db_uuid, usable=lambda: self.healthy,
                           live=lambda keys: len(self.cold.names_of(list(keys))) == len(set(keys)))

    # -- health ------------------------------------------------------------------------------

    def _connected(self) -> None:
        """A new connection of the link's client (redis-py's connect hook): the Redis may
        have restarted from a snapshot, so the next answered command checks it."""
        self._restored_due = True
        self._restored_fresh = True

    def _restored_check_due(self) -> bool:
        if not self._restored_due and self._watching:  # the common case: no clock read
            return False
        if self.degraded_since is not None and self._writes_refused:
            # a replica refuses the DELs, a full Redis the marker: after the recovery (the
            # deferred purge runs meanwhile, `on_recover`)
            return False
        now = time.monotonic()
        return (now >= self._restored_retry_at if self._restored_due
                else now - self._restored_checked_at >= RESTORED_RECHECK_S)

    def _check_restored(self) -> bool:
        """Purge the keys a restored Redis holds of erased conversations
        (tiermem.hot_restored), at most `restored_scan_keys` keys scanned per call (the
        next answered command goes on); one thread at a time, the others go on. False
        when Redis failed it (the link degraded, the check due again after
        RESTORED_RECHECK_S); the store failing it leaves it due so and the link as it is."""
        if not self._restored_lock.acquire(blocking=False):
            return True
        try:
            self._restored_due = False
            self._restored_checked_at = time.monotonic()
            try:
                if self._restored is None or self._restored_fresh:  # a new connection: maybe a new server
                    self._restored_fresh = False
                    self._restored = begin_check(self.tier, self.cold, self.cold.db_uuid)
                purge = self._restored
                if purge is None:
                    return True
                step(self.tier, self.cold.db_uuid, purge, self.restored_scan_keys)
            except REDIS_ERRORS as exc:  # a replica, a full Redis: again after a while, not per call
                self._restored_due = True
                self._restored_retry_at = time.monotonic() + RESTORED_RECHECK_S
                self._fail(exc)
                return False
            except Exception:  # the store busy or down, a reply no check expects: again after a while
                self._restored_due = True
                self._restored_retry_at = time.monotonic() + RESTORED_RECHECK_S
                log.warning("could not check %s for keys of erased conversations", self.shown_url, exc_info=True)
                return True
            if not purge.done:
                self._restored_due = True  # the next answered command scans on
                return True
            self._restored = None
        finally:
            self._restored_lock.release()
        self.restored_purges += purge.conversations
        level = logging.WARNING if purge.conversations else logging.INFO
        log.log(level, "Redis at %s was checked for keys of erased conversations (its erasure marker %s, the "
                "store's newest tombstone %d: restarted from an older snapshot, flushed or new): deleted %d "
                "key(s) of %d of the %d conversation(s) erased since; %d key(s) scanned in %d step(s), %.3f s",
                self.shown_url, "missing" if purge.marker is None else purge.marker, purge.newest, purge.deleted,
                purge.conversations, len(purge.tags), purge.scanned, purge.steps, purge.seconds)
        return True

    def note_purged(self) -> None:
        """After an erasure's Redis keys were deleted and crossed off in the store: mark
        this Redis as purged up to the store's newest tombstone (tiermem.hot_restored
        `mark_purged`), so a restart from a snapshot taken since scans nothing. Never
        raises: the erasure is done; a marker left older costs one scan at a restart."""
        try:
            mark_purged(self.tier, self.cold, self.cold.db_uuid)
        except REDIS_ERRORS as exc:
            self._fail(exc)
        except Exception:
            log.warning("could not mark %s as purged of erased conversations", self.shown_url, exc_info=True)

    def _ok(self, *, wrote: bool = True) -> None:
        """A call Redis answered. `wrote` False: it only read, which says nothing of a
        Redis refusing writes (out of memory, a replica: reads go on there): that
        degradation ends with a write (or `_recheck_writes`'s probe)."""
        if self._restored_check_due() and not self._check_restored():
            return  # the check met Redis failing and degraded the link (`_fail`)
        if self.degraded_since is None or (not wrote and self._writes_refused):
            return
        log.info("hot tier recovered after %.1fs", time.time() - self.degraded_since)
        self.degraded_since = None
        self.misconfigured = None
        self._refused = None
        self._run_on_recover()

    def _run_on_recover(self) -> None:
        if self._counted_owed and self.drop_counted() is None:
            return  # Redis failed it: degraded again, this runs at the next recovery
        if self.on_recover is not None:
            try:
                self.on_recover()
            except Exception:  # the call that noticed the recovery must still answer
                log.warning("could not run the hot tier's recovery work", exc_info=True)

    def _fail(self, exc: BaseException) -> None:
        if isinstance(exc, HotReadOnly):
            self._reconnect()
        self._writes_refused = isinstance(exc, WRITES_REFUSED)
        if isinstance(exc, RECHECKED_REFUSALS):
            if self._refused is None:  # this refusal was the first check: the next waits its turn
                self._writes_checked_at = time.monotonic()
            self._refused = type(exc)
        else:
            self._refused = None
        error = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, MISCONFIGURED):
            if self.misconfigured is None:  # once, however many calls meet it
                log.error("hot tier: Redis at %s refused tiermem (a wrong or missing password in redis_url, or "
                          "an ACL user without a command or key the hot tier needs); serving from the cold log "
                          "until it is fixed: %s", self.shown_url, error)
            self.misconfigured = error
        else:
            self.misconfigured = None
        if self.degraded_since is None:
            self.degraded_since = time.time()
            if self.misconfigured is None:
                log.warning("hot tier unavailable, serving from the cold log: %s", exc)
        self.last_error = error
        if self.embedded is not None:
            # an embedded server that died with us still alive: start it again
            try:
                self.embedded.ensure()
            except Exception as start_exc:
                log.warning("could not restart the embedded redis-server: %s", start_exc)

    def _reconnect(self) -> None:
        """After a READONLY: the client's idle connections are closed, so that the next
        command connects again and looks the URL's host up again (redis-py resolves at
        each connect, and drops no connection for a READONLY). A failover that moved the
        name to the new primary is followed; one that left the name on this server (now
        a replica) costs one connect per command until it is a primary again. Connections
        in use by other threads are left to finish (their READONLY comes here too). A
        Cluster client follows its topology itself."""
        if not isinstance(self.client, redis.Redis):
            return
        try:
            self.client.connection_pool.disconnect(inuse_connections=False)
        except Exception:  # the pool's own failure: the next command meets it, or not
            log.warning("could not drop the Redis client's connections after a READONLY", exc_info=True)

    def _recheck_writes(self, conversation_id: str | None = None) -> None:
        """While Redis refuses writes for want of memory or as a replica, at most once
        per WRITES_RECHECK_INTERVAL_S: whether it takes them again (under this
        conversation's tag, if any), which ends the degradation; if still full, the
        deferred purge, whose DELs a full Redis lets through, but not on a replica, which
        refuses them (module docstring). Never raises: its caller has answered."""
        with self._lock:
            now = time.monotonic()
            if (self._refused is None or self.degraded_since is None
                    or now - self._writes_checked_at < WRITES_RECHECK_INTERVAL_S):
                return
            self._writes_checked_at = now
        try:
            self.tier.check_writes(conversation_id)
        except RECHECKED_REFUSALS as exc:
            if type(exc) is not self._refused:  # full now rather than a replica, or the reverse
                self._fail(exc)
            if isinstance(exc, HotOutOfMemory):
                self._run_on_recover()
            return
        except REDIS_ERRORS as exc:
            self._fail(exc)
            return
        except Exception:  # a reply no check expects: the next write tells
            log.warning("could not check whether Redis takes writes again", exc_info=True)
            return
        self._ok()

    def _distrust(self, conversation_id: str, exc: BaseException) -> HotSet | None:
        """After an unexpected failure: drop the conversation's set and rebuild it from
        the log; None (degraded) if Redis fails that too. The cold log busy or down
        (`cold_failure`), here or in the rebuild, is raised as it is: the set is not to
        blame (module docstring)."""
        if cold_failure(exc):
            raise exc
        if isinstance(exc, HotStale) and exc.reason == STALE_DROPPED:
            # a rebuild's set that Redis dropped at once (evicted under maxmemory, flushed):
            # Redis is up and the set was sound; this call answers from the log, the next
            # read rebuilds it
            log.info("hot set of %s was dropped by Redis right after its rebuild (evicted under maxmemory?); "
                     "its next read rebuilds it", conversation_id)
            return None
        refused = refusal("command", exc) if isinstance(exc, redis.exceptions.ResponseError) else None
        if refused is not None:  # a plain command's refusal (BUSY, MISCONF, ...): not the set's fault
            self._fail(refused)
            return None
        log.error("hot set of %s failed unexpectedly; rebuilding it from the log", conversation_id,
                  exc_info=exc)
        self.last_error = f"{type(exc).__name__}: {exc}"
        try:
            self.tier.drop(conversation_id)
            hs = self._rebuild(conversation_id)
        except Exception as again:
            if cold_failure(again):
                raise
            self._fail(again)
            return None
        self._ok()
        return hs

    def _distrust_after_write(self, conversation_id: str, exc: BaseException) -> None:
        """`_distrust` after the log's write (an admit, a pin): never raises, so the
        caller's committed write is not answered as failed; the cold log busy or down
        leaves the set to its next read, which catches up with the log."""
        try:
            self._distrust(conversation_id, exc)
        except Exception as cold:  # only cold_failure escapes _distrust
            log.warning("hot set of %s not updated now: the cold log failed (%s); its next read catches up",
                        conversation_id, cold)

    @property
    def healthy(self) -> bool:
        return self.degraded_since is None

    def _ping(self) -> None:
        """Whether Redis answers: one PING (its refusals mapped as a command's), then,
        while it refused writes, whether it takes them again (`_recheck_writes`). Raises
        REDIS_ERRORS; a PING answered has ended an outage (`_ok(wrote=False)`)."""
        try:
            self.client.ping()
        except redis.exceptions.ResponseError as exc:  # BUSY, MISCONF (which refuses PING too)
            refused = refusal("PING", exc)
            if refused is None:
                raise
            raise refused from exc
        self._ok(wrote=False)
        self._recheck_writes()

    def probe(self, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
        """A health check's look at a degraded link: ask Redis whether it answers again
        (`_ping`) and wait at most `timeout_s` for it; whether the link is healthy then.
        A healthy link asks nothing (its requests tell), nor does a check while another's
        probe is in flight (it reports the link as it stands). Never raises."""
        if self.degraded_since is None:
            return True
        if not self._probing.acquire(blocking=False):
            return self.healthy
        done = threading.Event()

        def run() -> None:
            try:
                self._ping()
            except REDIS_ERRORS as exc:
                self._fail(exc)
            except Exception:  # a reply no check expects: the next request tells
                log.warning("could not probe the hot tier at %s", self.shown_url, exc_info=True)
            finally:
                self._probing.release()
                done.set()

        try:
            threading.Thread(target=run, name="tiermem-hot-probe", daemon=True).start()
        except RuntimeError:  # no thread to be had (interpreter shutting down): as it stands
            self._probing.release()
            return self.healthy
        done.wait(timeout_s)
        return self.healthy

    # -- cold -> hot -------------------------------------------------------------------------

    def generation(self, conversation_id: str) -> str:
        info = self.cold.conversation(conversation_id)
        return self._generation_at(info["created_at"] if info else 0.0)

    def _generation_at(self, created: object) -> str:
        return f"{self.cold.db_uuid}:{created!r}"

    def _hot_turns(self, conversation_id: str, rows: Sequence[TurnRow]) -> tuple[list[HotTurn], str]:
        """The rows as hot turns, and the log fingerprint of the last of those ('' when none)."""
        if not rows:
            return [], ""
        msgs = {m.position: m for m in
                self.cold.history(conversation_id, start=rows[0].position, end=rows[-1].position)}
        out = []
        tip = ""
        for r in rows:
            m = msgs.get(r.position)
            if m is None:  # salvaged row: it cannot be rendered, so it is not hot
                continue
            pinned, priority = pin_state(r)
            out.append(HotTurn(r.position, r.tokens, pinned, priority, json.dumps(m.body, ensure_ascii=False)))
            tip = turn_fingerprint(r.content_hash, r.created_at)
        return out, tip

    def _payloads(self, conversation_id: str, positions: Sequence[int]) -> dict[int, str]:
        """The hot payloads (the stored bodies as JSON text) at `positions`; a row that
        cannot be rendered (salvaged) or is gone is absent."""
        out: dict[int, str] = {}
        for i in range(0, len(positions), PAYLOAD_READ_POSITIONS):
            for m in self.cold.get(conversation_id, positions[i:i + PAYLOAD_READ_POSITIONS]):
                out[m.position] = json.dumps(m.body, ensure_ascii=False)
        return out

    def _replay_rows(self, conversation_id: str, rows: Sequence[TurnRow], generation: str,
                     pin_stamp: str, pin_version: int | None = None) -> HotSet:
        """The hot set that replaying `rows` gives, reading only the survivors' bodies.

        The members follow from positions, tokens and pins alone (the turn rows), so the
        replay is simulated here (tiers.hot.simulate_replay, APPLY_LUA's rules) and only
        the members' bodies, and the last row's (it sets the set's last position and
        tip), are read and written: reading and encoding every body of the log was 55%
        of a rebuild (2.0 s at 20,000 turns, 5.8 s at 60,000, audit_huge F6), under the
        store's lock for the read, and the Lua replay of every turn most of the rest. A
        row that turns out unrenderable (salvaged) is left out and the replay run again,
        as the full replay never admitted it; only an unrenderable row that the replay
        evicts stays unseen (its tokens took part): a log written through tiermem holds
        none. `pin_stamp`: the hot tier's pin stamp read before `rows` (tiers.hot);
        `pin_version`: the log's pin version read before them (tiers.hot, pin versions)."""
        tier = self.tier
        skip: set[int] = set()
        while True:
            live = [r for r in rows if r.position not in skip] if skip else rows
            state = simulate_replay(((r.position, r.tokens, *pin_state(r)) for r in live),
                                    budget=tier.budget_tokens, head=tier.head_protect, tail=tier.tail_protect,
                                    bias=tier.eviction_bias)
            wanted = list(state.members)
            if live and (not wanted or wanted[-1] != live[-1].position):
                wanted.append(live[-1].position)
            texts = self._payloads(conversation_id, wanted)
            unrenderable = [p for p in wanted if p not in texts]
            if not unrenderable:
                tip = turn_fingerprint(live[-1].content_hash, live[-1].created_at) if live else ""
                return tier.load(conversation_id, state, texts, generation=generation, tip=tip,
                                 pin_stamp=pin_stamp, pin_version=pin_version)
            # at least one row fewer each round: it ends. The rows again, as a row gone
            # rather than unrenderable (erased or pruned meanwhile) may have taken others
            # with it, whom skipping one by one would replay the log once each for.
            skip.update(unrenderable)
            rows = self._turn_rows(conversation_id)

    def _turn_rows(self, conversation_id: str) -> list[TurnRow]:
        """Every turn row of the conversation, read TURN_READ_ROWS positions at a time:
        each read holds the store's lock, which another tenant's reads and appends in
        this process wait for (one read of 20,000 rows held it ~0.5 s, audit_huge F6)."""
        last = self.cold.last_position(conversation_id)
        out: list[TurnRow] = []
        for start in range(0, last + 1, TURN_READ_ROWS):
            out += self.cold.turns(conversation_id, start=start, end=start + TURN_READ_ROWS - 1)
        # appends made while reading: the set covers the log up to some turn, as any
        # rebuild does, and the next read catches up with the rest
        return as_seen(self.cold, conversation_id, out)

    def _rebuild(self, conversation_id: str) -> HotSet:
        """The set replayed from the log. A pin or unpin of another process landing
        between the read of the rows and the load leaves it `pins_behind` (tiers.hot, pin
        stamps): it is rebuilt again, up to PIN_RACE_REBUILDS times in all."""
        gen = self.generation(conversation_id)
        for _ in range(PIN_RACE_REBUILDS):
            # the stamp before the rows: a pin after it is either in them or marks the set;
            # the log's pin version too: a pin change after it is either in the rows or
            # one the next write of the set checks for (tiers.hot, pin versions)
            stamp = self.tier.pin_stamp(conversation_id, gen)
            version = self.cold.pin_version(conversation_id)
            rows = self._turn_rows(conversation_id)
            hs = self._replay_rows(conversation_id, rows, gen, stamp, version)
            with self._lock:
                self.rebuilds += 1
            if not hs.pins_behind:
                break
        if self.cold.conversation(conversation_id) is None:
            # erased between the read and the write: the erasure's own deletion may have
            # run before this write, so the keys it just made are deleted here (an
            # erasure commits before it deletes, so one of the two always sees the other);
            # the set read serves only the call that was already under way
            self.tier.drop_all(conversation_id)
        return hs

    def _sync(self, conversation_id: str) -> tuple[HotSet, bool, bool]:
        """The conversation's hot set, rebuilt or caught up with the log as needed;
        whether it was rebuilt, and whether anything was written."""
        gen = self.generation(conversation_id)
        hs = self.tier.read(conversation_id)
        # pins_behind: a pin or unpin of another process reached Redis while this set was
        # being rebuilt from rows read before it (tiers.hot, pin stamps)
        if hs is None or hs.generation != gen or hs.pins_behind:
            if hs is not None:
                self._note_foreign(conversation_id, hs.generation)
            return self._rebuild(conversation_id), True, True
        tier = self.tier
        kept = (hs.budget, hs.head_protect, hs.tail_protect, hs.eviction_bias)
        configured = (tier.budget_tokens, tier.head_protect, tier.tail_protect, tier.eviction_bias)
        # None (a meta of a version before the rules were recorded) never matches: rebuilt once
        if kept != configured:
            if conversation_id not in self._rules_rebuilt:
                if len(self._rules_rebuilt) >= MAX_BUDGET_REBUILDS_TRACKED:
                    self._rules_rebuilt.clear()
                self._rules_rebuilt.add(conversation_id)
                return self._rebuild(conversation_id), True, True
            if not self._rules_mismatch_logged:
                self._rules_mismatch_logged = True
                log.warning("another process sharing this Redis writes hot sets under %s (this one: %s); every "
                            "process should use one hot_budget_tokens, head_protect, tail_protect and "
                            "eviction_bias", _rules_text(kept), _rules_text(configured))
        stale, rows, version, prev_tip = self._against_log(conversation_id, hs)
        if stale is not None:
            return self._rebuild(conversation_id), True, True
        if rows:
            turns, tip = self._hot_turns(conversation_id, rows)
            try:
                # prev_tip again: another process may have replaced the set since the read
                self._count(self.tier.admit_many(conversation_id, turns, generation=gen, tip=tip,
                                                 prev_tip=prev_tip, log_pins=self._admitted_pins(rows, version)))
            except HotStale:
                return self._rebuild(conversation_id), True, True
            return self.tier.read(conversation_id) or self._rebuild(conversation_id), False, True
        return hs, False, False

    def _note_foreign(self, conversation_id: str, stored_generation: str | None) -> None:
        """Before a rebuild overwrites a set of `stored_generation`: when another database
        wrote it (its generation names another db uuid), warn once per conversation (up to
        FOREIGN_WARNED_MAX): two stores pointed at one Redis by mistake share the keys of
        their like-named conversations, and each call of either rebuilds the other's set
        from its log, silently (review r_redis s4c: every call a rebuild, a context
        91 -> 214 ms). Only a set found another's again after this process rebuilt it is
        warned of: the first may be what a store no longer running left (the source of
        `migrate-store`, a data dir reset on the same Redis: each conversation's first read
        warned, up to FOREIGN_WARNED_MAX lines, before). Never raises."""
        if not stored_generation or stored_generation.partition(":")[0] == self.cold.db_uuid:
            return  # none, or ours (an older incarnation of the conversation, a restore)
        with self._lock:
            if conversation_id in self._foreign_warned or len(self._foreign_warned) >= FOREIGN_WARNED_MAX:
                return
            if conversation_id not in self._foreign_rebuilt:  # the first: rebuilt, remembered
                self._foreign_rebuilt[conversation_id] = None
                if len(self._foreign_rebuilt) > FOREIGN_REBUILT_MAX:
                    self._foreign_rebuilt.popitem(last=False)
                log.debug("hot set of %s was written by another tiermem database (%s); rebuilt from this "
                          "one's log", conversation_id, stored_generation.partition(":")[0])
                return
            del self._foreign_rebuilt[conversation_id]
            self._foreign_warned.add(conversation_id)
            last = len(self._foreign_warned) == FOREIGN_WARNED_MAX
        log.warning("hot set of %s in %s was written by another tiermem database (%s; this one %s) and is "
                    "rebuilt from this one's log: two stores share one Redis, so each rebuilds the other's "
                    "sets of like-named conversations on every call (a full rebuild from the log each); give "
                    "each store its own Redis database or server (redis_url, e.g. redis://host:6379/1)%s",
                    conversation_id, self.shown_url, stored_generation.partition(":")[0], self.cold.db_uuid,
                    f"; no more conversations are named ({FOREIGN_WARNED_MAX} were)" if last else "")

    def _against_log(self, conversation_id: str, hs: HotSet) -> tuple[str | None, list[TurnRow], int, str]:
        """The set `hs` of this log's generation against the log as it stands, writing
        nothing: why it must be rebuilt (STALE_DIVERGED, STALE_PINS; None: it need not be),
        the log's turns it lacks (to admit), the log's pin version, and the fingerprint of
        the log's turn at the set's last position ('' for an empty set)."""
        # The log from the set's last position on: its first row must be the very turn the
        # set ends with (module docstring: a set ahead of the log, or from a discarded
        # timeline, is rebuilt); the rest, if any, are the appends the set missed.
        # the log's pin version with them, in one statement: read after the set (below)
        rows, version = self.cold.turns_and_pin_version(conversation_id, start=max(hs.last_position, 0))
        prev_tip = ""
        if hs.last_position >= 0:
            head = rows[0] if rows and rows[0].position == hs.last_position else None
            prev_tip = turn_fingerprint(head.content_hash, head.created_at) if head is not None else ""
            if head is None or prev_tip != hs.tip:
                return STALE_DIVERGED, [], version, prev_tip
            rows = rows[1:]
        # The log's pin version, read after the set: one the set has not reached is a pin
        # change whose script never ran (or has not yet); one past it, a set of another
        # timeline of the log (tiers.hot, pin versions). With turns to admit, the admit
        # checks it (`_admitted_pins`).
        if not rows and hs.pin_version != version:
            return STALE_PINS, [], version, prev_tip
        return None, rows, version, prev_tip

    def staleness(self, conversation_id: str, hs: HotSet) -> str | None:
        """Why the stored set `hs` (as `HotTier.read` gave it) is not the log's
        conversation as it stands, by the checks the next read makes (`_sync`), writing
        nothing: 'generation' (another database's or an older incarnation's set),
        'pins_behind' (a pin raced its rebuild), STALE_DIVERGED (its last turn is not the
        log's: restored from an older snapshot, or ahead of the log), STALE_PINS (it
        missed a pin change), STALE_BEHIND (the log has turns it lacks: the next read
        admits them); None when it is current. A set built under other settings is not
        named: the next read rebuilds it only once per process (`_sync`)."""
        if hs.generation != self.generation(conversation_id):
            return "generation"
        if hs.pins_behind:
            return "pins_behind"
        stale, rows, version, _ = self._against_log(conversation_id, hs)
        if stale is not None or not rows:
            return stale
        # turns to admit: the admit checks the set's pin version against the changes of
        # the log before theirs (`_admitted_pins`; tiers.hot, pin versions), refusing a set
        # that misses one (or holds one the log has not: another timeline) for a rebuild
        pins = self._admitted_pins(rows, version)
        if hs.pin_version is not None and not pins.before <= hs.pin_version <= pins.after:
            return STALE_PINS
        return STALE_BEHIND

    @staticmethod
    def _admitted_pins(rows: Sequence[TurnRow], now: int) -> LogPins:
        """The log's pin changes an admit of the new `rows` applies (tiers.hot, pin
        versions): up to `now`, the log's version read with them (tiers.store
        `turns_and_pin_version`: one snapshot, so it holds every change they show), less
        the changes the rows account for with their pin flags, counted low (each
        load-bearing row was one at least, as its append or a relabel; each explicitly
        pinned row one more, its pin): never another writer's change taken for theirs."""
        own = sum(bool(r.load_bearing) + (r.pinned_priority is not None) for r in rows)
        return LogPins(max(now - own, 0), now)

    def on_append(self, conversation_id: str, positions: list[int]) -> AdmitResult | None:
        try:
            # admit checks the generation and the gap atomically (HotStale), so no extra
            # round trip to compare generations first
            gen = self.generation(conversation_id)
            # from the turn before the first new one: the set must end with it (else it grew
            # from a discarded timeline of the log: HotStale 'diverged', rebuilt below)
            rows, version = self.cold.turns_and_pin_version(conversation_id, start=max(positions[0] - 1, 0),
                                                            end=positions[-1])
            prev_tip = ""
            if rows and rows[0].position < positions[0]:
                prev_tip = turn_fingerprint(rows[0].content_hash, rows[0].created_at)
                rows = rows[1:]
            turns, tip = self._hot_turns(conversation_id, rows)
            try:
                res = self.tier.admit_many(conversation_id, turns, generation=gen, tip=tip, prev_tip=prev_tip,
                                           log_pins=self._admitted_pins(rows, version))
            except HotStale as stale:
                # the stored set missed appends (Redis was down, or another process's
                # admit raced ours) or a pin change (tiers.hot, pin versions): the log
                # has them all, replay it
                self._note_foreign(conversation_id, stale.stored_generation)
                self._rebuild(conversation_id)
                self._ok()
                return None
            self._count(res)
            self._ok()
            return res
        except StoreUnavailable as exc:  # an OSError, but the cold log's (cold_failure)
            self._distrust_after_write(conversation_id, exc)
            return None
        except REDIS_ERRORS as exc:
            self._fail(exc)
            self._recheck_writes(conversation_id)
            return None
        except Exception as exc:
            self._distrust_after_write(conversation_id, exc)
            return None

    def read(self, conversation_id: str) -> HotRead:
        try:
            hs, rebuilt, wrote = self._sync(conversation_id)
            self._ok(wrote=wrote)
            self._recheck_writes(conversation_id)
            return HotRead(hs, False, rebuilt)
        except StoreUnavailable:  # an OSError, but the cold log's (cold_failure): the caller's 503
            raise
        except REDIS_ERRORS as exc:
            self._fail(exc)
            self._recheck_writes(conversation_id)
            return HotRead(None, True, error=self.last_error)
        except Exception as exc:
            again = self._distrust(conversation_id, exc)
            if again is None:
                return HotRead(None, True, error=self.last_error)
            return HotRead(again, False, True)

    def refresh(self, conversation_id: str) -> None:
        try:
            self._rebuild(conversation_id)
            self._ok()
        except StoreUnavailable as exc:  # an OSError, but the cold log's (cold_failure)
            self._distrust_after_write(conversation_id, exc)
        except REDIS_ERRORS as exc:
            self._fail(exc)

    def pin(self, conversation_id: str, position: int, priority: int, *, log_move: int | None = None,
            log_pins: LogPins | None = None) -> None:
        """Pin the turn in the set, after the log's pin (or, from `unpin`, the log's
        classifier pin). `log_move`: the pin version the caller's log write moved to
        (tiers.store `set_pin`; None: it moved nothing, or it is not known), so that a
        set that missed an earlier pin change of the log is rebuilt (`_log_pins`).
        `log_pins`, instead: the changes it applies, named by the caller (a supersession's)."""
        try:
            rows = self.cold.turns(conversation_id, start=position, end=position)
            turns, _ = self._hot_turns(conversation_id, rows)
            turn = turns[0] if turns else None
            if turn is not None:
                turn = HotTurn(turn.position, turn.tokens, True, priority, turn.payload)
            log_pins = log_pins or self._log_pins(conversation_id, log_move)
            self._caught_up(conversation_id, lambda wait: self._count(self.tier.pin(
                conversation_id, position, priority, generation=self.generation(conversation_id), turn=turn,
                log_pins=log_pins, wait_gap=wait)))
            self._ok()
        except HotStale as exc:
            self._stale_pin(conversation_id, exc)
        except StoreUnavailable as exc:  # an OSError, but the cold log's (cold_failure)
            self._distrust_after_write(conversation_id, exc)
        except REDIS_ERRORS as exc:
            self._fail(exc)
        except Exception as exc:  # the pin is in the log: the rebuild shows it
            self._distrust_after_write(conversation_id, exc)

    def unpin(self, conversation_id: str, position: int, *, log_move: int | None = None,
              log_pins: LogPins | None = None) -> None:
        """Follow the log's pin state after a caller's unpin: a turn the log still pins
        (the classifier's pin of a load-bearing turn nothing superseded, `pin_state`)
        stays pinned in the set at the classifier's priority, as a rebuild would leave
        it; any other is unpinned. `log_move` and `log_pins` as in `pin` (a supersession's
        unpins name the changes its write made, tiers.store `set_superseded`; with
        neither, their changes are checked as not the unpin's own: the set is rebuilt)."""
        try:
            rows = as_seen(self.cold, conversation_id, self.cold.turns(conversation_id, start=position, end=position))
            if rows:
                pinned, priority = pin_state(rows[0])
                if pinned:
                    self.pin(conversation_id, position, priority, log_move=log_move, log_pins=log_pins)
                    return
            log_pins = log_pins or self._log_pins(conversation_id, log_move)
            self._caught_up(conversation_id, lambda wait: self._count(self.tier.unpin(
                conversation_id, position, generation=self.generation(conversation_id), log_pins=log_pins,
                wait_gap=wait)))
            self._ok()
        except HotStale as exc:
            self._stale_pin(conversation_id, exc)
        except StoreUnavailable as exc:  # an OSError, but the cold log's (cold_failure)
            self._distrust_after_write(conversation_id, exc)
        except REDIS_ERRORS as exc:
            self._fail(exc)
        except Exception as exc:
            self._distrust_after_write(conversation_id, exc)

    def _log_pins(self, conversation_id: str, log_move: int | None) -> LogPins:
        """The log's pin changes a pin or unpin applies (tiers.hot, pin versions): the one
        its log write made, at `log_move`; without one, none of its own, checked against
        the log's version now (a change whose script has not run yet, or never will, has
        the set rebuilt)."""
        if log_move is not None:
            return LogPins(log_move - 1, log_move)
        now = self.cold.pin_version(conversation_id)
        return LogPins(now, now)

    def _caught_up(self, conversation_id: str, op: Callable[[bool], None]) -> None:
        """Run a pin or unpin; when the set has not admitted its turn yet (HotStale
        'ahead': another process committed it to the log and its admit has not run), catch
        the set up with the log (`_sync`, which admits it with its pin flag as the log has
        it now) and run it once more."""
        try:
            self._in_order(op)
        except HotStale as exc:
            if exc.reason != STALE_AHEAD:
                raise
            self._sync(conversation_id)
            self._in_order(op)

    def _in_order(self, op: Callable[[bool], None]) -> None:
        """Run a pin or unpin (`op(wait)`); while its set lacks an earlier pin change of
        the log (PinChangeGap: most likely another process's pin whose log write came
        before this one's and whose script has not landed yet), wait for that script and
        run it again, for up to `pin_gap_wait_s` (PIN_GAP_WAIT_S) in all. The last try
        does not wait: a change no script follows is HotStale 'pins' (the set stamped, the
        caller rebuilds it), as every such gap was at once before (a full rebuild for two
        pins that reached Redis in the other order)."""
        waited, delay = 0.0, PIN_GAP_FIRST_WAIT_S
        while waited < self.pin_gap_wait_s:
            try:
                op(True)
                return
            except PinChangeGap:
                with self._lock:
                    self.pin_gap_waits += 1
                time.sleep(delay)
                waited += delay
                delay = min(delay * 2, max(self.pin_gap_wait_s - waited, PIN_GAP_FIRST_WAIT_S))
        op(False)

    def _stale_pin(self, conversation_id: str, exc: HotStale) -> None:
        """A pin or unpin the stored set refused, having written nothing. Of another
        generation (another database on this Redis, or an older incarnation): not ours
        to touch, and our next read rebuilds our set from the log, pin included. Still
        ahead of a set caught up with the log (`_caught_up`): the set cannot hold the
        turn (a row that cannot be rendered), or another process's rebuild from rows read
        before it replaced the set, whose next read catches up with the turn as the log
        has it. Missing a pin change of the log (STALE_PINS: a pin or unpin whose script
        never ran): rebuilt from the log, which holds it and this one. Any other refusal
        (an inconsistent set) is a set that cannot be trusted."""
        if exc.reason in ("generation", STALE_AHEAD):
            self._ok()
            return
        if exc.reason in (STALE_PINS, STALE_GAP):  # a gap only from a caller that asked to wait
            try:
                self._rebuild(conversation_id)
            except StoreUnavailable as again:  # an OSError, but the cold log's (cold_failure)
                self._distrust_after_write(conversation_id, again)
                return
            except REDIS_ERRORS as again:
                self._fail(again)
                return
            except Exception as again:
                self._distrust_after_write(conversation_id, again)
                return
            self._ok()
            return
        self._distrust_after_write(conversation_id, exc)

    def drop(self, conversation_id: str) -> None:
        try:
            self.tier.drop(conversation_id)
        except REDIS_ERRORS as exc:
            self._fail(exc)

    def erase(self, keys: list[str]) -> list[str]:
        """Delete every Redis key of these conversation keys (hot set, cached views, epoch
        state) and the epoch states of other conversations that show their turns
        (planner.epoch `drop_showing`, read from a set under each key's tag, so before
        it); returns the keys it could not reach (Redis down), for the caller to retry."""
        # lazy: as in `epochs`, a process that never plans imports no planner until it erases
        from tiermem.planner.epoch import drop_showing

        try:
            drop_showing(self.tier, self.cold.db_uuid, keys)
        except REDIS_ERRORS as exc:
            self._fail(exc)
            return list(keys)
        left: list[str] = []
        for i, key in enumerate(keys):
            try:
                self.tier.drop_all(key)
            except REDIS_ERRORS as exc:
                self._fail(exc)
                left.extend(keys[i:])
                break
        return left

    def drop_counted(self) -> int | None:
        """Delete every live conversation's hot set and shared epoch state: after the
        store recounted its turns' tokens under another tokenizer on open
        (tiers.recount), both hold the old counts, and a set kept within the budget by them
        holds more real tokens than its budget. Each set is rebuilt from the log at its
        next read, and the next context starts a new epoch. Its pin stamp stays (tiers.hot:
        it never goes with the set). Pipelined, DROP_COUNTED_PIPELINE conversations a
        round trip. Redis failing it leaves it owed (`_counted_owed`): done when Redis
        answers again, before the link's other recovery work. Returns how many
        conversations' keys it deleted, None while owed."""
        from tiermem.planner.epoch import EPOCH_KEY_SUFFIX  # lazy, as `epochs`

        self._counted_owed = True
        keys = self.cold.all_keys()
        try:
            for i in range(0, len(keys), DROP_COUNTED_PIPELINE):
                pipe = self.client.pipeline(transaction=False)
                for key in keys[i:i + DROP_COUNTED_PIPELINE]:  # one tag: one slot, one DEL on Cluster too
                    pipe.execute_command("DEL", *self.tier.keys(key), self.tier.tag(key) + EPOCH_KEY_SUFFIX)
                pipe.execute()
        except DROP_COUNTED_ERRORS as exc:
            # a pipeline's refusal (a replica's READONLY) comes as a plain reply error
            failure = refusal("delete", exc) if isinstance(exc, redis.exceptions.ResponseError) else exc
            if failure is None:
                raise
            self._fail(failure)
            log.warning("could not drop the hot sets and epoch states counted with the store's former tokenizer "
                        "(%s): dropped when Redis answers again", failure)
            return None
        self._counted_owed = False
        return len(keys)

    def rebuild_all(self) -> int:
        n = 0
        for conv in self.cold.all_keys():
            try:
                self._rebuild(conv)
                n += 1
            except StoreUnavailable:  # an OSError, but the cold log's (cold_failure): the caller's
                raise
            except REDIS_ERRORS as exc:
                self._fail(exc)
                break
        return n

    def _count(self, res: AdmitResult) -> None:
        with self._lock:  # appends run on many threads of one process
            self.evictions += len(res.evicted)
            self.demotions += len(res.demoted)

    def counters(self) -> dict[str, Any]:
        """What a /metrics scrape reads: whether Redis answers (one PING) and this
        process's running counts. Its cost does not depend on how many conversations
        there are, unlike stats(), which reads every set. The sizes of the sets (tokens,
        pins, overflow) are not kept as running totals in Redis: a set that expires idle
        (`hot_idle_ttl_s`), is evicted by maxmemory or flushed leaves no trace to subtract,
        and on Redis Cluster a global counter key cannot share a script with a
        conversation's keys (one hash slot per script)."""
        healthy = True
        try:
            self._ping()
        except REDIS_ERRORS as exc:
            self._fail(exc)
            healthy = False
        with self._lock:
            return {"healthy": healthy and self.healthy, "rebuilds": self.rebuilds,
                    "evictions": self.evictions, "demotions": self.demotions}

    def stats(self, *, namespace: str | None = None) -> dict[str, Any]:
        # first, so that what this reports is current: a degraded link asks Redis itself
        # (`probe`: a store with no set, or a namespace's stats, read none), as do refused writes
        self.probe()
        self._recheck_writes()
        # `healthy` and `degraded_since` are this process's link, shown to a namespace's
        # stats too: every tenant's calls go through it (a degraded link degrades their
        # contexts, whose plans say so), they depend on no namespace's contents, and
        # /healthz shows the same state to anyone without a token (/v1/stats exports
        # `healthy` only). What may name another tenant's conversation is left out below
        out: dict[str, Any] = {
            "healthy": self.healthy,
            "degraded_since": self.degraded_since,
            "backend": "embedded" if self.embedded is not None else "external",
        }
        if namespace is None:
            # process-wide facts: an error may name any tenant's conversation, and the
            # rebuild count is everyone's activity; a namespace's stats show neither
            out.update({"last_error": self.last_error, "misconfigured": self.misconfigured,
                        "rebuilds": self.rebuilds})
        # one read for every conversation's creation time: a lookup per conversation
        # (its metadata and log end) was most of a namespace's stats at 2,000 of them
        births = self.cold.created_times(namespace)
        tokens = members = pins = evictions = overflow = 0
        demoted: dict[str, list[int]] = {}
        demoted_counts: dict[str, int] = {}
        behind: list[str] = []
        try:
            # counts only, pipelined: reading each whole set renewed its idle TTL (a
            # polled /v1/stats kept every idle set alive) and took a round trip per set
            for conv, hs in self.tier.summaries(list(births)).items():  # no sets: Redis is not asked
                # a set under this key of another generation (another database sharing
                # this Redis) is not ours to count
                if hs.generation != self._generation_at(births[conv]):
                    continue
                if hs.pins_behind:
                    # a pin or unpin it missed (a rebuild raced it): its pins and members are
                    # not the log's until its next read rebuilds it, so they are not added
                    # up as if they were; it is named instead
                    behind.append(conv)
                    continue
                tokens += hs.total_tokens
                members += hs.members
                pins += hs.pins
                evictions += hs.evictions
                overflow += hs.overflow_tokens
                if hs.demoted:
                    # a long conversation's demoted pins number in the thousands: stats
                    # list at most SUMMARY_DEMOTED_LISTED of them and count them all
                    demoted[conv] = hs.demoted
                    demoted_counts[conv] = hs.demoted_count
            if births:  # else Redis said nothing: no sign that it is back
                self._ok(wrote=False)
        except REDIS_ERRORS as exc:
            self._fail(exc)
            out["healthy"] = False
        # by the ids their owners know, never by conversation key: a conversation erased
        # between the Redis read and this lookup has no name any more, and is left out
        # (its key would say that its id is, or was, used in another namespace)
        names = self.cold.names_of([*demoted, *behind]) if demoted or behind else {}
        out.update({"tokens": tokens, "members": members, "pins": pins, "evictions": evictions,
                    "overflow_tokens": overflow,
                    "demoted_pins": {names[k]: v for k, v in demoted.items() if k in names},
                    "demoted_pin_counts": {names[k]: v for k, v in demoted_counts.items() if k in names},
                    "demoted_pins_listed_max": SUMMARY_DEMOTED_LISTED,
                    "pins_behind": sorted(names[k] for k in behind if k in names)})
        return out


def cold_busy(exc: BaseException) -> bool:
    """Whether `exc` is the cold log busy: a lock or statement timeout, SQLite busy
    (tiers.files `storage_problem`), the error a caller answers 503 busy."""
    problem = storage_problem(exc)
    return problem is not None and problem.busy


def cold_failure(exc: BaseException) -> bool:
    """Whether `exc` is the cold log's failure, not Redis's: the store down
    (StoreUnavailable: closed, unreachable, silent; a ConnectionError, which REDIS_ERRORS
    would take for Redis's), or any error but Redis's that tiers.files `storage_problem`
    names (busy, `cold_busy`; a lost connection, a read-only or failing disk): the
    caller answers it as the store's, and the set is not to blame."""
    if isinstance(exc, StoreUnavailable):
        return True
    if isinstance(exc, (redis.exceptions.RedisError, *REDIS_ERRORS)):
        return False
    return storage_problem(exc) is not None


def as_seen(cold: ColdLog, conversation_id: str, rows: Sequence[TurnRow]) -> list[TurnRow]:
    """`rows` as readers see them past the conversation's popped turns
    (tiers.statements.Hidden), for `pin_state`: a hidden turn (a popped correction, a
    control row) pins nothing, since no context shows it, and a turn that only a popped
    turn superseded, wholly or a statement of it (`Hidden.revived`), is current again, so
    a load-bearing one is the classifier's pin again. The raw rows kept the popped
    correction pinned in the set (never evicted, its tokens held against the budget) and
    its revived target unpinned, on every admit and rebuild, while the log's pinned block
    showed the reverse. One read of the control rows; nothing more when none hides a turn."""
    hid = read_hidden(cold, conversation_id)
    if not hid.positions:
        return list(rows)
    return [replace(r, load_bearing=False, pinned_priority=None) if r.position in hid.positions else hid.row(r)
            for r in rows]


def pin_state(row: TurnRow) -> tuple[bool, int]:
    """Explicit pins win; otherwise a load-bearing turn that nothing superseded is
    pinned with its classifier priority."""
    if row.pinned_priority is not None:
        return True, row.pinned_priority
    if row.load_bearing and row.superseded_by is None:
        # the planner's threshold, imported here: a process that only appends or reads
        # never imports the planner (~25 ms)
        from tiermem.planner.candidates import AUTO_PIN_MIN_PRIORITY

        if row.priority >= AUTO_PIN_MIN_PRIORITY:
            return True, row.priority
    return False, row.priority


def _rules_text(rules: tuple[int, int | None, int | None, float | None]) -> str:
    """A set's budget and eviction rules as the settings name them, for a log line."""
    names = ("hot_budget_tokens", "head_protect", "tail_protect", "eviction_bias")
    return " ".join(f"{name}={'unrecorded' if value is None else value}"
                    for name, value in zip(names, rules, strict=True))

"""Keys of erased conversations that a Redis holds again: restarted from a snapshot (RDB
or AOF) taken before their erasure, or failed over to a replica that lagged behind it.

An erasure deletes every Redis key of the conversation (tiermem.hotlink `erase`), but a
Redis restored from an older snapshot has them back, texts included, until their idle
TTL (`hot_idle_ttl_s`, 7 days): never served (a conversation's key is never issued
twice, so no read names them), yet erased text sits in Redis's memory and goes into its
next snapshot. Each process therefore checks a Redis it connects to anew:

- The Redis records, per database (its uuid), the newest tombstone (tiers.store
  `erased_after`: erasures and prunes, ids in commit order) up to which it was checked:
  the marker key `{<prefix>:!erasures}:<db uuid>`. `!` is escaped in every
  conversation's tag (tiers.keys.escape_id), so no conversation's keys share it, and it
  stays inside the `{<prefix>:` key pattern an ACL user of the hot tier is confined to.
- When that marker is missing (a fresh or flushed Redis, one restored from a snapshot
  older than the first check) or older than the store's newest tombstone, the keys of
  the conversations tombstoned since the marker are purged: one SCAN of the prefix's
  keys, the epoch states of other conversations that showed their turns first
  (planner.epoch `drop_showing`, read from the tags' sets before they go), then a DEL
  per tag, pipelined SCAN_COUNT keys at a time; once the SCAN is through, the marker is
  set to the newest tombstone read before it began. The scan goes in steps of at most
  RESTORED_SCAN_KEYS_PER_CALL keys, one per answered command of the link, so no call
  waits for more than one step however large the Redis (measured: 2.5-4 us a key). A
  marker above the store's newest (a backup of the store restored under this Redis) is
  set down to it, nothing purged.
- The check is not per call: tiermem.hotlink runs it after the first command Redis
  answers on a new connection (a connect hook on the pools of the clients it makes: a
  restarted Redis drops every connection, and redis-py reconnects within the command
  that met the drop), and, for a client the caller made or a Cluster client, after the
  first answered command at least RESTORED_RECHECK_S after the last check. So a call
  that meets a restored Redis purges before it returns (all of it, for a Redis of up to
  RESTORED_SCAN_KEYS_PER_CALL keys); a check costs one GET and one index seek when
  nothing was erased since. While Redis refuses writes (a replica, full) the check
  waits for them to come back.
- An erasure whose Redis keys are deleted sets the marker too (`mark_purged`), so a
  Redis restarted from a snapshot taken since scans nothing: to the newest tombstone
  read before it found no key owed (tiers.store `deferred_purges`: every erasure
  records its keys as owed in its own transaction and crosses them off after their
  DEL), so the marker never passes an erasure whose keys are still in Redis. A marker
  set lower than another process's (two erasures at once) costs one scan, never a
  missed key. Marker and keys are in one snapshot, which thus holds a marker no newer
  than what it was purged of.
- Tombstones are never deleted, so every erasure and prune is found. Keys an
  unreachable Redis owes are `purge_deferred`'s, which deletes them when it answers.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import redis
from redis.exceptions import ResponseError

from tiermem.tiers.hot import SCAN_COUNT, HotTier, refusal, refusals

if TYPE_CHECKING:
    from tiermem.tiers.store import ColdLog

# the marker's id inside the tag: `!` never survives tiers.keys.escape_id, so no
# conversation's tag is this one
MARKER_TAG_ID = "!erasures"
# a tombstone id past any real one: `erased_after` from it reads only the newest id
NEWEST_ONLY_MARK = 2 ** 62
TOMBSTONES_PAGE = 5_000  # tombstones read per statement while collecting the tags to purge
# how often a link that cannot watch its client's connections checks all the same
RESTORED_RECHECK_S = 5.0
# Redis keys one call's check scans at most before the call goes on (the next answered
# command scans on): 2.5-4 us a key on a 2-core machine under load (a unix socket,
# SQLite), so at most 55-90 ms of one call's time; a Redis of 400,000 keys is through in
# 20 calls (1.0-1.1 s in all)
RESTORED_SCAN_KEYS_PER_CALL = 20_000
# what one conversation found costs a step, counted in keys scanned: its share of the
# pipelined DELs, and a SMEMBERS of its shown-in set where it has one (~190 us)
KEYS_PER_FOUND = 40


@dataclass
class RestoredPurge:
    """One check under way or done: the marker it found (None: missing), the store's
    newest tombstone then, the tags of the conversations tombstoned since (to their
    keys), where its SCAN is (0 before the first step and once done), Redis keys scanned,
    conversations found and keys deleted (with the epoch states of others), and the time
    its steps took."""

    marker: int | None
    newest: int
    tags: dict[str, str]
    cursor: int = 0
    steps: int = 0
    scanned: int = 0
    conversations: int = 0
    deleted: int = 0
    seconds: float = 0.0
    done: bool = False
    found: set[str] = field(default_factory=set)  # the tags found so far


def marker_key(tier: HotTier, db_uuid: str) -> str:
    return "{" + tier.key_prefix + ":" + MARKER_TAG_ID + "}:" + db_uuid


def _marker(raw: Any) -> int | None:
    """The stored marker, None when missing or not a tombstone id (garbled: as missing,
    which costs one scan)."""
    text = raw.decode() if isinstance(raw, bytes) else raw
    return int(text) if isinstance(text, str) and text.isdigit() else None


def _set_marker(tier: HotTier, key: str, newest: int) -> None:
    """SET the marker, a refusal (a replica's READONLY, a full Redis) named as the tier's
    writes are, so the link degrades for it rather than taking it for a bug."""
    try:
        tier.client.set(key, str(newest))
    except ResponseError as exc:
        refused = refusal("erasure marker write", exc)
        if refused is not None:
            raise refused from exc
        raise


def _tombstoned_tags(tier: HotTier, cold: ColdLog, after: int) -> dict[str, str]:
    """The hash tag of each conversation tombstoned after `after`, to its key."""
    tags: dict[str, str] = {}
    mark = after
    while True:
        _newest, rows = cold.erased_after(mark, TOMBSTONES_PAGE)
        tags.update((tier.tag(key), key) for _id, key in rows)
        if len(rows) < TOMBSTONES_PAGE:
            return tags
        mark = rows[-1][0]


def _delete(tier: HotTier, found: dict[str, list[str]]) -> int:
    """DEL each tag's keys (one slot per tag, so a Cluster pipeline splits nothing),
    SCAN_COUNT keys per round trip; a refusal named as the tier's `drop` names it."""
    deleted = 0
    pipe = tier.client.pipeline(transaction=False)
    queued = 0
    try:
        for keys in found.values():
            for i in range(0, len(keys), SCAN_COUNT):
                pipe.execute_command("DEL", *keys[i:i + SCAN_COUNT])
                queued += min(SCAN_COUNT, len(keys) - i)
                if queued >= SCAN_COUNT:
                    deleted += sum(int(n) for n in pipe.execute())
                    queued = 0
        if queued:
            deleted += sum(int(n) for n in pipe.execute())
    except ResponseError as exc:
        refused = refusal("delete", exc)
        if refused is not None:
            raise refused from exc
        raise
    return deleted


def begin_check(tier: HotTier, cold: ColdLog, db_uuid: str) -> RestoredPurge | None:
    """This Redis's marker against the store's newest tombstone: None when current
    (one GET, one index seek), else the check to run (`step`) with the tags of the
    conversations tombstoned since the marker (module docstring)."""
    start = time.perf_counter()
    key = marker_key(tier, db_uuid)
    with refusals("erasure marker read"):  # a BUSY Redis: HotBusy, the link degrades and retries
        marker = _marker(tier.client.get(key))
    newest, _rows = cold.erased_after(NEWEST_ONLY_MARK, 1)
    if marker is not None and marker >= newest:
        if marker > newest:  # the store went back under this Redis: count from its newest
            _set_marker(tier, key, newest)
        return None
    purge = RestoredPurge(marker, newest, _tombstoned_tags(tier, cold, marker or 0))
    purge.seconds = time.perf_counter() - start
    return purge


def step(tier: HotTier, db_uuid: str, purge: RestoredPurge, max_keys: int) -> None:
    """Scan about `max_keys` more of the prefix's keys (SCAN steps of at most
    SCAN_COUNT), delete those of the tombstoned conversations among them (the epoch
    states of others that showed them first), and once the SCAN is through, set the
    marker to the newest tombstone read before it began (`purge.done`). Raises Redis's
    errors; a step that failed can be run again (SCAN's cursor survives deletions)."""
    start = time.perf_counter()
    cursor = purge.cursor
    try:
        _step(tier, db_uuid, purge, max_keys)
    except BaseException:
        purge.cursor = cursor  # the keys this step found are found again by the next
        raise
    finally:
        purge.seconds += time.perf_counter() - start


def _step(tier: HotTier, db_uuid: str, purge: RestoredPurge, max_keys: int) -> None:
    from tiermem.planner.epoch import SHOWN_IN_SUFFIX, drop_showing  # lazy, as tiermem.hotlink `erase`

    found: dict[str, list[str]] = {}
    if purge.tags:
        # escape_id leaves no glob character in a tag, and the prefix matches _PREFIX_RE
        match, count = "{" + tier.key_prefix + ":*", max(1, min(SCAN_COUNT, max_keys))
        names: list[Any]
        scanned = 0
        while True:
            with refusals("erasure scan"):  # as the marker read
                if isinstance(tier.client, redis.Redis):  # a cursor to stop at and come back to
                    purge.cursor, names = tier.client.scan(purge.cursor, match=match, count=count)
                else:  # a Cluster client scans every node in one go
                    names, purge.cursor = list(tier.client.scan_iter(match=match, count=count)), 0
            scanned += len(names)
            for name in names:
                name = name.decode() if isinstance(name, bytes) else str(name)
                tag = name[:name.find("}") + 1]
                if tag in purge.tags:
                    found.setdefault(tag, []).append(name)
            # each conversation found costs round trips of its own (its shown-in set, its
            # DEL): a step stops at max_keys / KEYS_PER_FOUND of them too
            if purge.cursor == 0 or scanned >= max_keys or len(found) * KEYS_PER_FOUND >= max_keys:
                break
        purge.scanned += scanned
    if found:
        purge.found.update(found)  # a tag's keys may come in several steps: counted once
        purge.conversations = len(purge.found)
        # only a tag whose shown-in set this step found can list other states (one
        # SMEMBERS each, where every found tag would cost one); a set a later step finds
        # is still there then, as only what a step found is deleted
        listing = [purge.tags[t] for t, under in found.items() if t + SHOWN_IN_SUFFIX in under]
        if listing:
            purge.deleted += drop_showing(tier, db_uuid, listing)
        purge.deleted += _delete(tier, found)
    purge.steps += 1
    if purge.cursor == 0:
        _set_marker(tier, marker_key(tier, db_uuid), purge.newest)
        purge.done = True


def watch_connects(client: Any, connected: Callable[[], None]) -> bool:
    """Have `connected` called after each new connection of `client`'s pool (after its
    handshake, which it keeps: AUTH, SELECT): what a restarted Redis makes redis-py do
    within the command that met the dropped one. Only for a standalone client whose pool
    has no connection yet (the link's own); False otherwise: the caller checks by time."""
    if not isinstance(client, redis.Redis):
        return False
    kwargs = client.connection_pool.connection_kwargs
    before = kwargs.get("redis_connect_func")

    def handshake(conn: Any) -> None:
        if before is not None:
            before(conn)
        elif hasattr(conn, "on_connect_check_health"):
            # redis-py's own handshake, without the health check (a PING) that its
            # on_connect() adds: that PING reconnects after a refused handshake (NOAUTH),
            # recursing into this hook
            conn.on_connect_check_health(check_health=False)
        else:
            conn.on_connect()
        connected()

    kwargs["redis_connect_func"] = handshake
    return True


def mark_purged(tier: HotTier, cold: ColdLog, db_uuid: str) -> bool:
    """After an erasure's Redis keys were deleted and crossed off: set the marker to the
    store's newest tombstone, unless some erasure's keys are still owed (module
    docstring). Whether it was set."""
    newest, _rows = cold.erased_after(NEWEST_ONLY_MARK, 1)  # first: an erasure after it is not covered
    if cold.deferred_purges():
        return False
    _set_marker(tier, marker_key(tier, db_uuid), newest)
    return True

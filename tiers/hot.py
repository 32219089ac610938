"""The hot tier: a per-conversation working set in Redis under a hard token budget.

Invariants:

- All keys of one conversation share the hash tag `{<prefix>:<escaped id>}`, so every
  script touches one slot and runs unchanged on Redis Cluster. Ids are percent-encoded
  outside `[A-Za-z0-9._:@~-]`, so `{`, `}` and anything odd can never split or merge tags.
- Every mutation (admit, pin, unpin, a rebuild chunk) is one Lua script: the state is
  loaded, the operations and the eviction they cause are simulated in Lua tables, and
  the difference is written back. A script either returns an error status having
  written nothing (beyond clearing orphaned keys of a lost set, and a pin's stamp, below),
  or writes its whole effect.
- Eviction: while the total exceeds the budget, evict an unpinned member that is neither
  among the first `head_protect` nor the last `tail_protect` members of the hot window.
  Among those candidates (in position order, length L), the victim sits at index
  `ceil((1 - bias) * (L - 1) / 2 - 0.5)`: bias 0 evicts the candidate nearest the middle
  (the older one on a tie), bias 1 the oldest. The default 0.25 leans to the middle,
  because models attend best to the start and the end of a context and least to its
  middle ("lost in the middle"), while drifting a quarter of the way toward older turns,
  so that of turns equally far from the middle the older goes first and the set does
  not keep ancient middle turns forever.
- Pinned members are never evicted. When there is no candidate left and the total still
  exceeds the budget, a pin is demoted: removed from the hot set and recorded in the
  meta (`demoted` positions and their tokens), so the caller can represent it in the
  warm tier (it stays pinned in the log, and the context shows it among the pins). The
  lowest-priority pin (then the oldest) goes: of all pins while the pins alone exceed
  the budget, else of those outside the protected head and tail, so that the budget is
  hard but for the protected turns. When only protected turns (pinned ones among them)
  keep the total over the budget, eviction stops and `overflow_tokens = total - budget`
  is reported. Nothing is ever dropped without being reported.
- Eviction touches only these Redis keys; it never reaches the cold log.
- `admit` is idempotent per position (a position at or below the last admitted one is a
  no-op, so a retried script cannot resurrect an evicted turn) and it checks that the
  stored set belongs to the caller's generation and that positions arrive without a gap.
  Otherwise it raises `HotStale` and the caller rebuilds from the cold log: that is how a
  flushed, restarted or partly evicted Redis, or one that missed appends while it was
  down, is detected. Maxmemory evicts single keys, not a set: the meta records how many
  members, pins and demoted pins the set has, and an admit, pin or unpin (HotStale
  'inconsistent') and a read or summary (no set) check them, the members' tokens against
  `total` and, while the counts' stamp does not hold, the demoted pins' against
  `demoted_tokens` (while it holds, the demoted hash's size HLEN against its count tells
  a lost hash without reading it), so a set that lost its zset,
  pin or demoted hash is rebuilt, never served or extended without them. The counts
  are stamped (`counted`) with the state they were written with (COUNT_STAMP_FIELDS)
  and checked only while the stamp matches the meta: a process of a version before the
  counts (a rolling deploy, a rollback) updates `last`, `total` or `evictions` and leaves
  the counts as they were: such a set is checked as one written before the counts were,
  until a write of this version restamps it (only its pin or unpin that moves no member
  changes none of those: the counts are checked and the set rebuilt once). `pin` and `unpin` check the generation too (HotStale, nothing
  written): a Redis shared by two databases must never take one's turn into the other's
  set. A pin or unpin of a position past the set's last admitted one raises HotStale
  'ahead' (STALE_AHEAD), nothing written: another process committed the turn to the log
  and its admit has not run yet, with the pin flag it read; the caller catches the set up
  with the log and pins again (tiermem.hotlink), so neither the pin nor the unpin is left
  to an admit that read the turn before it.
- The meta records the fingerprint of the last admitted turn (`tip`,
  tiers.keys.turn_fingerprint), given by the caller with each admit and rebuild, so that
  the caller can tell a set derived from this log from one derived from another timeline
  of it (a restored backup: same generation, and possibly the same last position).
- `rebuild` replays the turns through the same Lua engine as `admit`, so the result is
  the set that live admits of the same turns with the same pin flags produce. (A pin
  applied long after a turn's admission may have re-admitted it after evictions that a
  replay with the pin in place would not make; the rebuilt set is the canonical one.)
  The replay runs in temporary keys and is renamed over the live ones in one script, so
  readers never see a half-built set. The replay carries no texts: the members are
  decided from positions, tokens and pins alone. `simulate_replay` runs the same admit
  and eviction rules in Python and `load` writes its result in one script, so a long
  log's rebuild reads and sends the texts of its survivors only (tiermem.hotlink).
- Pin stamps: a rebuild replaces the set by one computed from log rows read before, so a
  pin or unpin that another process makes in between (its log write after the rows were
  read, its script before the load) would be overwritten, and a pin that finds no set
  (dropped, expired, not built yet) writes nothing a rebuild could lose it against.
  Every pin and unpin script therefore records a fresh random stamp for its generation
  in `T:ps` first thing, whatever it finds (no set, another generation's, a stale one),
  except when it answers AHEAD, NOTHOT or GAP (nothing done; the caller acts). A rebuild reads
  that stamp (`pin_stamp`) before the log's rows and `load`/`rebuild` record it as the
  set's `pinstamp`; a pin or unpin applied to a set moves the set's `pinstamp` to its
  own stamp only when the set held the latest stamp before, so a set that missed one
  stays marked. `read` reports `pins_behind` whenever the set's `pinstamp` is not the
  stamp of its generation (`summaries` too: stats name such a set rather than count it),
  and the caller rebuilds (tiermem.hotlink): a pin whose log
  write came before the rebuild read its rows is in them; one whose script ran after
  the load changed the new set; any other ran its script after the stamp was read and
  before the load, and leaves the loaded set `pins_behind`. `T:ps` is renewed with the
  set's idle TTL and never deleted with the set (`drop`), only with the conversation
  (`drop_all`): a stamp that vanished could come back equal to what a rebuild read.
- Pin versions: the log numbers the pin changes of each conversation (tiers.store
  `pin_version`: a pin set or cleared, a load-bearing turn appended or relabelled, a
  supersession), and the set records in `pinver` the number up to which every change is
  in it. A rebuild records the version read before its rows. A write names the changes
  it applies (`LogPins`: those after `before` up to `after`; APPLY_LUA ARGV[12]): a pin
  or unpin the one its log write made (tiers.store `set_pin` returns it), a
  supersession's unpins those its write made (tiers.store `set_superseded` returns the
  version and their count; the last unpin claims them, tiermem.memory), an admit the
  log's version read after its rows less the changes its new turns account for, counted
  low (a load-bearing turn one, an explicitly pinned one one more), and none when the
  set has admitted one of its turns already (their changes may be among those the set
  holds). The set must hold every change up to `before`, else the script answers
  STALE 'pins' (STALE_PINS), nothing written but a pin's stamp, and the caller rebuilds
  the set from the log. A pin or unpin that names its own change (`before` below
  `after`) which the set holds already (a rebuild read the log past it) applies nothing,
  as applying it again could undo a later change of the same turn. Two processes' pins
  reach Redis in the other order than their log writes now and then (each such pair was
  a full rebuild): a pin or unpin asked to wait (flag w) that finds a change up to
  `before` missing from a set that has seen every pin script so far answers GAP
  (PinChangeGap), nothing written, not even the stamp, and the caller waits up to
  PIN_GAP_WAIT_S for the missing script and pins again; its last try asks not to wait,
  so a change no script follows is STALE 'pins' as before (stamped, then rebuilt)
  (tiermem.hotlink). So a pin or unpin whose script never ran (its process died
  between the log write and the script, or Redis refused that one script), or a change
  no script follows (a relabel outside a supersession, a replay's), is found by the next
  admit, pin or unpin of the conversation, and by its next read, which compares the
  versions (tiermem.hotlink); a normal append or pin rebuilds nothing and costs no
  round trip to Redis. A set without `pinver` (written before pin versions) holds no
  change: its first checked write or read rebuilds it.
- Redis being unreachable surfaces as redis-py's ConnectionError/TimeoutError, quickly
  (sub-second timeouts, one retry); the client reconnects on its own once Redis is back.
  A write Redis refuses whole surfaces as one of tiermem's errors (`refusal`): out of
  memory HotOutOfMemory, a read-only replica HotReadOnly, an ACL user without a command
  or key HotAccessDenied; a wrong or missing password as redis-py's AuthenticationError.

Key layout per conversation, tag T = `{tm:<escaped id>}`:
  T:meta  hash  gen, total, budget, head, tail, bias (the head_protect, tail_protect and
                eviction bias it was kept under; absent: written before they were
                recorded), last, tip, evictions, overflow, demoted_tokens,
                members, pins, demoted_pins (counts of T:z, T:pin, T:d),
                counted (COUNT_STAMP_FIELDS' values when the counts were written, '|'-joined),
                pinstamp (the pin stamp the set has seen; '' none),
                pinver (the log's pin version the set holds every change up to; absent: none)
  T:z     zset  member = position, score = position (the hot window in log order)
  T:t     hash  position -> token count
  T:p     hash  position -> payload text (the caller's rendering of the turn)
  T:pin   hash  pinned member position -> priority (absent: not pinned)
  T:d     hash  demoted position -> tokens (every pin pushed out and not back nor unpinned
                since: it grows with the conversation, not the budget, so the append
                script never reads or rewrites it whole: it takes the count and tokens from
                the meta while the count stamp holds, checks the size by HLEN, reads an
                entry by HGET and changes entries by HSET/HDEL; a read (every context)
                likewise checks its size by HLEN and lists its positions only while they
                are at most READ_DEMOTED_LISTED; stats read its size and one HSCAN page,
                SUMMARY_DEMOTED_LISTED; `HotTier.demoted_pins` reads it whole, for tools)
  T:ps    hash  generation -> the stamp of its last pin or unpin (outlives the set)
A member's record is thus split over T:t, T:p and T:pin: an admit loads only the
ordered positions and the pins, never the texts nor every member's record; that halved
the script's time against one packed record per member (measured, 40-member window).
"""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import json
import math
import re
import secrets
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis
from redis.backoff import ExponentialBackoff
from redis.cluster import RedisCluster
from redis.exceptions import (
    NoPermissionError,
    NoScriptError,
    OutOfMemoryError,
    ReadOnlyError,
    RedisClusterUnreachableError,
    ResponseError,
    TryAgainError,
)
from redis.retry import Retry

from tiermem.tiers.errors import (
    BUSY_CODE,
    STALE_AHEAD,
    STALE_DROPPED,
    TRYAGAIN_CODE,
    HotAccessDenied,
    HotBusy,
    HotNotPersisting,
    HotOutOfMemory,
    HotReadOnly,
    HotStale,
    HotStateLost,
    HotTurnNotResident,
    PinChangeGap,
    TiermemError,
)
from tiermem.tiers.keys import hash_tag
from tiermem.tiers.redis_url import parse_redis_url

DEFAULT_SOCKET_TIMEOUT_S = 0.5
DEFAULT_HEALTH_CHECK_INTERVAL_S = 30
# Turns per script call. A replay chunk of 2000 turns (no texts) runs for a few ms of
# Lua, short enough not to stall other clients of a shared server.
ADMIT_CHUNK = 1000
REBUILD_CHUNK = 2000
SCAN_COUNT = 1000  # keys asked of each SCAN step, and deleted per DEL, when erasing a tag
# Temporary rebuild keys expire on their own if the rebuilding process dies midway.
REBUILD_TTL_MS = 120_000
PIN_STAMP_BYTES = 8  # of randomness in a pin stamp: no two stamps of a conversation collide
SUMMARY_PIPELINE_SETS = 256  # hot sets whose counts one round trip reads (6 commands each)
# The meta fields whose values, '|'-joined, stamp the counts (meta `counted`; APPLY_LUA
# and LOAD_LUA join them in this order): any version's admit changes `last`, an evicting
# or demoting pin or unpin `evictions` or `total`, an undemoting unpin `demoted_tokens`
COUNT_STAMP_FIELDS = ("last", "total", "evictions", "demoted_tokens")
# the meta fields a summary reads: its own four, then the counts that `_whole` checks
# and what tells whether they still hold
SUMMARY_META_FIELDS = ("gen", "total", "evictions", "overflow", "members", "pins", "demoted_pins", "counted",
                       "last", "demoted_tokens")
SUMMARY_REPLIES = 9  # a set's replies in `summaries`' pipeline: meta, five keys' sizes, demoted sample, pin stamps
# Demoted positions a summary lists per set (stats): the demoted hash grows with the
# conversation, so a summary reads its size (HLEN) and one HSCAN page of about this many
# entries, never the whole hash; it lists the lowest positions of that page, at most this many.
SUMMARY_DEMOTED_LISTED = 20
# Demoted positions a read lists (HotSet.demoted): every context() reads its set, so the
# read takes the demoted hash's size and tokens from HLEN and the meta, and lists the
# positions only while there are at most this many (READ_LUA); `HotTier.demoted_pins`
# reads them all.
READ_DEMOTED_LISTED = SUMMARY_DEMOTED_LISTED
MS_PER_S = 1000
MAX_IDLE_TTL_S = 365 * 86_400  # a hot set idle for a year is rebuilt from the log, if ever used again
# The shortest idle TTL in ms: Redis counts whole ms, and a TTL of 0 in the scripts means
# "never", so a positive TTL below 1 ms is rounded up to this rather than down to never.
MIN_IDLE_TTL_MS = 1

# Lua prints numbers with %.14g: integers stay exact below 10^14.
_MAX_INT = 10**14
_PREFIX_RE = re.compile(r"^[A-Za-z0-9._:-]+$")

# ----------------------------------------------------------------------------------------
# Lua. Redis 6.2: EVAL/EVALSHA only (no functions). Positions, tokens and priorities are
# integers below 10^14 (checked in Python), which Lua doubles hold and print exactly.
# ----------------------------------------------------------------------------------------

# Redis refuses a script's write for want of memory only until the script has written
# something: after that every write goes through, so that a script never stops half way.
# The scripts' first writes (DEL, ZREM) take no memory, so they let whole admits and
# rebuilds through past `maxmemory`. Each script that writes therefore begins with this
# write, which Redis refuses out of memory (SETRANGE takes memory) and which changes
# nothing (an empty SETRANGE leaves a string as it is and creates no key): out of memory,
# the whole script is refused before it writes anything. The key shares the set's hash
# tag (the same slot on Cluster, the same ACL key pattern) and never exists.
OOM_PROBE_LUA = r"""
redis.call('SETRANGE', KEYS[1] .. ':oom-probe', 0, '')
"""
# How Redis words the refusal (the reply starts with OOM; inside a script, after its name)
OOM_REPLY = "OOM command not allowed"
# How a replica refuses a write: the reply's code, which a script's error (Redis 6.2)
# carries inside its own text ("Error running script ...: -READONLY You can't write ...")
READONLY_REPLY = "READONLY"
# How Redis refuses a command the ACL user may not run: the reply's code (Redis 7 keeps
# it inside a script too), and Redis 6.2's words for it inside a script
NOPERM_REPLY = "NOPERM"
SCRIPT_NOPERM_REPLY = "The user executing the script can't run this command"
# Redis refusing any command for now (another client's script past lua-time-limit: BUSY; a
# Cluster slot migrating: TRYAGAIN) or every write while it cannot persist (MISCONF): the
# reply's code, at the start of a command's reply or, inside a script's error, after
# Redis's own prefix (6.2: "... @user_script:2: -MISCONF ..."). Whole words: BUSYKEY (a
# RESTORE's target exists) is none of them.
BUSY_REPLY = re.compile(rf"(?:^|[\s:-])({BUSY_CODE}|{TRYAGAIN_CODE})\b")
MISCONF_REPLY = re.compile(r"(?:^|[\s:-])MISCONF\b")

APPLY_LUA = OOM_PROBE_LUA + r"""
-- KEYS[1] meta hash, KEYS[2] position zset, KEYS[3] tokens hash, KEYS[4] payload hash,
-- KEYS[5] pin hash, KEYS[6] demoted hash, KEYS[7] pin stamp hash (all of one
-- conversation, one hash tag; KEYS[7] only for the live set, a replay's scratch has none).
-- ARGV[1] generation; ARGV[2] budget; ARGV[3] head_protect; ARGV[4] tail_protect;
-- ARGV[5] eviction bias in [0, 1] (ARGV[2..5] are stored in the meta as 'budget', 'head',
-- 'tail', 'bias', as given);
-- ARGV[6] flags: c = check consistency, and that the first new admit follows the stored
--                    last position (later ones in the same call need only ascend),
--                g = check the stored generation equals ARGV[1],
--                r = reset (delete the six keys first),
--                p = ops carry payloads (ARGV[13..], one per admit and per pin with a turn),
--                e = return evicted positions, m = return the member positions,
--                s = a pin or unpin: stamp it (ARGV[11]; module docstring, pin stamps);
--                w = a pin or unpin that waits for a missing earlier pin change: 'GAP'
--                    instead of 'STALE|pins' while the set has seen every pin script;
-- ARGV[7] ttl in ms for the six keys (0: leave as is);
-- ARGV[8] ops: "<k><pos>,<tokens>,<pinned>,<priority>;" repeated, k = a (admit),
--         p (pin; tokens -1 when no turn is given), u (unpin).
-- ARGV[9] tip: the log fingerprint of the last admit in ops; stored as meta 'tip' when the
--         call moves the set's last position ('' there: unknown, the caller rebuilds).
-- ARGV[10] prev_tip: with flag c, the log fingerprint of the turn just before the first
--         admit ('' : not checked); the stored tip must equal it when that admit extends
--         the set, else the set grew from another timeline of the log ('STALE|diverged').
-- ARGV[11] with flag s: this pin's or unpin's stamp, recorded under ARGV[1] in KEYS[7]
--         on every reply but AHEAD, NOTHOT and GAP (which leave the caller to act), and as
--         the set's meta 'pinstamp' when the set held KEYS[7]'s stamp before ('' without s).
-- ARGV[12] the log's pin versions, '<before>,<after>' ('' : not checked; module
--         docstring, pin versions): this call applies the log's pin changes numbered
--         after <before> up to <after>, so the set must already hold every change up to
--         <before> (meta 'pinver' at least <before>), else it missed one: 'STALE|pins',
--         nothing written (but the pin stamp); then 'pinver' becomes the larger of it and
--         <after>. When the set has already admitted a turn this call admits, the changes
--         of those turns may be among those it holds: <after> must then be held already.
--         A set without 'pinver' (written before pin versions, or loaded without one)
--         holds none; a call that starts a set starts it from 0.
-- Returns one string (redis-py parses one bulk string much faster than nested arrays):
--   'OK|<evicted,...>|<demoted,...>|total|overflow|last|n_evicted|<members,...>'
--   (members only with flag m), or, with nothing written (but the pin stamp),
--   'STALE|reason|stored last|stored generation', 'NOTHOT|position', 'AHEAD|position|last',
--   'GAP|held|needed' (flag w: a pin change the set lacks, nothing written; below)
--   (AHEAD and the admits' checks come before the pin version's: a set only behind the log
--   is caught up, not rebuilt);
--   a pin or unpin without a stored set answers 'OK|||0|0|-1|0|' and writes only its stamp.
-- Only what eviction needs is loaded: the ordered positions, the pins with their
-- tokens, and the meta; other members' tokens are fetched when they become victims.
local meta_key, z_key, t_key, p_key, pin_key, d_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local gen = ARGV[1]
local budget = tonumber(ARGV[2])
local head = tonumber(ARGV[3])
local tail = tonumber(ARGV[4])
local bias = tonumber(ARGV[5])
local flags = ARGV[6]
local ttl = tonumber(ARGV[7])
local ops = ARGV[8]
local tip_arg = ARGV[9]
local prev_tip = ARGV[10]
local function flag(c) return string.find(flags, c, 1, true) ~= nil end
local check, check_gen, with_payloads = flag('c'), flag('g'), flag('p')
local want_evicted, want_members = flag('e'), flag('m')
local new_stamp = flag('s') and ARGV[11] or nil
local log_before, log_after = string.match(ARGV[12], '^(%d+),(%d+)$')
-- whether an admit of this call names a turn the set admitted before (module docstring)
local readmitted = false
-- A pin or unpin tells a rebuild under way in another process that it happened, whatever
-- it finds here (no set, another generation's): that rebuild's rows may predate it
local function mark()
  if new_stamp then
    redis.call('HSET', KEYS[7], ARGV[1], new_stamp)
    if ttl > 0 then redis.call('PEXPIRE', KEYS[7], ttl) end
  end
end

if flag('r') then redis.call('DEL', meta_key, z_key, t_key, p_key, pin_key, d_key) end

local meta = {}
local raw = redis.call('HGETALL', meta_key)
for i = 1, #raw, 2 do meta[raw[i]] = raw[i + 1] end
local exists = raw[1] ~= nil
local last, total, evictions = -1, 0, 0
if exists then
  last = tonumber(meta.last or '')
  total = tonumber(meta.total or '')
  evictions = tonumber(meta.evictions or '')
end
local stored_last = last or -1
local function stale(reason)
  mark()
  return 'STALE|' .. reason .. '|' .. stored_last .. '|' .. (meta.gen or '')
end
if last == nil or total == nil or evictions == nil then return stale('inconsistent') end
if not exists then
  -- Members without a meta are leftovers of a partial loss (maxmemory eviction of
  -- single keys): they cannot be trusted, and a rebuild starts from nothing anyway.
  redis.call('DEL', z_key, t_key, p_key, pin_key, d_key)
elseif check_gen and meta.gen ~= gen then
  return stale('generation')
end
-- whether the set has seen every pin and unpin of its generation so far (its stamp is the
-- stamp hash's): only then does this one's stamp become the set's
local pinstamp = meta.pinstamp or ''
local seen_all = false
if new_stamp and exists and pinstamp == (redis.call('HGET', KEYS[7], ARGV[1]) or '') then
  pinstamp = new_stamp
  seen_all = true
end

-- A pin's or unpin's own change of the log (<before> below <after>) that the set holds
-- already (a rebuild read the log past it; module docstring, pin versions): applied again
-- it could undo a later change of the same turn, so nothing is applied, and the set is
-- stamped as having seen it.
if new_stamp and log_before and exists and tonumber(log_before) < tonumber(log_after)
    and (tonumber(meta.pinver or '') or -1) >= tonumber(log_after) then
  ops = ''
end

-- members[] holds the positions in ascending order, as numbers.
local members = redis.call('ZRANGE', z_key, 0, -1)
local orig = {}
for i = 1, #members do
  local p = tonumber(members[i])
  members[i] = p
  orig[p] = true
end
-- The counts the meta records hold while their stamp names the meta's state (hot.py
-- COUNT_STAMP_FIELDS): a set written before they were (no stamp), or since by a process
-- of a version before them (which left them as they were), is not checked on them
local function count_stamp(l, t, e, d) return table.concat({l, t, e, d}, '|') end
local counted = exists and check and meta.counted ~= nil
  and meta.counted == count_stamp(meta.last, meta.total, meta.evictions, meta.demoted_tokens or '')
if exists and check then
  if redis.call('HLEN', t_key) ~= #members then return stale('inconsistent') end
  if with_payloads and redis.call('HLEN', p_key) ~= #members then return stale('inconsistent') end
  if counted and tonumber(meta.members) ~= #members then return stale('inconsistent') end
end
-- tok: tokens known so far; pri[p] ~= nil exactly when member p is pinned.
local tok, pri = {}, {}
local pinned_total, n_pins = 0, 0
local praw = redis.call('HGETALL', pin_key)
if #praw > 0 then
  local names = {}
  for i = 1, #praw, 2 do
    local p = tonumber(praw[i])
    if not orig[p] then return stale('inconsistent') end
    pri[p] = tonumber(praw[i + 1])
    n_pins = n_pins + 1
    names[#names + 1] = praw[i]
  end
  for i = 1, #names, 1000 do
    local j = math.min(i + 999, #names)
    local ts = redis.call('HMGET', t_key, unpack(names, i, j))
    for k = 1, j - i + 1 do
      local t = tonumber(ts[k])
      if t == nil then return stale('inconsistent') end
      tok[tonumber(names[i + k - 1])] = t
      pinned_total = pinned_total + t
    end
  end
end
-- The demoted hash grows with the conversation (every pin ever pushed out stays in it
-- until it is unpinned or comes back), not with the budget: it is never read whole here.
-- Its count and tokens come from the meta while the count stamp holds (this version's
-- writes keep them), a single entry is read when an op may undemote it (HGET, cached in
-- `demoted`), and only the entries that change are written (HSET/HDEL). A set whose
-- stamp does not hold (written before the counts, or since by a version before them)
-- is read whole once, as before; the write restamps it.
local demoted, dtokens, n_demoted = {}, 0, 0
local d_all = true  -- whether `demoted` holds every entry (else absent means not read yet)
local d_changed = {}  -- position -> tokens (HSET) or false (HDEL)
local d_stamped = exists and meta.counted ~= nil and tonumber(meta.demoted_pins or '') ~= nil
  and tonumber(meta.demoted_tokens or '') ~= nil
  and meta.counted == count_stamp(meta.last, meta.total, meta.evictions, meta.demoted_tokens)
if d_stamped then
  n_demoted, dtokens, d_all = tonumber(meta.demoted_pins), tonumber(meta.demoted_tokens), false
  -- A demoted hash that maxmemory evicted on its own leaves no member without its record:
  -- only its size against the meta's count tells (O(1))
  if redis.call('HLEN', d_key) ~= n_demoted then return stale('inconsistent') end
elseif exists then
  local draw = redis.call('HGETALL', d_key)
  for i = 1, #draw, 2 do
    local t = tonumber(draw[i + 1])
    demoted[tonumber(draw[i])] = t
    dtokens = dtokens + t
    n_demoted = n_demoted + 1
  end
end
-- A pin hash that maxmemory evicted on its own: as the demoted hash above (a set that went
-- on without it would evict its pins)
if counted and (tonumber(meta.pins) ~= n_pins or tonumber(meta.demoted_pins) ~= n_demoted) then
  return stale('inconsistent')
end
-- the tokens of demoted pin p, or nil when p is not demoted
local function demoted_of(p)
  local t = demoted[p]
  if t ~= nil or d_all or n_demoted == 0 then return t end
  t = tonumber(redis.call('HGET', d_key, p))
  demoted[p] = t
  if t == nil then demoted[p] = false end
  return t
end

local added, removed, pin_dirty, newpay = {}, {}, {}, {}
local ev_out, dem_out = {}, {}
local n_evicted = 0

local function tokens_of(p)
  local t = tok[p]
  if t == nil then
    t = tonumber(redis.call('HGET', t_key, p))
    -- Only reachable through a hand-edited or half-lost set; the caller maps it to a rebuild.
    if t == nil then error('tiermem: inconsistent hot set, no tokens for position ' .. p) end
    tok[p] = t
  end
  return t
end

local function find(p)
  local lo, hi = 1, #members
  while lo <= hi do
    local mid = math.floor((lo + hi) / 2)
    local q = members[mid]
    if q == p then return mid, mid end
    if q < p then lo = mid + 1 else hi = mid - 1 end
  end
  return nil, lo
end

local function insert(p, t, pr)
  local _, at = find(p)
  table.insert(members, at, p)
  tok[p] = t
  total = total + t
  pri[p] = pr
  if pr then
    pinned_total = pinned_total + t
    n_pins = n_pins + 1
  end
  added[p], removed[p] = true, nil
end

local function remove_at(i)
  local p = table.remove(members, i)
  local t = tokens_of(p)
  total = total - t
  if pri[p] then
    pinned_total = pinned_total - t
    n_pins = n_pins - 1
    pri[p] = nil
    pin_dirty[p] = true
  end
  if added[p] and not orig[p] then added[p] = nil else added[p], removed[p] = nil, true end
  newpay[p] = nil
  return p, t
end

local function undemote(p)
  local t = demoted_of(p)
  if t then
    demoted[p] = false
    dtokens = dtokens - t
    n_demoted = n_demoted - 1
    d_changed[p] = false
  end
end

-- Index in members of the victim, or nil when there is no candidate. Candidates are
-- the unpinned members at indices lo..hi, and the victim is the (k+1)-th of them. With
-- few pins, skip over their indices (O(pins * log n)); with many, scan the window.
local function victim_index()
  local lo, hi = head + 1, #members - tail
  if lo > hi then return nil end
  local width = hi - lo + 1
  if n_pins * 4 < width then
    local pinned_idx = {}
    if n_pins > 0 then
      for p in pairs(pri) do
        local i = find(p)
        if i and i >= lo and i <= hi then pinned_idx[#pinned_idx + 1] = i end
      end
      table.sort(pinned_idx)
    end
    local L = width - #pinned_idx
    if L <= 0 then return nil end
    local k = math.ceil((1 - bias) * ((L - 1) / 2) - 0.5)
    if k < 0 then k = 0 end
    local i = lo + k
    for _, j in ipairs(pinned_idx) do
      if j <= i then i = i + 1 else break end
    end
    return i
  end
  local L = 0
  for i = lo, hi do
    if not pri[members[i]] then L = L + 1 end
  end
  if L == 0 then return nil end
  local k = math.ceil((1 - bias) * ((L - 1) / 2) - 0.5)
  if k < 0 then k = 0 end
  for i = lo, hi do
    if not pri[members[i]] then
      if k == 0 then return i end
      k = k - 1
    end
  end
end

-- Index in members of the lowest-priority pin (the oldest on equal priority: a strict <
-- in position order) among indices lo..hi, or nil when none is pinned there.
local function lowest_pin(lo, hi)
  local best, best_pri
  for i = lo, hi do
    local r = pri[members[i]]
    if r and (best == nil or r < best_pri) then best, best_pri = i, r end
  end
  return best
end

local function enforce()
  while total > budget do
    local n = #members
    local v = victim_index()
    local best = nil
    if v == nil then
      if pinned_total > budget then
        -- the pins alone pass the budget: any of them, protected or not
        best = lowest_pin(1, n)
      elseif n_pins > 0 then
        -- the pins fit but with the protected turns they do not: the budget is hard but
        -- for the protected turns (README), so a pin outside them goes
        best = lowest_pin(head + 1, n - tail)
      end
    end
    if v then
      local p = remove_at(v)
      n_evicted = n_evicted + 1
      evictions = evictions + 1
      if want_evicted then ev_out[#ev_out + 1] = p end
    elseif best then
      local p, t = remove_at(best)
      demoted[p] = t
      dtokens = dtokens + t
      n_demoted = n_demoted + 1
      d_changed[p] = t
      dem_out[#dem_out + 1] = p
    else
      break
    end
  end
end

local argi = 13
for k, ps, ts, pns, prs in string.gmatch(ops, '(%a)(%d+),(%-?%d+),([01]),(%-?%d+);') do
  local p, t, pr = tonumber(ps), tonumber(ts), tonumber(prs)
  local payload = nil
  if with_payloads and (k == 'a' or (k == 'p' and t >= 0)) then
    payload = ARGV[argi]
    argi = argi + 1
  end
  if k == 'a' then
    if p > last then
      -- Only the first new turn must follow the stored set: that proves the set has
      -- seen every earlier append. Within a batch the caller may skip positions (e.g.
      -- log rows it cannot render), exactly as a rebuild would.
      if check and last == stored_last and p ~= last + 1 then
        if last < 0 then return stale('missing') end
        return stale('gap')
      end
      -- ...and that the turn it ends with is the log's turn before this one.
      if check and last == stored_last and last >= 0 and prev_tip ~= '' and (meta.tip or '') ~= prev_tip then
        return stale('diverged')
      end
      -- a position past the last admitted one was never a member, so never demoted:
      -- looked up only where the whole hash is in hand (a rebuild's replay admits
      -- thousands of turns per call, and must not send a command per turn)
      if d_all then undemote(p) end
      insert(p, t, pns == '1' and pr or nil)
      newpay[p] = payload
      last = p
      enforce()
    end
    -- p <= last: admitted before (a retry, or a duplicate in a replay); admitting it
    -- again could resurrect a turn that was evicted since.
    if p <= stored_last then readmitted = true end
  elseif k == 'p' then
    -- No set: nothing to pin in; the next read rebuilds it from the log, pin included.
    if check and not exists then
      mark()
      return 'OK|||0|0|-1|0|'
    end
    if find(p) then
      if not pri[p] then
        pinned_total = pinned_total + tokens_of(p)
        n_pins = n_pins + 1
      end
      pri[p] = pr
      pin_dirty[p] = true
      undemote(p)
      enforce()
    elseif t >= 0 then
      if p > last then return 'AHEAD|' .. p .. '|' .. last end
      undemote(p)
      insert(p, t, pr)
      newpay[p] = payload
      enforce()
    else
      return 'NOTHOT|' .. p
    end
  elseif k == 'u' then
    if check and not exists then
      mark()
      return 'OK|||0|0|-1|0|'
    end
    if find(p) then
      if pri[p] then
        pinned_total = pinned_total - tokens_of(p)
        n_pins = n_pins - 1
        pri[p] = nil
        pin_dirty[p] = true
        enforce()
      end
    elseif p > last then
      -- not admitted yet: the admit on its way may carry the pin this unpin removes
      return 'AHEAD|' .. p .. '|' .. last
    else
      undemote(p)
    end
  end
end

-- Every pin change of the log up to <after> is in this set once this call is written,
-- unless one before the changes this call applies is missing from it (a pin or unpin
-- whose script never ran: its process died after the log write, or Redis refused that
-- one script): refused, the caller rebuilds the set from the log
local pinver = meta.pinver
if log_before then
  local had = 0
  if exists then had = tonumber(pinver or '') end
  local need = tonumber(log_before)
  if readmitted then need = tonumber(log_after) end
  if had == nil or had < need then
    -- With flag w, a set that has seen every pin script so far (its stamp is the
    -- conversation's) and knows its version lacks a change another process's script has
    -- most likely not run yet (its log write came first): 'GAP', nothing written, not
    -- even the stamp; the caller waits for that script and tries again (tiermem.hotlink)
    if flag('w') and seen_all and had ~= nil then return 'GAP|' .. had .. '|' .. need end
    return stale('pins')
  end
  if tonumber(log_after) > had then pinver = log_after else pinver = tostring(had) end
end

-- Write back what changed.
local function call_chunked(cmd, key, list)
  -- unpack() is bounded by the Lua C stack; 1000 is even, so pairs never split.
  for i = 1, #list, 1000 do
    redis.call(cmd, key, unpack(list, i, math.min(i + 999, #list)))
  end
end
local gone = {}
for p in pairs(removed) do gone[#gone + 1] = p end
if #gone > 0 then
  call_chunked('ZREM', z_key, gone)
  call_chunked('HDEL', t_key, gone)
  call_chunked('HDEL', p_key, gone)
end
local zargs, targs, pargs, pin_set, pin_del = {}, {}, {}, {}, {}
for p in pairs(added) do
  zargs[#zargs + 1] = p
  zargs[#zargs + 1] = p
  targs[#targs + 1] = p
  targs[#targs + 1] = tok[p]
  if newpay[p] then
    pargs[#pargs + 1] = p
    pargs[#pargs + 1] = newpay[p]
  end
  if pri[p] then
    pin_set[#pin_set + 1] = p
    pin_set[#pin_set + 1] = pri[p]
  end
end
for p in pairs(pin_dirty) do
  if pri[p] and (added[p] or (orig[p] and not removed[p])) then
    pin_set[#pin_set + 1] = p
    pin_set[#pin_set + 1] = pri[p]
  else
    pin_del[#pin_del + 1] = p
  end
end
if #zargs > 0 then call_chunked('ZADD', z_key, zargs) end
if #targs > 0 then call_chunked('HSET', t_key, targs) end
if #pargs > 0 then call_chunked('HSET', p_key, pargs) end
if #pin_del > 0 then call_chunked('HDEL', pin_key, pin_del) end
if #pin_set > 0 then call_chunked('HSET', pin_key, pin_set) end
-- only the demoted entries this call changed (the hash is never rewritten whole)
local d_set, d_del = {}, {}
for p, t in pairs(d_changed) do
  if t then
    d_set[#d_set + 1] = p
    d_set[#d_set + 1] = t
  else
    d_del[#d_del + 1] = p
  end
end
if #d_del > 0 then call_chunked('HDEL', d_key, d_del) end
if #d_set > 0 then call_chunked('HSET', d_key, d_set) end
local overflow = total - budget
if overflow < 0 then overflow = 0 end
-- Without flag g (a rebuild's later chunks) the stored generation stays.
if exists and meta.gen then gen = meta.gen end
-- The tip names the turn at `last`: it changes exactly when `last` does.
local tip = meta.tip or ''
if last ~= stored_last then tip = tip_arg end
mark()
-- the eviction rules the set was kept under, as given (tiermem.hotlink rebuilds a set kept
-- under others)
redis.call('HSET', meta_key, 'gen', gen, 'total', total, 'budget', budget, 'head', ARGV[3], 'tail', ARGV[4],
  'bias', ARGV[5], 'last', last, 'tip', tip, 'evictions', evictions, 'overflow', overflow,
  'demoted_tokens', dtokens, 'members', #members, 'pins', n_pins, 'demoted_pins', n_demoted,
  'counted', count_stamp(last, total, evictions, dtokens), 'pinstamp', pinstamp)
if pinver then redis.call('HSET', meta_key, 'pinver', pinver) end
if ttl > 0 then
  for _, key in ipairs(KEYS) do redis.call('PEXPIRE', key, ttl) end
end
return table.concat({'OK', table.concat(ev_out, ','), table.concat(dem_out, ','), total, overflow,
  last, n_evicted, want_members and table.concat(members, ',') or ''}, '|')
"""

FINISH_REBUILD_LUA = OOM_PROBE_LUA + r"""
-- KEYS[1..6] live meta, zset, tokens, payload, pin, demoted keys;
-- KEYS[7..12] the temporary keys a replay built, in the same order (same hash tag).
-- ARGV[1] the live keys' idle TTL in ms (0: none); ARGV[2] the pin stamp read before the
-- replayed rows (meta 'pinstamp'; module docstring); ARGV[3] the log's pin version read
-- before them (meta 'pinver'; '' none); then position, payload, position, payload, ...
-- for the members of the rebuilt set.
-- Writes the payloads into the temporary set, then renames it over the live keys in one
-- step, so that readers see either the old set or the whole new one.
-- Returns 'OK', or 'EXPIRED' when the temporary keys are gone (nothing written).
if redis.call('EXISTS', KEYS[7]) == 0 then return 'EXPIRED' end
local ttl = tonumber(ARGV[1])
for i = 4, #ARGV, 1000 do
  redis.call('HSET', KEYS[10], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
redis.call('HSET', KEYS[7], 'pinstamp', ARGV[2])
if ARGV[3] ~= '' then redis.call('HSET', KEYS[7], 'pinver', ARGV[3]) end
for i = 1, 6 do
  if redis.call('EXISTS', KEYS[i + 6]) == 1 then
    redis.call('RENAME', KEYS[i + 6], KEYS[i])
    if ttl > 0 then redis.call('PEXPIRE', KEYS[i], ttl) else redis.call('PERSIST', KEYS[i]) end
  else
    redis.call('DEL', KEYS[i])
  end
end
return 'OK'
"""

LOAD_LUA = OOM_PROBE_LUA + r"""
-- KEYS[1..6] meta, zset, tokens, payload, pin, demoted keys of one conversation,
-- KEYS[7] its pin stamp hash (left as it is; its idle TTL renewed with the set's).
-- ARGV[1] generation, [2] total, [3] budget, [4] last, [5] tip, [6] evictions,
-- [7] overflow, [8] demoted tokens, [9] idle TTL in ms (0: none), [10] the pin stamp
-- read before the rows the replay ran on (meta 'pinstamp'), [11] the log's pin version
-- read before them (meta 'pinver'; '' none), [12] head_protect, [13] tail_protect, [14]
-- eviction bias (meta 'head', 'tail', 'bias', as given); then the count of
-- members and position, tokens, payload for each (ascending); the count of pins and
-- position, priority for each; the count of demoted pins and position, tokens for each.
-- Replaces the conversation's set by this one (a replay simulated by the caller,
-- `simulate_replay`) in one step: readers see the old set or the whole new one.
local meta_key, z_key, t_key, p_key, pin_key, d_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
redis.call('DEL', meta_key, z_key, t_key, p_key, pin_key, d_key)
local function call_chunked(cmd, key, list)
  -- unpack() is bounded by the Lua C stack; 1000 is even, so pairs never split.
  for i = 1, #list, 1000 do
    redis.call(cmd, key, unpack(list, i, math.min(i + 999, #list)))
  end
end
local i = 15
local n = tonumber(ARGV[i])
i = i + 1
local zargs, targs, pargs = {}, {}, {}
for _ = 1, n do
  local pos = ARGV[i]
  zargs[#zargs + 1] = pos
  zargs[#zargs + 1] = pos
  targs[#targs + 1] = pos
  targs[#targs + 1] = ARGV[i + 1]
  pargs[#pargs + 1] = pos
  pargs[#pargs + 1] = ARGV[i + 2]
  i = i + 3
end
if n > 0 then
  call_chunked('ZADD', z_key, zargs)
  call_chunked('HSET', t_key, targs)
  call_chunked('HSET', p_key, pargs)
end
local counts = {}
for _, key in ipairs({pin_key, d_key}) do
  local m = tonumber(ARGV[i])
  local list = {}
  for j = i + 1, i + 2 * m do list[#list + 1] = ARGV[j] end
  if m > 0 then call_chunked('HSET', key, list) end
  counts[#counts + 1] = m
  i = i + 1 + 2 * m
end
redis.call('HSET', meta_key, 'gen', ARGV[1], 'total', ARGV[2], 'budget', ARGV[3], 'head', ARGV[12],
  'tail', ARGV[13], 'bias', ARGV[14], 'last', ARGV[4], 'tip', ARGV[5], 'evictions', ARGV[6], 'overflow', ARGV[7],
  'demoted_tokens', ARGV[8], 'members', n, 'pins', counts[1], 'demoted_pins', counts[2],
  'counted', table.concat({ARGV[4], ARGV[2], ARGV[6], ARGV[8]}, '|'), 'pinstamp', ARGV[10])
if ARGV[11] ~= '' then redis.call('HSET', meta_key, 'pinver', ARGV[11]) end
local ttl = tonumber(ARGV[9])
if ttl > 0 then
  for _, key in ipairs(KEYS) do redis.call('PEXPIRE', key, ttl) end
end
return 'OK'
"""

READ_LUA = r"""
-- KEYS[1..6] meta, zset, tokens, payload, pin, demoted keys of one conversation,
-- KEYS[7] its pin stamp hash.
-- ARGV[1] their idle TTL in ms, renewed by the read (0: none);
-- ARGV[2] how many demoted positions to list at most (READ_DEMOTED_LISTED).
-- Returns false when the meta is missing, else one JSON document (a single bulk string
-- parses far faster in redis-py than a hundred nested replies):
-- {"meta": [field, value, ...], "z": [positions in order], "t": [tokens aligned with z],
--  "p": [payloads aligned with z], "pin": [position, priority, ...],
--  "d": [the demoted positions, ascending, when at most ARGV[2]; else none],
--  "dn": the demoted hash's size,
--  "dt": its tokens summed, or false where the meta's count stamp holds,
--  "s": the pin stamp of the set's generation or false};
-- a missing token count or payload is false.
-- One consistent snapshot.
-- The demoted hash grows with the conversation (every pin ever pushed out stays in it
-- until it is unpinned or comes back), not with the budget, and every context() reads
-- the set: it is never read whole here while the count stamp holds. Its size (HLEN)
-- against the meta's count tells a hash that maxmemory evicted on its own (hot.py
-- `_whole`), its tokens are the meta's, and its positions are listed only while there
-- are at most ARGV[2] of them (HKEYS; not a page of HSCAN: a hash of up to
-- hash-max-ziplist-entries, 512 by default, is scanned whole in one page). A set whose
-- stamp does not hold (written before the counts, or since by a version before them)
-- has its tokens summed (HVALS), as before, until its next write restamps it.
local meta = redis.call('HGETALL', KEYS[1])
if meta[1] == nil then return false end
local ttl = tonumber(ARGV[1])
if ttl > 0 then
  for _, key in ipairs(KEYS) do redis.call('PEXPIRE', key, ttl) end
end
local z = redis.call('ZRANGE', KEYS[2], 0, -1)
local m = {}
for i = 1, #meta, 2 do m[meta[i]] = meta[i + 1] end
local stamp = false
if m.gen ~= nil then stamp = redis.call('HGET', KEYS[7], m.gen) end
local t, p = {}, {}
for i = 1, #z, 1000 do
  local j = math.min(i + 999, #z)
  local ts = redis.call('HMGET', KEYS[3], unpack(z, i, j))
  local ps = redis.call('HMGET', KEYS[4], unpack(z, i, j))
  for k = 1, j - i + 1 do
    t[i + k - 1] = ts[k]
    p[i + k - 1] = ps[k]
  end
end
local dn = redis.call('HLEN', KEYS[6])
local stamped = m.counted ~= nil and tonumber(m.demoted_pins or '') ~= nil
  and tonumber(m.demoted_tokens or '') ~= nil
  and m.counted == table.concat({m.last or '', m.total or '', m.evictions or '', m.demoted_tokens}, '|')
local dt = false
if not stamped then
  dt = 0
  for _, v in ipairs(redis.call('HVALS', KEYS[6])) do
    local n = tonumber(v)
    if n == nil then dt = -1 break end  -- not a count: no set (hot.py `read`)
    dt = dt + n
  end
end
local d = {}
if dn > 0 and dn <= tonumber(ARGV[2]) then
  local names = redis.call('HKEYS', KEYS[6])
  for i = 1, #names do d[i] = tonumber(names[i]) end
  table.sort(d)
end
return cjson.encode({meta = meta, z = z, t = t, p = p, pin = redis.call('HGETALL', KEYS[5]),
                     d = d, dn = dn, dt = dt, s = stamp})
"""

_SCRIPTS = {"apply": APPLY_LUA, "finish": FINISH_REBUILD_LUA, "read": READ_LUA, "load": LOAD_LUA,
            "probe": OOM_PROBE_LUA}
SCRIPT_SUFFIX = " script"  # how `refusal` names a script's run: "<name> script"
# The conversation id whose hash tag `HotTier.check_access` probes: its probe key is
# never written (an empty SETRANGE creates nothing), so any id would do
ACCESS_PROBE_ID = "access-check"


def refusal(what: str, exc: ResponseError) -> TiermemError | None:
    """The error for a reply by which Redis refused `what` as a whole, having written
    nothing: out of memory (HotOutOfMemory), a read-only replica (HotReadOnly), a
    command or key the ACL user may not use (HotAccessDenied), busy (HotBusy), unable to
    persist (HotNotPersisting); None for any other reply.
    A script's refusal may come as a plain ResponseError carrying the code in its text.
    Redis refusing it for now (HotBusy: BUSY, TRYAGAIN) or refusing writes while it cannot
    persist (HotNotPersisting: MISCONF) is one too: the set is not to blame."""
    text = str(exc)
    busy = BUSY_REPLY.search(text)
    if isinstance(exc, TryAgainError) or busy is not None:
        return HotBusy(what.removesuffix(SCRIPT_SUFFIX), busy.group(1) if busy else TRYAGAIN_CODE, text)
    if MISCONF_REPLY.search(text) is not None:
        return HotNotPersisting(what.removesuffix(SCRIPT_SUFFIX), text)
    if isinstance(exc, OutOfMemoryError) or OOM_REPLY in text:  # only a script's (DEL is let through)
        return HotOutOfMemory(what.removesuffix(SCRIPT_SUFFIX), text)
    if isinstance(exc, ReadOnlyError) or READONLY_REPLY in text:
        return HotReadOnly(what, text)
    if isinstance(exc, NoPermissionError) or NOPERM_REPLY in text or SCRIPT_NOPERM_REPLY in text:
        return HotAccessDenied(text)
    return None


@contextlib.contextmanager
def refusals(what: str) -> Iterator[None]:
    """A plain command's refusals as `refusal` names them (a script's: `HotTier._run`).
    Every Redis call of an erasure runs under it (here, planner.epoch `drop_showing`,
    tiermem.hot_restored): a refusal that escapes as a plain ResponseError never degrades
    the link, so no recovery retries the keys it left."""
    try:
        yield
    except ResponseError as e:
        refused = refusal(what, e)
        if refused is not None:
            raise refused from e
        raise


@dataclass(frozen=True)
class HotTurn:
    position: int
    tokens: int
    pinned: bool
    priority: int
    payload: str


@dataclass(frozen=True)
class AdmitResult:
    evicted: list[int]
    demoted: list[int]
    total_tokens: int
    overflow_tokens: int


@dataclass(frozen=True)
class HotSet:
    turns: list[HotTurn]
    total_tokens: int
    budget: int
    overflow_tokens: int
    generation: str
    last_position: int
    evictions: int
    # the demoted positions, ascending, when `demoted_count` is at most
    # READ_DEMOTED_LISTED; else none (READ_LUA: a read's work must not grow with them;
    # `HotTier.demoted_pins` reads every one)
    demoted: list[int]
    demoted_tokens: int = 0
    # the log fingerprint of the turn at last_position ('' when not known: a set written
    # before tips were recorded, or by a caller that gave none)
    tip: str = ""
    # a pin or unpin reached Redis that this set has not seen (its stamp is not the
    # conversation's: it was being rebuilt from rows read before it): rebuild it
    pins_behind: bool = False
    # the log's pin version the set reflects (meta 'pinver'; module docstring, pin
    # versions); None when not known (a set written before pin versions, or without one)
    pin_version: int | None = None
    # the eviction rules the set was kept under (meta 'head', 'tail', 'bias'); None when
    # not recorded (a set written before they were)
    head_protect: int | None = None
    tail_protect: int | None = None
    eviction_bias: float | None = None
    demoted_count: int = 0  # every demoted pin of the set (HLEN of its demoted hash)


@dataclass(frozen=True)
class LogPins:
    """The log's pin changes a hot write applies (module docstring, pin versions): those
    numbered after `before` up to `after` (the log's per-conversation pin version,
    tiers.store `pin_version`). The set must hold every change up to `before` already;
    `before` equal to `after` claims none as the write's own, which is always safe."""

    before: int
    after: int

    def __post_init__(self) -> None:
        for name in ("before", "after"):
            value = getattr(self, name)
            if type(value) is not int or not 0 <= value < _MAX_INT:
                raise ValueError(f"LogPins.{name} must be an int in [0, 1e14), got {value!r}")
        if self.before > self.after:
            raise ValueError(f"LogPins.before must not exceed after, got {self.before} > {self.after}")


@dataclass
class ReplayState:
    """What replaying admits through APPLY_LUA leaves (`simulate_replay`), without texts."""

    members: list[int] = field(default_factory=list)  # positions, ascending
    tokens: dict[int, int] = field(default_factory=dict)  # member -> tokens
    pins: dict[int, int] = field(default_factory=dict)  # pinned member -> priority
    demoted: dict[int, int] = field(default_factory=dict)  # demoted pin -> tokens
    total: int = 0
    last: int = -1
    evictions: int = 0


@dataclass(frozen=True)
class HotSummary:
    """A hot set's counts, without its turns (`HotTier.summaries`)."""

    generation: str
    total_tokens: int
    members: int
    pins: int
    evictions: int
    overflow_tokens: int
    # up to SUMMARY_DEMOTED_LISTED demoted positions, ascending (all of them when
    # `demoted_count` is no more than that; else a sample of one HSCAN page)
    demoted: list[int]
    # a pin or unpin reached Redis that the set has not seen (HotSet.pins_behind): its
    # counts are not the log's pins until its next read rebuilds it
    pins_behind: bool = False
    demoted_count: int = 0  # every demoted pin of the set (HLEN of its demoted hash)


# What a Redis Cluster client that reached no node raises (redis-py builds the topology
# while the client is built, and a command that gave up on a cluster it cannot reach
# raises RedisClusterUnreachableError, a RedisClusterException and not a RedisError):
# the cluster is down or not there yet, which the hot tier treats as an outage
CLUSTER_UNREACHABLE: tuple[type[BaseException], ...] = (RedisClusterUnreachableError,
                                                        redis.exceptions.ConnectionError,
                                                        redis.exceptions.TimeoutError)


class DeferredCluster:
    """A Redis Cluster client for a cluster no node of which answered when it was made.

    redis-py's RedisCluster asks a node for the slot map while it is built, so a cluster
    that is down when a process opens would fail the opening, where a single Redis that
    is down only fails its commands (redis-py connects per command) and the hot tier
    degrades to the log. This stands in for the client until the cluster answers: each
    command (attribute) first builds the real client, raising what building raised
    (CLUSTER_UNREACHABLE: an outage, for the caller to degrade on) until it succeeds;
    from then on it is that client. Threads building at once each wait their own
    connect timeout, not one another's; the first client built is kept, the others
    closed.
    """

    def __init__(self, url: str, kwargs: Mapping[str, Any]) -> None:
        self._url = url
        self._kwargs = dict(kwargs)
        self._client: RedisCluster | None = None
        self._closed = False
        self._lock = threading.Lock()

    @property
    def built(self) -> bool:
        """Whether the cluster has answered and the real client exists."""
        return self._client is not None

    def _real(self) -> RedisCluster:
        client = self._client
        if client is not None:
            return client
        if self._closed:
            raise redis.exceptions.ConnectionError("the Redis Cluster client was closed")
        made = RedisCluster.from_url(self._url, **self._kwargs)  # CLUSTER_UNREACHABLE while down
        with self._lock:
            if self._client is None and not self._closed:
                self._client = made
                return made
            kept = self._client
        made.close()  # another thread's client came first (or this one was closed)
        if kept is None:
            raise redis.exceptions.ConnectionError("the Redis Cluster client was closed")
        return kept

    def __getattr__(self, name: str) -> Any:
        # only names this object lacks get here: every command, pipeline() and the rest
        return getattr(self._real(), name)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            client, self._client = self._client, None
        if client is not None:
            client.close()


RedisClient = redis.Redis | RedisCluster | DeferredCluster


def make_client(
    url: str,
    *,
    socket_timeout: float = DEFAULT_SOCKET_TIMEOUT_S,
    socket_connect_timeout: float = DEFAULT_SOCKET_TIMEOUT_S,
    health_check_interval: int = DEFAULT_HEALTH_CHECK_INTERVAL_S,
    retries: int = 1,
) -> RedisClient:
    """A client for `url` tuned for the hot tier.

    A Cluster client is made when the scheme is `redis+cluster://` (or
    `rediss+cluster://`), or the query has `cluster=1` (also `true`/`yes`); the flag is
    stripped before redis-py sees the URL. Otherwise `redis://`, `rediss://` and
    `unix:///path/to.sock` make a standalone client. Responses are decoded (str).
    Timeouts are short so that a dead Redis fails fast and the caller can degrade; one
    retry with a few ms of backoff rides over a single dropped connection, e.g. the first
    command after Redis restarted, and redis-py reconnects per command by itself.
    A cluster no node of which answers now gives a DeferredCluster, whose commands fail
    as an outage until one does: a cluster down at startup degrades as a single Redis.
    """
    parsed = parse_redis_url(url)  # ValueError for a URL tiermem does not accept
    retry = Retry(ExponentialBackoff(cap=0.05, base=0.005), retries)
    common: dict[str, Any] = {
        "decode_responses": True,
        "socket_timeout": socket_timeout,
        "socket_connect_timeout": socket_connect_timeout,
        "health_check_interval": health_check_interval,
        "retry": retry,
    }
    if parsed.cluster:
        try:
            return RedisCluster.from_url(parsed.url, **common)
        except CLUSTER_UNREACHABLE:
            # down or not up yet: open anyway, as with a single Redis, and build the
            # client once a node answers (DeferredCluster)
            return DeferredCluster(parsed.url, common)
    return redis.Redis.from_url(parsed.url, **common)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _ints(csv: str) -> list[int]:
    return [int(x) for x in csv.split(",")] if csv else []


def _pairs(flat: Sequence[Any]) -> dict[str, str]:
    return {_text(flat[i]): _text(flat[i + 1]) for i in range(0, len(flat), 2)}


def _counted(meta: Mapping[str, str]) -> bool:
    """Whether the meta's counts describe the set as it stands: stamped with the state
    they were written with, which no write of an older version has changed since."""
    stamp = meta.get("counted")
    return stamp is not None and stamp == "|".join(meta.get(name, "") for name in COUNT_STAMP_FIELDS)


def _whole(meta: Mapping[str, str], members: int, pins: int, demoted: int, tokens: int | None = None,
           demoted_tokens: int | None = None) -> bool:
    """Whether a set's keys agree with what its meta records: the counts of members, pins
    and demoted pins (while their stamp holds: `_counted`), and, when given, its members'
    and demoted pins' tokens. Maxmemory evicts single keys, and a lost zset, pin or
    demoted hash leaves no member without its record."""
    counts: tuple[tuple[str, int | None], ...] = ()
    if _counted(meta):
        counts = (("members", members), ("pins", pins), ("demoted_pins", demoted))
    try:
        for name, have in (*counts, ("total", tokens), ("demoted_tokens", demoted_tokens)):
            if have is not None and name in meta and int(meta[name]) != have:
                return False
    except ValueError:
        return False
    return True


def _check_turn(turn: HotTurn) -> None:
    # A bool, a float or a negative number would not survive the ops encoding: refuse
    # them here rather than corrupt the state in Lua. `type(x) is int` also refuses bool.
    # One combined test first, because rebuild runs this for every turn of a log.
    if type(turn.position) is not int or type(turn.tokens) is not int or type(turn.priority) is not int:
        for name in ("position", "tokens", "priority"):
            value = getattr(turn, name)
            if type(value) is not int:
                raise TypeError(f"HotTurn.{name} must be an int, got {value!r}")
    if not (
        0 <= turn.position < _MAX_INT and 0 <= turn.tokens < _MAX_INT and -_MAX_INT < turn.priority < _MAX_INT
    ):
        raise ValueError(
            "HotTurn position and tokens must be in [0, 1e14) and priority within ±1e14, got "
            f"position={turn.position} tokens={turn.tokens} priority={turn.priority}"
        )
    if not isinstance(turn.payload, str):
        raise TypeError(f"HotTurn.payload must be a str, got {type(turn.payload).__name__}")


def simulate_replay(
    turns: Iterable[tuple[int, int, bool, int]], *, budget: int, head: int, tail: int, bias: float
) -> ReplayState:
    """The set that admitting `turns` (position, tokens, pinned, priority; ascending
    positions) one by one into an empty set leaves: APPLY_LUA's admit and eviction,
    step for step, in Python. A rebuild of a long log keeps ~100 of its turns: simulated
    here it costs a few bisects a turn (the victim is found among the pins only) where
    the Lua replay parsed and re-ran every turn in Redis, and only the survivors are
    then written (`HotTier.load`). tests/test_hot_rebuild_survivors.py compares it with
    the Lua replay (`HotTier.rebuild`), the canonical engine."""
    st = ReplayState()
    members, tok, pins, demoted = st.members, st.tokens, st.pins, st.demoted
    # the members split by kind, each ascending: the candidates of victim_index are the
    # unpinned members between the window's first and last member, found by bisection
    pinned: list[int] = []
    free: list[int] = []
    total = pinned_total = evictions = 0
    last = -1
    for position, tokens, is_pinned, priority in turns:
        if position <= last:
            raise ValueError(f"rebuild needs ascending positions: {position} after {last}")
        members.append(position)
        tok[position] = tokens
        total += tokens
        if is_pinned:
            pins[position] = priority
            pinned.append(position)
            pinned_total += tokens
        else:
            free.append(position)
        last = position
        while total > budget:
            # victim_index of APPLY_LUA (0-based here): the candidates are the unpinned
            # members at indices lo..hi, the victim the (k+1)-th of them
            lo, hi = head, len(members) - 1 - tail
            if lo <= hi:
                a = bisect.bisect_left(free, members[lo])
                n_cand = bisect.bisect_right(free, members[hi]) - a
            else:
                n_cand = 0
            if n_cand > 0:
                k = max(0, math.ceil((1 - bias) * ((n_cand - 1) / 2) - 0.5))
                victim = free.pop(a + k)
                del members[bisect.bisect_left(members, victim)]
                total -= tok.pop(victim)
                evictions += 1
                continue
            # enforce's demotion: the lowest priority, the oldest among equals (the first
            # in position order), of every pin when the pins alone pass the budget, else
            # of the pins outside the protected turns (APPLY_LUA lowest_pin)
            if pinned_total > budget:
                among = pinned
            elif lo <= hi:
                among = pinned[bisect.bisect_left(pinned, members[lo]):bisect.bisect_right(pinned, members[hi])]
            else:
                among = []
            if among:
                worst = min(among, key=pins.__getitem__)
                pinned.remove(worst)
                del members[bisect.bisect_left(members, worst)]
                t = tok.pop(worst)
                del pins[worst]
                total -= t
                pinned_total -= t
                demoted[worst] = t
            else:
                break
    st.total, st.last, st.evictions = total, last, evictions
    return st


def _version_arg(pin_version: int | None) -> str:
    """A rebuild's log pin version as LOAD_LUA and FINISH_REBUILD_LUA take it ('' none)."""
    if pin_version is None:
        return ""
    LogPins(pin_version, pin_version)  # the same bounds as a write's
    return str(pin_version)


def _op(kind: str, position: int, tokens: int, pinned: bool, priority: int) -> str:
    return f"{kind}{position},{tokens},{1 if pinned else 0},{priority};"


def new_stamp() -> str:
    """A pin's or unpin's stamp: random, so that no stamp ever comes back (a counter
    would, once its key expired and began again) and a rebuild never mistakes a pin it
    missed for the one it saw."""
    return secrets.token_hex(PIN_STAMP_BYTES)


class HotTier:
    """Budgeted per-conversation working sets in one Redis (standalone or Cluster)."""

    def __init__(
        self,
        client: RedisClient,
        *,
        budget_tokens: int,
        head_protect: int,
        tail_protect: int,
        eviction_bias: float,
        key_prefix: str = "tm",
        idle_ttl_s: float = 0.0,
    ) -> None:
        if budget_tokens < 0 or head_protect < 0 or tail_protect < 0:
            raise ValueError("budget_tokens, head_protect and tail_protect must be >= 0")
        if budget_tokens >= _MAX_INT:
            # Lua would store it as 1e+17, which no read parses back: the set never loads
            raise ValueError(f"budget_tokens must be below {_MAX_INT}, got {budget_tokens}")
        if not 0.0 <= eviction_bias <= 1.0:
            raise ValueError(f"eviction_bias must be in [0, 1], got {eviction_bias}")
        if not _PREFIX_RE.match(key_prefix):
            raise ValueError(f"key_prefix must match {_PREFIX_RE.pattern}, got {key_prefix!r}")
        self.client = client
        self.budget_tokens = int(budget_tokens)
        self.head_protect = int(head_protect)
        self.tail_protect = int(tail_protect)
        self.eviction_bias = float(eviction_bias)
        self.key_prefix = key_prefix
        self.cluster = isinstance(client, (RedisCluster, DeferredCluster))
        self._sources = dict(_SCRIPTS)
        self._shas = {name: hashlib.sha1(src.encode()).hexdigest() for name, src in _SCRIPTS.items()}
        # Cluster goes through raw EVALSHA/EVAL (see _run): redis-py's cluster pipeline
        # refuses Script objects, so the cluster path never depends on them.
        self._scripts = (
            {} if self.cluster else {name: client.register_script(src) for name, src in _SCRIPTS.items()}
        )
        # repr() round-trips a float exactly, so Lua's tonumber sees the very same double.
        self._bias_arg = repr(self.eviction_bias)
        if not 0 <= idle_ttl_s <= MAX_IDLE_TTL_S:
            raise ValueError(f"idle_ttl_s must be within 0..{MAX_IDLE_TTL_S}, got {idle_ttl_s}")
        # a conversation's keys expire together this long after its last read or write
        # (0: never); an expired set is a missing one, rebuilt from the log when next used
        self.idle_ttl_ms = int(idle_ttl_s * MS_PER_S)
        if idle_ttl_s > 0:
            # truncated to 0 it would mean never: the opposite of a very short TTL
            self.idle_ttl_ms = max(MIN_IDLE_TTL_MS, self.idle_ttl_ms)

    # -- keys ----------------------------------------------------------------------------

    def tag(self, conversation_id: str) -> str:
        if not isinstance(conversation_id, str) or not conversation_id:
            raise ValueError("conversation_id must be a non-empty str")
        return hash_tag(self.key_prefix, conversation_id)

    def keys(self, conversation_id: str, *, scratch: str | None = None) -> list[str]:
        """meta, zset, tokens, payload, pin, demoted keys (or a rebuild's scratch copies)."""
        base = self.tag(conversation_id) + (f":r:{scratch}" if scratch else "")
        return [f"{base}:{name}" for name in ("meta", "z", "t", "p", "pin", "d")]

    def stamp_key(self, conversation_id: str) -> str:
        """The conversation's pin stamp hash (module docstring): generation -> stamp."""
        return self.tag(conversation_id) + ":ps"

    def _live_keys(self, conversation_id: str) -> list[str]:
        """The set's six keys and its pin stamp hash, whose idle TTL is renewed with them."""
        return [*self.keys(conversation_id), self.stamp_key(conversation_id)]

    def pin_stamp(self, conversation_id: str, generation: str) -> str:
        """The stamp of the last pin or unpin of `generation` that reached Redis ('' none):
        what a rebuild reads before the log's rows and gives `load` or `rebuild`."""
        with refusals("pin stamp read"):  # BUSY: Redis's state, not the set's
            value = self.client.hget(self.stamp_key(conversation_id), generation)
        return "" if value is None else _text(value)

    # -- scripts -------------------------------------------------------------------------

    def _run(self, name: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        """Run script `name`; HotOutOfMemory when Redis refused it for want of memory
        (nothing written: OOM_PROBE_LUA), HotReadOnly on a replica, HotAccessDenied when
        the ACL user may not run it or a command in it (`refusal`)."""
        try:
            if not self.cluster:
                return self._scripts[name](keys=keys, args=args)
            try:
                return self.client.execute_command("EVALSHA", self._shas[name], len(keys), *keys, *args)
            except NoScriptError:
                # A node that never saw the script (fresh, restarted, failed over): EVAL
                # both runs and caches it there.
                return self.client.execute_command("EVAL", self._sources[name], len(keys), *keys, *args)
        except ResponseError as e:
            refused = refusal(name + SCRIPT_SUFFIX, e)
            if refused is not None:
                raise refused from e
            raise

    def _apply(
        self,
        conversation_id: str,
        keys: Sequence[str],
        flags: str,
        ops: str,
        payloads: Sequence[str] = (),
        *,
        generation: str = "",
        ttl_ms: int | None = None,
        tip: str = "",
        prev_tip: str = "",
        stamp: str = "",
        log_pins: LogPins | None = None,
    ) -> list[str]:
        """Run APPLY_LUA; returns the fields after 'OK': evicted, demoted, total,
        overflow, last, n_evicted, members (the lists comma-separated). `ttl_ms` None:
        the live keys' idle TTL. `tip`: the fingerprint of the last admit in `ops`,
        `prev_tip` that of the log's turn before the first (see APPLY_LUA); `stamp`: a
        pin's or unpin's stamp (flag s); `log_pins`: the log's pin changes this call
        applies, which the set is checked against (None: not checked)."""
        if ttl_ms is None:
            ttl_ms = self.idle_ttl_ms
        args = [
            generation,
            self.budget_tokens,
            self.head_protect,
            self.tail_protect,
            self._bias_arg,
            flags,
            ttl_ms,
            ops,
            tip,
            prev_tip,
            stamp,
            "" if log_pins is None else f"{log_pins.before},{log_pins.after}",
            *payloads,
        ]
        try:
            res = self._run("apply", keys, args)
        except ResponseError as e:
            if "tiermem: inconsistent" in str(e):
                raise HotStale(conversation_id, "inconsistent", None, -1) from e
            raise
        status, _, rest = _text(res).partition("|")
        if status == "OK":
            return rest.split("|")
        if status == "STALE":
            reason, stored_last, stored_gen = rest.split("|", 2)
            raise HotStale(conversation_id, reason, stored_gen or None, int(stored_last))
        if status == "NOTHOT":
            raise HotTurnNotResident(conversation_id, int(rest))
        if status == "AHEAD":
            _position, last = rest.split("|")
            raise HotStale(conversation_id, STALE_AHEAD, generation or None, int(last))
        if status == "GAP":
            held, before = rest.split("|")
            raise PinChangeGap(conversation_id, int(held), int(before))
        raise RuntimeError(f"unexpected reply from the hot-tier script: {res!r}")

    @staticmethod
    def _result(res: list[str]) -> AdmitResult:
        return AdmitResult(
            evicted=_ints(res[0]),
            demoted=_ints(res[1]),
            total_tokens=int(res[2]),
            overflow_tokens=int(res[3]),
        )

    # -- API -----------------------------------------------------------------------------

    def admit(
        self, conversation_id: str, turn: HotTurn, *, generation: str, tip: str = "", prev_tip: str = "",
        log_pins: LogPins | None = None,
    ) -> AdmitResult:
        """Add one turn (the next position of the log), then evict while over budget.

        A position at or below the last admitted one is a no-op (retries are safe).
        Raises HotStale when the stored set is missing (and the turn is not position 0),
        of another generation, inconsistent, or when the turn does not follow the last
        admitted position (appends were missed): the caller rebuilds from the cold log,
        which holds the turn. `tip`: the turn's log fingerprint, recorded as the set's
        (HotSet.tip) when the turn becomes its last position; `prev_tip`: that of the
        log's turn before it, which the set must end with (else HotStale 'diverged': it
        grew from another timeline of the log); '' checks nothing. `log_pins`: the log's
        pin changes the turn's append made (`before` the pin version less the changes the
        turn accounts for, `after` the version read after the turn): HotStale 'pins' when
        the set missed another; None checks nothing.
        """
        return self.admit_many(conversation_id, [turn], generation=generation, tip=tip, prev_tip=prev_tip,
                               log_pins=log_pins)

    def admit_many(
        self, conversation_id: str, turns: Sequence[HotTurn], *, generation: str, tip: str = "",
        prev_tip: str = "", log_pins: LogPins | None = None,
    ) -> AdmitResult:
        """Same effect as admitting the turns one by one, in one script call per
        ADMIT_CHUNK turns (each chunk atomic on its own). Positions must ascend; the first
        new one must follow the stored set (else HotStale), later ones may skip. `tip`:
        the log fingerprint of the last turn (a chunk before the last records '', which
        the caller treats as unknown should the later chunks never run); `prev_tip`: as
        in `admit`, checked by the first chunk (later ones extend what it wrote), as is
        `log_pins` (the changes of all the turns: the first chunk records the version)."""
        keys = self._live_keys(conversation_id)
        for t in turns:  # all of them first: bad input writes nothing
            _check_turn(t)
        if not turns:
            # Nothing to admit; report the stored totals without creating keys.
            total, overflow = self.client.hmget(keys[0], ["total", "overflow"])
            return AdmitResult([], [], int(total or 0), int(overflow or 0))
        evicted: list[int] = []
        demoted: list[int] = []
        res: list[str] = []
        for start in range(0, len(turns), ADMIT_CHUNK):
            chunk = turns[start : start + ADMIT_CHUNK]
            ops = "".join(_op("a", t.position, t.tokens, t.pinned, t.priority) for t in chunk)
            final = start + ADMIT_CHUNK >= len(turns)
            res = self._apply(
                conversation_id, keys, "cgpe", ops, [t.payload for t in chunk], generation=generation,
                tip=tip if final else "", prev_tip=prev_tip if start == 0 else "",
                log_pins=log_pins if start == 0 else None,
            )
            evicted += _ints(res[0])
            demoted += _ints(res[1])
        return AdmitResult(evicted, demoted, int(res[2]), int(res[3]))

    def pin(
        self, conversation_id: str, position: int, priority: int, *, generation: str, turn: HotTurn | None = None,
        log_pins: LogPins | None = None, wait_gap: bool = False,
    ) -> AdmitResult:
        """Pin a hot turn (or update its priority). A turn that is not hot is re-admitted
        as pinned when `turn` is given, else HotTurnNotResident; one past the set's last
        admitted position raises HotStale 'ahead', nothing written (the log holds it and
        its admit has not run yet: catch the set up and pin again). Pinning can demote
        lower-priority pins (possibly this one) when the set passes the budget with no
        unpinned turn left to evict (module docstring).
        Without a stored set for the conversation this is a no-op (all zeros): the
        caller's next read rebuilds the set from the log, with the pin. A stored set of
        another generation raises HotStale, nothing written: it is not this log's. With
        `log_pins` (the log's pin change the pin's log write made: `after` its version,
        `before` the one before it), a set that missed a pin change of the log raises
        HotStale 'pins' (pin versions), nothing written but the stamp: rebuild it; with
        `wait_gap`, PinChangeGap instead, nothing written at all, while the set has seen
        every pin script so far (the missing change's script is likely on its way)."""
        if turn is not None:
            _check_turn(turn)
            if turn.position != position:
                raise ValueError(f"turn.position {turn.position} != position {position}")
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise TypeError(f"priority must be an int, got {priority!r}")
        ops = _op("p", position, turn.tokens if turn is not None else -1, True, priority)
        payloads = [turn.payload] if turn is not None else []
        res = self._apply(conversation_id, self._live_keys(conversation_id), "cgpes" + ("w" if wait_gap else ""),
                          ops, payloads, generation=generation, stamp=new_stamp(), log_pins=log_pins)
        return self._result(res)

    def unpin(self, conversation_id: str, position: int, *, generation: str,
              log_pins: LogPins | None = None, wait_gap: bool = False) -> AdmitResult:
        """Make a pinned turn evictable again (and evict if over budget); a demoted pin is
        forgotten as demoted; a position past the set's last admitted one raises HotStale
        'ahead', nothing written (its admit, on its way, may carry the pin: catch the set
        up and unpin again); anything else, a missing set included, is a no-op. A stored
        set of another generation raises HotStale, nothing written; `log_pins` as in
        `pin` (HotStale 'pins'), `wait_gap` too (PinChangeGap)."""
        res = self._apply(conversation_id, self._live_keys(conversation_id), "cgpes" + ("w" if wait_gap else ""),
                          _op("u", position, 0, False, 0), generation=generation, stamp=new_stamp(),
                          log_pins=log_pins)
        return self._result(res)

    def read(self, conversation_id: str) -> HotSet | None:
        """The hot set in log order, or None when Redis has no (complete) set for it: a
        member without its tokens or text, or keys that disagree with the meta's counts
        and totals (one evicted on its own), is no set. Its work and reply do not grow
        with the demoted pins (READ_LUA): `demoted` lists them only while they are at most
        READ_DEMOTED_LISTED, `demoted_count` counts them all."""
        res = self._run("read", self._live_keys(conversation_id), [self.idle_ttl_ms, READ_DEMOTED_LISTED])
        if not res:
            return None
        doc = json.loads(res)
        # cjson writes an empty Lua table as {}, hence the `or ()`.
        meta = _pairs(doc["meta"] or ())
        pins = _pairs(doc["pin"] or ())
        turns: list[HotTurn] = []
        for pos, tokens, payload in zip(doc["z"] or (), doc["t"] or (), doc["p"] or (), strict=True):
            if not isinstance(tokens, str) or not isinstance(payload, str):
                return None  # partly lost (e.g. maxmemory evicted one key): as good as gone
            priority = pins.get(pos)
            turns.append(HotTurn(int(pos), int(tokens), priority is not None, int(priority or 0), payload))
        n_demoted = int(doc["dn"])
        # the demoted pins' tokens, summed by the script only where the count stamp does
        # not hold (else the meta's, whose count HLEN matched: `_whole`); -1: not counts
        summed = doc["dt"]
        if summed is not False and int(summed) < 0:
            return None
        try:
            if not _whole(meta, len(turns), len(pins), n_demoted, sum(t.tokens for t in turns),
                          None if summed is False else int(summed)):
                return None  # a key of it was evicted on its own: as good as gone
            return HotSet(
                turns=turns,
                total_tokens=int(meta["total"]),
                budget=int(meta["budget"]),
                overflow_tokens=int(meta["overflow"]),
                generation=meta["gen"],
                last_position=int(meta["last"]),
                evictions=int(meta["evictions"]),
                demoted=[int(p) for p in doc["d"] or ()],
                demoted_tokens=int(meta.get("demoted_tokens", 0)),
                tip=meta.get("tip", ""),
                pins_behind=meta.get("pinstamp", "") != (doc.get("s") or ""),
                pin_version=int(meta["pinver"]) if meta.get("pinver") else None,
                head_protect=int(meta["head"]) if "head" in meta else None,
                tail_protect=int(meta["tail"]) if "tail" in meta else None,
                eviction_bias=float(meta["bias"]) if "bias" in meta else None,
                demoted_count=n_demoted,
            )
        except (KeyError, ValueError):
            return None

    def demoted_pins(self, conversation_id: str) -> dict[int, int]:
        """Every demoted pin of the set, position -> tokens: the whole demoted hash, whose
        size grows with the conversation (HGETALL): for checks and tools, never a
        request's path (`read` lists a bounded few). Empty when there is none (or no set)."""
        with refusals("demoted pins read"):
            raw = self.client.hgetall(self.keys(conversation_id)[5])
        return {int(_text(p)): int(_text(t)) for p, t in raw.items()}

    def summaries(self, conversation_ids: Sequence[str]) -> dict[str, HotSummary]:
        """The counts of each conversation's hot set that has one (complete), by plain
        reads pipelined `SUMMARY_PIPELINE_SETS` sets per round trip, and whether the set
        is `pins_behind` as `read` would say (its pin stamp against its generation's).
        Unlike `read`, it neither renews the sets' idle TTL (a stats poll must not keep
        every idle set alive) nor loads their texts, nor rebuilds a set behind."""
        out: dict[str, HotSummary] = {}
        for i in range(0, len(conversation_ids), SUMMARY_PIPELINE_SETS):
            chunk = conversation_ids[i:i + SUMMARY_PIPELINE_SETS]
            pipe = self.client.pipeline(transaction=False)  # a cluster pipeline routes each set's reads
            for conv in chunk:
                meta, z, t, p, pin, d = self.keys(conv)
                pipe.hmget(meta, *SUMMARY_META_FIELDS)
                pipe.zcard(z)
                pipe.hlen(t)
                pipe.hlen(p)
                pipe.hlen(pin)
                pipe.hlen(d)
                pipe.hscan(d, 0, count=SUMMARY_DEMOTED_LISTED)  # (cursor, {position: tokens})
                pipe.hget(meta, "pinstamp")
                pipe.hgetall(self.stamp_key(conv))  # generation -> stamp: one entry a generation
            with refusals("stats read"):  # BUSY: a refusal the link degrades for, not a failure of stats
                replies = pipe.execute()
            for j, conv in enumerate(chunk):
                fields, members, tokens, payloads, pins, n_demoted, (_, demoted), set_stamp, stamps = \
                    replies[SUMMARY_REPLIES * j:SUMMARY_REPLIES * (j + 1)]
                gen, total, evictions, overflow = fields[:4]
                counts = {name: _text(value) for name, value in zip(SUMMARY_META_FIELDS, fields, strict=True)
                          if value is not None}
                # no meta: no set; fewer token counts or texts than members, or fewer of
                # them than the meta counts: partly lost (maxmemory evicted a key), as
                # good as gone, as `read` says
                if gen is None or not members == tokens == payloads or not _whole(counts, members, pins, n_demoted):
                    continue
                try:
                    latest = {_text(k): _text(v) for k, v in stamps.items()}.get(_text(gen), "")
                    out[conv] = HotSummary(_text(gen), int(total), int(members), int(pins), int(evictions),
                                           int(overflow), sorted(int(x) for x in demoted)[:SUMMARY_DEMOTED_LISTED],
                                           pins_behind=_text(set_stamp or "") != latest,
                                           demoted_count=int(n_demoted))
                except (TypeError, ValueError):
                    continue
        return out

    def generation(self, conversation_id: str) -> str | None:
        value = self.client.hget(self.keys(conversation_id)[0], "gen")
        return None if value is None else _text(value)

    def rebuild(self, conversation_id: str, turns: Iterable[HotTurn], *, generation: str, tip: str = "",
                pin_stamp: str = "", pin_version: int | None = None) -> HotSet:
        """Replace the conversation's hot set by the replay of `turns` (ascending
        positions, each with its current pin flag and priority); `tip` is the log
        fingerprint of the last of them, `pin_stamp` what `pin_stamp` said before the
        turns were read from the log (the set is `pins_behind` when a pin came since),
        `pin_version` the log's pin version read before them (None: not known).

        The replay sends no texts to Lua, REBUILD_CHUNK turns per call, into scratch
        keys; payloads are kept here only for turns still hot after each chunk and are
        written by the final script, which renames the scratch keys over the live ones.
        """
        scratch = secrets.token_hex(8)
        tmp = self.keys(conversation_id, scratch=scratch)
        payloads: dict[int, str] = {}
        members: list[int] = []
        ops: list[str] = []
        first = True
        prev = -1

        def flush() -> None:
            nonlocal first, members, payloads
            res = self._apply(
                conversation_id,
                tmp,
                "m" + ("r" if first else ""),
                "".join(ops),
                generation=generation,
                ttl_ms=REBUILD_TTL_MS,
                # every chunk moves `last`, so the final one's tip is the one that stays;
                # the scratch keys are renamed over the live ones only after it
                tip=tip,
            )
            first = False
            ops.clear()
            members = _ints(res[6])
            payloads = {p: payloads[p] for p in members}

        for t in turns:
            _check_turn(t)
            if t.position <= prev:
                raise ValueError(f"rebuild needs ascending positions: {t.position} after {prev}")
            prev = t.position
            ops.append(_op("a", t.position, t.tokens, t.pinned, t.priority))
            payloads[t.position] = t.payload
            if len(ops) >= REBUILD_CHUNK:
                flush()
        if ops or first:
            flush()
        args: list[Any] = [self.idle_ttl_ms, pin_stamp, _version_arg(pin_version)]
        for p in members:
            args += (p, payloads[p])
        status = _text(self._run("finish", [*self.keys(conversation_id), *tmp], args))
        if status != "OK":
            raise HotStateLost(conversation_id, status, REBUILD_TTL_MS)
        hot = self.read(conversation_id)
        if hot is None:
            raise HotStale(conversation_id, STALE_DROPPED, None, -1)
        return hot

    def load(self, conversation_id: str, state: ReplayState, payloads: Mapping[int, str], *, generation: str,
             tip: str = "", pin_stamp: str = "", pin_version: int | None = None) -> HotSet:
        """Replace the conversation's hot set by `state` (`simulate_replay` under this
        tier's budget and protection), with the members' `payloads`, in one script; `tip`
        is the log fingerprint of the turn at `state.last`, `pin_stamp` what `pin_stamp`
        said before the rows were read (the set is `pins_behind` when a pin came since),
        `pin_version` the log's pin version read before them (None: not known).
        Raises KeyError, having written nothing, when `payloads` lacks a member."""
        args: list[Any] = [generation, state.total, self.budget_tokens, state.last, tip, state.evictions,
                           max(0, state.total - self.budget_tokens), sum(state.demoted.values()),
                           self.idle_ttl_ms, pin_stamp, _version_arg(pin_version), self.head_protect,
                           self.tail_protect, self._bias_arg, len(state.members)]
        for p in state.members:
            payload = payloads[p]
            if not isinstance(payload, str):
                raise TypeError(f"payload of position {p} must be a str, got {type(payload).__name__}")
            args += (p, state.tokens[p], payload)
        for table in (state.pins, state.demoted):
            args.append(len(table))
            for p, value in sorted(table.items()):
                args += (p, value)
        self._run("load", self._live_keys(conversation_id), args)
        hot = self.read(conversation_id)
        if hot is None:
            raise HotStale(conversation_id, STALE_DROPPED, None, -1)
        return hot

    def drop(self, conversation_id: str) -> None:
        # All keys share one slot, so a single DEL is fine on Cluster too.
        with refusals("delete"):
            self.client.execute_command("DEL", *self.keys(conversation_id))

    def delete_key(self, key: str) -> int:
        """Delete one key of this tier (another conversation's epoch state, for an
        erasure: planner.epoch `drop_showing`), a refusal named as `drop`'s is: a replica's
        READONLY must reach the link as HotReadOnly, not as a plain ResponseError that no
        caller treats as Redis being unavailable. Returns how many went (0 or 1)."""
        with refusals("delete"):
            return int(self.client.execute_command("DEL", key))

    def drop_all(self, conversation_id: str) -> int:
        """Delete every key under the conversation's hash tag: the hot set's, the warm
        tier's cached views, any rebuild scratch. For erasure; returns how many went."""
        # escape_id leaves only [A-Za-z0-9._:@~%-] in the tag: no glob characters
        pattern = self.tag(conversation_id) + "*"
        gone = 0
        # the SCAN too: a BUSY Redis refuses it as it would the DEL, and a refusal the link
        # does not know (a plain ResponseError) left the erasure's keys neither deleted nor owed
        with refusals("delete"):
            found = list(self.client.scan_iter(match=pattern, count=SCAN_COUNT))
            for i in range(0, len(found), SCAN_COUNT):
                gone += int(self.client.execute_command("DEL", *found[i:i + SCAN_COUNT]))
        return gone

    def check_access(self) -> None:
        """One PING and one run of the writing scripts' first step (OOM_PROBE_LUA, which
        changes nothing) under a tag of this prefix: what a wrong or missing password
        (redis-py's AuthenticationError), an ACL user without EVAL, EVALSHA or SETRANGE
        or without this prefix's keys (HotAccessDenied), a replica (HotReadOnly) or a
        full Redis (HotOutOfMemory) answers to the hot tier's first write."""
        self.client.ping()
        self._run("probe", [self.tag(ACCESS_PROBE_ID)], [])

    def check_writes(self, conversation_id: str | None = None) -> None:
        """Whether Redis takes the hot tier's writes again under this conversation's hash
        tag (its node, on Cluster; None: `check_access`'s tag): the writing scripts' first
        step alone (OOM_PROBE_LUA, which changes nothing), on the very key theirs names.
        Raises HotOutOfMemory while Redis is still full, HotReadOnly while it is a
        replica (it refuses the empty SETRANGE as any write)."""
        key = self.tag(ACCESS_PROBE_ID) if conversation_id is None else self.keys(conversation_id)[0]
        self._run("probe", [key], [])

    def ping(self) -> bool:
        try:
            return bool(self.client.ping())
        except redis.exceptions.RedisError:
            return False

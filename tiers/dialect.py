"""The SQL both cold engines share, written once: a small dialect layer and the store
methods whose query and decoding are the same on SQLite and PostgreSQL.

The engines (`tiers.cold.ColdStore`, `tiers.postgres.PostgresStore`) inherit
`SharedQueries`; each says which `Dialect` it speaks. A shared query is written with
`?` placeholders and sent through `Dialect.sql`, which turns it into the engine's
paramstyle (`%s` for psycopg, with any literal `%` doubled). What stays in an engine is
what really differs: appends and their position counters, `IN (...)` against
`= ANY(%s)`, upserts SQLite spells `INSERT OR REPLACE`, locks (`FOR SHARE`/`FOR
UPDATE`) PostgreSQL needs under READ COMMITTED, NUL scrubbing PostgreSQL text needs
(a warm fold's text is scrubbed here, on both engines, so they read it alike),
the search SQL (FTS5 and vec0 against tsvector and pgvector), and numbered parameters
(`?1`) that SQLite reuses.

Invariants:

- A method here behaves identically on both engines: same rows, same order, same
  Python types (counts are cast to int, times to float, as the PostgreSQL engine did).
- A writer of a conversation's turns takes its locks in the one order PostgreSQL's
  writers share (tiers.postgres: the conversation's row, `_lock_turn_writers` where no
  UPDATE of it comes first; then the turns by position; then the pin version their
  trigger moves), so none deadlocks another; SQLite's one writer needs none of it. A
  pass over many turns (`set_labels`) takes that lock per short batch
  (LABEL_BATCH_TURNS), not for the whole pass, so an append waits one batch at most.
- It reaches its engine only through the hooks declared below (`_read`, `_tx`,
  `_require_in`, `_salvage`, ...), which each engine defines.
- Every stored JSON text it reads (a message's body and metadata, a checkpoint's
  metadata, a stored plan) is decoded with `tiers.models.loads_stored`; a row that cannot
  be decoded is salvaged (`_salvage`: logged, counted in `salvaged_rows`), never raised
  to the caller: a message or plan row is skipped, a checkpoint is read as absent.
  `salvaged_rows` counts distinct bad rows: one is known by its kind and its identity
  within the conversation (`SALVAGE_ROW_IDS`), so a bad message and a bad checkpoint or
  plan at the same position are two rows, and a row met on many reads is one.
- A turn-index row (derived: `rebuild` recomputes it) whose columns cannot be used (a
  token count, time, priority or supersession SQLite holds as text, or out of its range:
  `turn_problem`) is salvaged as a "turn" row: missing from the index for that read, as a
  turn not indexed yet is (the planner skips it; its message stays in `history`, counted
  as 0 tokens). Rows are converted in one pass and checked row by row only when that
  pass fails, so good rows cost what they did. A position out of range is left out by the
  reads' own position bounds (text sorts after every integer in SQLite). The background
  reads (`turn_times`, `turn_created_at`, `unlabeled_tail`) check each row with the same
  `turn_problem`; the turn census reads an id or time it cannot use as UNREADABLE_ID/_TIME.
- A view row whose columns cannot be used (`summary_problem`) is absent to `put_summary`
  and to the sweep (`view_frontier`, `session_summary_ends`) as to its readers: the next
  version is written after the highest version in 1..MAX_VIEW_VERSION, never onto the odd
  row's number, and the odd row is never rewritten. The warm cache's check
  (`turn_and_newest_view`) is the one read that does not skip it: a cached entry must be
  the newest row in that range, so while an odd row is newest the view is read from the
  store (its readers skip the row there), never served from a cache that lags it.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, cast

import numpy as np

from tiermem.tiers.embed import Embedder, query_embedding
from tiermem.tiers.errors import (
    ConversationNotFound,
    IdempotencyKeyReused,
    PositionOutOfRange,
    ValidationError,
)
from tiermem.tiers.formats import CONTROL_TYPE_PREFIX, is_control
from tiermem.tiers.models import (
    DEFAULT_FORK_MAX_ID_CHARS,
    FOLD_LINES_KEY,
    MAX_POSITION,
    MAX_TIMESTAMP,
    ROLES,
    Checkpoint,
    ErasureReport,
    IdempotencyRecord,
    SearchHit,
    StoredMessage,
    TurnRow,
    canonical_role,
    check_stored_body,
    fold_lines_meta,
    fork_id,
    key_name,
    loads_stored,
)
from tiermem.tiers.schema import RECHECK_TABLE, TOMBSTONE_NEWEST_COLUMN
from tiermem.tiers.search import fuse
from tiermem.tiers.statements import TABLE as STATEMENT_TABLE
from tiermem.tiers.statements import StatementRow
from tiermem.tiers.store import VIEWS_BEHIND_SQL, Erasure, ViewFailureRow

if TYPE_CHECKING:
    from tiermem.tiers.store import FrontierRow, SummaryRow, TurnFact


@functools.lru_cache(maxsize=1024)
def _to_pyformat(text: str) -> str:
    # a shared query's text is fixed per call site: converted once, then looked up
    return text.replace("%", "%%").replace("?", "%s")


@dataclass(frozen=True)
class Dialect:
    """What differs in the SQL text itself between the engines."""

    name: str
    placeholder: str  # one positional parameter
    greatest: str  # the two-argument maximum: MAX(a, b) in SQLite, GREATEST(a, b) in PostgreSQL
    # the database's clock in unix seconds: what a lease shared by several hosts expires
    # by (a client's clock may be minutes off; SQLite's database is on this host anyway)
    now: str

    def sql(self, text: str) -> str:
        """`text`, written with `?` placeholders (and no `?` in a literal), in this dialect."""
        return text if self.placeholder == "?" else _to_pyformat(text)

    def params(self, n: int) -> str:
        """`n` placeholders separated by commas (a VALUES list)."""
        return ",".join([self.placeholder] * n)


# a salvaged row's kind -> what identifies one row of that kind in its conversation (the
# log line names it): a message by its position; checkpoints and plans by their row id,
# since several can share a position
SALVAGE_ROW_IDS = {"message": "position", "checkpoint": "checkpoint_id", "plan": "plan_id", "turn": "position"}

# tokens: the largest count a turn-index row holds and is used with, PostgreSQL's INTEGER
# column's largest value (a message under the largest body limit, 256 MiB, counts far
# fewer); a sum over 2**32 such turns still fits the turn cache's int64 arrays
MAX_TURN_TOKENS = 2**31 - 1
# a turn's priority: a label's or a pin's, within PostgreSQL's INTEGER column
MIN_TURN_PRIORITY, MAX_TURN_PRIORITY = -(2**31), 2**31 - 1
# a census's first-turn time when the row holds none that can be read: no usable turn
# has a negative time, so the census still compares equal to itself call after call
UNREADABLE_TIME = -1.0
# and its first-turn id: no turn's id (a message's rowid) is negative
UNREADABLE_ID = -1
# a view's versions: 1 up to one below PostgreSQL's INTEGER largest, so that the version
# after any readable one still fits the column; a version outside (or SQLite text) is an
# odd row, and a new version is written after the highest one in range, never onto it
MAX_VIEW_VERSION = 2**31 - 2
# what `turn_and_newest_view` answers for a newest view row its readers cannot use: a
# version above every one a cache entry can hold, so the entry counts as behind the store
# (a miss, the store's own read answers) and is not deleted on every read
UNUSABLE_VIEW_VERSION = MAX_VIEW_VERSION + 1
# the newest view rows put_summary looks through for one it can read (WarmStore reads as many)
SUMMARY_LOOKBACK = 5
# set_labels writes a pass over many turns in batches, each its own transaction taking
# the conversation's row (the writers' lock order) for that batch alone, so an append to
# the conversation waits out one batch, not the whole pass. One transaction for all of
# them (a rebuild's relabelling: every turn of each conversation) held the row 1.1-17 s
# for 20k turns on PostgreSQL (SQLite's write lock 0.3-1.9 s; 2 cores, loaded to varying
# degrees), and an append behind it failed busy past a lock timeout shorter than that.
# A batch holds about LABEL_BATCH_TARGET_S (a turn costs ~15-35 us on SQLite, ~55-220 us on
# PostgreSQL): the first LABEL_BATCH_TURNS turns until the store has timed one, then as
# many as the last batches' cost per turn fits (`_label_turn_s`), within MIN..MAX turns,
# so a conversation of a few hundred turns is one batch. Between two batches a pause where
# a waiter gets in, but only once the lock has been held a spell (`_spell_begin`):
# PostgreSQL per conversation row, SQLite per store (one write lock for the file, across
# conversations); never after a pass's last batch.
LABEL_BATCH_TURNS = 200
LABEL_BATCH_MIN_TURNS = 16
LABEL_BATCH_MAX_TURNS = 5000
LABEL_BATCH_TARGET_S = 0.03
LABEL_PAUSE_MAX_S = 1.0
# how much each new batch's cost per turn weighs in the store's estimate (`_label_turn_s`)
LABEL_COST_WEIGHT = 0.5
# at most this many lock scopes' spells are remembered (PostgreSQL: one per conversation a
# pass is writing; SQLite has one): past it the ones idle longest are forgotten
SPELL_SCOPES_MAX = 64
# The order an erasure reports its conversations in (ErasureReport's tombstones, keys and
# conversation_ids) on both engines: by namespace, then name (the engine's collation, as
# conversation listings sort), then several incarnations of one name by creation time;
# the key, random per store, only breaks an exact tie. Over `conversations` columns.
ERASURE_ORDER = "namespace, name, created_at, id"
# Which conversations `prune` takes, over `conversations` columns, on both engines, with
# the cutoff's placeholder (`{cutoff}`, given twice): idle since before the cutoff. A
# conversation's last activity is its newest message, and a fork's creation too: a fork
# carries its parent's message times (`last_message_at`), so one made seconds ago from a
# 10-day-old prefix was erased by `prune --older-than 1d` (review r_ops, 2026-12-07). An
# import's old `created_at` still dates a new conversation: archives imported with their
# times are as old as their messages. `last_message_at` first, so its index is used.
PRUNE_IDLE_SQL = "last_message_at < {cutoff} AND (parent_id IS NULL OR created_at < {cutoff})"
# tombstones(): the oldest erasure first, each erasure's conversations in ERASURE_ORDER
# (over the `tombstones` table, whose key column is `key`)
TOMBSTONE_ORDER = "deleted_at, namespace, name, created_at, key"
# the newest tombstone's id (`erasure_mark`) as a column of another statement: a call that
# reads the store anyway learns of erasures without a round trip of its own. Uncorrelated:
# evaluated once per statement on both engines (one seek of the primary key's end)
ERASURE_MARK_COLUMN = "(SELECT MAX(id) FROM tombstones)"
# PostgreSQL text cannot hold NUL: derived and diagnostic text (a warm fold, the keyword
# index's text, a turn's speaker, a view's refresh error) holds this in its place on both
# engines, so they read alike and migrate-store copies such rows. A message's body keeps
# its NUL (its JSON escapes it).
NUL_STAND_IN = " "


def without_nul(text: str) -> str:
    """`text` as derived text stores it on either engine: each NUL a `NUL_STAND_IN`."""
    return text.replace("\x00", NUL_STAND_IN)


def _is_int(v: object, lo: int, hi: int) -> bool:
    return type(v) is int and lo <= v <= hi


def turn_problem(position: object, tokens: object, created: object, priority: object = None,
                 superseded_by: object = None) -> str | None:
    """Why a turn-index row's values cannot be used, naming the column and its limit (None:
    they can). SQLite keeps text (or a REAL) in an INTEGER column that does not convert;
    PostgreSQL's typed columns can still hold a negative count or a NaN time."""
    if not _is_int(position, 0, MAX_POSITION):
        return f"position {position!r} is not an integer from 0 to {MAX_POSITION}"
    if not _is_int(tokens, 0, MAX_TURN_TOKENS):
        return f"tokens {tokens!r} is not an integer from 0 to {MAX_TURN_TOKENS}"
    if type(created) not in (int, float) or not 0 <= cast("float", created) <= MAX_TIMESTAMP:
        return f"created_at {created!r} is not a time from 0 to {MAX_TIMESTAMP}"
    if priority is not None and not _is_int(priority, MIN_TURN_PRIORITY, MAX_TURN_PRIORITY):
        return f"priority {priority!r} is not an integer from {MIN_TURN_PRIORITY} to {MAX_TURN_PRIORITY}"
    if superseded_by is not None and not _is_int(superseded_by, 0, MAX_POSITION):
        return f"superseded_by {superseded_by!r} is not an integer from 0 to {MAX_POSITION}"
    return None


class UnusableTurn(ValueError):
    """A turn-index row `turn_problem` refuses (raised inside a read, salvaged there)."""


def summary_problem(row: Sequence[Any]) -> str | None:
    """Why a stored view row (`SummaryRow`) cannot be used, naming the column and its limit
    (None: it can). Its body is decoded by its reader (tiers.warm), not here."""
    _conv, _kind, _key, version, start, end, body, tokens, summarizer, created = row
    if not _is_int(version, 1, MAX_VIEW_VERSION):
        return f"version {version!r} is not an integer from 1 to {MAX_VIEW_VERSION}"
    if not _is_int(start, 0, MAX_POSITION):
        return f"start_position {start!r} is not an integer from 0 to {MAX_POSITION}"
    if not _is_int(end, start, MAX_POSITION):
        return f"end_position {end!r} is not an integer from start_position ({start}) to {MAX_POSITION}"
    if not _is_int(tokens, 0, MAX_TURN_TOKENS):
        return f"tokens {tokens!r} is not an integer from 0 to {MAX_TURN_TOKENS}"
    if type(created) not in (int, float):
        # a number out of range is still the view's: its readers show no time for it
        return f"created_at {created!r} is not a number"
    if not isinstance(body, str) or not isinstance(summarizer, str):
        return "body and summarizer must be text"
    return None

CONTROL_QUERY_KEYS = 500  # conversation ids per IN (...) list (SQLite allows 32766 parameters)
ERASURES_OF_NAMES = 500  # conversation names per IN (...) list of `erasures_of`


def erasures_sql(n_names: int) -> str:
    """The statement `erasures_of` runs for `n_names` names (parameters: namespace, then
    the names; `?` marks, as `_q` takes them): each name's latest erasure on request and
    the newest created_at its erasures took. One function, so the test of its query plan
    (tests/test_tombstones_by_name_index.py) reads the statement that runs."""
    marks = ", ".join("?" for _ in range(n_names))
    return (f"SELECT name, MAX(deleted_at), MAX({TOMBSTONE_NEWEST_COLUMN}) FROM tombstones "
            f"WHERE namespace = ? AND reason = 'erase' AND name IN ({marks}) GROUP BY name")

# checkpoints read, newest first, for the newest one that can be read (latest_checkpoint)
CHECKPOINT_LOOKBACK = 5

SQLITE = Dialect("sqlite", "?", "MAX", "((julianday('now') - 2440587.5) * 86400.0)")
POSTGRES = Dialect("postgresql", "%s", "GREATEST", "EXTRACT(EPOCH FROM clock_timestamp())::double precision")


class SalvagedRows:
    """The distinct stored rows a store could not decode, as this process has met them
    (both cold engines' `salvaged_rows`, tiers.warm's `salvaged`). A row is known by its
    conversation, then its identity there: every read of the conversation meets the same
    bad row again and it is still one row. Not locked: a count, read for stats only."""

    def __init__(self) -> None:
        self._rows: set[tuple[object, ...]] = set()  # (conversation, *identity)

    def add(self, conversation_id: str, *identity: object) -> bool:
        """Count the row; whether it is new (its salvage is then worth a warning, later
        reads of it only a debug line)."""
        row = (conversation_id, *identity)
        new = row not in self._rows
        self._rows.add(row)
        return new

    def __len__(self) -> int:
        return len(self._rows)

    def forget(self, conversation_ids: Collection[str]) -> None:
        """After an erasure or prune: these incarnations' bad rows no longer exist."""
        gone = set(conversation_ids)
        self._rows = {r for r in self._rows if r[0] not in gone}

    def count_in(self, conversation_ids: Collection[str]) -> int:
        """How many of the rows are these conversations' (a namespace's count)."""
        keys = set(conversation_ids)
        return sum(1 for r in self._rows if r[0] in keys)


def _idempotency_record(row: Sequence[Any]) -> IdempotencyRecord:
    return IdempotencyRecord(bytes(row[0]), int(row[1]), int(row[2]), float(row[3]))


class SharedQueries:
    """The store methods (tiers.store.ColdLog documents each contract) that are the same
    on both engines but for the dialect."""

    dialect: ClassVar[Dialect]
    _log: ClassVar[logging.Logger]  # the engine's logger (salvage lines name it)
    # A long pass (set_labels, a PostgreSQL rebuild's rewrite) commits in short batches;
    # a waiter gets the lock in a pause between two. `_SPELL_S`: how long the engine's
    # lock may be held, batch after batch, before a pause (`_spell_begin`);
    # `_SPELL_WHOLE_STORE`: whether the lock is the store's (SQLite's write lock: a pass
    # over one conversation holds off appends to every other) or the conversation's row
    # (PostgreSQL); `_lock_pause(held)`: how long the pause after a spell of `held` s.
    _SPELL_S: ClassVar[float]
    _SPELL_WHOLE_STORE: ClassVar[bool]

    if TYPE_CHECKING:  # what each engine provides
        _salvaged_rows: SalvagedRows  # (conversation, kind, SALVAGE_ROW_IDS[kind])
        _fault: Callable[[str], None] | None
        version: int
        embedder: Embedder | None

        def search_dense(self, query_vec: np.ndarray, k: int, *, conversation_id: str | None = None,
                         namespace: str | None = None, exclude: str | None = None,
                         before: int | None = None) -> list[tuple[str, int, float]]: ...
        def search_bm25(self, query: str, k: int, *, conversation_id: str | None = None,
                        namespace: str | None = None, exclude: str | None = None) -> list[tuple[str, int, float]]: ...

        def turn_facts(self, conversation_id: str, *, after: int = -1, positions: Sequence[int] | None = None,
                       limit: int | None = None) -> list[TurnFact]: ...

        def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...
        def _tx(self) -> contextlib.AbstractContextManager[Any]: ...
        @staticmethod
        def _require_in(c: Any, key: str) -> None: ...
        def _location(self) -> str: ...
        def _lock_summaries(self, c: Any, conversation_id: str) -> None: ...
        def _lock_turn_writers(self, c: Any, conversation_id: str) -> None: ...
        def _drop_old_warm_folds(self, c: Any, conversation_id: str, keep: int) -> None: ...
        def files_bytes(self) -> int: ...
        def list_conversations(self, namespace: str, *, exclude: str | None = None,
                               limit: int | None = None) -> list[str]: ...

    @property
    def salvaged(self) -> int:
        """How many distinct stored rows could not be decoded (this process has met)."""
        return len(self._salvaged_rows)

    def _salvage(self, conversation_id: str, kind: str, row: int, reason: object, *, what: str = "skipped") -> None:
        # warn the first time; later reads of the same row would only repeat it
        level = logging.WARNING if self._salvaged_rows.add(conversation_id, kind, int(row)) else logging.DEBUG
        self._log.log(level, "salvage: %s conversation=%s %s=%s: %s", what, conversation_id, SALVAGE_ROW_IDS[kind],
                      row, reason)

    def _q(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """A shared read, in the engine's dialect."""
        return self._read(self.dialect.sql(sql), params)

    def _prune_preview(self, where: str, params: Sequence[Any]) -> ErasureReport:
        """Each engine's `prune_preview`: the conversations `where` holds for (the
        condition over `conversations`, in the engine's placeholders, that its `prune`
        takes), with their messages and keys, in ERASURE_ORDER; erasing and writing
        nothing, and its report says so (`ErasureReport.dry_run`: no tombstone, no byte
        reclaimed, nothing scrubbed nor any WAL truncated)."""
        rows = self._read(
            "SELECT id, name, (SELECT COUNT(*) FROM messages m WHERE m.conversation_id = conversations.id), "
            f"namespace FROM conversations WHERE {where} ORDER BY {ERASURE_ORDER}", params)
        size = self.files_bytes()
        return ErasureReport(conversations=len(rows), messages=sum(int(r[2]) for r in rows), bytes_before=size,
                             bytes_after=size, conversation_ids=[str(r[1]) for r in rows],
                             namespaces=[str(r[3]) for r in rows],
                             keys=[str(r[0]) for r in rows], scrubbed=False, wal_truncated=False, dry_run=True)

    def _step(self, name: str) -> None:
        if self._fault is not None:
            self._fault(name)

    # when this process first saw an erasure's scrub (or rows) owed, still owed since
    # (`finish_owed_scrub`); None: nothing owed at the last look
    _owed_since: float | None = None

    def finish_owed_scrub(self, *, owed_for_s: float) -> bool:
        """(see ColdLog.finish_owed_scrub) The look is the engine's (`_scrub_owed`: one
        read), the work its open's (`_finish_scrub`)."""
        if not self._scrub_owed():
            self._owed_since = None
            return False
        now = time.monotonic()
        if self._owed_since is None:
            self._owed_since = now
        if now - self._owed_since < owed_for_s:
            return False
        self._owed_since = None  # seen owed again after this: another wait of owed_for_s
        self._finish_scrub(owed_for_s=owed_for_s)
        return True

    def _scrub_owed(self) -> bool:
        """Whether an erasure's scrub, or rows, are owed (their marker or records); one read."""
        raise NotImplementedError

    def _finish_scrub(self, *, owed_for_s: float | None = None) -> None:
        """What an open does about an owed scrub (each engine's); it logs and keeps owed
        what it could not do. `owed_for_s`: called by a running process that saw it owed
        that long (`finish_owed_scrub`), not at an open (`owed_erasure`'s words)."""
        raise NotImplementedError

    def _lock_pause(self, held: float) -> float:
        """The pause after a spell of `held` seconds holding the lock, long enough for a
        writer waiting on it to be sure to take it (each engine says)."""
        raise NotImplementedError

    def _spells(self) -> tuple[threading.Lock, OrderedDict[str, list[float]]]:
        # scope -> [seconds held since the last pause, perf_counter() at the last release]
        got: tuple[threading.Lock, OrderedDict[str, list[float]]] | None = self.__dict__.get("_spell_state")
        if got is None:
            got = self.__dict__.setdefault("_spell_state", (threading.Lock(), OrderedDict()))
        return got

    def _spell_begin(self, key: str) -> None:
        """Before a long pass's transaction on `key`: pause first when the lock has been
        held a spell (`_SPELL_S`) since the last gap long enough for a waiter to take it.
        The pause comes before the next batch, not after the last one, so a pass's last
        batch, or a conversation's on PostgreSQL (the next one locks another row), is
        followed by none; on SQLite the spell runs on across conversations and passes."""
        lock, spells = self._spells()
        scope = "" if self._SPELL_WHOLE_STORE else key
        with lock:
            spell = spells.get(scope)
            if spell is None:
                return
            held, released = spell
            pause = self._lock_pause(held)
            if time.perf_counter() - released >= pause:
                del spells[scope]  # a gap as long as a pause since: a waiter had its turn
                return
            if held < self._SPELL_S:
                return
            del spells[scope]
        time.sleep(pause)

    def _spell_end(self, key: str, held: float) -> None:
        """After a long pass's transaction on `key` that held the lock `held` seconds."""
        lock, spells = self._spells()
        scope = "" if self._SPELL_WHOLE_STORE else key
        with lock:
            spell = spells.pop(scope, None)
            spells[scope] = [(spell[0] if spell is not None else 0.0) + held, time.perf_counter()]
            while len(spells) > SPELL_SCOPES_MAX:
                spells.popitem(last=False)

    def _label_batch(self) -> int:
        """How many turns set_labels's next batch takes: LABEL_BATCH_TARGET_S at the cost
        per turn its batches have taken in this store (LABEL_BATCH_TURNS before one)."""
        per_turn: float | None = self.__dict__.get("_label_turn_s")
        if per_turn is None:
            return LABEL_BATCH_TURNS
        return max(LABEL_BATCH_MIN_TURNS, min(LABEL_BATCH_MAX_TURNS, int(LABEL_BATCH_TARGET_S / max(per_turn, 1e-7))))

    def _label_cost(self, turns: int, held: float) -> None:
        if turns < LABEL_BATCH_MIN_TURNS:
            return  # mostly a transaction's own cost: it would size the next batches too small
        per_turn = held / max(turns, 1)
        was: float | None = self.__dict__.get("_label_turn_s")
        self.__dict__["_label_turn_s"] = per_turn if was is None else (
            LABEL_COST_WEIGHT * per_turn + (1 - LABEL_COST_WEIGHT) * was)

    # -- conversations ----------------------------------------------------------------

    def key_of(self, namespace: str, name: str) -> str | None:
        rows = self._q("SELECT id FROM conversations WHERE namespace = ? AND name = ?", (namespace, name))
        return str(rows[0][0]) if rows else None

    def key_and_erasure_mark(self, namespace: str, name: str) -> tuple[str | None, int]:
        """`key_of` and `erasure_mark` in one statement: a call that looks its
        conversation up learns of erasures without a round trip of its own."""
        rows = self._q("SELECT (SELECT id FROM conversations WHERE namespace = ? AND name = ?), "
                       f"{ERASURE_MARK_COLUMN}", (namespace, name))
        key, mark = rows[0]
        return (str(key) if key is not None else None), int(mark or 0)

    # -- idempotency keys (tiers.store: "Idempotency keys"; the table: SQLite m024,
    # PostgreSQL m010) ---------------------------------------------------------------------

    _IDEMPOTENCY_COLS = "fingerprint, first_position, message_count, created_at"

    def idempotency_record(self, conversation_id: str, idempotency_key: str) -> IdempotencyRecord | None:
        rows = self._q(f"SELECT {self._IDEMPOTENCY_COLS} FROM idempotency_keys WHERE conversation_id = ? "
                       "AND idem_key = ?", (conversation_id, idempotency_key))
        return _idempotency_record(rows[0]) if rows else None

    def _replayed(self, c: Any, key: str, idempotency_key: str, fingerprint: bytes) -> list[int] | None:
        """Inside an append's write transaction, the conversation's row held: the
        positions an earlier append of this same request wrote under `idempotency_key`
        (a replay: the caller writes nothing), or None when the key is new here.
        IdempotencyKeyReused when the key was used for another request. The record may
        hold the fingerprint an earlier release took of this same request (`fingerprint`'s
        `also`, `tiers.models.Fingerprint`): a retry spanning the upgrade replays too."""
        row = c.execute(self.dialect.sql(f"SELECT {self._IDEMPOTENCY_COLS} FROM idempotency_keys "
                                         "WHERE conversation_id = ? AND idem_key = ?"),
                        (key, idempotency_key)).fetchone()
        if row is None:
            return None
        record = _idempotency_record(row)
        if record.fingerprint != fingerprint and record.fingerprint not in getattr(fingerprint, "also", ()):
            raise IdempotencyKeyReused(idempotency_key, record.first_position,
                                       record.first_position + record.count - 1)
        return record.positions

    def _record_key(self, c: Any, key: str, idempotency_key: str, fingerprint: bytes, positions: Sequence[int],
                    now: float) -> bool:
        """Inside the append's transaction, after its rows: record the key with the
        positions written; False when another transaction recorded it first (the caller
        rolls its work back and answers from that record). One batch's positions are
        contiguous on both engines (one counter under the conversation's write lock), so
        the first and the count stand for them all."""
        if list(positions) != list(range(positions[0], positions[0] + len(positions))):
            raise RuntimeError(f"append positions of {key!r} are not contiguous: {list(positions)}")
        return c.execute(self.dialect.sql(
            "INSERT INTO idempotency_keys(conversation_id, idem_key, fingerprint, first_position, message_count, "
            "created_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING 1"),
            (key, idempotency_key, bytes(fingerprint), positions[0], len(positions), now)).fetchone() is not None

    def name_of(self, key: str) -> tuple[str, str] | None:
        rows = self._q("SELECT namespace, name FROM conversations WHERE id = ?", (key,))
        return (str(rows[0][0]), str(rows[0][1])) if rows else None

    def namespace_of(self, conversation_id: str) -> str | None:
        rows = self._q("SELECT namespace FROM conversations WHERE id = ?", (conversation_id,))
        return rows[0][0] if rows else None

    def require(self, conversation_id: str, namespace: str | None = None) -> str:
        """The namespace of a conversation key; ConversationNotFound if it does not exist
        or (when `namespace` is given) belongs to another namespace."""
        owner = self.namespace_of(conversation_id)
        if owner is None or (namespace is not None and owner != namespace):
            raise ConversationNotFound(key_name(conversation_id), namespace)
        return owner

    def conversation(self, conversation_id: str) -> dict[str, Any] | None:
        rows = self._q(
            "SELECT id, name, namespace, parent_id, fork_position, created_at, last_message_at, "
            "(SELECT COALESCE(MAX(position) + 1, 0) FROM messages WHERE conversation_id = c.id) "
            "FROM conversations c WHERE id = ?", (conversation_id,))
        if not rows:
            return None
        r = rows[0]
        return {"key": r[0], "id": r[1], "namespace": r[2], "parent_id": r[3], "fork_position": r[4],
                "created_at": r[5], "last_message_at": r[6], "messages": int(r[7])}

    def all_keys(self) -> list[str]:
        return [r[0] for r in self._q("SELECT id FROM conversations ORDER BY id")]

    def created_times(self, namespace: str | None = None) -> dict[str, Any]:
        # as `conversation` returns it (uncast): a hot set's generation is built from it
        if namespace is None:
            rows = self._q("SELECT id, created_at FROM conversations ORDER BY id")
        else:
            rows = self._q("SELECT id, created_at FROM conversations WHERE namespace = ? ORDER BY id", (namespace,))
        return {r[0]: r[1] for r in rows}

    @staticmethod
    def _names_query(columns: str, namespace: str, after: str | None, limit: int | None) -> tuple[str, list[object]]:
        # the (namespace, name) unique index serves the cursor and the order on both engines
        sql = f"SELECT {columns} FROM conversations WHERE namespace = ?"
        params: list[object] = [namespace]
        if after is not None:
            sql += " AND name > ?"
            params.append(after)
        sql += " ORDER BY name"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return sql, params

    def list_names(self, namespace: str, *, after: str | None = None, limit: int | None = None) -> list[str]:
        return [r[0] for r in self._q(*self._names_query("name", namespace, after, limit))]

    def list_names_and_erasure_mark(self, namespace: str, *, after: str | None = None,
                                    limit: int | None = None) -> tuple[list[str], int]:
        rows = self._q(*self._names_query(f"name, {ERASURE_MARK_COLUMN}", namespace, after, limit))
        return [r[0] for r in rows], self._mark_of(rows, 1)

    def count_names(self, namespace: str) -> int:
        return int(self._q("SELECT COUNT(*) FROM conversations WHERE namespace = ?", (namespace,))[0][0])

    def last_position(self, conversation_id: str) -> int:
        return int(self._q("SELECT COALESCE(MAX(position), -1) FROM messages WHERE conversation_id = ?",
                           (conversation_id,))[0][0])

    # a namespace's pending turns: from its conversations (SQLite keeps a CROSS JOIN's
    # order) to each one's pending turns (a partial index on both engines), not from every
    # tenant's (turns_pending)
    _NAMESPACE_PENDING: ClassVar[str] = (
        "SELECT COUNT(*) FROM conversations c CROSS JOIN turns t "
        "WHERE c.namespace = ? AND t.conversation_id = c.id AND t.embedded = 0")

    def pending_embeddings(self, conversation_id: str | None = None, *, namespace: str | None = None) -> int:
        if conversation_id is None and namespace is not None:
            return int(self._q(self._NAMESPACE_PENDING, (namespace,))[0][0])
        if conversation_id is None:
            return int(self._q("SELECT COUNT(*) FROM turns WHERE embedded = 0")[0][0])
        return int(self._q("SELECT COUNT(*) FROM turns WHERE embedded = 0 AND conversation_id = ?",
                           (conversation_id,))[0][0])

    def turn_census(self, conversation_id: str) -> tuple[int, float, int] | None:
        # two index seeks, not a count (a COUNT over 20k turns costs 1.7 ms per call)
        # the last position in range: one SQLite holds as text sorts after every integer
        rows = self._q(
            "SELECT f.id, f.created_at, l.position, f.position FROM "
            "(SELECT id, created_at, position FROM turns WHERE conversation_id = ? ORDER BY position LIMIT 1) f, "
            "(SELECT position FROM turns WHERE conversation_id = ? AND position BETWEEN 0 AND ? "
            "ORDER BY position DESC LIMIT 1) l",
            (conversation_id, conversation_id, MAX_POSITION))
        if not rows:
            return None
        r = rows[0]
        # the first turn's identity only: a time or an id that cannot be used is not read as one
        # NaN (PostgreSQL holds it) is no time: it compares unequal to itself, and the turn
        # cache would read the census as a new first turn, reloading on every call
        created = float(r[1]) if type(r[1]) in (int, float) and 0 <= r[1] <= MAX_TIMESTAMP else UNREADABLE_TIME
        if type(r[0]) is not int:
            self._salvage(conversation_id, "turn", r[3] if type(r[3]) is int else -1,
                          f"id {r[0]!r} is not an integer", what="turn skipped")
        return r[0] if type(r[0]) is int else UNREADABLE_ID, created, int(r[2])

    # -- reads --------------------------------------------------------------------------

    def _decode(self, row: Sequence[Any]) -> StoredMessage | None:
        conv, pos, role, body, session, meta, created, tokens = row
        if tokens is not None and not _is_int(tokens, 0, MAX_TURN_TOKENS):
            # the turn index's count, not the message: the message stays, as one not indexed yet
            self._salvage(conv, "turn", pos, f"tokens {tokens!r} is not an integer from 0 to {MAX_TURN_TOKENS}",
                          what="turn skipped")
            tokens = 0
        try:
            data = loads_stored(body)  # a row nested past what json decodes is salvaged too
            # the check that admitted the message on append runs on every read: a row of
            # valid JSON but the wrong shape (tool_calls a string) is salvaged here, not
            # met as an AttributeError by whatever renders it
            check_stored_body(data)
            if canonical_role(data) != role or role not in ROLES:
                raise ValueError("body is not a message of the row's role")
            metadata = loads_stored(meta) if meta is not None else None
            if metadata is not None and not isinstance(metadata, dict):
                raise ValueError("metadata is not an object")
            return StoredMessage(conv, int(pos), role, data, session, metadata, float(created), int(tokens or 0))
        except (ValueError, TypeError) as exc:
            self._salvage(conv, "message", pos, exc)
            return None

    _SELECT = (
        "SELECT m.conversation_id, m.position, m.role, m.body, m.session_id, m.metadata, m.created_at, t.tokens "
        "FROM messages m LEFT JOIN turns t ON t.conversation_id = m.conversation_id AND t.position = m.position "
    )

    def history(self, conversation_id: str, *, start: int = 0, end: int | None = None) -> list[StoredMessage]:
        rows = self._q(self._SELECT + "WHERE m.conversation_id = ? AND m.position BETWEEN ? AND ? "
                       "ORDER BY m.position", (conversation_id, start, MAX_POSITION if end is None else end))
        return [m for m in map(self._decode, rows) if m is not None]

    def _checkpoint(self, r: Sequence[Any]) -> Checkpoint | None:
        """A checkpoint row; None when it cannot be read (salvaged: logged, counted)."""
        conv, pos, summary, meta, created, row_id = r
        try:
            if not isinstance(summary, str):
                raise ValueError("summary is not text")
            # decoded as a message's metadata is: a row nested past what json decodes, or
            # not JSON at all, is salvaged rather than failing the read that met it
            metadata = loads_stored(meta) if meta else None
            if metadata is not None and not isinstance(metadata, dict):
                raise ValueError("metadata is not an object")
            return Checkpoint(conv, int(pos), summary, metadata, float(created))
        except (ValueError, TypeError) as exc:
            self._salvage(conv, "checkpoint", row_id, exc, what="checkpoint skipped")
            return None

    def latest_checkpoint(self, conversation_id: str, at_or_before: int | None = None) -> Checkpoint | None:
        sql = ("SELECT conversation_id, position, summary, metadata, created_at, id FROM checkpoints "
               "WHERE conversation_id = ? AND position <= ? ORDER BY position DESC, id DESC LIMIT ?")
        at = MAX_POSITION if at_or_before is None else at_or_before
        rows = self._q(sql, (conversation_id, at, 1))  # one fold's text, not a few, on every context
        newest = self._checkpoint(rows[0]) if rows else None
        if newest is not None or not rows:
            return newest
        # a checkpoint that cannot be read is absent: the newest readable one among the
        # newest CHECKPOINT_LOOKBACK stands in, or none (what it covered is then read from
        # the log, the source of truth). From the newest again: one written since is read.
        rows = self._q(sql, (conversation_id, at, CHECKPOINT_LOOKBACK))
        return next((cp for cp in map(self._checkpoint, rows) if cp is not None), None)

    def active(self, conversation_id: str) -> tuple[Checkpoint | None, list[StoredMessage]]:
        cp = self.latest_checkpoint(conversation_id)
        return cp, self.history(conversation_id, start=(cp.position + 1) if cp else 0)

    _TURN_COLUMNS = (
        "t.conversation_id, t.position, t.role, t.session_id, t.tokens, t.content_hash, t.created_at, "
        "t.intent, t.load_bearing, t.priority, t.label_reason, t.superseded_by, p.priority "
    )
    # `_turn` reads these by index: a column after them is not read
    _TURN_COLUMN_COUNT = _TURN_COLUMNS.count(",") + 1
    _TURN_PINS = "LEFT JOIN pins p ON p.conversation_id = t.conversation_id AND p.position = t.position "
    _TURN_SELECT = "SELECT " + _TURN_COLUMNS + "FROM turns t " + _TURN_PINS

    @staticmethod
    def _turn(r: Sequence[Any]) -> TurnRow:
        # the checks only: a row that fails them is met by `_turn_rows`' second pass
        if not (type(r[4]) is int and 0 <= r[4] <= MAX_TURN_TOKENS and type(r[6]) in (int, float)
                and 0 <= r[6] <= MAX_TIMESTAMP and (r[9] is None or _is_int(r[9], MIN_TURN_PRIORITY, MAX_TURN_PRIORITY))
                and (r[11] is None or _is_int(r[11], 0, MAX_POSITION))):
            raise UnusableTurn(turn_problem(r[1], r[4], r[6], r[9], r[11]) or "unusable")
        return TurnRow(r[0], int(r[1]), r[2], r[3], r[4], r[5], float(r[6]), r[7], bool(r[8]),
                       r[9] or 0, r[10], r[11], None if r[12] is None else int(r[12]))

    def _turn_rows(self, rows: Sequence[Sequence[Any]]) -> list[TurnRow]:
        """`rows` of `_TURN_SELECT` as TurnRows; one that cannot be used is salvaged (a
        "turn" row) and left out, as a turn not indexed yet is."""
        try:
            return [self._turn(r) for r in rows]
        except (ValueError, TypeError):
            pass  # a second pass, row by row: the first one stays as cheap as it was
        out: list[TurnRow] = []
        for r in rows:
            try:
                out.append(self._turn(r))
            except (ValueError, TypeError) as exc:
                self._salvage(r[0], "turn", r[1] if type(r[1]) is int else -1, exc, what="turn skipped")
        return out

    def usable_facts(self, conversation_id: str, rows: Sequence[Sequence[Any]],
                     convert: Callable[[Sequence[Any]], TurnFact], *, limit: int | None,
                     positions: Sequence[int] | None) -> list[TurnFact]:
        """`rows` (a `turn_facts` read) converted by `convert` in one pass; only when that
        fails, the careful pass: each row converted alone, one the index cannot use (its
        tokens or time out of range, NULL in the engine's SELECT) salvaged and left out. A
        page (`limit`) is filled up from the rows after it: the turn cache reads pages
        until one comes back short."""
        try:
            return [convert(r) for r in rows]
        except (ValueError, TypeError):
            pass  # a row the index cannot use: the careful pass, only now
        out: list[TurnFact] = []
        for r in rows:
            try:
                out.append(convert(r))
            except (ValueError, TypeError, OverflowError) as exc:
                reason: object = exc
                if r[2] is None:
                    reason = f"tokens is not an integer from 0 to {MAX_TURN_TOKENS}"
                elif r[3] is None:
                    reason = f"created_at is not a time from 0 to {MAX_TIMESTAMP}"
                self._salvage(conversation_id, "turn", r[1] if type(r[1]) is int else -1, reason, what="turn skipped")
        if positions is None and limit is not None and len(rows) == limit and len(out) < limit:
            out += self.turn_facts(conversation_id, after=int(rows[-1][1]), limit=limit - len(out))
        return out

    def _turns_where(self, where: str, params: Sequence[Any]) -> list[TurnRow]:
        return self._turn_rows(self._q(self._TURN_SELECT + where, params))

    def turns(self, conversation_id: str, *, start: int = 0, end: int | None = None) -> list[TurnRow]:
        return self._turns_where("WHERE t.conversation_id = ? AND t.position BETWEEN ? AND ? ORDER BY t.position",
                                 (conversation_id, start, MAX_POSITION if end is None else end))

    def superseded_within(self, conversation_id: str, *, start: int, end: int) -> list[tuple[int, int]]:
        # no index holds superseded_by: the range of the (conversation, position) key is
        # read in the database, only the superseded rows' two columns come back
        return [(int(r[0]), int(r[1])) for r in self._q(
            "SELECT position, superseded_by FROM turns WHERE conversation_id = ? AND position BETWEEN ? AND ? "
            "AND superseded_by IS NOT NULL ORDER BY position", (conversation_id, start, end))]

    # conversation keys per statement of `fork_links`: an IN list of 500 parameters, as
    # tiers.cold's (well under SQLite's 32766); a namespace recall asks for a few dozen
    FORK_LINKS_PER_READ: ClassVar[int] = 500

    def fork_links(self, conversation_ids: Collection[str]) -> dict[str, tuple[str, int]]:
        want = sorted({str(c) for c in conversation_ids})
        out: dict[str, tuple[str, int]] = {}
        for i in range(0, len(want), self.FORK_LINKS_PER_READ):
            chunk = want[i:i + self.FORK_LINKS_PER_READ]
            out.update((str(r[0]), (str(r[1]), int(r[2]))) for r in self._q(
                "SELECT id, parent_id, fork_position FROM conversations WHERE id IN ("
                + ", ".join(["?"] * len(chunk)) + ") AND parent_id IS NOT NULL AND fork_position IS NOT NULL",
                chunk))
        return out

    # superseding positions per statement of `turns_superseded_by`: an IN list of 500
    # parameters, as tiers.cold's (well under SQLite's 32766); a refresh asks for a few pops
    SUPERSEDED_BY_PER_READ: ClassVar[int] = 500

    def turns_superseded_by(self, conversation_id: str, by: Collection[int], *, start: int, end: int) -> list[int]:
        # no index holds superseded_by: the range of the (conversation, position) key is
        # read in the database, only the matching positions come back (no row decoded)
        want = sorted({int(p) for p in by})
        out: set[int] = set()
        for i in range(0, len(want), self.SUPERSEDED_BY_PER_READ):
            chunk = want[i:i + self.SUPERSEDED_BY_PER_READ]
            out.update(int(r[0]) for r in self._q(
                "SELECT position FROM turns WHERE conversation_id = ? AND position BETWEEN ? AND ? "
                "AND superseded_by IN (" + ", ".join(["?"] * len(chunk)) + ")",
                [conversation_id, start, end, *chunk]))
        return sorted(out)

    # (key, position) pairs per statement of `turns_at_many`: 500 parameters, as tiers.cold's
    # IN lists (well under SQLite's 32766); one call's namespace hits are a few dozen
    TURN_KEYS_PER_READ: ClassVar[int] = 250

    def _at_keys(self, keys: Sequence[tuple[str, int]], select: str) -> tuple[list[Any], dict[str, int]]:
        """`select` (reading the pairs as `k(conv, pos)`) run for the distinct (conversation,
        position) `keys`, one statement per TURN_KEYS_PER_READ pairs: its rows, and each
        conversation's rank in first-seen order (the callers' grouping, as `get_many`)."""
        # the pairs as a VALUES list joined to the table's (conversation, position) key;
        # SQLite keeps a CROSS JOIN's order, so it seeks each pair, never scans the table
        want = list(dict.fromkeys((str(c), int(p)) for c, p in keys))
        rows: list[Any] = []
        for i in range(0, len(want), self.TURN_KEYS_PER_READ):
            chunk = want[i:i + self.TURN_KEYS_PER_READ]
            rows += self._q("WITH k(conv, pos) AS (VALUES " + ", ".join(["(?, ?)"] * len(chunk)) + ") " + select,
                            [v for pair in chunk for v in pair])
        return rows, {c: n for n, c in enumerate(dict.fromkeys(c for c, _p in want))}

    def turns_at_many(self, keys: Sequence[tuple[str, int]]) -> list[TurnRow]:
        # one statement for every conversation (per TURN_KEYS_PER_READ pairs), seeking the
        # turn index's (conversation, position) key
        rows, order = self._at_keys(keys, f"SELECT {self._TURN_COLUMNS}FROM k CROSS JOIN turns t {self._TURN_PINS}"
                                          "WHERE t.conversation_id = k.conv AND t.position = k.pos")
        # grouped by conversation in first-seen order, each in log order (as `get_many`)
        out = self._turn_rows(rows)
        out.sort(key=lambda r: (order[r.conversation_id], r.position))
        return out

    def superseded_statements_many(self, keys: Sequence[tuple[str, int]]) -> list[tuple[str, StatementRow]]:
        # as `turns_at_many`, joined to the statement rows' (conversation, position, start) key
        rows, order = self._at_keys(
            keys, f'SELECT s.conversation_id, s.position, s.start, s."end", s.superseded_by FROM k CROSS JOIN '
                  f"{STATEMENT_TABLE} s WHERE s.conversation_id = k.conv AND s.position = k.pos")
        out = [(str(r[0]), StatementRow(int(r[1]), int(r[2]), int(r[3]), int(r[4]))) for r in rows]
        out.sort(key=lambda cs: (order[cs[0]], cs[1].position, cs[1].start))
        return out

    def turns_and_pin_version(self, conversation_id: str, *, start: int = 0,
                              end: int | None = None) -> tuple[list[TurnRow], int]:
        # One statement, so one snapshot on both engines (the version counts exactly the
        # changes the rows show) and no round trip of its own: the hot tier's check on
        # every read and admit (tiermem.hotlink). The version is an uncorrelated subquery
        # (run once) in a column after `_TURN_COLUMNS`, which `_turn` does not read; the
        # plan is `turns`' own. A range without turns has no row to carry it: read alone.
        rows = self._q(
            f"SELECT {self._TURN_COLUMNS}, (SELECT version FROM pin_versions WHERE conversation_id = ?) "
            f"FROM turns t {self._TURN_PINS}"
            "WHERE t.conversation_id = ? AND t.position BETWEEN ? AND ? ORDER BY t.position",
            (conversation_id, conversation_id, start, MAX_POSITION if end is None else end))
        if not rows:
            return [], self.pin_version(conversation_id)
        return self._turn_rows(rows), int(rows[0][self._TURN_COLUMN_COUNT] or 0)

    def tail_turns(self, conversation_id: str, limit: int) -> list[TurnRow]:
        # positions in range: one SQLite holds as text sorts after every integer
        rows = self._turns_where("WHERE t.conversation_id = ? AND t.position <= ? ORDER BY t.position DESC LIMIT ?",
                                 (conversation_id, MAX_POSITION, limit))
        return rows[::-1]

    def latest_position(self, conversation_id: str, role: str, *, after: int = -1,
                        skip: Collection[int] = ()) -> int | None:
        if not skip:
            # positions in range: one SQLite holds as text sorts after every integer
            row = self._q("SELECT MAX(position) FROM turns WHERE conversation_id = ? AND role = ? "
                          "AND position > ? AND position <= ?", (conversation_id, role, after, MAX_POSITION))
            return None if row[0][0] is None else int(row[0][0])
        # among the newest len(skip) + 1 turns of the role, one at least is not skipped
        rows = self._q("SELECT position FROM turns WHERE conversation_id = ? AND role = ? AND position > ? "
                       "AND position <= ? ORDER BY position DESC LIMIT ?",
                       (conversation_id, role, after, MAX_POSITION, len(skip) + 1))
        return next((int(r[0]) for r in rows if int(r[0]) not in skip), None)

    def control_rows(self, conversation_ids: Sequence[str]) -> dict[str, list[tuple[int, dict[str, Any]]]]:
        """Per conversation, its control rows (a retraction, a clear: tiers.formats) as
        (position, body) in log order; conversations without any are absent. They carry
        the canonical role "system", so the role index finds them among a conversation's
        few system rows, and only bodies naming a control type are decoded."""
        out: dict[str, list[tuple[int, dict[str, Any]]]] = {}
        uniq = sorted(set(conversation_ids))
        for i in range(0, len(uniq), CONTROL_QUERY_KEYS):
            chunk = uniq[i:i + CONTROL_QUERY_KEYS]
            rows = self._q(
                "SELECT m.conversation_id, m.position, m.body FROM turns t JOIN messages m "
                "ON m.conversation_id = t.conversation_id AND m.position = t.position "
                f"WHERE t.conversation_id IN ({','.join('?' * len(chunk))}) AND t.role = 'system' "
                "ORDER BY m.conversation_id, m.position", chunk)
            for conv, pos, body in rows:
                if CONTROL_TYPE_PREFIX not in body:
                    continue
                try:
                    data = loads_stored(body)
                except ValueError:
                    continue  # salvaged where it is read; it hides nothing
                if isinstance(data, dict) and is_control(data):
                    out.setdefault(str(conv), []).append((int(pos), data))
        return out

    def pin_version(self, conversation_id: str) -> int:
        # kept by triggers in both engines (m012_pin_versions)
        rows = self._q("SELECT version FROM pin_versions WHERE conversation_id = ?", (conversation_id,))
        return int(rows[0][0]) if rows else 0

    def supersession_version(self, conversation_id: str) -> int:
        # kept by triggers in both engines (m027_supersession_versions, PostgreSQL m014)
        rows = self._q("SELECT supersessions FROM pin_versions WHERE conversation_id = ?", (conversation_id,))
        return int(rows[0][0]) if rows else 0

    # -- corrections to search by meaning again (derived: m029, PostgreSQL m016) -----------

    def first_pending(self, conversation_id: str, before: int) -> int | None:
        # a seek on the pending turns by position (m022; PostgreSQL's turns_pending)
        rows = self._q("SELECT position FROM turns WHERE conversation_id = ? AND embedded = 0 AND position < ? "
                       "ORDER BY position LIMIT 1", (conversation_id, before))
        return int(rows[0][0]) if rows else None

    def owe_rechecks(self, conversation_id: str, positions: Sequence[int]) -> None:
        if not positions:
            return
        with self._tx() as c:
            c.cursor().executemany(self.dialect.sql(
                f"INSERT INTO {RECHECK_TABLE}(conversation_id, position) VALUES (?, ?) "
                "ON CONFLICT (conversation_id, position) DO NOTHING"),
                [(conversation_id, int(p)) for p in sorted(set(positions))])

    def rechecks(self, conversation_id: str) -> list[int]:
        return [int(r[0]) for r in self._q(f"SELECT position FROM {RECHECK_TABLE} WHERE conversation_id = ? "
                                           "ORDER BY position", (conversation_id,))]

    def take_recheck(self, conversation_id: str, position: int) -> bool:
        with self._tx() as c:
            cur = c.cursor()
            cur.execute(self.dialect.sql(f"DELETE FROM {RECHECK_TABLE} WHERE conversation_id = ? AND position = ?"),
                        (conversation_id, int(position)))
            return bool(cur.rowcount == 1)

    # -- derived labels and user state ------------------------------------------------------

    def set_labels(self, conversation_id: str, labels: Sequence[tuple[int, str, bool, int, str]]) -> None:
        # by position (a stable sort: a position given twice keeps its last label, written
        # after the first in the same batch or a later one)
        ordered = sorted(labels, key=lambda lab: lab[0])
        update = self.dialect.sql("UPDATE turns SET intent = ?, load_bearing = ?, priority = ?, label_reason = ? "
                                  "WHERE conversation_id = ? AND position = ?")
        start = 0
        while start < len(ordered):  # no labels: no transaction
            size = self._label_batch()
            # a batch that would leave fewer than a small batch's turns takes them too
            if len(ordered) - start - size < LABEL_BATCH_MIN_TURNS:
                size = len(ordered) - start
            self._spell_begin(conversation_id)  # a pause first, if the lock has been held a spell
            began = time.perf_counter()
            with self._tx() as c:
                # each batch in the writers' lock order (the engine's `_lock_turn_writers`):
                # the conversation's row, then its turns by position, then the pin version
                # their trigger moves (once per turn whose label it changes, as before)
                self._lock_turn_writers(c, conversation_id)
                c.cursor().executemany(update, [(i, int(lb), p, r, conversation_id, pos)
                                                for pos, i, lb, p, r in ordered[start:start + size]])
            held = time.perf_counter() - began
            self._spell_end(conversation_id, held)
            self._label_cost(size, held)
            start += size

    def set_superseded(self, conversation_id: str, pairs: Sequence[tuple[int, int]],
                       labels: Sequence[tuple[int, str, bool, int, str]] = ()) -> tuple[int, int] | None:
        if not pairs and not labels:
            return None
        with self._tx() as c:
            cur = c.cursor()
            # the writers' lock order (`_lock_turn_writers`): the conversation's row first,
            # then its turns by position, then the pin version their trigger moves
            if pairs:
                # the scheduler's sweep looks at the conversation again (views_seq, as an
                # append): a view built before this correction may show the old value as
                # current (consolidation.views `outdated_views`). This UPDATE is the row's lock
                cur.execute(self.dialect.sql("UPDATE conversations SET views_seq = views_seq + 1 WHERE id = ?"),
                            (conversation_id,))
            else:
                self._lock_turn_writers(c, conversation_id)
            # only what changes is written to the columns the pin version's trigger
            # watches: each row written so moves the version exactly once, so `changes`
            # counts this write's moves. A pair's row and a label's in one position order
            # (a pair's first where both name one turn, each list's own order among equals)
            steps = sorted([(old, 0, i) for i, (old, _new) in enumerate(pairs)]
                           + [(lab[0], 1, i) for i, lab in enumerate(labels)])
            changes = 0
            for _pos, is_label, i in steps:
                if not is_label:
                    old, new = pairs[i]
                    cur.execute(self.dialect.sql(
                        "UPDATE turns SET superseded_by = ? WHERE conversation_id = ? AND position = ? "
                        "AND (superseded_by IS NULL OR superseded_by <> ?)"), (new, conversation_id, old, new))
                    changes += max(cur.rowcount, 0)
                    continue
                pos, intent, bearing, priority, reason = labels[i]
                cur.execute(self.dialect.sql(
                    "UPDATE turns SET load_bearing = ?, priority = ? WHERE conversation_id = ? AND position = ? "
                    "AND (load_bearing IS NULL OR load_bearing <> ? OR priority IS NULL OR priority <> ?)"),
                    (int(bearing), priority, conversation_id, pos, int(bearing), priority))
                changes += max(cur.rowcount, 0)
                cur.execute(self.dialect.sql(
                    "UPDATE turns SET intent = ?, label_reason = ? WHERE conversation_id = ? AND position = ?"),
                    (intent, reason, conversation_id, pos))
            if not changes:
                return None
            # the trigger's row lock (PostgreSQL) or the write transaction (SQLite) is held
            # to the commit: the last `changes` moves of the version are this write's
            got = cur.execute(self.dialect.sql("SELECT version FROM pin_versions WHERE conversation_id = ?"),
                              (conversation_id,)).fetchone()
            return int(got[0]), changes

    def store_plan(self, conversation_id: str, plan_json: str) -> None:
        with self._tx() as c:
            self._require_in(c, conversation_id)
            c.execute(self.dialect.sql(
                "INSERT INTO plans(conversation_id, last_position, plan, created_at) VALUES (?, "
                "(SELECT COALESCE(MAX(position), -1) FROM messages WHERE conversation_id = ?), ?, ?)"),
                (conversation_id, conversation_id, plan_json, time.time()))

    def plans(self, conversation_id: str, last_position: int | None = None) -> list[dict[str, Any]]:
        sql = "SELECT id, last_position, plan, created_at FROM plans WHERE conversation_id = ?"
        params: tuple[Any, ...] = (conversation_id,)
        if last_position is not None:
            sql += " AND last_position = ?"
            params = (conversation_id, last_position)
        out: list[dict[str, Any]] = []
        for row_id, last, text, created in self._q(sql + " ORDER BY id", params):
            try:
                plan = loads_stored(text)  # nested past what json decodes, or not JSON: skipped
                if not isinstance(plan, dict):
                    raise ValueError("plan is not an object")
                # a column SQLite stores as text when it is no integer: a row of no turn
                last = int(last)
            except (ValueError, TypeError) as exc:
                self._salvage(conversation_id, "plan", row_id, exc, what="plan skipped")
                continue
            # the plan's own shape is checked where it is shown (planner.plan.read_stored_plan)
            out.append({"last_position": last, "plan": plan, "created_at": created})
        return out

    def plan_turns(self, conversation_id: str, *, before: int | None = None, limit: int) -> list[int]:
        # DISTINCT over the (conversation_id, last_position) index: no plan text is read
        sql = "SELECT DISTINCT last_position FROM plans WHERE conversation_id = ?"
        params: tuple[Any, ...] = (conversation_id,)
        if before is not None:
            sql += " AND last_position < ?"
            params = (conversation_id, before)
        out = []
        for (last,) in self._q(sql + " ORDER BY last_position DESC LIMIT ?", (*params, limit)):
            try:
                out.append(int(last))  # a column SQLite stores as text when it is no integer: no turn
            except (ValueError, TypeError):
                continue
        return out

    def plans_at(self, conversation_id: str, last_position: int, *, after: int | None = None,
                 limit: int) -> tuple[list[dict[str, Any]], int | None]:
        # The row id is the shared table's: its gaps count other namespaces' plans, so a
        # caller sees the plan's number among this turn's instead (invariant 10), the
        # OFFSET of its row plus one. The skipped rows are index entries of plans_by_conv
        # (SQLite's carry the row id, in id order) whose plan text is never read.
        # One row more than the page: is there a next one? Only the page's rows are decoded
        skip = 0 if after is None else after
        rows = self._q("SELECT id, plan, created_at FROM plans WHERE conversation_id = ? AND last_position = ? "
                       "ORDER BY id LIMIT ? OFFSET ?", (conversation_id, last_position, limit + 1, skip))
        out: list[dict[str, Any]] = []
        for number, (row_id, text, created) in enumerate(rows[:limit], start=skip + 1):
            try:
                plan = loads_stored(text)
                if not isinstance(plan, dict):
                    raise ValueError("plan is not an object")
            except (ValueError, TypeError) as exc:
                self._salvage(conversation_id, "plan", row_id, exc, what="plan skipped")  # the operator's log
                continue
            out.append({"number": number, "last_position": last_position, "plan": plan, "created_at": created})
        return out, (skip + limit if len(rows) > limit else None)

    def checkpoint(self, conversation_id: str, summary: str, position: int,
                   metadata: dict[str, Any] | None = None) -> Checkpoint:
        now = time.time()
        with self._tx() as c:
            last = c.execute(self.dialect.sql(
                "SELECT COALESCE(MAX(position), -1) FROM messages WHERE conversation_id = ?"),
                (conversation_id,)).fetchone()[0]
            if last < 0:
                raise ConversationNotFound(key_name(conversation_id))
            if not 0 <= position <= last:
                raise PositionOutOfRange("position", position, int(last))
            c.execute(self.dialect.sql(
                "INSERT INTO checkpoints(conversation_id, position, summary, metadata, created_at) VALUES (?,?,?,?,?)"),
                (conversation_id, position, summary, json.dumps(metadata) if metadata else None, now))
        return Checkpoint(conversation_id, position, summary, metadata, now)

    # -- search ----------------------------------------------------------------------------

    def search(self, query: str, k: int = 10, *, conversation_id: str | None = None, namespace: str | None = None,
               query_vec: np.ndarray | None = None, rrf_k: int = 60, depth: int | None = None,
               dense: bool = True) -> list[SearchHit]:
        """Hybrid search: the engine's dense and keyword lists fused by reciprocal rank
        (RRF); each hit carries its rank in every retriever that found it. `depth` is how
        many candidates each retriever contributes before fusion (default 3k). `dense`
        False: the keyword list alone (the caller has no query vector)."""
        depth = depth or max(3 * k, 20)
        lists: dict[str, list[tuple[str, int, float]]] = {}
        if query_vec is None and dense and self.embedder is not None and query.strip():
            query_vec = query_embedding(self.embedder)([query])[0]
        if query_vec is not None:
            lists["dense"] = self.search_dense(query_vec, depth, conversation_id=conversation_id, namespace=namespace)
        lists["bm25"] = self.search_bm25(query, depth, conversation_id=conversation_id, namespace=namespace)
        return fuse(lists, k, rrf_k=rrf_k)

    def _fork_name(self, c: Any, conversation_id: str, parent: Sequence[Any] | None, up_to: int,
                   new_id: str | None, max_id_chars: int = DEFAULT_FORK_MAX_ID_CHARS) -> tuple[str, str]:
        """Inside fork's transaction, from the parent's (namespace, name, last position)
        row (None: it is gone): `up_to` checked against its last position, and the
        (namespace, name) of the child (`new_id`, or one made from the parent's name
        that fits `max_id_chars`: `fork_id`), that name free in the namespace."""
        if parent is None:
            raise ConversationNotFound(key_name(conversation_id))
        namespace, parent_name, last = parent
        if not 0 <= up_to <= last:
            raise PositionOutOfRange("up_to", up_to, int(last))
        child_name = new_id or fork_id(parent_name, max_id_chars)
        if c.execute(self.dialect.sql("SELECT 1 FROM conversations WHERE namespace = ? AND name = ?"),
                     (namespace, child_name)).fetchone():
            raise ValidationError("new_id", f"conversation {child_name!r} already exists")
        return namespace, child_name

    # -- retention and stats ---------------------------------------------------------------

    def _rebuild_body(self, conv: str, pos: int, role: str, body: str) -> dict[str, Any]:
        """A message's body for `rebuild`; one that cannot be decoded is salvaged and
        indexed as an empty message of its role (its position keeps a turn row)."""
        try:
            data = loads_stored(body)
            if not isinstance(data, dict):
                raise ValueError("not an object")
        except ValueError as exc:
            self._salvage(conv, "message", pos, exc, what="rebuild skipped")
            return {"role": role, "content": ""}
        return data

    def tombstones(self, namespace: str | None = None) -> list[dict[str, Any]]:
        return self.tombstones_and_erasure_mark(namespace)[0]

    def tombstones_and_erasure_mark(self, namespace: str | None = None) -> tuple[list[dict[str, Any]], int]:
        sql = ("SELECT name, namespace, reason, messages, summaries, checkpoints, created_at, deleted_at, "
               f"{ERASURE_MARK_COLUMN} FROM tombstones")
        params: tuple[Any, ...] = ()
        if namespace is not None:
            sql += " WHERE namespace = ?"
            params = (namespace,)
        cols = ("id", "namespace", "reason", "messages", "summaries", "checkpoints", "created_at", "deleted_at")
        rows = self._q(sql + f" ORDER BY {TOMBSTONE_ORDER}", params)
        return ([dict(zip(cols, (r[0], r[1], r[2], int(r[3]), int(r[4]), int(r[5]), r[6], r[7]), strict=True))
                 for r in rows], self._mark_of(rows, 8))

    def _mark_of(self, rows: Sequence[Any], column: int) -> int:
        """The erasure mark a listing read in its rows' `column` (ERASURE_MARK_COLUMN); a
        listing of no rows read none: a statement of its own then (`erasure_mark`)."""
        if not rows:
            return self.erasure_mark()
        return int(rows[0][column] or 0)

    def erasure_mark(self) -> int:
        """The newest tombstone's id (0: none yet). Tombstone ids grow in commit order (one
        writer on SQLite; PostgreSQL's erasures number theirs under one lock), so every
        erasure or prune committed after a mark has a tombstone past it (`erased_after`)."""
        rows = self._q("SELECT MAX(id) FROM tombstones")
        return int(rows[0][0]) if rows and rows[0][0] is not None else 0

    def erasures_of(self, namespace: str, names: Sequence[str]) -> dict[str, Erasure]:
        """The erasures on request (tombstones of reason 'erase', not 'prune') of each of
        `names` in `namespace` that has one: name -> its latest deleted_at and the newest
        created_at among the messages any of them erased (`Erasure`; every incarnation of
        the name erased is erased data). Read by an import, which refuses to bring back
        lines created at or before `Erasure.until` (tiermem.evals.conversations:
        `import_dataset`). Names in groups of ERASURES_OF_NAMES, so no statement passes a
        driver's limit on parameters."""
        out: dict[str, Erasure] = {}
        names = list(dict.fromkeys(names))
        for i in range(0, len(names), ERASURES_OF_NAMES):
            group = names[i:i + ERASURES_OF_NAMES]
            rows = self._q(erasures_sql(len(group)), (namespace, *group))
            out.update({str(n): Erasure(float(at), None if newest is None else float(newest))
                        for n, at, newest in rows})
        return out

    def erased_after(self, mark: int, limit: int) -> tuple[int, list[tuple[int, str]]]:
        """The newest tombstone's id (`erasure_mark`) and the (tombstone id, key) of the
        conversations erased or pruned after `mark`, in commit order, at most `limit`:
        what another process sharing the store must drop (tiermem.memory:
        `Memory._catch_erasures`; a newest id below `mark` says the store went back, a
        backup restored under it). One statement, one index seek when there are none."""
        rows = self._q("SELECT id, key FROM (SELECT id, key FROM tombstones WHERE id > ? ORDER BY id LIMIT ?) "
                       "AS after_mark UNION ALL SELECT COALESCE(MAX(id), 0), NULL FROM tombstones", (mark, limit))
        newest = next(int(i) for i, k in rows if k is None)
        return newest, sorted((int(i), str(k)) for i, k in rows if k is not None)

    def stats(self) -> dict[str, Any]:
        return self.stats_and_erasure_mark()[0]

    def stats_and_erasure_mark(self) -> tuple[dict[str, Any], int]:
        row = self._q(
            "SELECT (SELECT COUNT(*) FROM conversations), (SELECT COUNT(*) FROM messages), "
            "(SELECT COUNT(DISTINCT namespace) FROM conversations), (SELECT COUNT(*) FROM checkpoints), "
            f"(SELECT COUNT(*) FROM turns WHERE embedded = 0), {ERASURE_MARK_COLUMN}")[0]
        return ({"conversations": int(row[0]), "messages": int(row[1]), "namespaces": int(row[2]),
                 "checkpoints": int(row[3]), "pending_embeddings": int(row[4]), "salvaged_rows": self.salvaged,
                 "schema_version": self.version, "db_bytes": self.files_bytes(), "path": self._location()},
                int(row[5] or 0))

    def _salvaged_in(self, namespace: str) -> int:
        return self._salvaged_rows.count_in(self.list_conversations(namespace))

    def namespace_stats(self, namespace: str) -> dict[str, Any]:
        return self.namespace_stats_and_erasure_mark(namespace)[0]

    def namespace_stats_and_erasure_mark(self, namespace: str) -> tuple[dict[str, Any], int]:
        # an aggregate: one row, the mark with it, whatever the namespace holds
        row = self._q(
            f"SELECT COUNT(DISTINCT c.id), COUNT(m.id), {ERASURE_MARK_COLUMN} FROM conversations c "
            "LEFT JOIN messages m ON m.conversation_id = c.id WHERE c.namespace = ?", (namespace,))[0]
        pending = self._q(self._NAMESPACE_PENDING, (namespace,))[0][0]
        return ({"conversations": int(row[0]), "messages": int(row[1]), "pending_embeddings": int(pending),
                 # only this namespace's bad rows: a tenant must not see another's count
                 "salvaged_rows": self._salvaged_in(namespace)}, int(row[2] or 0))

    # -- the warm tier's tables (tiers.warm stores and reads its views through these) ---------

    _SUMMARY_COLS = ("conversation_id, kind, key, version, start_position, end_position, body, tokens, summarizer, "
                     "created_at")

    @staticmethod
    def _summary(r: Sequence[Any]) -> SummaryRow:
        # uncast: a column SQLite holds as text must fail where the row is decoded
        # (WarmStore._decode salvages it), not here, out of every read of the view
        return cast("SummaryRow", tuple(r))

    def put_summary(self, row: SummaryRow, *, fold_text: str | None, keep_versions: int | None,
                    keep_current: Callable[[SummaryRow], bool]) -> tuple[int, SummaryRow | None]:
        conv, kind, key, _version, start, end, body, tokens, summarizer, created = row
        sql = self.dialect.sql
        with self._tx() as c:
            self._lock_summaries(c, conv)
            last = c.execute(sql("SELECT COALESCE(MAX(position), -1) FROM messages WHERE conversation_id = ?"),
                             (conv,)).fetchone()[0]
            if last < 0:
                raise ConversationNotFound(key_name(conv))
            if end > last:
                raise ValidationError("end_position", f"{end} is past the last position {last}")
            # the newest rows whose version is in range; an odd one (a version, range, count
            # or time that cannot be used) is absent to the checks below, as it is to readers
            # (WarmStore salvages it), but still holds its version number
            rows = c.execute(sql(
                f"SELECT {self._SUMMARY_COLS} FROM summaries WHERE conversation_id = ? AND kind = ? AND key = ? "
                "AND version BETWEEN 1 AND ? ORDER BY version DESC LIMIT ?"),
                (conv, kind, key, MAX_VIEW_VERSION, SUMMARY_LOOKBACK)).fetchall()
            prev = next((r for r in rows if summary_problem(r) is None), None)
            # behind the newest version (a slower refresher), or the very version again
            # (two processes that refreshed the same view from the same log): the newest
            # stays, nothing is written, no second fold. A refresh over the same range
            # that says something else (a full one after a relabeling) is a new version.
            if prev is not None and (prev[5] > end or (
                    prev[5] == end and prev[4] == start and prev[8] == summarizer and prev[6] == body)
            ) and keep_current(self._summary(prev)):
                return int(prev[3]), self._summary(prev)
            # after the highest version in range, whether its row can be read or not (a
            # REAL 2.5 SQLite kept: 3), so no two rows share a number (the UNIQUE key)
            top = rows[0][3] if rows else 0
            version = math.floor(top) + 1
            if version > MAX_VIEW_VERSION:
                raise ValidationError("version", f"the view already has version {top}, the last one "
                                      f"(versions run from 1 to {MAX_VIEW_VERSION})")
            if rows and (rows[0] is not prev or prev[5] > end):
                # a version that covers less than the one it replaces (which could not be
                # read): the sweep must look at the conversation again, from the start
                c.execute(sql("UPDATE conversations SET views_seq = views_seq + 1, views_through = -1 WHERE id = ?"),
                          (conv,))
            c.execute(sql(f"INSERT INTO summaries({self._SUMMARY_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?)"),
                      (conv, kind, key, version, start, end, body, tokens, summarizer, created))
            if fold_text is not None:
                meta: dict[str, Any] = {"source": "warm", "kind": kind, "version": version, "summarizer": summarizer}
                # each line's source positions: a reader can then leave out a line whose
                # item a later control row hides, as it does a view's (Checkpoint.lines)
                lines = fold_lines_meta(body)
                if lines is not None:
                    meta[FOLD_LINES_KEY] = lines
                # without NUL on both engines: a fold must read the same on either
                # (migrate-store copies an older store's fold NUL by the same rule)
                c.execute(sql("INSERT INTO checkpoints(conversation_id, position, summary, metadata, created_at) "
                              "VALUES (?,?,?,?,?)"),
                          (conv, end, without_nul(fold_text), json.dumps(meta), time.time()))
            if keep_versions is not None:
                # derived data stays proportional to the log: old versions of a view and
                # old folds of its own go; a checkpoint a caller wrote is never touched
                c.execute(sql("DELETE FROM summaries WHERE conversation_id = ? AND kind = ? AND key = ? "
                              "AND version <= ?"), (conv, kind, key, version - keep_versions))
                if fold_text is not None:
                    self._drop_old_warm_folds(c, conv, keep_versions)
        return version, None

    def latest_summaries(self, conversation_id: str, kind: str, key: str, limit: int) -> list[SummaryRow]:
        return [self._summary(r) for r in self._q(
            f"SELECT {self._SUMMARY_COLS} FROM summaries WHERE conversation_id = ? AND kind = ? AND key = ? "
            "ORDER BY version DESC LIMIT ?", (conversation_id, kind, key, limit))]

    def summary_version(self, conversation_id: str, kind: str, key: str, version: int) -> SummaryRow | None:
        rows = self._q(
            f"SELECT {self._SUMMARY_COLS} FROM summaries WHERE conversation_id = ? AND kind = ? AND key = ? "
            "AND version = ?", (conversation_id, kind, key, version))
        return self._summary(rows[0]) if rows else None

    def summary_versions(self, conversation_id: str, kind: str, key: str) -> list[int]:
        # a version SQLite holds as text names no row a reader can decode: not listed
        return [int(r[0]) for r in self._q(
            "SELECT version FROM summaries WHERE conversation_id = ? AND kind = ? AND key = ? ORDER BY version",
            (conversation_id, kind, key)) if isinstance(r[0], int) and not isinstance(r[0], bool)]

    def turn_and_newest_view(self, conversation_id: str, position: int, kind: str,
                             key: str) -> tuple[TurnRow | None, tuple[int, float] | None]:
        # One statement (one snapshot, one round trip), as turns_and_pin_version: the turn
        # is `turns_at`'s read; the newest row's version and time are two uncorrelated
        # subqueries (run once each: a backward seek of the summaries' unique index) in
        # columns after `_TURN_COLUMNS`, which `_turn` does not read. "In range" as
        # put_summary's: a version SQLite holds as text is left out.
        newest = ("(SELECT {col} FROM summaries WHERE conversation_id = ? AND kind = ? AND key = ? "
                  "AND version BETWEEN 1 AND ? ORDER BY version DESC LIMIT 1)")
        view = (conversation_id, kind, key, MAX_VIEW_VERSION)
        rows = self._q(
            f"SELECT {self._TURN_COLUMNS}, {newest.format(col='version')}, {newest.format(col='created_at')} "
            f"FROM turns t {self._TURN_PINS}WHERE t.conversation_id = ? AND t.position = ?",
            (*view, *view, conversation_id, position))
        turns = self._turn_rows(rows)
        if not turns:
            return None, None
        version, created = rows[0][self._TURN_COLUMN_COUNT], rows[0][self._TURN_COLUMN_COUNT + 1]
        if version is None:
            return turns[0], None
        if not _is_int(version, 1, MAX_VIEW_VERSION) or type(created) not in (int, float):
            # a row its readers cannot use (a REAL version, a time held as text): no cache
            # entry is that row, and none may stand in for it (module docstring)
            return turns[0], (UNUSABLE_VIEW_VERSION, math.nan)
        return turns[0], (version, float(created))

    def session_summary_keys(self, conversation_id: str, after: str | None, limit: int) -> list[str]:
        # the (conversation_id, kind, key, version) unique index serves the cursor, the order
        # and the limit on both engines: a page reads its own sessions' index entries only
        sql = "SELECT DISTINCT key FROM summaries WHERE conversation_id = ? AND kind = 'session'"
        params: list[object] = [conversation_id]
        if after is not None:
            sql += " AND key > ?"
            params.append(after)
        sql += " ORDER BY key LIMIT ?"
        params.append(limit)
        return [str(r[0]) for r in self._q(sql, params)]

    def summary_errors(self, conversation_id: str, kind: str, key: str, limit: int) -> list[tuple[str, float]]:
        return [(r[0], float(r[1])) for r in self._q(
            "SELECT error, at FROM summary_errors WHERE conversation_id = ? AND kind = ? AND key = ? "
            "ORDER BY id DESC LIMIT ?", (conversation_id, kind, key, limit))]

    def claim_view(self, conversation_id: str, kind: str, key: str, holder: str, ttl_s: float, *,
                   replacing: str | None = None) -> bool:
        # one upsert: a free view, an expired lease, the holder's own or the dead one's
        # named by `replacing` is taken; another live lease is left as it is. Expiry by the
        # database's clock, which every host sharing it reads alike. Read back in the same
        # transaction rather than with RETURNING, which older SQLite libraries lack.
        with self._tx() as c:
            return self._claim_in(c, conversation_id, kind, key, holder, ttl_s, replacing)

    def renew_view(self, conversation_id: str, kind: str, key: str, holder: str, ttl_s: float) -> bool:
        # the check and the upsert in one transaction (FOR SHARE on PostgreSQL, SQLite's
        # one writer): an erasure either commits first (no row) or waits and deletes it
        with self._tx() as c:
            self._require_in(c, conversation_id)
            return self._claim_in(c, conversation_id, kind, key, holder, ttl_s, None)

    def _claim_in(self, c: Any, conversation_id: str, kind: str, key: str, holder: str, ttl_s: float,
                  replacing: str | None) -> bool:
        """Inside a write transaction: `claim_view`'s upsert and its read back."""
        d = self.dialect
        c.execute(d.sql(
            "INSERT INTO view_claims(conversation_id, kind, key, holder, expires_at) "
            f"VALUES (?,?,?,?,{d.now} + ?) "
            "ON CONFLICT (conversation_id, kind, key) DO UPDATE SET holder = excluded.holder, "
            "expires_at = excluded.expires_at "
            f"WHERE view_claims.expires_at < {d.now} OR view_claims.holder = excluded.holder "
            "OR view_claims.holder = ?"),
            (conversation_id, kind, key, holder, float(ttl_s), replacing or holder))
        row = c.execute(d.sql("SELECT holder FROM view_claims WHERE conversation_id = ? AND kind = ? AND key = ?"),
                        (conversation_id, kind, key)).fetchone()
        return row is not None and row[0] == holder

    def view_holder(self, conversation_id: str, kind: str, key: str) -> str | None:
        rows = self._q("SELECT holder FROM view_claims WHERE conversation_id = ? AND kind = ? AND key = ?",
                       (conversation_id, kind, key))
        return str(rows[0][0]) if rows else None

    def release_view(self, conversation_id: str, kind: str, key: str, holder: str) -> None:
        with self._tx() as c:
            c.execute(self.dialect.sql(
                "DELETE FROM view_claims WHERE conversation_id = ? AND kind = ? AND key = ? AND holder = ?"),
                (conversation_id, kind, key, holder))

    def view_failure(self, conversation_id: str, kind: str, key: str) -> ViewFailureRow | None:
        rows = self._q("SELECT failures, first_at, retry_at FROM view_failures WHERE conversation_id = ? "
                       "AND kind = ? AND key = ?", (conversation_id, kind, key))
        if not rows:
            return None
        failures, first_at, retry_at = rows[0]
        return conversation_id, kind, key, int(failures), float(first_at), float(retry_at)

    def _conversation_held(self, c: Any, conversation_id: str) -> bool:
        """Inside a write transaction: whether the conversation still exists, and (the
        engine's `_require_in`: FOR SHARE on PostgreSQL, SQLite's one writer) goes on
        existing until the commit. A row a refresh writes after its wait on a summarizer
        is written under it: an erasure either commits first (the row is not written)
        or waits and deletes it with the rest."""
        try:
            self._require_in(c, conversation_id)
        except ConversationNotFound:
            return False
        return True

    def database_now(self) -> float:
        return float(self._q(f"SELECT {self.dialect.now}")[0][0])

    def put_view_failure(self, row: ViewFailureRow) -> None:
        with self._tx() as c:
            if not self._conversation_held(c, row[0]):
                return  # erased while its refresh waited: nothing may outlive it
            c.execute(self.dialect.sql(
                "INSERT INTO view_failures(conversation_id, kind, key, failures, first_at, retry_at) "
                "VALUES (?,?,?,?,?,?) ON CONFLICT (conversation_id, kind, key) DO UPDATE SET "
                "failures = excluded.failures, first_at = excluded.first_at, retry_at = excluded.retry_at"),
                (row[0], row[1], row[2], int(row[3]), float(row[4]), float(row[5])))

    def clear_view_failure(self, conversation_id: str, kind: str, key: str) -> None:
        with self._tx() as c:
            c.execute(self.dialect.sql(
                "DELETE FROM view_failures WHERE conversation_id = ? AND kind = ? AND key = ?"),
                (conversation_id, kind, key))

    def views_held_back(self, now: float) -> list[tuple[str, str, str]]:
        return [(str(r[0]), str(r[1]), str(r[2])) for r in self._q(
            "SELECT conversation_id, kind, key FROM view_failures WHERE retry_at > ?", (float(now),))]

    def view_failure_stats(self) -> tuple[int, float | None]:
        rows = self._q("SELECT COUNT(*), MIN(first_at) FROM view_failures", ())
        count, oldest = rows[0] if rows else (0, None)
        return int(count), None if oldest is None else float(oldest)

    def load_bearing_between(self, conversation_id: str, after: int, end: int) -> list[TurnRow]:
        return self._turns_where("WHERE t.conversation_id = ? AND t.load_bearing = 1 AND t.position > ? "
                                 "AND t.position <= ? ORDER BY t.position", (conversation_id, after, end))

    def session_turns(self, conversation_id: str, session_id: str, after: int, end: int) -> list[TurnRow]:
        return self._turns_where("WHERE t.conversation_id = ? AND t.position > ? AND t.position <= ? "
                                 "AND t.session_id = ? ORDER BY t.position", (conversation_id, after, end, session_id))

    def view_frontier(self) -> list[FrontierRow]:
        # the conversations_views_behind partial index, then index seeks per conversation;
        # each view's newest version in range, whose end, if it cannot be used, is read as
        # no view: the sweep refreshes it, and the new version is one it can read
        rows = self._q(
            "SELECT c.id, (SELECT MAX(position) FROM messages m WHERE m.conversation_id = c.id) AS lastpos, "
            "c.last_message_at, c.created_at, "
            "(SELECT end_position FROM summaries s WHERE s.conversation_id = c.id AND s.kind = 'rolling' "
            " AND s.key = '' AND s.version BETWEEN 1 AND ? ORDER BY version DESC LIMIT 1), "
            "(SELECT end_position FROM summaries s WHERE s.conversation_id = c.id AND s.kind = 'constraints' "
            " AND s.key = '' AND s.version BETWEEN 1 AND ? ORDER BY version DESC LIMIT 1), "
            f"c.views_seq, c.views_through FROM conversations c WHERE c.{VIEWS_BEHIND_SQL}",
            (MAX_VIEW_VERSION, MAX_VIEW_VERSION))
        return [(r[0], int(r[1]), float(r[2]), float(r[3]), view_end(r[4]), view_end(r[5]), int(r[6]), int(r[7]))
                for r in rows if r[1] is not None]

    def mark_views_current(self, conversation_id: str, seq: int, through: int) -> bool:
        with self._tx() as c:
            # the seq test is the whole race: an append bumps views_seq in its own
            # transaction, so a mark read before it matches nothing (PostgreSQL re-checks
            # the condition on the row an append just updated)
            cur = c.execute(self.dialect.sql(
                "UPDATE conversations SET views_checked_seq = ?, views_through = ? WHERE id = ? AND views_seq = ?"),
                (seq, through, conversation_id, seq))
            return bool(cur.rowcount)

    # what `turn_problem` checks, first in each background read of the turn index below
    _CHECKED = "position, tokens, created_at, priority, superseded_by"

    def _indexed(self, conversation_id: str, rows: Sequence[Sequence[Any]]) -> list[Sequence[Any]]:
        """`rows` (`_CHECKED` first) that `turn_problem` accepts; another is salvaged as a
        "turn" row and left out, as a turn not indexed yet is."""
        out: list[Sequence[Any]] = []
        for r in rows:
            problem = turn_problem(*r[:5])
            if problem is None:
                out.append(r)
            else:
                self._salvage(conversation_id, "turn", r[0] if type(r[0]) is int else -1, problem,
                              what="turn skipped")
        return out

    def turn_times(self, conversation_id: str, after: int, *, session_id: str | None = None,
                   limit: int | None = None) -> list[tuple[int, str | None, float]]:
        # positions in range: one SQLite holds as text sorts after every integer
        sql = (f"SELECT {self._CHECKED}, session_id FROM turns WHERE conversation_id = ? AND position > ? "
               "AND position <= ?")
        params: list[Any] = [conversation_id, after, MAX_POSITION]
        if session_id is not None:
            sql += " AND session_id = ?"
            params.append(session_id)
        sql += " ORDER BY position"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        rows = self._q(sql, params)
        out = [(int(r[0]), r[5], float(r[2])) for r in self._indexed(conversation_id, rows)]
        if limit is not None and len(rows) == limit and len(out) < limit:
            # a page stays full unless the log ends there: its reader stops at a short one
            out += self.turn_times(conversation_id, rows[-1][0], session_id=session_id, limit=limit - len(out))
        return out

    def turn_created_at(self, conversation_id: str, position: int) -> float | None:
        rows = self._indexed(conversation_id, self._q(
            f"SELECT {self._CHECKED} FROM turns WHERE conversation_id = ? AND position = ?",
            (conversation_id, position)))
        return float(rows[0][2]) if rows else None

    def unlabeled_tail(self, conversation_id: str, after: int) -> list[tuple[int, float]]:
        return [(int(r[0]), float(r[2])) for r in self._indexed(conversation_id, self._q(
            f"SELECT {self._CHECKED} FROM turns WHERE conversation_id = ? AND position > ? AND position <= ? "
            "AND intent IS NULL ORDER BY position", (conversation_id, after, MAX_POSITION)))]


def view_end(end: object) -> int | None:
    """A view row's end_position as the sweep reads it; None (no view) when it cannot be used."""
    return cast("int", end) if _is_int(end, 0, MAX_POSITION) else None


def owed_erasure(owed_for_s: float | None) -> tuple[str, str]:
    """How the log names the erasure whose scrub (or rows) `_finish_scrub` finishes, and
    what retries one it could not finish. At an open (`owed_for_s` None): as before,
    an erasure interrupted. From a running process's check (`finish_owed_scrub`): only
    what it knows, that the scrub was still owed that long; the erasure's process may be
    alive and erasing yet (a long erasure, or back-to-back ones), so "interrupted" would
    not be known to be true."""
    if owed_for_s is None:
        return "an erasure interrupted before it was done", "the next open retries"
    return (f"an erasure whose scrub was still owed after {owed_for_s:g} s (its process may have stopped)",
            "the next open or check retries")

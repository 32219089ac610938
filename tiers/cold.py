"""Cold tier: the append-only SQLite log, the only source of truth.

Invariants (docs/design.md, "The invariants"):

- Messages are appended once and never updated, deleted or reordered. Triggers refuse
  UPDATE always and DELETE unless `prune` has armed its guard inside its own
  transaction. Positions are assigned by the store in one statement
  (`INSERT ... SELECT COALESCE(MAX(position)+1, 0) ... RETURNING position`) under a
  write lock taken up front (`BEGIN IMMEDIATE`), so concurrent writers in several
  processes get contiguous, unique positions; callers never pass one.
- One domain action, one transaction: an append writes the message, its turn-index row
  and its FTS row together; fork and prune are single transactions too.
- The store's lock (one connection per process) is never held while waiting for
  another process: `BEGIN IMMEDIATE` and an erasure's WAL checkpoint are tried without
  SQLite's busy handler (`_polled`), and between tries (SQLite's own schedule,
  `BUSY_POLL_DELAYS_S`, up to `busy_timeout_ms` from the first busy answer, as SQLite
  counts it: not the time spent queued for the store's own lock) the lock is free, so
  this process's reads go on (WAL needs no lock to read) while one of its writes or
  scrubs waits for another process's transaction. Every write goes through `_tx`,
  the scrub's too; a scrub left pending (the WAL held by a reader) is retried after
  each write with a single try that does not wait.
- An append with an idempotency key looks the key up and records it inside its own
  `BEGIN IMMEDIATE` transaction (one writer at a time, every process): the same request
  again writes nothing and answers the recorded positions, another one is refused. The
  records (`idempotency_keys`) live as long as their conversation: no expiry.
- Everything except `messages`, `conversations`, `checkpoints` and `pins` is derived
  (the turn index, FTS, vectors) and `rebuild()` recomputes it from the messages. The
  turn index's token counts are of the tokenizer recorded in meta; an open under another
  recounts them first (tiers.recount, `tokenizer_recount`).
  Embeddings are computed *outside* the write lock, after the commit; a crash in
  between leaves `turns.embedded = 0` rows that `index_pending` fills later, and
  `stats()["pending_embeddings"]` shows the lag.
- The database file is created 0600 before WAL mode exists, so SQLite gives the -wal
  and -shm sidecars the same mode. A database newer than the code is refused before
  anything opens or chmods it (its header is read first). A database this process cannot
  write (read-only mount, immutable file) is opened read-only: reads work, writes raise.
- A row that cannot be decoded is logged, counted and skipped; its neighbours load.
- Keyword ranking sees only its scope (docs/design.md invariant 10): FTS5 MATCH, narrowed
  by the scope tokens, finds the candidate rows, and `search_bm25` scores them with BM25
  (tiers/lexical.py's words and formula) over the scope's own document count, document
  frequencies and mean length, never FTS5's `bm25()`, whose statistics span the whole
  table and so would let one tenant's text reorder another's results.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import shutil
import string
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import numpy as np

from tiermem.tiers.catchup import PIPELINE_DEPTH, Claims, Deciding, PendingTurn, TextsAhead, pipelined
from tiermem.tiers.dialect import (
    ERASURE_ORDER,
    MAX_TURN_TOKENS,
    PRUNE_IDLE_SQL,
    SQLITE,
    SalvagedRows,
    SharedQueries,
    owed_erasure,
    view_end,
    without_nul,
)
from tiermem.tiers.embed import Embedder, checked_identity, embedder_identity, memo_scope, remembered_for
from tiermem.tiers.errors import (
    ConversationNotFound,
    PositionOutOfRange,
    StoreUnavailable,
    ValidationError,
    VectorWidthConflict,
    embedding_conflict,
)
from tiermem.tiers.formats import message_text
from tiermem.tiers.lexical import BM25_K1, bm25_idf, bm25_top, query_words_terms, term_counts, total_length
from tiermem.tiers.models import (
    DEFAULT_FORK_MAX_ID_CHARS,
    KEY_SEPARATOR,
    MAX_POSITION,
    MAX_TIMESTAMP,
    AppendResult,
    ErasureReport,
    Message,
    StoredMessage,
    TurnRow,
    key_name,
    loads_stored,
    search_text,
)
from tiermem.tiers.owed import OWED_MARK_KEY, OWED_PREFIX, OwedDecisions
from tiermem.tiers.recount import Recount, check_tokenizer
from tiermem.tiers.schema import (
    COPIED_DIGEST_PREFIX,
    DEFAULT_BUSY_TIMEOUT_MS,
    FORK_PARENT_COLUMN,
    FTS_TOKENIZE,
    PENDING_BY_POSITION_INDEX,
    PIN_CANDIDATES_INDEX,
    RECHECK_TABLE,
    RESIDUE_KEY,
    SCOPE_SQL,
    SCRUB_PENDING_KEY,
    SUPERSEDED_PINS_INDEX,
    TOMBSTONE_NEWEST_COLUMN,
    VEC_MODEL_KEY,
    VEC_TABLE,
    Connection,
    DriverDatabaseError,
    connect,
    migrate,
    vec_table_sql,
)
from tiermem.tiers.statements import TABLE as STATEMENT_TABLE
from tiermem.tiers.statements import StatementRow
from tiermem.tiers.store import INDEX_POOL_BATCHES, SummaryRow, check_expected, pool_rows
from tiermem.tiers.tokens import TokenCounter, message_tokens

try:  # file locks tell a fork in progress from one whose process died (`ColdStore._fork_lock`)
    import fcntl
except ImportError:  # not on Windows: there a record's age tells (FORK_ABANDONED_S)
    fcntl = None  # type: ignore[assignment]

# Sleeps between tries of BEGIN IMMEDIATE (or an erasure's WAL checkpoint) while another
# process holds the write lock or a read snapshot (seconds): SQLite's own busy handler's
# schedule (sqliteDefaultBusyCallback), then its last step until busy_timeout_ms is spent;
# the store's lock is free while they run (`ColdStore._polled`).
BUSY_POLL_DELAYS_S = (0.001, 0.002, 0.005, 0.010, 0.015, 0.020, 0.025, 0.025, 0.025, 0.050, 0.050, 0.100)
SQLITE_BUSY_PRIMARY = 5  # SQLITE_BUSY: another connection holds the lock (extended codes share it)
SQLITE_PRIMARY_CODE_MASK = 0xFF  # an extended result code's low byte is its primary code

_T = TypeVar("_T")


def _try_file_lock(path: Path) -> int | None:
    """An exclusive flock on `path` (created if missing), taken without waiting: its
    descriptor, or None while another process holds it. The lock's holder unlinks the
    file before letting go (`ColdStore._fork_unlock`, `_sweep_fork_locks`), so a lock won
    on a file opened before that unlink is on a name nobody sees any more: that
    descriptor is dropped and the file at `path` opened again (else the next process to
    look would create a new file, find it free and take a live fork for a dead one)."""
    while True:
        fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held
            os.close(fd)
            return None
        try:
            now = os.stat(path)
        except FileNotFoundError:  # unlinked after our open: the name is free again
            os.close(fd)
            continue
        had = os.fstat(fd)
        if (now.st_dev, now.st_ino) == (had.st_dev, had.st_ino):
            return fd
        os.close(fd)  # another file at the name now: lock that one


def _is_busy(exc: Exception) -> bool:
    """Whether SQLite answered busy (another connection holds what was asked for)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(code, int) and code & SQLITE_PRIMARY_CODE_MASK == SQLITE_BUSY_PRIMARY


log = logging.getLogger("tiermem.cold")

# The owed rewrite (VACUUM) of a store written before `secure_delete` (RESIDUE_KEY) holds
# the write lock for all of it (a reviewer's 1.49 GB store: 9.9 s, and a writer with a
# 5 s busy timeout failed) and builds the copy in memory (peak 1.7 GB for it): an open,
# or a running process's look at an owed scrub, does it only for a file up to this size;
# a larger one is left owed to an erasure (bytes)
REWRITE_AT_OPEN_MAX_BYTES = 256 * 2**20
# The rewrite's pages go through the WAL, which grows to about the file's size: it needs
# that much free space on the store's file system, plus this margin for the other files
# there (bytes). With less it is not tried: a reviewer's store larger than the free space
# failed it ("database or disk is full") with the disk left full until the process ended
REWRITE_FREE_MARGIN_BYTES = 64 * 2**20
# meta: the last rewrite that failed for something other than a busy store (a full disk,
# memory): {"at": unix seconds, "free": bytes free after it}. Not tried again before
# REWRITE_RETRY_AFTER_S, unless the free space grew by the file's size since
RESIDUE_FAILED_KEY = "residue_rewrite_failed"
REWRITE_RETRY_AFTER_S = 24 * 3600.0

MAX_SQL_PARAMS = 500  # ids per IN (...) list: well under SQLite's 32766 host parameters
# An erasure merges the FTS index before secure-deleting its rows when their deletes,
# estimated from a timed sample, would cost more than the merge (`ColdStore.
# _delete_fts_rows`); a merge ('optimize') measured ~7 us per indexed row on a 2-core
# machine (381 ms at 60k rows, 21 ms at 3k).
FTS_MERGE_S_PER_ROW = 7e-6
FTS_SECURE_DELETE_SAMPLE_ROWS = 16  # rows of an erasure deleted and timed first
# An erasure commits in batches of whole conversations, so the store's lock is free
# between them. The first holds at most ERASE_BATCH_MESSAGES messages; each next one is
# sized from the last to hold the lock ERASE_BATCH_TARGET_S (a message costs 0.3-3 ms:
# vectors, FTS secure deletes, rows, more in a large index), within MIN..MAX messages; a
# conversation larger than its batch is detached (`ColdStore._detach`) and its rows
# deleted in batches of the same size; between two, a pause as long as the last one held
# it (at most ERASE_PAUSE_MAX_S).
ERASE_BATCH_MESSAGES = 200
ERASE_BATCH_MIN_MESSAGES = 16
ERASE_BATCH_MAX_MESSAGES = 5000
ERASE_BATCH_TARGET_S = 0.2
ERASE_PAUSE_MAX_S = 1.0
# A detached conversation's batches merge the FTS index first (see `_delete_fts_rows`)
# only when the merge is estimated to hold the lock at most this long: past it, the merge
# would be the stall the batches avoid (~140k indexed rows at FTS_MERGE_S_PER_ROW).
ERASE_MERGE_MAX_S = 1.0
# A fork copies its prefix in batches (`ColdStore.fork`): the first (the top of the
# prefix) holds FORK_BATCH_MESSAGES messages, each next one at most as many, fewer where
# that held the lock past ERASE_BATCH_TARGET_S (`_next_batch`), a pause as long after it.
# A set-based copy costs ~0.1-0.2 ms a message (rows, turn, FTS row, vector; 2 loaded
# cores), so a prefix of up to one batch stays one transaction of ~0.3 s, as every fork was.
FORK_BATCH_MESSAGES = 2000
FORK_OWED_REASON = "fork"  # erase_owed.reason of an unpublished fork's child
FORK_LOCK_HEX = 32  # hex digits of the key's hash in a fork's lock file name
FORK_LOCK_SUFFIX = ".lock"
# without file locks (Windows), an unpublished fork's record older than this is taken as
# abandoned (its process died): no batch pauses near that long
FORK_ABANDONED_S = 3600.0
# `rebuild` rewrites the derived rows of this many messages in its first batch (decoded,
# labelled and counted outside the lock; 26.6k messages rewrote in ~5 s, 2 loaded cores),
# each next one sized as an erasure's (`_next_batch`), never fewer
REBUILD_BATCH_MESSAGES = 1000
MAX_ROWID = 2**63 - 1  # SQLite's largest rowid: "every id above" as a bound
# A conversation key that is not its name: name + KEY_SEPARATOR + KEY_SUFFIX_HEX hex digits
# (tiers.models.KEY_SEPARATOR: outside the id alphabet, so such a key is never a name).
VEC0_MAX_K = 4096  # rows: the most one vec0 nearest-neighbour query returns
# how sqlite-vec words a vector of another width than its table's ("Dimension mismatch for
# inserted vector ..." / "... for query vector ..."), lowercased
VEC0_DIMENSION_ERROR = "dimension mismatch"
KEY_SUFFIX_HEX = 16
# conversations whose keyword statistics (turns, terms) `search_bm25` remembers: ~150
# bytes each, so at most ~10 MB; one forgotten is counted again from its text
MAX_SCOPE_SIZES = 65_536
# Tables whose rows belong to one conversation key; an erasure empties them for that key.
CONVERSATION_TABLES = ("turns", "checkpoints", "pins", "plans", "summaries", "summary_errors", "statement_supersessions",
                       "view_claims", "idempotency_keys", "view_failures", "supersession_rechecks")
Label = tuple[str, bool, int, str]  # intent, load_bearing, priority, reason
NO_LABEL: tuple[None, None, None, None] = (None, None, None, None)


def rebuilt_labels(labeler: Callable[[str, str, dict[str, Any]], Label] | None, role: str, body: dict[str, Any]
            ) -> tuple[str, int, int, str] | tuple[None, None, None, None]:
    """A rebuilt turn's label columns (ColdLog.labeler), load_bearing as the 0/1 both
    engines store; NO_LABEL without a labeler or a decodable body."""
    if labeler is None or not body:
        return NO_LABEL
    intent, lb, prio, reason = labeler(message_text(body), role, body)
    return intent, int(lb), prio, reason


def content_hash(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def _vec_bytes(v: np.ndarray) -> bytes:
    return np.ascontiguousarray(v, dtype=np.float32).tobytes()


@dataclasses.dataclass(frozen=True)
class _ForkCopy:
    """What each batch of one fork needs (`ColdStore.fork`)."""

    parent: str
    child: str
    namespace: str
    name: str
    up_to: int
    base: int  # the child's message at position p gets id base + p
    now: float


class ColdStore(SharedQueries):
    """The SQLite log. Thread-safe (one connection behind a lock); one per process.

    It opens and closes its own connection. It implements the store interface
    `tiers.store.ColdLog` (each method's contract is written there once), as does
    `tiers.postgres.PostgresStore`.
    """

    dialect = SQLITE
    _log = log
    # A long pass's batches (set_labels) and a waiting writer: SQLite has no queue. Another
    # process's write polls for the write lock (`_polled`; SQLite's own busy handler the
    # same: sqliteDefaultBusyCallback sleeps 1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100 ms
    # between tries, BUSY_POLL_DELAYS_S), so it takes the lock only in a gap that one of
    # its tries falls in: back-to-back transactions are one hold to it, whichever
    # conversation each writes. So the spell is counted across the store, and the pause
    # after one is just over the longest sleep (LOCK_PAUSE_S), a try always falling in it.
    # The spell: a waiter's tries come 25 ms apart around 100 ms into its wait, so a spell
    # plus the batch that ends it (~30 ms, LABEL_BATCH_TARGET_S) keeps the longest wait
    # near 130 ms, under a 150 ms busy timeout (tests/test_labels_append_during_pass.py;
    # the default is 5 s). Before, every batch paused 0.15 s, and every conversation over
    # 200 turns paid one (300 of 300 turns: +45 s to a rebuild's relabelling).
    _SPELL_WHOLE_STORE = True
    _SPELL_S = 0.075
    LOCK_PAUSE_S = max(BUSY_POLL_DELAYS_S) + 0.02  # + a loaded machine's late wake-up

    def _lock_pause(self, held: float) -> float:
        return self.LOCK_PAUSE_S

    def __init__(
        self,
        path: Path,
        *,
        tokens: TokenCounter,
        embedder: Embedder | None = None,
        busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
        synchronous: str = "NORMAL",
    ) -> None:
        self.path = Path(path)
        self.tokens = tokens
        self.embedder = embedder
        self._lock = threading.RLock()
        # turns a catch-up of this store is embedding now: another leaves them (Claims)
        self._claims = Claims()
        # turns a catch-up of this store read and has not yet hooked: an append waits (Deciding)
        self._deciding = Deciding()
        self._busy_timeout_ms = busy_timeout_ms
        # an erasure's WAL truncation waits for a reader: retried once after each write (`_tx`)
        self._wal_scrub_pending = False
        self._residue_warned = False  # the owed rewrite's warning (`_rewrite_residue`), once a process
        self._conn = connect(self.path, busy_timeout_ms=busy_timeout_ms, synchronous=synchronous)
        # opened read-only (the storage refuses writes): reads skip their derived catch-up
        self.read_only = bool(self._conn.execute("PRAGMA query_only").fetchone()[0])
        # rows skipped because they could not be decoded; distinct, because every read of
        # the conversation meets the same bad row again and it is still one row
        self._salvaged_rows = SalvagedRows()  # (conversation, kind, row)
        # conversation key -> (next position counted, turns, terms): search_bm25's scope
        # statistics, extended by the turns appended since (the log is append-only and a
        # key is never reused, so a count never goes stale); least recently used first
        self._scope_sizes: OrderedDict[str, tuple[int, int, int]] = OrderedDict()
        self._scope_sizes_lock = threading.Lock()
        self._fault: Callable[[str], None] | None = None  # tests inject failures mid-transaction
        # called after each committed batch of `index_pending` with the (conversation,
        # position, vector) of the turns this call embedded (each turn exactly once, in
        # whichever process flips its `embedded`): derived work that needs the vector
        self.on_embedded: Callable[[list[tuple[str, int, np.ndarray]]], None] | None = None
        # (see ColdLog.on_hooked)
        self.on_hooked: Callable[[list[str]], None] | None = None
        # the turns whose hook failed, decided again by the next call (tiers.owed)
        self._owed = OwedDecisions(
            read_keys=lambda: [str(r[0]) for r in self._read(
                "SELECT key FROM meta WHERE substr(key, 1, ?) = ?", (len(OWED_PREFIX), OWED_PREFIX))],
            read_mark=lambda: next((str(r[0]) for r in self._read(
                "SELECT value FROM meta WHERE key = ?", (OWED_MARK_KEY,))), None),
            record=self._owed_record, forget=self._meta_keys_delete,
            turns=lambda ids: [(int(r[0]), str(r[1]), int(r[2])) for r in self._read(
                "SELECT id, conversation_id, position FROM turns WHERE embedded = 1 "
                "AND id IN (SELECT value FROM json_each(?)) ORDER BY id", (json.dumps(ids),))],
            vectors=self.embeddings)
        # pools embedded ahead while one is stored (tiers/catchup.py); 0: one at a time
        self.pipeline_depth = PIPELINE_DEPTH
        # called with the rows read so far before each pool of a catch-up over every
        # conversation is read (not one conversation's: an append's inline catch-up); it
        # may wait. Set only while an import writes beside the catch-up (tiermem/ingest.py):
        # it holds each read until a whole pool of finished conversations is committed, so
        # the pools (and the hooks' batches) are cut where a catch-up after the import would
        self.read_gate: Callable[[int], None] | None = None
        # texts the hook will embed for a pool's turns, embedded with the pool (ColdLog.texts_ahead)
        self.texts_ahead: TextsAhead | None = None
        self.labeler: Callable[[str, str, dict[str, Any]], Label] | None = None  # ColdLog.labeler
        try:
            self.version = migrate(self._conn, str(self.path))
            self.db_uuid: str = self._conn.execute("SELECT value FROM meta WHERE key='db_uuid'").fetchone()[0]
            self._vec_dim: int | None = self._read_vec_dim()
            self._vec_model: str | None = None  # the embedder's identity, once checked against vec_model
        except BaseException:
            self._conn.close()
            raise
        self._finish_scrub()
        # the turns' counts recounted on this open, made under another tokenizer than this
        # store's (tiers.recount); the caller drops what holds the old ones (tiermem.Memory)
        self.tokenizer_recount: Recount | None = self._check_tokenizer()

    def _check_tokenizer(self) -> Recount | None:
        try:
            return check_tokenizer(self, read_only=self.read_only)
        except BaseException:
            self.close()
            raise

    def _finish_scrub(self, *, owed_for_s: float | None = None) -> None:
        """An erasure whose process died between its commit and its scrub (FTS merge,
        freed pages, WAL), or before the rows of a conversation it detached were all
        deleted, is finished and scrubbed now, at the next open that may write, or by a
        running process that saw it owed `owed_for_s` (`finish_owed_scrub`; `owed_erasure`
        words the log)."""
        if self.read_only:
            return
        erasure, retry = owed_erasure(owed_for_s)
        try:
            if n := self.finish_owed_erasures():
                log.info("deleted the rows of %d conversation(s) detached by %s", n, erasure)
        except DriverDatabaseError:  # busy: they stay owed; the next open or erasure deletes them
            log.warning("could not finish the rows of %s now; %s", erasure, retry, exc_info=True)
            return
        # rows deleted here are scrubbed as an erasure's are, marker or not: an unfinished
        # fork's copy of a conversation erased meanwhile may be among them (one recorded
        # without its parent, which its erasure reported not scrubbed and left here)
        pending = bool(self._read("SELECT 1 FROM meta WHERE key = ?", (SCRUB_PENDING_KEY,)))
        residue = bool(self._read("SELECT 1 FROM meta WHERE key = ?", (RESIDUE_KEY,)))
        if not n and not pending and not (residue and owed_for_s is None):
            return
        if residue and not n:  # no erasure: the upgrade's rewrite (m031, migrate) is what is owed
            erasure = "the rewrite of a store written before secure_delete"
        try:
            if n or pending:
                done = self.reclaim(at_open=True)
            else:  # owed to the rewrite alone (an earlier open left it): the rewrite, nothing else
                rewritten = self._rewrite_residue(at_open=True)
                done = self._truncate_after_scrub() and rewritten  # truncated either way
            if done:
                log.info("finished the scrub of %s", erasure)
        except DriverDatabaseError:  # busy: the marker stays, the next open tries again
            log.warning("could not finish the scrub of %s now; %s", erasure, retry, exc_info=True)

    def _scrub_owed(self) -> bool:
        if self.read_only:
            return False
        return bool(self._read("SELECT EXISTS(SELECT 1 FROM meta WHERE key = ?) OR EXISTS(SELECT 1 FROM erase_owed)",
                               (SCRUB_PENDING_KEY,))[0][0])

    # -- plumbing ------------------------------------------------------------------

    def _location(self) -> str:
        return str(self.path)

    def _open(self) -> Connection:
        """The store's connection, for a caller holding `self._lock` (close() takes it
        too, so the connection stays open until the caller lets go of the lock). Every
        statement on the connection gets it here: a closed store raises StoreUnavailable
        (the service's 503, as for a store that is down), not an AttributeError on None."""
        conn = self._conn
        if conn is None:
            raise StoreUnavailable(str(self.path), "the store is closed")
        return conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                if self._wal_scrub_pending:
                    self._retry_wal_scrub()
                self._conn.close()
                self._conn = None

    def _retry_wal_scrub(self) -> None:
        """An erasure could not truncate the WAL (a reader held it): try again now, once
        and without waiting (this runs after every write until it succeeds: a reader that
        stays would otherwise add busy_timeout_ms to each of them)."""
        try:
            if self.truncate_wal(wait=False):
                self._wal_scrub_pending = False
                log.info("erasure: the WAL is truncated now")
        except DriverDatabaseError:  # busy or read-only: the next write or close tries again
            pass

    @contextlib.contextmanager
    def _tx(self) -> Iterator[Connection]:
        """A write transaction holding the write lock from its first statement."""
        conn = self._begin_immediate()
        try:
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                # a COMMIT (or statement) that failed for a full disk or an I/O error may
                # have had SQLite roll the transaction back itself: a ROLLBACK then raised
                # "cannot rollback - no transaction is active" in place of the error that
                # ended it ("database or disk is full", left only in its __context__)
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        finally:
            self._lock.release()
        if self._wal_scrub_pending:
            self._retry_wal_scrub()

    def _begin_immediate(self) -> Connection:
        """BEGIN IMMEDIATE on the store's connection; returns it with the store's lock
        held (the caller releases it). Waits for another process's write lock as
        `_polled` does; past busy_timeout_ms the busy error is raised, as SQLite's own
        handler raised it."""
        def begin(conn: Connection) -> Connection:
            conn.execute("BEGIN IMMEDIATE")
            return conn
        conn = self._polled(begin)
        assert conn is not None  # a busy BEGIN raises; it never answers None
        return conn

    def _polled(self, attempt: Callable[[Connection], _T | None], *, wait: bool = True) -> _T | None:
        """`attempt(conn)` on the store's connection under the store's lock with SQLite's
        busy handler off (busy_timeout 0 for it), tried again while another process
        makes it busy: it raised SQLITE_BUSY, or answered None. Its first other answer
        is returned with the store's lock held (the caller releases it). Between tries
        this thread sleeps SQLite's own busy schedule without the store's lock, so this
        process's reads are not held up by another process's transaction; it gives up
        busy_timeout_ms after the first busy answer, as SQLite's handler does (time
        queued for the store's lock before the first try is this process's own wait,
        not another's), or at once with `wait` False (a single try). Giving up
        re-raises the last busy error, or answers None (the store's lock free)."""
        deadline: float | None = None
        tries = 0
        while True:
            busy: Exception | None = None  # (the driver's error class is a variable: not a type)
            self._lock.acquire()
            try:
                conn = self._open()
                conn.execute("PRAGMA busy_timeout = 0")
                try:
                    answer = attempt(conn)
                finally:
                    conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
            except DriverDatabaseError as exc:
                self._lock.release()
                if not _is_busy(exc):
                    raise
                busy = exc
            except BaseException:
                self._lock.release()
                raise
            else:
                if answer is not None:
                    return answer
                self._lock.release()
            now = time.monotonic()
            if deadline is None:
                deadline = now + (self._busy_timeout_ms / 1000 if wait else 0)
            left = deadline - now
            if left <= 0:
                if busy is not None:
                    raise busy
                return None
            time.sleep(min(BUSY_POLL_DELAYS_S[min(tries, len(BUSY_POLL_DELAYS_S) - 1)], left))
            tries += 1

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._lock:
            return list(self._open().execute(sql, params).fetchall())

    # -- raw access for the storage layer's own tools (tiers.store.SqlAccess) ----------

    @contextlib.contextmanager
    def reading(self) -> Iterator[Connection]:
        """The connection, under the store's lock (no other thread's statement in between)."""
        with self._lock:
            yield self._open()

    def transaction(self) -> contextlib.AbstractContextManager[Connection]:
        """One write transaction (BEGIN IMMEDIATE) under the store's lock."""
        return self._tx()

    def maintenance(self) -> contextlib.AbstractContextManager[None]:
        """(SqlAccess) SQLite cuts no connection at a deadline: nothing to lift."""
        return contextlib.nullcontext()

    def ensure_vector_width(self, dim: int, model: str | None = None) -> None:
        """Make the vector table `dim` wide (a new width empties it, as a new embedder does),
        its vectors recorded as `model`'s (another model than recorded empties it too)."""
        self._ensure_vec_table(dim, model)

    def _read_vec_dim(self) -> int | None:
        row = self._open().execute("SELECT value FROM meta WHERE key='vec_dim'").fetchone()
        return int(row[0]) if row else None

    def _ensure_vec_table(self, dim: int, model: str | None = None) -> None:
        """The vec0 table's width depends on the embedder, so it is made on first use,
        not in a migration; a different width or a different model (`model`: the
        embedder's `model_identity()`, recorded as `vec_model`; None until the model has
        loaded, `embedder_identity`) drops the derived vectors and marks every turn for
        re-embedding. A store whose vectors carry no identity (made before it was
        recorded, or by an embedder without one) adopts `model`."""
        # the table itself is checked, not only the cached width: a lost vector table
        # (dropped, or an old backup restored) is recreated and every turn re-embedded
        if self._vec_dim == dim and self._has_vec() and (model is None or self._vec_model == model):
            return
        with self._tx() as c:
            row = c.execute("SELECT value FROM meta WHERE key = ?", (VEC_MODEL_KEY,)).fetchone()
            recorded = str(row[0]) if row else None
            has_vec = c.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (VEC_TABLE,)).fetchone() is not None
            if self._vec_dim == dim and has_vec and (model is None or recorded in (None, model)):
                if model is not None and recorded is None:
                    c.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (VEC_MODEL_KEY, model))
                self._vec_model = model or recorded
                return
            if self._vec_dim is not None:
                if has_vec:
                    log.warning("the stored vectors are %s-wide from model %s, the embedder's %d-wide from %s: "
                                "re-embedding every turn", self._vec_dim, recorded or "unrecorded", dim,
                                model or "unrecorded")
                c.execute(f"DROP TABLE IF EXISTS {VEC_TABLE}")
                c.execute("UPDATE turns SET embedded = 0")
            c.execute(vec_table_sql(VEC_TABLE, dim))
            c.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('vec_dim', ?)", (str(dim),))
            if model is not None:
                c.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (VEC_MODEL_KEY, model))
            else:
                c.execute("DELETE FROM meta WHERE key = ?", (VEC_MODEL_KEY,))
        self._vec_dim = dim
        self._vec_model = model

    def _width_conflict(self, exc: Exception, ours: int) -> VectorWidthConflict | None:
        """After vec0 refused a vector (`exc`): the clear error when another process has
        remade the vector table at another width than `ours` (this process's), else None
        (`exc` stands). Read afresh, the cached width left this process's: taking the
        store's as a new one would drop the other process's vectors, and the two would
        wipe each other's in turn."""
        if VEC0_DIMENSION_ERROR not in str(exc).lower():
            return None
        stored = self._read_vec_dim()
        if stored is None or stored == ours:
            return None
        return VectorWidthConflict(str(self.path), stored, ours, self._recorded_vec_model(), self._own_model(),
                                   read_only=self.read_only)

    def _recorded_vec_model(self) -> str | None:
        rows = self._read("SELECT value FROM meta WHERE key = ?", (VEC_MODEL_KEY,))
        return str(rows[0][0]) if rows else None

    # whether the vector table exists, and the width and model its vectors are recorded
    # as: one statement, where `_has_vec` alone was asked before (no statement more)
    _VEC_STATE_SQL = ("SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE name = ?), "
                      "(SELECT value FROM meta WHERE key = 'vec_dim'), (SELECT value FROM meta WHERE key = ?)")

    def _vectors_ours(self, ours_dim: int | None, c: Connection | None = None) -> bool:
        """Whether the vector table exists, after checking that the store's vectors are
        this process's embedder's (`ours_dim` wide, from `_vec_model`, once checked): when
        another live process has since recorded another model or width (it switched
        them, opened later), EmbeddingModelConflict (VectorWidthConflict for a width),
        instead of comparing or storing vectors of two models. `c`: read in that
        transaction (a catch-up's store, whose write lock holds any switch off until it
        ends), else on its own. A side not known yet (None) checks nothing."""
        params = (VEC_TABLE, VEC_MODEL_KEY)
        row = c.execute(self._VEC_STATE_SQL, params).fetchone() if c is not None else \
            self._read(self._VEC_STATE_SQL, params)[0]
        has_vec, stored_dim, stored_model = bool(row[0]), row[1], row[2]
        if has_vec and stored_dim is not None and ours_dim is not None:
            conflict = embedding_conflict(str(self.path), int(stored_dim), ours_dim,
                                          None if stored_model is None else str(stored_model), self._own_model(),
                                          read_only=self.read_only)
            if conflict is not None:
                raise conflict
        return has_vec

    def _own_model(self) -> str | None:
        """The model identity this process's vectors are checked as: `_vec_model` (set when
        a catch-up checked the store), or on a read-only open, where no catch-up runs and
        `_vec_model` stays None, the embedder's model files' identity (no load; cached by
        the embedder): without it another model of the store's width would compare its
        query vectors with the store's, silently."""
        if self._vec_model is not None or not self.read_only or self.embedder is None:
            return self._vec_model
        files = getattr(self.embedder, "model_identity", None)
        if files is None:
            return None
        try:
            named = files()
        except OSError:
            return None  # a directory gone: nothing says the models differ
        return named if isinstance(named, str) and named else None

    def _own_dim(self) -> int | None:
        """The width this process's reads of stored vectors are checked by (`_vectors_ours`):
        None without an embedder (a tool reading the log compares no vectors, whichever
        model made them); on a read-only open the embedder's (`_vec_dim` is then the
        store's, read at open, as no catch-up set it)."""
        if self.embedder is None:
            return None
        return int(self.embedder.dim) if self.read_only else self._vec_dim

    def _has_vec(self) -> bool:
        return bool(
            self._read("SELECT 1 FROM sqlite_master WHERE name = ?", (VEC_TABLE,))
        )

    # -- conversations ----------------------------------------------------------------

    def _claim_conversation(self, c: Connection, name: str, namespace: str, now: float) -> tuple[str, bool]:
        """The key of (namespace, name), creating the conversation if it does not exist;
        (key, created). Runs inside the caller's write transaction."""
        row = c.execute("SELECT id FROM conversations WHERE namespace = ? AND name = ?", (namespace, name)).fetchone()
        if row is not None:
            return str(row[0]), False
        key = self._issue_key(c, name, now)
        c.execute(
            # last_message_at starts at 0 and the first message's created_at sets it (see
            # _insert), as fork sets it from the copied messages: a conversation imported
            # with old timestamps is as old as its messages when prune asks (a fork's
            # creation counts as activity too: PRUNE_IDLE_SQL).
            "INSERT INTO conversations(id, name, namespace, created_at, last_message_at) VALUES (?, ?, ?, ?, 0)",
            (key, name, namespace, now),
        )
        return key, True

    @staticmethod
    def _issue_key(c: Connection, name: str, now: float) -> str:
        """A key never issued before in this database: the name itself the first time
        it is used anywhere (keys stay readable in Redis and in the file), else the name
        with `~` and a random suffix (`~` is not allowed in names, so a suffixed key can
        never equal a name). Recorded in `conversation_keys`, which is never deleted
        from, so no later incarnation can be given it."""
        key = name
        while c.execute("INSERT OR IGNORE INTO conversation_keys(key, issued_at) VALUES (?, ?)",
                        (key, now)).rowcount == 0:
            key = f"{name}{KEY_SEPARATOR}{uuid.uuid4().hex[:KEY_SUFFIX_HEX]}"
        return key

    def names_of(self, keys: Sequence[str]) -> dict[str, str]:
        """key -> name for the live conversations among `keys`."""
        out: dict[str, str] = {}
        uniq = sorted(set(keys))
        for i in range(0, len(uniq), MAX_SQL_PARAMS):
            chunk = uniq[i:i + MAX_SQL_PARAMS]
            ph = ",".join("?" * len(chunk))
            out.update((str(k), str(n)) for k, n in self._read(f"SELECT id, name FROM conversations WHERE id IN ({ph})",
                                                               chunk))
        return out

    @staticmethod
    def _next_position(c: Connection, key: str) -> int:
        """Inside a write transaction: the position the key's next message gets."""
        return int(c.execute("SELECT COALESCE(MAX(position) + 1, 0) FROM messages WHERE conversation_id = ?",
                             (key,)).fetchone()[0])

    @staticmethod
    def _require_in(c: Connection, key: str) -> None:
        """Inside a write transaction: the key's conversation still exists (a prune or
        an erasure may have removed it since the caller resolved the key; keys are
        never reused, so a stale key can only miss, never reach another conversation)."""
        if c.execute("SELECT 1 FROM conversations WHERE id = ?", (key,)).fetchone() is None:
            raise ConversationNotFound(key_name(key))

    @staticmethod
    def _lock_turn_writers(c: Connection, key: str) -> None:
        """(tiers.dialect) Nothing to take: BEGIN IMMEDIATE already serialises every writer
        of the file (PostgreSQL locks the conversation's row here)."""

    def list_conversations(self, namespace: str, *, exclude: str | None = None, limit: int | None = None) -> list[str]:
        """The keys of exactly `namespace`'s conversations (not those of namespaces
        below it), without the key `exclude`, at most `limit` (a caller that only needs
        to know whether there are few need not list 100k)."""
        return [r[0] for r in self._read(
            "SELECT id FROM conversations WHERE namespace = ? AND id IS NOT ? ORDER BY name LIMIT ?",
            (namespace, exclude, -1 if limit is None else limit))]

    # -- append -----------------------------------------------------------------------

    def _insert(
        self, c: Connection, conversation_id: str, msg: Message, label: Label | None = None
    ) -> tuple[int, int, float]:
        """Insert one message and its turn and FTS rows: (position, id, created). The
        conversation's `last_message_at` is the caller's (`append_batch`: once per batch)."""
        body = msg.body()
        body_json = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
        meta_json = json.dumps(msg.metadata, ensure_ascii=False) if msg.metadata is not None else None
        created = float(msg.created_at if msg.created_at is not None else time.time())
        # One statement assigns the position: splitting MAX and INSERT, even inside a
        # transaction, invites SQLITE_BUSY storms between processes.
        position, mid = c.execute(
            "INSERT INTO messages(conversation_id, position, id, role, body, session_id, metadata, created_at) "
            "SELECT ?1, COALESCE(MAX(position) + 1, 0), (SELECT COALESCE(MAX(id), 0) + 1 FROM messages), "
            "?2, ?3, ?4, ?5, ?6 FROM messages WHERE conversation_id = ?1 RETURNING position, id",
            (conversation_id, msg.role, body_json, msg.session_id, meta_json, created),
        ).fetchone()
        text = search_text(body)
        intent, lb, prio, reason = label if label is not None else (None, None, None, None)
        c.execute(
            "INSERT INTO turns(conversation_id, position, id, role, session_id, tokens, content_hash, created_at, "
            "intent, load_bearing, priority, label_reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (conversation_id, position, mid, msg.role, msg.session_id,
             message_tokens(self.tokens, body), content_hash(body), created,
             intent, None if lb is None else int(lb), prio, reason),
        )
        c.execute(
            "INSERT INTO messages_fts(rowid, text, scope) SELECT ?, ?, " + SCOPE_SQL + " FROM conversations c "
            "WHERE c.id = ?",
            (mid, text, conversation_id),
        )
        return int(position), int(mid), created

    def append(self, conversation_id: str, msg: Message, *, namespace: str = "default") -> int:
        """Append one validated message to the conversation named `conversation_id` in
        `namespace`; returns its position. Commits before embedding."""
        return self.append_many(conversation_id, [msg], namespace=namespace)[0]

    def append_many(
        self,
        conversation_id: str,
        msgs: Sequence[Message],
        *,
        namespace: str = "default",
        labels: Sequence[Label | None] | None = None,
    ) -> list[int]:
        """Append a batch to the conversation named `conversation_id` in `namespace`
        (created if it does not exist) in one transaction; positions are contiguous."""
        return self.append_batch(conversation_id, msgs, namespace=namespace, labels=labels).positions

    def append_batch(
        self,
        name: str,
        msgs: Sequence[Message],
        *,
        namespace: str = "default",
        labels: Sequence[Label | None] | None = None,
        idempotency_key: str | None = None,
        fingerprint: bytes | None = None,
        expect_position: int | None = None,
        expect_key: str | None = None,
    ) -> AppendResult:
        """`append_many` that also says which incarnation the messages went to. The
        name is resolved inside the write transaction, so a prune racing the append
        either happens before (a new incarnation) or after (the batch goes with it).
        `labels` (intent, load_bearing, priority, reason) are derived turn-index values
        that the caller computed from the text; they commit with the messages.
        `idempotency_key`: tiers.store.ColdLog.append_batch; the key is looked up inside
        the write transaction (BEGIN IMMEDIATE: one writer at a time across processes),
        so two appends under one key write once. `expect_position` / `expect_key`:
        tiers.store.ColdLog.append_batch, checked in the same transaction."""
        if not msgs:
            return AppendResult(self.key_of(namespace, name) or "", [], False)
        if labels is not None and len(labels) != len(msgs):
            raise ValueError("labels must match messages one to one")
        if (idempotency_key is None) != (fingerprint is None):
            raise ValueError("idempotency_key and fingerprint go together")
        with self._tx() as c:
            now = time.time()
            key, created = self._claim_conversation(c, name, namespace, now)
            if idempotency_key is not None and fingerprint is not None and not created:
                replayed = self._replayed(c, key, idempotency_key, fingerprint)
                if replayed is not None:  # nothing written in this transaction: its commit is empty
                    return AppendResult(key, replayed, False, replayed=True)
            if expect_position is not None:  # raising rolls back a conversation created above
                found = 0 if created else self._next_position(c, key)
                check_expected(name, key, found, expect_position, expect_key, created=created,
                               db_uuid=self.db_uuid)
            rows = [self._insert(c, key, m, labels[i] if labels else None) for i, m in enumerate(msgs)]
            # once per batch, not per row: the same MAX, one statement instead of len(msgs);
            # views_seq puts the conversation in the scheduler's sweep (tiers.store)
            c.execute("UPDATE conversations SET last_message_at = MAX(last_message_at, ?), "
                      "views_seq = views_seq + 1 WHERE id = ?", (max(r[2] for r in rows), key))
            positions = [r[0] for r in rows]
            if idempotency_key is not None and fingerprint is not None and not self._record_key(
                    c, key, idempotency_key, fingerprint, positions, now):
                # cannot happen under SQLite's one writer (the lookup above saw no record)
                raise RuntimeError(f"idempotency key of {key!r} recorded by another writer inside a write lock")
        return AppendResult(key, positions, created)

    # -- embeddings (derived, outside the write lock) -------------------------------------

    def index_pending(
        self,
        *,
        conversation_id: str | None = None,
        batch: int = 64,
        max_rows: int | None = None,
        progress: Callable[[int], None] | None = None,
        end: int | None = None,
        pool_batches: int = INDEX_POOL_BATCHES,
        stop: Callable[[], bool] | None = None,
        namespace: str | None = None,
        read_claimed: bool = False,
    ) -> int:
        """Embed turns that have no vector yet; returns how many were stored.

        Rows are read `pool_batches` batches at a time and embedded together, so the
        embedder can group texts of similar length (less padding: measured 2.3x fewer
        tokens through the model on LoCoMo than batches in log order); they are stored in
        one transaction and `on_embedded` sees them in log order, `batch` rows at a time.
        `end` (with `conversation_id`) limits it to positions <= end. The embedding runs
        without any lock held; the store step re-checks `embedded = 0`, so two processes
        catching up at once never double-insert. The next pool is read and embedded while
        this thread stores the current one (`pipeline_depth`, tiers/catchup.py); an error
        is raised here, and a pool not stored stays pending. `stop()`, asked before each
        read, ends the catch-up there: what was embedded is stored, nothing more is read.
        `read_claimed`: turns another catch-up of this store holds are read and embedded
        too, not left to it (tiers.catchup.Claims).
        """
        if self.embedder is None or self.read_only:  # read-only: pending turns stay bm25-only
            return 0
        self._ensure_vec_table(self.embedder.dim, checked_identity(self.embedder, self._recorded_vec_model))
        embedder = self.embedder
        self._owed.retry(self.on_embedded)  # a decision a failed hook owes comes first (log order)
        pool = batch * max(1, pool_batches)
        done = 0

        cut = [False]  # whether a read was cut short (pool_rows, claims): then it is not the last
        claims = self._claims
        mine: set[int] = set()  # the turns this call holds (tiers.catchup.Claims)
        deciding = self._deciding
        # the turns this call read and has not hooked yet (tiers.catchup.Deciding)
        undecided: collections.Counter[tuple[str, int]] = collections.Counter()

        def pools() -> Iterator[list[Any]]:
            # each read resumes after the last row read (not the last stored: the pipeline
            # reads pool N+1 before pool N is stored), in the order the loop read before
            # (the pending index, by rowid; one conversation by position, turns_pending_by_pos)
            read, after = 0, -1
            while (max_rows is None or read < max_rows) and not (stop is not None and stop()):
                rows: list[Any] = []
                while not rows:  # a read whose turns another catch-up holds: the ones after it
                    limit = pool if max_rows is None else min(pool, max_rows - read)
                    if self.read_gate is not None and conversation_id is None:  # not an append's own
                        self.read_gate(read)
                    cols = self._POOL_COLUMNS
                    with claims.lock:  # read and claim as one step (Claims)
                        if conversation_id is None and namespace is not None:
                            # from the namespace's conversations (CROSS JOIN: in that order), each one's
                            # pending turns by turns_pending_by_conv: not every tenant's backlog
                            rows = self._read(f"SELECT {cols}, t.rowid FROM conversations c CROSS JOIN turns t "
                                              "INDEXED BY turns_pending_by_conv ON t.conversation_id = c.id "
                                              "JOIN messages m ON m.id = t.id WHERE c.namespace = ? "
                                              "AND t.embedded = 0 AND t.rowid > ? ORDER BY t.rowid LIMIT ?",
                                              (namespace, after, limit))
                        elif conversation_id is None:
                            rows = self._read(f"SELECT {cols}, t.rowid FROM turns t JOIN messages m ON m.id = t.id "
                                              "WHERE t.embedded = 0 AND t.rowid > ? ORDER BY t.rowid LIMIT ?",
                                              (after, limit))
                        else:
                            # a seek to the conversation's pending turns after `after`, in position
                            # order (m022): not a walk of all its turns after it, pending or not
                            rows = self._read(self._conv_pending_sql(cols),
                                              (conversation_id, end if end is not None else MAX_POSITION, after,
                                               limit))
                        if not rows:
                            return
                        keep = pool_rows([len(r[3]) for r in rows])
                        if keep < len(rows):  # long texts: the rest is read with the next pool
                            rows = rows[:keep]
                            cut[0] = True
                        after = int(rows[-1][7])
                        free = claims.take([int(r[2]) for r in rows], mine)
                        if read_claimed:  # the claimed ones too, their claims left to their holder
                            free = {int(r[2]) for r in rows}
                        # held before the lock ends: a reader that finds them claimed finds them held
                        deciding.hold([(r[0], int(r[1])) for r in rows if int(r[2]) in free], undecided)
                    if len(free) < len(rows):  # another catch-up of this process embeds those
                        rows = [r for r in rows if int(r[2]) in free]
                        cut[0] = True
                read += len(rows)
                yield rows

        def embed(rows: list[Any]) -> np.ndarray:
            return self._pool_vectors(embedder.embed, rows)

        def store(rows: list[Any], vecs: np.ndarray) -> None:
            nonlocal done
            # a model's width shows, and its identity is known, only once it has loaded
            # (`embedder_identity`): one that fails to load never replaces the recorded one
            model = embedder_identity(embedder)
            if vecs.ndim == 2 and (vecs.shape[1] != self._vec_dim or (model is not None and model != self._vec_model)):
                self._ensure_vec_table(int(vecs.shape[1]), model)
            stored: list[tuple[str, int, np.ndarray]] = []
            stored_ids: list[int] = []
            try:
                with self._tx() as c:
                    self._step("index_pending.store")
                    # in the write transaction: a process that switched the model or width
                    # since this one checked (opened later) wins; storing this model's
                    # vectors beside its would mix them (same width) unseen
                    self._vectors_ours(int(vecs.shape[1]), c)
                    for r, v in zip(rows, vecs, strict=True):
                        cur = c.execute(
                            "UPDATE turns SET embedded = 1 WHERE id = ? AND embedded = 0", (r[2],)
                        )
                        if cur.rowcount == 1:
                            c.execute(
                                f"INSERT INTO {VEC_TABLE}(rowid, conversation_id, embedding) VALUES (?, ?, ?)",
                                (r[2], r[0], _vec_bytes(v)),
                            )
                            stored.append((r[0], r[1], v))
                            stored_ids.append(int(r[2]))
            except DriverDatabaseError as exc:  # rolled back: the pool stays pending
                conflict = self._width_conflict(exc, int(vecs.shape[1]))
                if conflict is not None:
                    raise conflict from exc
                raise
            claims.release([int(r[2]) for r in rows], mine)  # committed: a read now finds embedded = 1
            # the hook's work per call (supersession's meaning search) is sized for a batch
            for start in range(0, len(stored), batch) if self.on_embedded is not None else ():
                try:
                    assert self.on_embedded is not None
                    self.on_embedded(stored[start:start + batch])
                except Exception:  # derived work: the vectors are stored, indexing goes on
                    log.exception("after-embedding hook failed for %d turns; the next catch-up decides them",
                                  len(stored[start:start + batch]))
                    self._owed.owe(stored_ids[start:start + batch])  # they are embedded: nothing else would
            if stored and self.on_hooked is not None:
                try:  # each conversation once the pool's hooks have all run (log order)
                    self.on_hooked(sorted({s[0] for s in stored}))
                except Exception:  # derived work, as the hook's: indexing goes on
                    log.exception("after-pool hook failed; the next catch-up's runs again")
            deciding.release([(r[0], int(r[1])) for r in rows], undecided)  # hooked (or another's to hook)
            done += len(rows)
            if progress is not None:
                progress(len(rows))

        # the next pool is read and embedded while this thread stores one (tiers/catchup.py)
        try:
            pipelined(pools(), embed, store, depth=self.pipeline_depth,
                      last=lambda rows: len(rows) < pool and not cut[0])
        finally:  # read, not stored (an error, a stop): pending again, for whichever catch-up comes
            claims.release(list(mine), mine)
            deciding.release_all(undecided)
        return done

    def wait_decided(self, conversation_id: str, positions: Sequence[int] | None, timeout_s: float) -> bool:
        """`ColdLog.wait_decided`."""
        return self._deciding.wait(conversation_id, positions, timeout_s)

    def undecided_conversations(self) -> set[str]:
        """`ColdLog.undecided_conversations`."""
        return self._deciding.conversations()

    def _owed_record(self, keys: list[str], mark: str) -> None:
        """tiers.owed's rows, and its mark that sends the other processes to read them."""
        with self._tx() as c:
            c.executemany("INSERT OR IGNORE INTO meta(key, value) VALUES (?, '1')", [(k,) for k in keys])
            c.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (OWED_MARK_KEY, mark))

    def _meta_keys_delete(self, keys: list[str]) -> None:
        with self._tx() as c:
            c.executemany("DELETE FROM meta WHERE key = ?", [(k,) for k in keys])

    # the index one conversation's catch-up reads its pending turns through (by position);
    # evals/bench_pending_seek sets the primary key's to time the walk it replaced
    _CONV_PENDING_INDEX: ClassVar[str] = PENDING_BY_POSITION_INDEX

    @classmethod
    def _conv_pending_sql(cls, cols: str) -> str:
        """One conversation's catch-up read of `cols` (parameters: the conversation, the
        last position, the resume position, the limit); evals/bench_pending_seek plans this
        very text, so its plans are those of what runs."""
        return (f"SELECT {cols}, t.position FROM turns t INDEXED BY {cls._CONV_PENDING_INDEX} "
                "JOIN messages m ON m.id = t.id "
                "WHERE t.embedded = 0 AND t.conversation_id = ? AND t.position <= ? "
                "AND t.position > ? ORDER BY t.position LIMIT ?")

    # what a catch-up reads of a pending turn (`_pool_vectors`), then its resume key
    _POOL_COLUMNS = "t.conversation_id, t.position, t.id, m.body, t.role, t.intent, t.load_bearing"

    def _pool_vectors(self, embed: Callable[[list[str]], np.ndarray], rows: list[Any]) -> np.ndarray:
        """The vectors of a pool's rows (`_POOL_COLUMNS`), with `texts_ahead`'s texts
        embedded in the same call (they are remembered, not returned)."""
        texts: list[str] = []
        turns: list[PendingTurn] = []
        scopes = [memo_scope(self.db_uuid, str(r[0])) for r in rows]  # each remembered for its conversation
        for r in rows:
            try:
                body = loads_stored(r[3])
                texts.append(search_text(body))
            except (ValueError, TypeError, AttributeError):
                texts.append("")  # salvage: an undecodable row still gets marked
                continue
            turns.append(PendingTurn(r[0], int(r[1]), r[4], r[5], bool(r[6]), body))
        extra: list[tuple[str, str]] = []
        ahead = self.texts_ahead
        if ahead is not None and getattr(self.embedder, "memo_size", 0) > 0:  # found again in the memo only
            try:
                extra = ahead(turns)
            except Exception:  # only speed depends on it
                log.exception("texts_ahead failed; the hook embeds its own texts")
        # one call: the extra texts are batched with the pool's (and remembered)
        with remembered_for(scopes + [memo_scope(self.db_uuid, conv) for conv, _t in extra]):
            return embed(texts + [t for _conv, t in extra])[:len(texts)]

    def embeddings(self, conversation_id: str, positions: Sequence[int]) -> dict[int, np.ndarray]:
        """Stored vectors for some positions (missing ones are absent)."""
        if not positions or not self._vectors_ours(self._own_dim()):
            return {}
        out: dict[int, np.ndarray] = {}
        ph = ",".join("?" * len(positions))
        rows = self._read(
            f"SELECT position, id FROM turns WHERE conversation_id = ? AND position IN ({ph}) AND embedded = 1",
            (conversation_id, *positions),
        )
        with self._lock:
            conn = self._open()
            for pos, mid in rows:
                v = conn.execute(f"SELECT embedding FROM {VEC_TABLE} WHERE rowid = ?", (mid,)).fetchone()
                if v is not None:
                    out[int(pos)] = np.frombuffer(v[0], dtype=np.float32)
        return out

    def turn_facts(
        self, conversation_id: str, *, after: int = -1, positions: Sequence[int] | None = None,
        limit: int | None = None,
    ) -> list[tuple[int, int, int, float, str | None, bytes | None, str | None, str | None]]:
        """(turn id, position, tokens, created_at, session_id, vector bytes or None, speaker name or
        None, indexed text or None) for the turns after `after`, or for `positions`, in
        log order; the planner's exhaustive scoring reads these once per turn and keeps
        them (tiers.turncache). The text is what the FTS index holds; re-reads of
        `positions` (vectors that arrived late) leave it out (`indexed_texts` reads it)."""
        with_text = positions is None
        vec = self._vectors_ours(self._own_dim())  # another process's model's vectors never reach the cache
        # tokens and time NULL where out of range (text too: it sorts after every number),
        # so that the one-pass conversion below fails for such a row (`usable_facts`)
        cols = (f"t.id, t.position, CASE WHEN t.tokens BETWEEN 0 AND {MAX_TURN_TOKENS} THEN t.tokens END, "
                f"CASE WHEN t.created_at BETWEEN 0 AND {MAX_TIMESTAMP} THEN t.created_at END, t.session_id, "
                + ("v.embedding" if vec else "NULL")
                # a garbled body must not fail the read (salvage is row by row): no name
                # a speaker's name only: on calls, results and tool messages `name` is the tool's
                + ", CASE WHEN json_valid(m.body) AND json_extract(m.body, '$.type') IS NULL AND "
                "json_extract(m.body, '$.role') IN ('system', 'developer', 'user', 'assistant') "
                "THEN json_extract(m.body, '$.name') END, "
                + ("f.text" if with_text else "NULL"))
        join = "JOIN messages m ON m.id = t.id "
        if with_text:
            join += "LEFT JOIN messages_fts f ON f.rowid = t.id "
        join += f"LEFT JOIN {VEC_TABLE} v ON v.rowid = t.id AND t.embedded = 1 " if vec else ""
        if positions is not None:
            if not positions:
                return []
            ph = ",".join("?" * len(positions))
            sql = (f"SELECT {cols} FROM turns t {join}WHERE t.conversation_id = ? AND t.position IN ({ph}) "
                   "ORDER BY t.position")
            params: tuple[Any, ...] = (conversation_id, *positions)
        else:
            # positions in range: one SQLite holds as text sorts after every integer
            sql = (f"SELECT {cols} FROM turns t {join}WHERE t.conversation_id = ? AND t.position > ? "
                   "AND t.position <= ? ORDER BY t.position")
            params = (conversation_id, after, MAX_POSITION)
            if limit is not None:
                sql += " LIMIT ?"
                params += (limit,)
        return self.usable_facts(conversation_id, self._read(sql, params), lambda r: (
            int(r[0]), int(r[1]), int(r[2]), float(r[3]), r[4], r[5],
            # the speaker read from the body, which keeps a NUL: as PostgreSQL's column holds it
            without_nul(r[6]) if isinstance(r[6], str) else None,
            r[7] if isinstance(r[7], str) else None), limit=limit, positions=positions)

    def indexed_texts(self, conversation_id: str, positions: Sequence[int]) -> dict[int, str]:
        if not positions:
            return {}
        ph = ",".join("?" * len(positions))
        rows = self._read(
            "SELECT t.position, f.text FROM turns t JOIN messages_fts f ON f.rowid = t.id "
            f"WHERE t.conversation_id = ? AND t.position IN ({ph})", (conversation_id, *positions))
        # an odd row SQLite holds as text is no position (turn_facts salvages it)
        return {p: text for p, text in rows if isinstance(p, int) and isinstance(text, str)}

    # -- reads --------------------------------------------------------------------------

    def get(self, conversation_id: str, positions: Sequence[int]) -> list[StoredMessage]:
        if not positions:
            return []
        ph = ",".join("?" * len(positions))
        rows = self._read(
            self._SELECT + f"WHERE m.conversation_id = ? AND m.position IN ({ph}) ORDER BY m.position",
            (conversation_id, *positions),
        )
        return [m for m in map(self._decode, rows) if m is not None]

    def get_many(self, keys: Sequence[tuple[str, int]]) -> list[StoredMessage]:
        """Messages for (conversation, position) pairs across conversations."""
        out: list[StoredMessage] = []
        by_conv: dict[str, list[int]] = {}
        for conv, pos in keys:
            by_conv.setdefault(conv, []).append(pos)
        for conv, positions in by_conv.items():
            out.extend(self.get(conv, positions))
        return out

    def turns_at(self, conversation_id: str, positions: Sequence[int]) -> list[TurnRow]:
        if not positions:
            return []
        ph = ",".join("?" * len(positions))
        rows = self._read(
            self._TURN_SELECT + f"WHERE t.conversation_id = ? AND t.position IN ({ph}) ORDER BY t.position",
            (conversation_id, *positions),
        )
        return self._turn_rows(rows)

    def pinned_turns(self, conversation_id: str) -> list[TurnRow]:
        """Turns pinned explicitly or labeled load-bearing (superseded ones included:
        the caller decides how to show them)."""
        rows = self._read(
            self._TURN_SELECT + "WHERE t.conversation_id = ?1 AND (t.load_bearing = 1 OR t.position IN "
            "(SELECT position FROM pins WHERE conversation_id = ?1)) ORDER BY t.position",
            (conversation_id,),
        )
        return self._turn_rows(rows)

    def pin_candidates(self, conversation_id: str, *, min_priority: int, limit: int) -> list[TurnRow]:
        """What the planner may pin, best first: explicit pins, and load-bearing turns of
        at least `min_priority` that nothing superseded; by priority, then newest."""
        # two indexed reads merged here: one OR over both kinds makes SQLite scan every
        # turn of the conversation (5.5 ms at 20k turns against 0.6)
        pinned = self._read(
            self._TURN_SELECT.replace("FROM turns t LEFT JOIN pins p ON", "FROM pins p JOIN turns t ON")
            + "WHERE p.conversation_id = ?1 ORDER BY p.priority DESC, t.position DESC LIMIT ?2",
            (conversation_id, limit),
        )
        # a backward walk of the candidates' own index (m023) that stops after `limit`
        # rows (a pinned one is skipped: the first read has it); not a sort of all of them
        bearing = self._read(
            self._turns_through(self._PIN_CANDIDATES_INDEX) + self._PIN_CANDIDATES_WHERE,
            (conversation_id, min_priority, limit),
        )
        turns = self._turn_rows((*pinned, *bearing))
        turns.sort(key=lambda t: (-(t.pinned_priority if t.pinned_priority is not None else t.priority), -t.position))
        return turns[:limit]

    def superseded_pins(self, conversation_id: str, *, min_priority: int, limit: int) -> list[TurnRow]:
        """Load-bearing turns a later turn superseded (newest first), for the plan to say
        why they are not shown; explicitly pinned ones are the caller's to show."""
        # the superseded ones' own index (m023), newest first: not a walk of every
        # load-bearing turn testing each
        rows = self._read(
            self._turns_through(self._SUPERSEDED_PINS_INDEX) + self._SUPERSEDED_PINS_WHERE,
            (conversation_id, min_priority, limit),
        )
        return self._turn_rows(rows)

    # the indexes the two pin reads walk (m023); evals/bench_pin_candidates sets
    # turns_load_bearing's to time the reads they replaced
    _PIN_CANDIDATES_INDEX: ClassVar[str] = PIN_CANDIDATES_INDEX
    _SUPERSEDED_PINS_INDEX: ClassVar[str] = SUPERSEDED_PINS_INDEX
    # the two reads' conditions and order (parameters: the conversation, the least
    # priority, the limit); evals/bench_pin_candidates plans this very text
    _PIN_CANDIDATES_WHERE: ClassVar[str] = (
        "WHERE t.conversation_id = ?1 AND t.load_bearing = 1 AND t.priority >= ?2 "
        "AND t.superseded_by IS NULL AND p.priority IS NULL ORDER BY t.priority DESC, t.position DESC LIMIT ?3")
    _SUPERSEDED_PINS_WHERE: ClassVar[str] = (
        "WHERE t.conversation_id = ?1 AND t.load_bearing = 1 AND t.priority >= ?2 "
        "AND t.superseded_by IS NOT NULL AND p.priority IS NULL ORDER BY t.position DESC LIMIT ?3")

    @classmethod
    def _turns_through(cls, index: str) -> str:
        """`_TURN_SELECT` reading the turns through `index` (INDEXED BY: SQLite fails the
        statement rather than plan another way)."""
        return cls._TURN_SELECT.replace("FROM turns t ", f"FROM turns t INDEXED BY {index} ")

    # -- derived labels (written by the consolidation layer) -----------------------------------

    def set_superseded_statements(self, conversation_id: str, rows: Sequence[StatementRow], *,
                                  over: Collection[int] = ()) -> None:
        """Statement-level supersession (tiers/statements.py): derived, messages untouched;
        a row already recorded stays as it is, unless it names one of `over` (hidden
        turns): deleted and written anew (both move the pin version, by the triggers). The
        scheduler's sweep looks at the conversation again (`set_superseded`)."""
        if not rows:
            return
        with self._tx() as c:
            c.execute("UPDATE conversations SET views_seq = views_seq + 1 WHERE id = ?", (conversation_id,))
            if over:
                hid = json.dumps(sorted(over))
                c.executemany(
                    f"DELETE FROM {STATEMENT_TABLE} WHERE conversation_id = ? AND position = ? AND start = ? "
                    "AND superseded_by IN (SELECT value FROM json_each(?))",
                    [(conversation_id, r.position, r.start, hid) for r in rows])
            c.executemany(
                f'INSERT OR IGNORE INTO {STATEMENT_TABLE}(conversation_id, position, start, "end", superseded_by) '
                "VALUES (?, ?, ?, ?, ?)",
                [(conversation_id, r.position, r.start, r.end, r.superseded_by) for r in rows],
            )

    def superseded_statements(self, conversation_id: str, positions: Sequence[int] | None = None
                              ) -> list[StatementRow]:
        """The conversation's statement-level supersessions (of `positions` only, when
        given), by position and start."""
        sql = f'SELECT position, start, "end", superseded_by FROM {STATEMENT_TABLE} WHERE conversation_id = ?'
        if positions is None:
            got = self._read(sql + " ORDER BY position, start", (conversation_id,))
        else:
            got = []
            want = sorted(set(positions))
            for i in range(0, len(want), MAX_SQL_PARAMS):
                chunk = want[i:i + MAX_SQL_PARAMS]
                got += self._read(sql + f" AND position IN ({','.join('?' * len(chunk))}) ORDER BY position, start",
                                  (conversation_id, *chunk))
        return [StatementRow(int(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in got]

    def set_pin(self, conversation_id: str, position: int, priority: int | None) -> int | None:
        """Record (priority) or clear (None) an explicit pin; the pin version it moved to,
        None when nothing changed (tiers.store)."""
        with self._tx() as c:
            self._require_in(c, conversation_id)
            last = c.execute("SELECT COALESCE(MAX(position), -1) FROM messages WHERE conversation_id = ?",
                             (conversation_id,)).fetchone()[0]
            if not 0 <= position <= last:
                raise PositionOutOfRange("position", position, last)
            if priority is None:
                cur = c.execute("DELETE FROM pins WHERE conversation_id = ? AND position = ?",
                                (conversation_id, position))
            else:
                # the REPLACE's delete of a pin already there fires no trigger
                # (m009_messages_no_replace): one move of the version either way
                cur = c.execute(
                    "INSERT OR REPLACE INTO pins(conversation_id, position, priority, created_at) VALUES (?,?,?,?)",
                    (conversation_id, position, priority, time.time()),
                )
            if cur.rowcount <= 0:
                return None
            return int(c.execute("SELECT version FROM pin_versions WHERE conversation_id = ?",
                                 (conversation_id,)).fetchone()[0])

    # -- checkpoint / fork / prune -------------------------------------------------------------

    def fork(self, conversation_id: str, up_to: int, *, new_id: str | None = None,
             max_id_chars: int = DEFAULT_FORK_MAX_ID_CHARS) -> str:
        """Copy positions 0..up_to (messages, index rows, vectors, the latest checkpoint
        at or before up_to, the newest rolling view inside it, explicit pins) into a new
        conversation of the same namespace, named `new_id` (unique in that namespace;
        none: `fork_id` of the parent's name, at most `max_id_chars` characters);
        returns the child's key. A stored row that fails its model is not copied (its
        position stays a gap, so positions still match the parent's).

        Whole or not at all, to every reader (DESIGN invariant 7), without holding the
        write lock for the whole copy (one transaction held it 5.8 s for a 30,000-turn
        prefix, past another process's 5 s busy timeout): the prefix is copied from its
        top down in batches of `FORK_BATCH_MESSAGES` (sized as an erasure's) under a key
        bound to no name, so no read reaches it (every read resolves a name or a
        namespace through the `conversations` row, which does not exist yet); the last
        transaction writes that row with the checkpoint, rolling view, pins and
        supersessions, publishing the child at once. A prefix of one batch is one
        transaction, as before. Until published the child is recorded as owed
        (`erase_owed`, reason 'fork') and its process holds a file lock on it
        (`_fork_lock`): a process killed meanwhile leaves it to the next open or erasure,
        which deletes its rows (`finish_owed_erasures`); a fork that fails deletes them
        itself. The parent erased meanwhile, or the name taken, fails the fork so; the
        record names the parent, so its erasure deletes the unfinished copy with the rest
        of its text (`_erase_forks_of`), whatever the fork's process does meanwhile."""
        batch = FORK_BATCH_MESSAGES
        # the undecodable rows are found outside the lock (the messages are immutable):
        # the top batch, extended down until it holds a row that is copied, so the copy's
        # highest id is taken at once and no append takes an id of the range below it
        # (from the log's end when `up_to` is past it: the transaction refuses it then,
        # and the walk down from a far position must not take a read per empty batch)
        top = min(up_to, max(self.last_position(conversation_id), 0))
        lo, hi, bad = max(0, top - batch + 1), top, []
        while True:
            found, rows = self._fork_undecodable(conversation_id, lo, hi)
            bad += found
            if rows > len(found) or lo == 0:
                break
            hi, lo = lo - 1, max(0, lo - batch)
        began = time.perf_counter()
        lock: int | None = None
        owed = False
        try:
            with self._tx() as c:
                row = c.execute(
                    "SELECT namespace, name, (SELECT COALESCE(MAX(position), -1) FROM messages "
                    "WHERE conversation_id = ?1) FROM conversations WHERE id = ?1",
                    (conversation_id,),
                ).fetchone()
                namespace, child_name = self._fork_name(c, conversation_id, row, up_to, new_id, max_id_chars)
                now = time.time()
                child = self._issue_key(c, child_name, now)
                base = int(c.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM messages").fetchone()[0])
                copy = _ForkCopy(conversation_id, child, namespace, child_name, up_to, base, now)
                self._step("fork:conversation")
                if lo > 0:  # more batches to come: owed until published, locked while this process lives
                    lock = self._fork_lock(child)
                    # with its parent: an erasure of the parent deletes the copy too (`_erase_forks_of`)
                    c.execute(f"INSERT INTO erase_owed(key, reason, at, {FORK_PARENT_COLUMN}) VALUES (?, ?, ?, ?)",
                              (child, FORK_OWED_REASON, now, conversation_id))
                self._fork_batch(c, copy, lo, up_to, bad)
                if lo == 0:
                    self._fork_publish(c, copy, bad)
            owed = lo > 0
        finally:
            if not owed and lock is not None:  # the first transaction failed: nothing was written
                self._fork_unlock(child, lock)
        if not owed:
            return child
        try:
            held = time.perf_counter() - began
            self._step("fork:batch")
            while lo > 0:
                time.sleep(min(held, ERASE_PAUSE_MAX_S))
                batch = min(FORK_BATCH_MESSAGES, self._next_batch(batch, held))
                hi, lo = lo - 1, max(0, lo - batch)
                more, _ = self._fork_undecodable(conversation_id, lo, hi)
                bad += more
                began = time.perf_counter()
                with self._tx() as c:
                    # erased meanwhile: stop at once, saying so (the erasure took the copy too,
                    # so the ownership check below would only say that it is gone)
                    self._require_in(c, conversation_id)
                    self._fork_owned(c, child)
                    self._fork_batch(c, copy, lo, hi, more)
                held = time.perf_counter() - began
                self._step("fork:batch")
            time.sleep(min(held, ERASE_PAUSE_MAX_S))
            with self._tx() as c:
                self._require_in(c, conversation_id)  # as above
                self._fork_owned(c, child)
                self._fork_publish(c, copy, bad)
                c.execute("DELETE FROM erase_owed WHERE key = ?", (child,))
        except BaseException:
            self._abandon_fork(child)
            if not self._read("SELECT 1 FROM conversations WHERE id = ?", (conversation_id,)):
                with contextlib.suppress(DriverDatabaseError):  # busy: the next erasure's scrub
                    self.reclaim()  # its parent erased meanwhile: the copy of its text is scrubbed too
            raise
        finally:
            self._fork_unlock(child, lock)
        return child

    def _fork_undecodable(self, conversation_id: str, lo: int, hi: int) -> tuple[list[int], int]:
        """The positions lo..hi of the conversation whose rows fail their model (a fork
        leaves them gaps), and how many rows there are; read and decoded outside any
        write transaction."""
        rows = self._read(self._SELECT + "WHERE m.conversation_id = ? AND m.position BETWEEN ? AND ?",
                          (conversation_id, lo, hi))
        return [int(r[1]) for r in rows if self._decode(r) is None], len(rows)

    @staticmethod
    @contextlib.contextmanager
    def _fork_skipping(c: Connection, bad: Sequence[int]) -> Iterator[None]:
        """Inside a fork's transaction: `temp.fork_skip` holds the positions `bad` (rows
        that fail their model: the copy leaves them gaps) for the statements run in it,
        and is emptied after them."""
        c.execute("CREATE TEMP TABLE IF NOT EXISTS fork_skip(position INTEGER PRIMARY KEY)")
        c.execute("DELETE FROM temp.fork_skip")
        c.executemany("INSERT OR IGNORE INTO temp.fork_skip(position) VALUES (?)", [(p,) for p in bad])
        yield
        c.execute("DELETE FROM temp.fork_skip")

    def _fork_batch(self, c: Connection, f: _ForkCopy, lo: int, hi: int, bad: Sequence[int]) -> None:
        """Inside a fork's transaction: copy the parent's positions lo..hi (but `bad`)
        into the child, each table in one INSERT ... SELECT (ids `base + position`)."""
        with self._fork_skipping(c, bad):
            self._fork_batch_rows(c, f, lo, hi)

    def _fork_batch_rows(self, c: Connection, f: _ForkCopy, lo: int, hi: int) -> None:
        # the table, not this process's cached width, and at each batch: another process
        # may have made it since we opened, or a rebuild dropped it since the last batch
        has_vec = self._has_vec()
        args = (f.child, f.base, f.parent, lo, hi, f.up_to, f.namespace)
        c.execute(
            "INSERT INTO messages(conversation_id, position, id, role, body, session_id, metadata, created_at) "
            "SELECT ?1, position, ?2 + position, role, body, session_id, metadata, created_at "
            "FROM messages WHERE conversation_id = ?3 AND position BETWEEN ?4 AND ?5 "
            "AND position NOT IN (SELECT position FROM temp.fork_skip) ORDER BY position",
            args[:5],
        )
        self._step("fork:messages")
        c.execute(
            "INSERT INTO turns(conversation_id, position, id, role, session_id, tokens, content_hash, created_at, "
            "embedded, intent, load_bearing, priority, label_reason, superseded_by) "
            "SELECT ?1, position, ?2 + position, role, session_id, tokens, content_hash, created_at, "
            # without a vector table the child's turns are embedded by catch-up
            + ("embedded" if has_vec else "0") + ", intent, load_bearing, priority, label_reason, "
            "CASE WHEN superseded_by <= ?6 THEN superseded_by END "
            "FROM turns WHERE conversation_id = ?3 AND position BETWEEN ?4 AND ?5 "
            "AND position NOT IN (SELECT position FROM temp.fork_skip)",
            args[:6],
        )
        # the scope token of the child's (conversation, namespace), from literals: its
        # conversations row is written only when it is published
        c.execute(
            "INSERT INTO messages_fts(rowid, text, scope) SELECT ?2 + m.position, f.text, "
            "(SELECT " + SCOPE_SQL + " FROM (SELECT ?1 AS id, ?7 AS namespace) c) FROM messages m "
            "JOIN messages_fts f ON f.rowid = m.id WHERE m.conversation_id = ?3 AND m.position BETWEEN ?4 AND ?5 "
            "AND m.position NOT IN (SELECT position FROM temp.fork_skip)",
            args,
        )
        self._step("fork:index")
        if has_vec:
            # one statement: vec0 looks each vector up by rowid (the join's inner loop)
            want = int(c.execute(
                "SELECT COUNT(*) FROM turns WHERE conversation_id = ? AND position BETWEEN ? AND ? AND embedded = 1",
                (f.child, lo, hi)).fetchone()[0])
            got = c.execute(
                f"INSERT INTO {VEC_TABLE}(rowid, conversation_id, embedding) "
                f"SELECT ?2 + t.position, ?1, v.embedding FROM turns t CROSS JOIN {VEC_TABLE} v ON v.rowid = t.id "
                "WHERE t.conversation_id = ?3 AND t.position BETWEEN ?4 AND ?5 AND t.embedded = 1 "
                "AND t.position NOT IN (SELECT position FROM temp.fork_skip)",
                args[:5],
            ).rowcount
            if got != want:  # the index drifted (a vector missing): catch-up recomputes those
                have = {int(r[0]) for r in c.execute(
                    f"SELECT rowid FROM {VEC_TABLE} WHERE conversation_id = ? AND rowid BETWEEN ? AND ?",
                    (f.child, f.base + lo, f.base + hi))}
                c.executemany("UPDATE turns SET embedded = 0 WHERE id = ?", [
                    (int(r[0]),) for r in c.execute(
                        "SELECT id FROM turns WHERE conversation_id = ? AND position BETWEEN ? AND ? AND embedded = 1",
                        (f.child, lo, hi)).fetchall() if int(r[0]) not in have])
        self._step("fork:vectors")

    def _fork_publish(self, c: Connection, f: _ForkCopy, bad: Sequence[int]) -> None:
        """Inside a fork's last transaction: bind the child's key to its name (the
        parent still there, the name still free), with the checkpoint, rolling view,
        pins and supersessions that apply at `up_to`; from its commit the child is read."""
        row = c.execute(
            "SELECT namespace, name, (SELECT COALESCE(MAX(position), -1) FROM messages WHERE conversation_id = ?1) "
            "FROM conversations WHERE id = ?1",
            (f.parent,),
        ).fetchone()
        self._fork_name(c, f.parent, row, f.up_to, f.name)  # erased, or the name taken, since it began
        # stored as the column holds it, as before the fork was batched (a row an older version
        # or a hand edit left as text must not make the fork fail)
        last_at = c.execute("SELECT MAX(created_at) FROM messages WHERE conversation_id = ? AND position <= ?",
                            (f.parent, f.up_to)).fetchone()[0]
        c.execute(
            "INSERT INTO conversations(id, name, namespace, parent_id, fork_position, created_at, last_message_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (f.child, f.name, f.namespace, f.parent, f.up_to, f.now, last_at),
        )
        with self._fork_skipping(c, bad):
            self._fork_publish_rows(c, f)

    def _fork_publish_rows(self, c: Connection, f: _ForkCopy) -> None:
        c.execute(
            "INSERT INTO checkpoints(conversation_id, position, summary, metadata, created_at) "
            "SELECT ?, position, summary, metadata, created_at FROM checkpoints "
            "WHERE conversation_id = ? AND position <= ? ORDER BY position DESC, id DESC LIMIT 1",
            (f.child, f.parent, f.up_to),
        )
        # the newest rolling view inside the prefix, as the child's first version: its
        # sentences keep their positions, so what the child's control rows hide stays
        # hidden (a fold alone is one text), and the child's refreshes go on from it
        c.execute(
            "INSERT INTO summaries(conversation_id, kind, key, version, start_position, end_position, body, tokens, "
            "summarizer, created_at) SELECT ?, kind, key, 1, start_position, end_position, body, tokens, "
            "summarizer, created_at FROM summaries WHERE conversation_id = ? AND kind = 'rolling' "
            "AND key = '' AND end_position <= ? ORDER BY version DESC LIMIT 1",
            (f.child, f.parent, f.up_to),
        )
        c.execute(
            "INSERT INTO pins(conversation_id, position, priority, created_at) "
            "SELECT ?, position, priority, created_at FROM pins WHERE conversation_id = ? AND position <= ? "
            "AND position NOT IN (SELECT position FROM temp.fork_skip)",
            (f.child, f.parent, f.up_to),
        )
        c.execute(
            f'INSERT INTO {STATEMENT_TABLE}(conversation_id, position, start, "end", superseded_by) '
            f"SELECT ?, position, start, \"end\", superseded_by FROM {STATEMENT_TABLE} "
            "WHERE conversation_id = ? AND superseded_by <= ? AND position NOT IN (SELECT position FROM temp.fork_skip)",
            (f.child, f.parent, f.up_to),
        )
        self._step("fork:checkpoint")

    @staticmethod
    def _fork_owned(c: Connection, child: str) -> None:
        """Inside a fork's later transaction: its unpublished child is still owed to it
        (a process that found its lock free, wrongly, may have deleted it)."""
        if c.execute("SELECT 1 FROM erase_owed WHERE key = ? AND reason = ?", (child, FORK_OWED_REASON)).fetchone() is None:
            raise StoreUnavailable(child, "the unpublished fork was deleted by another process")

    def _fork_lock_path(self, child: str) -> Path:
        return Path(f"{self.path}-fork-{hashlib.sha256(child.encode()).hexdigest()[:FORK_LOCK_HEX]}{FORK_LOCK_SUFFIX}")

    def _fork_lock(self, child: str) -> int | None:
        """An exclusive file lock held while this process copies the unpublished child
        `child`, taken before its `erase_owed` record commits: the kernel drops it when
        the process dies, so `_fork_abandoned` tells a fork in progress from one killed.
        None where there are no file locks (then a record is taken as abandoned only
        FORK_ABANDONED_S after it was made)."""
        if fcntl is None:
            return None
        fd = self._try_fork_lock(child)
        if fd is None:  # a new key, so nobody else should hold it: refuse rather than copy unlocked
            raise StoreUnavailable(child, "another process holds the unpublished fork's lock")
        return fd

    def _try_fork_lock(self, child: str) -> int | None:
        """The exclusive file lock on the unpublished child `child`, taken without waiting:
        its descriptor, or None while another process holds it. Only with file locks."""
        return _try_file_lock(self._fork_lock_path(child))

    def _fork_unlock(self, child: str, fd: int | None) -> None:
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.unlink(self._fork_lock_path(child))
        os.close(fd)

    def _fork_abandoned(self, child: str, at: float) -> int | None:
        """Whether the unpublished fork `child` was abandoned (its process died): its
        file lock is free; returns the lock's descriptor, held, for `_fork_unlock` after
        its rows are deleted (-1 where there are no file locks), or None while its
        process still copies it."""
        if fcntl is None:
            return -1 if time.time() - at > FORK_ABANDONED_S else None
        return self._try_fork_lock(child)  # None while held: the fork is being copied

    def _abandon_fork(self, child: str) -> None:
        """Delete an unpublished fork's rows and owed record (`_purge_owed`), and its
        key: no reader ever met it, so a retry may be given the same key."""
        try:
            self._purge_owed(child, ERASE_BATCH_MESSAGES, terms=False)
            with self._tx() as c:
                if c.execute("SELECT 1 FROM conversations WHERE id = ?", (child,)).fetchone() is None:
                    c.execute("DELETE FROM conversation_keys WHERE key = ?", (child,))
        except DriverDatabaseError:  # busy: still owed, the next open or erasure deletes it
            log.warning("could not delete an unfinished fork's rows now; the next open retries", exc_info=True)

    def files_bytes(self) -> int:
        total = 0
        for suffix in ("", "-wal", "-shm"):
            p = Path(str(self.path) + suffix)
            if p.exists():
                total += p.stat().st_size
        return total

    def prune(self, older_than: float, *, namespace: str | None = None, all_namespaces: bool = False,
              on_erased: Callable[[Sequence[str]], None] | None = None) -> ErasureReport:
        """Delete whole conversations of exactly `namespace` idle since before
        `older_than` (unix seconds; `PRUNE_IDLE_SQL`: a fork's creation is activity), with
        every derived row, in transactions of whole conversations (`_erase`, batched);
        then hand the space back. Every namespace only with `all_namespaces=True`, never
        by omission. Forks keep their copies. Each batch takes a conversation only if it
        is still idle in that batch's transaction (`_erase`'s `still`): one written to
        after the prune began, between its batches, is kept whole, and its messages are
        not counted in the report or any tombstone."""
        where, params = self._prune_where(older_than, namespace, all_namespaces)
        return self._erase(f"SELECT id FROM conversations WHERE {where}", params, reason="prune",
                           on_erased=on_erased, still=(where, params))

    def prune_preview(self, older_than: float, *, namespace: str | None = None,
                      all_namespaces: bool = False) -> ErasureReport:
        """What `prune` with these arguments would erase now, erasing nothing (its
        conversations, messages and keys, in ERASURE_ORDER; no tombstone, no byte
        reclaimed): `tiermem prune --dry-run`. A snapshot: a conversation written to
        after it is no longer idle, and a prune run later keeps it (and takes any that
        became idle meanwhile)."""
        return self._prune_preview(*self._prune_where(older_than, namespace, all_namespaces))

    @staticmethod
    def _prune_where(older_than: float, namespace: str | None, all_namespaces: bool) -> tuple[str, tuple[Any, ...]]:
        """The conversations `prune` takes, as a condition over `conversations` columns
        (unqualified) and its parameters."""
        if all_namespaces == (namespace is not None):
            raise ValidationError("namespace", "give a namespace, or all_namespaces=True (not both)")
        where = PRUNE_IDLE_SQL.format(cutoff="?")
        if namespace is None:
            return where, (older_than, older_than)
        return f"{where} AND namespace = ?", (older_than, older_than, namespace)

    def delete_conversation(self, conversation_id: str, *,
                            on_erased: Callable[[Sequence[str]], None] | None = None) -> ErasureReport:
        """Erase one conversation (by key) on request: every row of it, derived or not,
        a tombstone left, the space handed back; in one transaction, or (larger than a
        batch) detached in one and its rows deleted in batches after (`_erase`)."""
        report = self._erase("SELECT id FROM conversations WHERE id = ?", (conversation_id,), reason="erase",
                             on_erased=on_erased)
        if not report.conversations:
            raise ConversationNotFound(key_name(conversation_id))
        return report

    def delete_namespace(self, namespace: str, *, on_erased: Callable[[Sequence[str]], None] | None = None
                         ) -> ErasureReport:
        """Erase every conversation of `namespace` and of the namespaces below it
        (`acme` takes `acme/alice`, never `acme2`)."""
        # a range of the namespace index ('/' + 1 is '0'), not substr(), which scans every
        # conversation of every tenant
        return self._erase(
            "SELECT id FROM conversations WHERE namespace = ?1 OR (namespace >= ?1 || '/' AND namespace < ?1 || '0')",
            (namespace,), reason="erase", on_erased=on_erased)

    def _erase(self, select_keys: str, params: Sequence[Any], *, reason: str,
               on_erased: Callable[[Sequence[str]], None] | None = None,
               still: tuple[str, Sequence[Any]] | None = None) -> ErasureReport:
        """The one deletion path of every retention operation (DESIGN invariant 3).

        In transactions of whole conversations sized to hold the store's lock about
        `ERASE_BATCH_TARGET_S` each, with a pause between them, so erasing a large tenant
        does not stall every other tenant of the process (and other processes' writes)
        for its whole length: one transaction held it 6.5 s for a 3,000-turn namespace in
        a 33k-turn store. A conversation larger than its batch (one of 20,000 turns held
        it 7.8 s) is detached instead: its tombstone written and its metadata row
        deleted in one short transaction, from which on no read reaches it and its id is
        free, then its rows deleted in batches (`_purge_owed`). A process killed meanwhile
        leaves the rest of what it was erasing, each conversation whole, gone, or
        detached with its rows owed (the next open or erasure deletes them); a retry
        erases the rest. One scrub at the end. `on_erased(keys)` runs after each commit
        that erased or detached conversations with their keys (and once more for a
        detached one when its rows are gone), so a caller drops its copies of them (Redis,
        caches) batch by batch, also when a later batch fails. What follows a commit for
        its keys never fails the erasure: `on_erased` failing, a detached conversation's
        rows or the scrub busy (another process's write lock past busy_timeout_ms) are
        left owed (recorded with the commit: redis_purge, erase_owed, the scrub's marker;
        `scrubbed` False) and done later.

        `still` (a prune's: its condition over `conversations` columns and its
        parameters): each batch takes a conversation only where it still holds, checked
        in the transaction that erases it. The keys are read once, before the batches,
        and a batch pauses before the next: a conversation appended to meanwhile, 201s
        acknowledged, was erased with those messages, counted in its tombstone, and began
        again at position 0 (review r_tenant, 2026-12-07). An erasure on request takes
        what it listed, written to or not."""
        report = ErasureReport(bytes_before=self.files_bytes())
        now = time.time()
        # rows of conversations another erasure detached and could not finish: their
        # terms are not known here, so the scrub merges the index whole
        erased_terms: list[bytes] | None = None if self.finish_owed_erasures() else []
        limit = ERASE_BATCH_MESSAGES
        rows_owed = False  # a detached conversation's rows left to the next open or erasure
        # the conversations there are now, erased in batches; one created in the
        # namespace meanwhile stays (as one created after a single transaction would), so a
        # writer that keeps creating cannot keep the erasure going. In ERASURE_ORDER, so
        # that the report, batch after batch, lists them as PostgreSQL's one transaction
        # does (which batch takes which conversation changes nothing else)
        pending = collections.deque(r[0] for r in self._read(f"{select_keys} ORDER BY {ERASURE_ORDER}", params))
        while True:
            began = time.perf_counter()
            detached = None
            with self._tx() as c:
                keys, size = self._erase_batch(c, pending, limit, still)
                last = not pending
                if not keys:
                    break
                if size > limit:  # one conversation larger than a batch
                    detached = keys[0]
                    self._detach(c, detached, report, reason, now)
                else:
                    terms = self._erase_keys(c, keys, report, reason, now, terms=erased_terms is not None)
                    if erased_terms is not None:
                        erased_terms += terms
                forks = self._erase_forks_of(c, keys, reason)
            held = time.perf_counter() - began
            # committed: what follows for these keys may not raise, or the caller hears
            # "nothing was written" for conversations that are gone (a retry finds none,
            # the erasure hooks never run); what it leaves undone stays owed, recorded
            # with the commit (redis_purge, erase_owed, the scrub's marker)
            self._step("erase:committed")
            self._after_commit(on_erased, keys)
            if detached is not None:
                self._step("erase:detached")
                time.sleep(min(held, ERASE_PAUSE_MAX_S))
                terms, limit, owed = self._purge_owed_committed(
                    detached, limit, terms=erased_terms is not None,
                    busy_warning="erasure: could not delete a detached conversation's rows now; "
                                 "the next open or erasure deletes them and scrubs")
                rows_owed |= owed
                if not owed:
                    if erased_terms is not None:
                        erased_terms += terms
                    self._after_commit(on_erased, keys)  # a reader in flight may have cached its rows meanwhile
            for fork in forks:  # unfinished copies of these conversations: deleted as a detached one's rows
                terms, _, owed = self._purge_owed_committed(
                    fork, ERASE_BATCH_MESSAGES, terms=erased_terms is not None,
                    busy_warning="erasure: could not delete an unfinished fork's copy now; "
                                 "the next open or erasure deletes it and scrubs")
                rows_owed |= owed
                if erased_terms is not None:  # [] when its rows stay owed
                    erased_terms += terms
            self._step("erase:batch")
            if last:  # nothing left to erase: no pause, no further look
                break
            if detached is None:
                limit = self._next_batch(limit, held)
            time.sleep(min(held, ERASE_PAUSE_MAX_S))
        if not report.keys:
            report.bytes_after = report.bytes_before  # nothing erased, nothing reclaimed
            if erased_terms is None:  # but owed rows were deleted: their scrub
                self.reclaim()
            return report
        try:
            # rows still owed are in the file: no scrub now, its marker stays for whoever deletes them
            report.wal_truncated = report.scrubbed = not rows_owed and self.reclaim(erased_terms=erased_terms)
        except DriverDatabaseError as exc:  # busy: the scrub's marker stays, the next open or erasure scrubs
            report.wal_truncated = report.scrubbed = False
            log.warning("erasure: the rows are deleted but not scrubbed from the file (%s); "
                        "the next open of the store or the next erasure scrubs them", str(exc).strip())
        if report.scrubbed and (unknown := self._forks_of_unknown_parent()):
            report.scrubbed = False
            report.not_rewritten = (f"{unknown} unfinished fork(s) recorded without their parent (by a tiermem "
                                    "older than this store's schema) may hold a copy of erased text: it is deleted "
                                    "when the fork fails, or when an open or erasure after its process ends does")
        report.bytes_after = self.files_bytes()
        gone = set(report.keys)
        self._salvaged_rows.forget(gone)  # their bad rows no longer exist either
        with self._scope_sizes_lock:  # sizes of erased text: no copy of it stays in the process
            for key in gone:
                self._scope_sizes.pop(key, None)
        return report

    @staticmethod
    def _erase_forks_of(c: Connection, keys: Sequence[str], reason: str) -> list[str]:
        """Inside an erasure's transaction: the unpublished forks (`fork`) copying one of
        the conversations `keys`, turned from forks owed to their process into rows owed
        to erasure (reason `reason`), as a detached conversation's: the caller deletes
        them after the commit (`_purge_owed`), or the next open or erasure does. Their
        copy holds the erased text, and the fork would only find out at its next batch
        (a process stopped, or killed, never): its ownership check fails from the commit
        on (`_fork_owned`), and the fork raises ConversationNotFound."""
        forks: list[str] = []
        for i in range(0, len(keys), MAX_SQL_PARAMS):
            chunk = list(keys[i:i + MAX_SQL_PARAMS])
            forks += [str(r[0]) for r in c.execute(
                f"UPDATE erase_owed SET reason = ? WHERE reason = ? AND {FORK_PARENT_COLUMN} IN "
                f"({','.join('?' * len(chunk))}) RETURNING key", (reason, FORK_OWED_REASON, *chunk))]
        return sorted(forks)

    def _forks_of_unknown_parent(self) -> int:
        """Unpublished forks whose record names no parent (made before FORK_PARENT_COLUMN,
        by an older tiermem still running): an erasure cannot tell whether they copy what
        it erased. Those whose process died were deleted at the erasure's start."""
        return int(self._read(f"SELECT COUNT(*) FROM erase_owed WHERE reason = ? AND {FORK_PARENT_COLUMN} IS NULL",
                              (FORK_OWED_REASON,))[0][0])

    @staticmethod
    def _after_commit(on_erased: Callable[[Sequence[str]], None] | None, keys: Sequence[str]) -> None:
        """The caller's `on_erased(keys)` after a commit of an erasure, which its failure
        must not fail: what the caller could not do stays owed in its own records."""
        if on_erased is None:
            return
        try:
            on_erased(keys)
        except Exception:
            log.exception("erasure: committed, but dropping the erased keys' copies failed")

    @staticmethod
    def _next_batch(limit: int, held: float) -> int:
        """The next batch's messages, sized to hold the lock about ERASE_BATCH_TARGET_S
        (a message costs 0.3-3 ms, more in a large index). After it the lock is free, but
        this thread would take it again before a waiter woke (threads) or polled (other
        processes' busy handlers): the caller waits as long as the batch held it."""
        return max(ERASE_BATCH_MIN_MESSAGES, min(ERASE_BATCH_MAX_MESSAGES,
                                                 int(limit * ERASE_BATCH_TARGET_S / max(held, 1e-3))))

    def _erase_batch(self, c: Connection, pending: collections.deque[str], limit: int,
                     still: tuple[str, Sequence[Any]] | None = None) -> tuple[list[str], int]:
        """Inside a transaction: take the next keys of an erasure off `pending`, up to
        `limit` messages together (at least one conversation, which may hold more), and
        their messages; keys already gone (an erasure beside this one), or where the
        condition `still` (over `conversations` columns, with its parameters) no longer
        holds (a prune's conversation written to since it was listed), are dropped."""
        where, params = ("", ()) if still is None else (f" AND ({still[0]})", tuple(still[1]))
        out: list[str] = []
        total = 0
        while pending:
            # the condition on the row itself (not `id IN (<the prune's SELECT>)`, which
            # would list every idle conversation again for each key); its unqualified
            # columns are the conversation's (the messages subquery is not in scope here)
            row = c.execute("SELECT (SELECT COALESCE(MAX(position) + 1, 0) FROM messages m "
                            f"WHERE m.conversation_id = c.id) FROM conversations c WHERE c.id = ?{where}",
                            (pending[0], *params)).fetchone()
            if row is None:
                pending.popleft()
                continue
            if out and total + int(row[0]) > limit:
                break
            out.append(pending.popleft())
            total += int(row[0])
        return out, total

    def _erase_keys(self, c: Connection, keys: Sequence[str], report: ErasureReport, reason: str, now: float,
                    *, terms: bool) -> list[bytes]:
        """Inside a transaction: erase the conversations `keys`, every row of them, derived
        or not, with their tombstones and what is owed after the commit; add them to
        `report`. Returns their FTS terms (for the scrub) when `terms`, else []."""
        self._tombstones(c, keys, report, reason, now)
        # the erased messages' ids, in rowid order (what FTS5 and vec0 delete fastest by)
        ids = [(r[0],) for r in c.execute(
            "SELECT m.id FROM temp.erase_keys k CROSS JOIN messages m ON m.conversation_id = k.id ORDER BY m.id"
        ).fetchall()]
        erased_terms = self._delete_messages(c, ids, terms=terms)
        for table in CONVERSATION_TABLES:
            c.execute(f"DELETE FROM {table} WHERE conversation_id IN (SELECT id FROM temp.erase_keys)")
        c.execute("DELETE FROM conversations WHERE id IN (SELECT id FROM temp.erase_keys)")
        c.execute("DELETE FROM temp.erase_keys")
        self._forget_copied(c, keys)
        self._owe_after_commit(c, keys, now)
        return erased_terms

    def _tombstones(self, c: Connection, keys: Sequence[str], report: ErasureReport, reason: str,
                    now: float) -> None:
        """Inside an erasure's transaction: put `keys` in temp.erase_keys, write their
        tombstones (counts, no content) and add them to `report`."""
        c.execute("CREATE TEMP TABLE IF NOT EXISTS erase_keys(id TEXT PRIMARY KEY)")
        c.execute("DELETE FROM temp.erase_keys")
        c.executemany("INSERT INTO temp.erase_keys(id) VALUES (?)", [(k,) for k in keys])
        # the newest created_at among its messages (TOMBSTONE_NEWEST_COLUMN): last_message_at,
        # which every append and fork keeps at their MAX, read in O(1) where a detached
        # conversation's MAX over its rows would read them all inside the short detaching
        # transaction; as a number (a row an older release left as text must not make it fail)
        rows = c.execute(
            "SELECT c.id, c.namespace, c.name, c.created_at, "
            "(SELECT COUNT(*) FROM messages m WHERE m.conversation_id = c.id), "
            "(SELECT COUNT(*) FROM summaries s WHERE s.conversation_id = c.id), "
            "(SELECT COUNT(*) FROM checkpoints k WHERE k.conversation_id = c.id), "
            "CAST(c.last_message_at AS REAL) "
            f"FROM conversations c WHERE c.id IN (SELECT id FROM temp.erase_keys) ORDER BY {ERASURE_ORDER}"
        ).fetchall()
        for key, ns, name, created, n_msgs, n_sum, n_cp, newest in rows:
            c.execute(
                "INSERT INTO tombstones(key, namespace, name, reason, messages, summaries, checkpoints, "
                f"created_at, deleted_at, {TOMBSTONE_NEWEST_COLUMN}) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (key, ns, name, reason, n_msgs, n_sum, n_cp, created, now, newest))
            report.tombstones.append({"id": name, "namespace": ns, "reason": reason, "messages": n_msgs,
                                      "summaries": n_sum, "checkpoints": n_cp, "created_at": created,
                                      "deleted_at": now})
            report.keys.append(key)
            report.conversation_ids.append(name)
            report.namespaces.append(ns)
            report.messages += n_msgs
        report.conversations += len(rows)

    @staticmethod
    def _forget_copied(c: Connection, keys: Sequence[str]) -> None:
        # migrate-store's record of its copy of each (COPIED_DIGEST_PREFIX): it names the
        # conversation and digests its content, so it goes with the conversation's rows
        c.executemany("DELETE FROM meta WHERE key = ?", [(COPIED_DIGEST_PREFIX + k,) for k in keys])

    @staticmethod
    def _owe_after_commit(c: Connection, keys: Sequence[str], now: float) -> None:
        # owed after the commit, recorded with it: a process killed before they are
        # done leaves them to the next open (the scrub) and the next Memory with a hot
        # tier (the Redis keys), never to nobody
        c.executemany("INSERT OR IGNORE INTO redis_purge(key, at) VALUES (?, ?)", [(k, now) for k in keys])
        c.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, '1')", (SCRUB_PENDING_KEY,))

    def _delete_messages(self, c: Connection, ids: Sequence[tuple[int]], *, terms: bool, to_come: int = 0
                         ) -> list[bytes]:
        """Inside an erasure's transaction: delete the messages `ids` (in rowid order)
        with their turn, FTS and vector rows; returns their FTS terms (for the scrub) when
        `terms`, else [] (a scrub that merges the whole index needs none: reading them
        costs ~55 ms per 5,000 rows of the batch's lock). `to_come` as for `_delete_indexed`."""
        c.execute("CREATE TEMP TABLE IF NOT EXISTS erase_ids(id INTEGER PRIMARY KEY)")
        c.execute("DELETE FROM temp.erase_ids")
        c.executemany("INSERT INTO temp.erase_ids(id) VALUES (?)", ids)
        erased = self._erased_terms(c) if terms else []
        self._delete_indexed(c, ids, to_come=to_come)
        c.execute("DELETE FROM turns WHERE id IN (SELECT id FROM temp.erase_ids)")
        c.execute("INSERT INTO prune_guard(armed) VALUES (1)")
        c.execute("DELETE FROM messages WHERE id IN (SELECT id FROM temp.erase_ids)")
        c.execute("DELETE FROM prune_guard")
        c.execute("DELETE FROM temp.erase_ids")
        return erased

    def _delete_indexed(self, c: Connection, ids: Sequence[tuple[int]], *, to_come: int = 0) -> None:
        """Inside an erasure's transaction: the FTS and vector rows of the messages `ids`
        (in rowid order); `to_come`: rows a detached conversation's later batches will
        delete (they weigh in the choice to merge the index first, which then is capped
        at ERASE_MERGE_MAX_S)."""
        self._delete_fts_rows(c, ids, to_come=to_come, merge_max_s=ERASE_MERGE_MAX_S if to_come else None)
        # the table, not this process's cached width: another process may have made
        # it since we opened (skipping it would orphan vectors), or it may be lost.
        # By rowid, one statement each: vec0 cannot look up `rowid IN (SELECT ...)`
        # and scanned the whole table for it (48-91 ms at 60k turns, against 2 ms)
        if self._has_vec():
            c.executemany(f"DELETE FROM {VEC_TABLE} WHERE rowid = ?", ids)

    def _detach(self, c: Connection, key: str, report: ErasureReport, reason: str, now: float) -> None:
        """Inside an erasure's transaction: erase a conversation too large for one
        batch as far as every reader can tell. Its tombstone is written and its metadata
        row deleted (every read resolves a key or a namespace through that row, so none
        reaches the conversation from the commit on, and its id is free for a new
        incarnation under a new key); its rows are recorded as owed (`erase_owed`) and
        deleted in batches after the commit (`_purge_owed`). Its idempotency keys go
        here, not with the last batch: they are read by the old key directly
        (`idempotency_record`), and they are few and small (one per keyed append)."""
        self._tombstones(c, [key], report, reason, now)
        c.execute("DELETE FROM temp.erase_keys")
        c.execute("DELETE FROM idempotency_keys WHERE conversation_id = ?", (key,))
        c.execute("DELETE FROM conversations WHERE id = ?", (key,))
        self._forget_copied(c, [key])
        c.execute("INSERT OR REPLACE INTO erase_owed(key, reason, at) VALUES (?, ?, ?)", (key, reason, now))
        self._owe_after_commit(c, [key], now)

    def _purge_owed_committed(self, key: str, limit: int, *, terms: bool,
                              busy_warning: str) -> tuple[list[bytes], int, bool]:
        """`_purge_owed(key, limit)` after an erasure's commit, where nothing may raise
        (the caller would hear "nothing was written" for conversations that are gone):
        busy (another process's write lock past busy_timeout_ms), the rows stay owed, the
        next open or erasure deletes them and scrubs, and `busy_warning` is logged.
        Returns the FTS terms of the rows deleted ([] when busy or not `terms`), the last
        batch size (`limit` when busy) and whether the rows stay owed."""
        try:
            erased, limit = self._purge_owed(key, limit, terms=terms)
        except DriverDatabaseError:
            log.warning(busy_warning, exc_info=True)
            return [], limit, True
        return erased, limit, False

    def _purge_owed(self, key: str, limit: int, *, terms: bool) -> tuple[list[bytes], int]:
        """Delete the rows of a detached conversation (`_detach`), in batches of about
        `limit` messages, each with their derived rows, sized and paused as an erasure's
        batches are; the last one takes the conversation's other rows and its
        `erase_owed` record. Returns the FTS terms of the rows deleted (for the scrub;
        [] unless `terms`) and the last batch size. Another thread or process may be deleting the same
        rows: each batch deletes what is there when it runs. Nothing owed (never, or finished
        by someone else) takes no write transaction: the read decides as the transaction's
        check would at that moment, and a record written after it is its writer's to purge
        (an erasure's, a fork's) or the next `finish_owed_erasures`'s."""
        erased: list[bytes] = []
        if not self._read("SELECT 1 FROM erase_owed WHERE key = ?", (key,)):
            return erased, limit  # behind another writer, waiting for its lock would be for nothing
        while True:
            began = time.perf_counter()
            with self._tx() as c:
                if c.execute("SELECT 1 FROM erase_owed WHERE key = ?", (key,)).fetchone() is None:
                    return erased, limit  # finished by someone else
                left = int(c.execute("SELECT COUNT(*) FROM messages WHERE conversation_id = ?", (key,)).fetchone()[0])
                ids = [(int(r[0]),) for r in c.execute(
                    "SELECT id FROM messages WHERE conversation_id = ? ORDER BY id LIMIT ?", (key, limit))]
                erased += self._delete_messages(c, ids, terms=terms, to_come=left - len(ids))
                done = len(ids) < limit
                if done:
                    for table in CONVERSATION_TABLES:
                        c.execute(f"DELETE FROM {table} WHERE conversation_id = ?", (key,))
                    c.execute("DELETE FROM erase_owed WHERE key = ?", (key,))
            held = time.perf_counter() - began
            self._step("erase:purge")
            if done:
                return erased, limit
            limit = self._next_batch(limit, held)
            time.sleep(min(held, ERASE_PAUSE_MAX_S))

    def finish_owed_erasures(self) -> int:
        """Delete the rows of conversations an erasure detached and did not finish (a
        process killed, a batch that failed), and of forks whose process died before
        publishing them (`fork`; one still being copied is left): at open and before
        every erasure. Returns how many it finished (their FTS terms are not known: the
        caller's scrub merges the index whole)."""
        if self.read_only:
            return 0
        done = 0
        for key, reason, at in self._read("SELECT key, reason, at FROM erase_owed ORDER BY at, key"):
            if reason == FORK_OWED_REASON:  # an unpublished fork: only one whose process died
                lock = self._fork_abandoned(key, float(at))
                if lock is None:
                    continue
                try:
                    self._abandon_fork(key)
                finally:
                    self._fork_unlock(key, lock if lock >= 0 else None)
            else:
                self._purge_owed(key, ERASE_BATCH_MESSAGES, terms=False)
            done += 1
        self._sweep_fork_locks()
        return done

    def _sweep_fork_locks(self) -> int:
        """Delete the lock files (`_fork_lock_path`) no live process holds: those of forks
        killed in their first transaction, after the lock was taken and before their
        `erase_owed` record committed (a kill then rolls back everything but the file,
        which nothing else would ever delete: one empty file per killed fork, forever).
        A fork in progress holds its lock, so its file is left; one that opened the file
        and had not locked it yet finds it unlinked once locked and takes a new one
        (`_try_file_lock`). Returns how many it deleted. Only with file locks."""
        if fcntl is None:
            return 0
        prefix = f"{self.path.name}-fork-"
        swept = 0
        try:
            names = list(self.path.parent.iterdir())
        except OSError:  # a folder this process may not list: the files wait for one that may
            log.warning("could not look for the lock files of killed forks", exc_info=True)
            return 0
        for path in names:
            digits = path.name[len(prefix):-len(FORK_LOCK_SUFFIX)]
            if not (path.name.startswith(prefix) and path.name.endswith(FORK_LOCK_SUFFIX)
                    and len(digits) == FORK_LOCK_HEX and all(ch in string.hexdigits for ch in digits)):
                continue
            try:
                fd = _try_file_lock(path)
            except OSError:  # deleted meanwhile (its fork done, another sweep), or not ours to open
                continue
            if fd is None:  # held: a fork in progress
                continue
            try:
                path.unlink(missing_ok=True)
            finally:
                os.close(fd)
            swept += 1
        if swept:
            log.info("deleted %d lock file(s) of forks whose process died before recording them", swept)
        return swept

    def _delete_fts_rows(self, c: Connection, ids: Sequence[tuple[int]], *, to_come: int = 0,
                         merge_max_s: float | None = None) -> None:
        """Inside an erasure's transaction: secure-delete the FTS rows `ids` (in rowid
        order), first merging the index whole when that makes it cheaper.

        'secure-delete' removes a row's entries from every segment that holds its terms:
        little for rows written one append at a time (~0.01 ms a row), but ~1.6-2.5 ms a
        row for rows written in batches (an import, `append_many` of a history: many
        segments with long doclists, each delete rewriting their pages): 4.7-7.3 s for a
        namespace of 3,000 such turns, every tenant of the process waiting on the store's
        lock. On one merged segment the same deletes cost ~0.13 ms a row, and the merge
        ('optimize') ~7 us per indexed row. So a sample of the rows is deleted and timed
        (FTS5 keeps deletes pending until a flush, which writing a setting forces), and
        when the rest (with `to_come` rows of later batches) would cost more than a
        merge, the index is merged first, if the merge is estimated to take at most
        `merge_max_s` (None: any).
        (Deleting plainly and merging after, which would be cheaper still, is not done:
        the merge left erased terms inside a live leaf of the merged segment.)"""
        # in rowid order: FTS5 flushes its pending deletes whenever a rowid is lower than
        # the one before, and each flush walks the segments again (3x the time, measured)
        sample, rest = ids[:FTS_SECURE_DELETE_SAMPLE_ROWS], ids[FTS_SECURE_DELETE_SAMPLE_ROWS:]
        start = time.perf_counter()
        c.executemany("DELETE FROM messages_fts WHERE rowid = ?", sample)
        c.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('secure-delete', 1)")  # flushes them
        per_row_s = (time.perf_counter() - start) / max(1, len(sample))
        if not rest:
            return
        indexed = int(c.execute("SELECT COALESCE(MAX(id), 0) FROM messages").fetchone()[0])  # an upper bound
        merge_s = indexed * FTS_MERGE_S_PER_ROW
        if per_row_s * (len(rest) + to_come) > merge_s and (merge_max_s is None or merge_s <= merge_max_s) and c.execute(
                "SELECT COUNT(DISTINCT segid) > 1 FROM messages_fts_idx").fetchone()[0]:
            # (one segment already: a merge would cost without making the deletes cheaper)
            c.execute("INSERT INTO messages_fts(messages_fts) VALUES ('optimize')")
        c.executemany("DELETE FROM messages_fts WHERE rowid = ?", rest)

    def _erased_terms(self, c: Connection) -> list[bytes]:
        """Inside an erasure's transaction, before its FTS rows go: the FTS terms of the
        messages whose ids are in temp.erase_ids (UTF-8), tokenized by a scratch FTS5 table
        in memory (temp_store) with the index's tokenizer. Cost follows the erased text,
        not the database."""
        c.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.erase_fts USING fts5(text, scope, "
                  f"tokenize='{FTS_TOKENIZE}')")
        c.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.erase_fts_terms USING fts5vocab(temp, erase_fts, row)")
        c.execute("DELETE FROM temp.erase_fts")
        # CROSS JOIN: the ids drive (else the planner, knowing no sizes, may scan messages)
        c.execute("INSERT INTO temp.erase_fts(text, scope) SELECT f.text, f.scope FROM erase_ids "
                  "CROSS JOIN messages_fts f ON f.rowid = erase_ids.id")  # (the temp table)
        terms = [str(r[0]).encode() for r in c.execute("SELECT term FROM temp.erase_fts_terms")]
        c.execute("DELETE FROM temp.erase_fts")
        return terms

    def _fts_keys_leak(self, erased_terms: Sequence[bytes]) -> bool:
        """Whether the FTS index may still hold a part of an erased term. With
        'secure-delete' (m017) a delete removes the row's entries from the segments'
        pages, but not the segment index's page keys (messages_fts_idx: each page's first
        term, cut to the bytes that tell it from the page before), which only a merge
        rewrites. A key leaks when it is a prefix of an erased term and of no live term
        (a key that live text also starts with tells nothing of the erased). Without
        'secure-delete' (set by a migration, but checked) the erased entries themselves
        stay until a merge: True."""
        c = self._open()
        if not c.execute("SELECT 1 FROM messages_fts_config WHERE k = 'secure-delete' AND v = 1").fetchone():
            return True
        prefixes = {t[:i] for t in erased_terms for i in range(1, len(t) + 1)}
        c.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.messages_fts_terms USING fts5vocab(main, messages_fts, row)")
        for (key,) in c.execute("SELECT term FROM messages_fts_idx").fetchall():
            key = bytes(key)
            # byte 0 names the index ('0': the main one; this table has no prefix indexes)
            if key[:1] != b"0" or key[1:] not in prefixes:
                continue
            try:
                start = key[1:].decode()
            except UnicodeDecodeError:  # a key cut inside a character: merge, do not guess
                return True
            live = c.execute("SELECT term FROM temp.messages_fts_terms WHERE term >= ? ORDER BY term LIMIT 1",
                             (start,)).fetchone()
            if live is None or not str(live[0]).encode().startswith(key[1:]):
                return True
        return False

    def reclaim(self, *, erased_terms: Sequence[bytes] | None = None, at_open: bool = False) -> bool:
        """Make deleted rows unrecoverable from the files and hand space back, after an
        erasure whose FTS terms were `erased_terms` (None: not known, as for an erasure
        whose process died before its scrub; then the FTS index is merged whole). FTS5 with
        'secure-delete' removed the rows' entries at the delete; the index is merged
        ('optimize', which grows with every tenant's text) only when a page key of its
        segment index still spells part of an erased term (`_fts_keys_leak`).
        `secure_delete` (set on every connection) has zeroed freed content; freed pages
        go back to the file system (auto_vacuum=INCREMENTAL, set when the file was
        made); the WAL, which still holds the old page images, is checkpointed and
        truncated to zero bytes. Returns whether it was (a reader can hold it: see
        `wal_truncated`). The writes are one transaction (`_tx`) and the checkpoint is
        polled (`truncate_wal`): neither waits for another process holding the store's
        lock, each at most busy_timeout_ms. A store written before `secure_delete` is
        rewritten once (`_rewrite_residue`; `at_open`: by an open or a running process's
        look, which leave a large file to an erasure); False while that is owed."""
        with self._tx() as c:
            if erased_terms is None or self._fts_keys_leak(erased_terms):
                c.execute("INSERT INTO messages_fts(messages_fts) VALUES ('optimize')")
            # each step of this pragma frees one page: without fetchall() it frees one
            c.execute("PRAGMA incremental_vacuum").fetchall()
            residue = c.execute("SELECT 1 FROM meta WHERE key = ?", (RESIDUE_KEY,)).fetchone() is not None
            if not residue:
                c.execute("DELETE FROM meta WHERE key = ?", (SCRUB_PENDING_KEY,))
        rewritten = not residue or self._rewrite_residue(at_open=at_open)
        return self._truncate_after_scrub() and rewritten

    def _truncate_after_scrub(self) -> bool:
        if not self.truncate_wal():
            # another connection's read transaction holds old frames: this store's next
            # write (or its close) truncates it once the reader is done
            self._wal_scrub_pending = True
            log.warning("erasure: the WAL could not be truncated now (a reader holds it); "
                        "it is truncated at this store's next write or close")
        else:
            self._wal_scrub_pending = False
        return not self._wal_scrub_pending

    def _rewrite_residue(self, *, at_open: bool) -> bool:
        """The rewrite a store written before `secure_delete` owes (`_vacuum_residue`), when
        it can be done here; True when done. Not done (False; RESIDUE_KEY stays, so an
        erasure reports `scrubbed` False): the file larger than REWRITE_AT_OPEN_MAX_BYTES
        `at_open` (an open, or a running process's look: not an erasure, which was asked
        for), too little free space for its WAL, or a failure other than busy recorded less
        than REWRITE_RETRY_AFTER_S ago. One warning per process names why and what does it.
        A failed rewrite's WAL is truncated before anything else (a full disk is handed
        back); a busy one raises, as before (the next open or erasure retries)."""
        self._step("reclaim:residue")
        size = self._file_bytes()
        free = shutil.disk_usage(self.path.parent).free
        reason = self._residue_refusal(size, free, at_open=at_open)
        if reason is None:
            try:
                self._vacuum_residue()
                return True
            except DriverDatabaseError as exc:
                if _is_busy(exc):
                    with contextlib.suppress(DriverDatabaseError):
                        self.truncate_wal(wait=False)
                    raise
                with contextlib.suppress(DriverDatabaseError):  # hand the disk back first
                    self.truncate_wal(wait=False)
                free = shutil.disk_usage(self.path.parent).free
                with contextlib.suppress(DriverDatabaseError), self._tx() as c:
                    c.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                              (RESIDUE_FAILED_KEY, json.dumps({"at": time.time(), "free": free})))
                reason = f"the rewrite failed: {exc}; not tried again for {REWRITE_RETRY_AFTER_S / 3600:g} h " \
                         "unless the free space grows by the file's size"
        # owed to the rewrite alone now (RESIDUE_KEY): a running process's look at owed
        # scrubs (`_scrub_owed`) does not come back to it, nor merge the index again
        with contextlib.suppress(DriverDatabaseError), self._tx() as c:
            c.execute("DELETE FROM meta WHERE key = ?", (SCRUB_PENDING_KEY,))
        if not self._residue_warned:
            self._residue_warned = True
            log.warning(
                "this store (%s, %.1f MiB) was written by a tiermem before schema 13 (before secure_delete) "
                "and may still hold text deleted then; it is not rewritten now: %s. Until it is, erasures "
                "report scrubbed: false. An erasure (`tiermem delete`, `tiermem prune`, "
                "Memory.delete_conversation) rewrites it (VACUUM, holding the write lock meanwhile) when "
                "the disk has %d MiB free (the file's size + %d MiB); %d MiB are free now",
                self.path, size / 2**20, reason, (size + REWRITE_FREE_MARGIN_BYTES) // 2**20,
                REWRITE_FREE_MARGIN_BYTES // 2**20, free // 2**20)
        return False

    def _file_bytes(self) -> int:
        try:
            return self.path.stat().st_size
        except OSError:
            return 0

    def _residue_refusal(self, size: int, free: int, *, at_open: bool) -> str | None:
        """Why the owed rewrite is not done now (None: it is)."""
        if at_open and size > REWRITE_AT_OPEN_MAX_BYTES:
            return (f"the file is larger than {REWRITE_AT_OPEN_MAX_BYTES // 2**20} MiB, which an open "
                    "rewrites (it would block other processes' writes and take memory about its size)")
        if free < size + REWRITE_FREE_MARGIN_BYTES:
            return "too little free space on its disk for the rewrite's WAL"
        row = self._read("SELECT value FROM meta WHERE key = ?", (RESIDUE_FAILED_KEY,))
        if row:
            try:
                failed = json.loads(row[0][0])
                at, free_then = float(failed["at"]), int(failed["free"])
            except (ValueError, KeyError, TypeError):
                return None
            if time.time() - at < REWRITE_RETRY_AFTER_S and free < free_then + size:
                return (f"it failed {time.time() - at:.0f} s ago and the free space has not grown by "
                        "the file's size since")
        return None

    def _vacuum_residue(self) -> None:
        """Rewrite the whole file (VACUUM) of a store an older tiermem wrote without
        `secure_delete` (RESIDUE_KEY, set by the migration that took it across
        SECURE_DELETE_SINCE): text it deleted stays in free pages and in the unused space
        of live pages, which no later delete overwrites, and only a rewrite drops. Done by
        the scrub the upgrading open owes (`_finish_scrub`), once. Measured on a 105 MB
        store (20,000 turns; 2 busy cores, so ranges): 0.9-1.9 s at that open, and an
        erasure after it 0.5-0.7 s (the index compacted) against 0.9-2.0 s without; done
        at the first erasure or prune instead, that erasure took 1.0-2.4 s. About the same
        cost either way; at the open, the text of conversations the older code erased
        (still in the file after the upgrade, 245 copies in the test's store) does not
        stay readable until some erasure comes. Busy
        (another process's write lock past busy_timeout_ms) or killed: the flag and the
        scrub's marker stay, so the next open or erasure does it, and an erasure reports
        `scrubbed` False meanwhile. The copy is built in memory (temp_store = MEMORY, as
        for every connection: about the file's size, once), not in a temporary file, whose
        freed blocks would hold a copy of every conversation's text outside the store; the
        rewritten pages go through the WAL, which the caller truncates."""
        def vacuum(conn: Connection) -> bool:
            conn.execute("VACUUM")
            return True
        self._polled(vacuum)  # a busy VACUUM raises past busy_timeout_ms
        self._lock.release()
        self._step("reclaim:vacuumed")
        with self._tx() as c:  # only now: a process killed before this leaves it owed
            c.executemany("DELETE FROM meta WHERE key = ?",
                          [(RESIDUE_KEY,), (SCRUB_PENDING_KEY,), (RESIDUE_FAILED_KEY,)])

    def truncate_wal(self, *, wait: bool = True) -> bool:
        """Checkpoint the WAL into the database file and truncate it to zero bytes;
        False when another process's open read transaction still holds frames (they
        stay) or its write lock is held, past busy_timeout_ms (`_polled`; `wait` False:
        after one try)."""
        def checkpoint(conn: Connection) -> bool | None:
            # (busy, frames, checkpointed); busy 1: another connection kept it from finishing
            busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            return None if busy and busy[0] else True
        if self._polled(checkpoint, wait=wait) is None:
            return False
        self._lock.release()
        return True

    def defer_purge(self, keys: Sequence[str]) -> None:
        """Remember erased keys whose Redis keys could not be deleted yet."""
        with self._tx() as c:
            c.executemany("INSERT OR IGNORE INTO redis_purge(key, at) VALUES (?, ?)",
                          [(k, time.time()) for k in keys])

    def deferred_purges(self) -> list[str]:
        return [r[0] for r in self._read("SELECT key FROM redis_purge ORDER BY at")]

    def purged(self, keys: Sequence[str]) -> None:
        with self._tx() as c:
            c.executemany("DELETE FROM redis_purge WHERE key = ?", [(k,) for k in keys])
        # the frames just written hold erased keys (no content), and "truncated" is a promise
        # to the caller: truncate them, once and without waiting (this runs after each batch
        # of an erasure, before its reclaim, and a reader in another process would make each
        # batch wait busy_timeout_ms); what a reader holds is left to the next write or close
        try:
            if not self.truncate_wal(wait=False):
                self._wal_scrub_pending = True
        except DriverDatabaseError:  # read-only or busy: the next write or close tries again
            self._wal_scrub_pending = True

    # -- search ----------------------------------------------------------------------------

    def _scope(self, conversation_id: str | None, namespace: str | None) -> list[str]:
        if conversation_id is not None:
            return [conversation_id]
        if namespace is None:
            raise ValidationError("conversation_id", "search needs a conversation or a namespace")
        return self.list_conversations(namespace)

    def search_dense(
        self, query_vec: np.ndarray, k: int, *, conversation_id: str | None = None, namespace: str | None = None,
        exclude: str | None = None, before: int | None = None,
    ) -> list[tuple[str, int, float]]:
        """(conversation, position, L2 distance) of the k nearest turns (`exclude`: a
        conversation of the namespace not to scan, e.g. the one already searched;
        `before`, with `conversation_id`: only positions below it)."""
        try:
            return self._search_dense(query_vec, k, conversation_id=conversation_id, namespace=namespace,
                                      exclude=exclude, before=before)
        except DriverDatabaseError as exc:  # "Dimension mismatch for query vector"
            conflict = self._width_conflict(exc, int(np.asarray(query_vec).size))
            if conflict is not None:
                raise conflict from exc
            raise

    def _search_dense(self, query_vec: np.ndarray, k: int, *, conversation_id: str | None, namespace: str | None,
                      exclude: str | None, before: int | None) -> list[tuple[str, int, float]]:
        if not self._vectors_ours(int(np.asarray(query_vec).size)):
            return []
        convs = [c for c in self._scope(conversation_id, namespace) if c != exclude]
        if not convs:
            return []
        later = 0
        if before is not None and conversation_id is not None:
            # vec0 cannot filter on position: ask for as many more as there are later
            # vectors, then drop those (a catch-up has embedded turns after the one it
            # decides; without this they would crowd the earlier ones out of the k)
            later = int(self._read("SELECT COUNT(*) FROM turns WHERE conversation_id = ? AND position >= ? "
                                   "AND embedded = 1", (conversation_id, before))[0][0])
        k_asked = max(1, int(k))
        k = max(1, min(k_asked + later, VEC0_MAX_K))
        qb = _vec_bytes(query_vec)
        # one row past the k-th: a search without a tie there is settled by its first scan
        want = min(k + 1, VEC0_MAX_K)
        while True:
            # ties by the row's id: the earlier row first
            rows = sorted(self._nearest(qb, want, convs), key=lambda r: (float(r[1]), int(r[0])))
            # vec0 keeps any of the rows tied at the k-th distance (equal vectors: equal
            # texts, a fork's copies): ask again for more until every tied row is among
            # them, so that ties go to the earlier row, as the keyword search's and
            # PostgreSQL's do, whichever rows vec0 happened to keep
            if len(rows) < want or want >= VEC0_MAX_K or float(rows[-1][1]) > float(rows[k - 1][1]):
                break
            want = min(2 * want, VEC0_MAX_K)
        if not rows:
            return []
        ids = {int(r[0]): float(r[1]) for r in rows[:k]}
        ph = ",".join("?" * len(ids))
        # positions in range: one SQLite holds as text is no turn a hit can name
        meta = self._read(f"SELECT id, conversation_id, position FROM turns WHERE id IN ({ph}) "
                          "AND position BETWEEN 0 AND ?", (*ids, MAX_POSITION))
        out = [(m[1], int(m[2]), ids[int(m[0])], int(m[0])) for m in meta]
        if later:
            out = [t for t in out if before is None or t[1] < before]
        out.sort(key=lambda t: (t[2], t[3]))  # ties by the row's id: the earlier row first
        hits = [(c, pos, d) for c, pos, d, _id in out]
        return hits[:k_asked] if later else hits

    def _nearest(self, qb: bytes, k: int, convs: list[str]) -> list[Any]:
        """(rowid, distance) of the k nearest vectors of `convs`, nearest first (vec0's
        order among equal distances)."""
        if len(convs) == 1:
            sql = (f"SELECT rowid, distance FROM {VEC_TABLE} WHERE embedding MATCH ? AND k = ? "
                   "AND conversation_id = ?")
            return self._read(sql, (qb, k, convs[0]))
        # IN over partition keys returns k rows per partition; an outer LIMIT over a
        # vec0 subquery fails, hence the MATERIALIZED CTE.
        ph = ",".join("?" * len(convs))
        sql = (f"WITH hits AS MATERIALIZED (SELECT rowid, distance FROM {VEC_TABLE} WHERE embedding MATCH ? "
               f"AND k = ? AND conversation_id IN ({ph})) SELECT rowid, distance FROM hits "
               "ORDER BY distance LIMIT ?")
        return self._read(sql, (qb, k, *convs, k))

    def search_bm25(
        self, query: str, k: int, *, conversation_id: str | None = None, namespace: str | None = None,
        exclude: str | None = None,
    ) -> list[tuple[str, int, float]]:
        """(conversation, position, bm25) of the k best FTS matches (lower bm25 is better);
        `exclude`: a conversation of the namespace not to search.

        FTS5 finds the rows of the scope holding any query term; they are scored here with
        FTS5's formula over the scope's statistics (turns, mean length in terms, each
        term's document frequency among the scope's rows), not FTS5's `bm25()`, whose
        statistics are the whole table's: with them another namespace's text (one
        occurrence of a rare word) would change this scope's order and scores. Each
        word's document frequency is counted by FTS5; the text of only the matches that
        can still enter the k best is read and tokenized (MaxScore, below), plus the
        turns appended to the scope since its last search (counted into `_scope_sizes`)."""
        words = query_words_terms(query)
        if not words or k < 1:
            return []
        # The scope tokens narrow FTS5 to one conversation's (or namespace's) doclist. The
        # SQL filter on the joined rows stays, so a stemmer collision of two scope tokens
        # could only cost results, never mix conversations (nor their counts).
        if conversation_id is not None:
            scope = f'scope : "c{conversation_id.encode().hex()}"'
            params: tuple[str | None, ...] = (conversation_id,)
            join, where = "", "m.conversation_id = ?"
        else:
            if namespace is None:
                raise ValidationError("conversation_id", "search needs a conversation or a namespace")
            scope = f'scope : "n{namespace.encode().hex()}"'
            if exclude is not None:
                scope = f'({scope} NOT scope : "c{exclude.encode().hex()}")'
            join = " JOIN conversations c ON c.id = m.conversation_id"
            where, params = "c.namespace = ? AND m.conversation_id IS NOT ?", (namespace, exclude)

        def matching(columns: str) -> str:
            return (f"SELECT {columns} FROM (SELECT rowid, text FROM messages_fts WHERE messages_fts MATCH ?) h "
                    f"JOIN messages m ON m.id = h.rowid{join} WHERE {where}")

        # each word is letters and digits only: quoted, no user text can break the query
        quoted = [f'"{w}"' for w, _t in words]
        with self._lock:
            conn = self._open()
            dfs = [int(conn.execute(matching("COUNT(*)"), (f"{scope} AND text : {q}", *params)).fetchone()[0])
                   for q in quoted]
            if not any(dfs):
                return []
            # read after the counts: the log is append-only, so the scope's sizes cover them
            if conversation_id is not None:
                last = conn.execute(
                    "SELECT MAX(position) FROM messages WHERE conversation_id = ?", (conversation_id,)).fetchall()
                ends = [(conversation_id, last[0][0])] if last and last[0][0] is not None else []
            else:
                ends = [(r[0], r[1]) for r in conn.execute(
                    "SELECT c.id, (SELECT MAX(position) FROM messages m WHERE m.conversation_id = c.id) "
                    "FROM conversations c WHERE c.namespace = ? AND c.id IS NOT ?", (namespace, exclude),
                ).fetchall() if r[1] is not None]
            live = {c for c, _ in ends}  # a conversation erased meanwhile has matches but no counts
            turns, size = self._scope_size(ends)
            avgdl = size / turns if turns else 1.0
            idfs = [bm25_idf(turns, df) for df in dfs]
            # MaxScore: the rows holding the rarest word first; a row holding none of the
            # words read so far scores at most its words' idf x (k1 + 1), so once the k-th
            # best score read is above that bound the rest of the matches cannot enter
            # the k best (nor tie: a term's part is strictly below its bound). The scores
            # are exact, over the scope's statistics, for every row read.
            order = sorted((i for i in range(len(words)) if dfs[i]), key=lambda i: -idfs[i])
            bounds = [sum(idfs[i] for i in order[j:]) * (BM25_K1 + 1.0) for j in range(len(order))]
            terms = [t for _w, t in words]
            rows: list[Any] = []
            counted: list[tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]] = []  # per read
            best: list[tuple[int, float]] = []
            for j, i in enumerate(order):
                if len(best) >= k and -best[k - 1][1] > bounds[j]:
                    break
                expr = quoted[i] if j == 0 else f"{quoted[i]} NOT ({' OR '.join(quoted[o] for o in order[:j])})"
                new = [r for r in conn.execute(matching("h.rowid, h.text, m.conversation_id, m.position"),
                                                (f"{scope} AND text : ({expr})", *params)) if r[2] in live]
                if not new:
                    continue
                # each read's text is split once; the reads' counts are joined for scoring
                lengths, found = term_counts([r[1] for r in new], terms)
                counted.append((lengths, [(d + len(rows), tf) for d, tf in found]))
                rows += new
                best = self._scored(rows, counted, dfs, turns, avgdl, k)
        return [(rows[d][2], int(rows[d][3]), s) for d, s in best]

    @staticmethod
    def _scored(rows: list[Any], counted: list[tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]],
                dfs: list[int], turns: int, avgdl: float, k: int) -> list[tuple[int, float]]:
        """The k best of `rows` (rowid first) by BM25 over the scope's statistics, from
        each read's (lengths, postings per term): (index into `rows`, bm25), best first,
        ties to the earlier row."""
        by_rowid = np.argsort(np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows)), kind="stable")
        place = np.empty_like(by_rowid)
        place[by_rowid] = np.arange(by_rowid.shape[0])  # a row's index -> its place in rowid order
        lengths = np.concatenate([c[0] for c in counted])[by_rowid]
        postings: list[tuple[np.ndarray, np.ndarray]] = []
        dfs_of: list[int] = []
        for t, df in enumerate(dfs):
            docs = np.concatenate([c[1][t][0] for c in counted])
            if docs.shape[0]:
                postings.append((place[docs], np.concatenate([c[1][t][1] for c in counted])))
                dfs_of.append(df)
        return [(int(by_rowid[d]), s) for d, s in bm25_top(turns, avgdl, lengths, postings, k, dfs=dfs_of)]

    def _scope_size(self, ends: list[tuple[str, int]]) -> tuple[int, int]:
        """(turns, terms) of the conversations given as (key, last position): counted
        from their FTS text with `total_length` (the words `search_bm25` scores), each
        conversation's count remembered and extended by the turns after it. Under
        `self._lock` (the first search of a large scope counts all of its text there, once),
        called by `search_bm25` only."""
        turns = terms = 0
        for conv, last in ends:
            with self._scope_sizes_lock:
                got = self._scope_sizes.get(conv)
                if got is not None:
                    self._scope_sizes.move_to_end(conv)
            start, n, size = got if got is not None else (0, 0, 0)
            if start <= last:
                # LEFT JOIN: a turn whose FTS row is missing (repair fills it) still counts
                texts = self._open().execute(
                    "SELECT f.text FROM messages m LEFT JOIN messages_fts f ON f.rowid = m.id "
                    "WHERE m.conversation_id = ? AND m.position >= ? AND m.position <= ?", (conv, start, last),
                ).fetchall()
                n += len(texts)
                size += total_length(t[0] for t in texts if t[0])
                with self._scope_sizes_lock:
                    mine = self._scope_sizes.get(conv)
                    if mine is None or mine[0] < last + 1:
                        self._scope_sizes[conv] = (last + 1, n, size)
                        self._scope_sizes.move_to_end(conv)
                    while len(self._scope_sizes) > MAX_SCOPE_SIZES:
                        self._scope_sizes.popitem(last=False)
            turns += n
            terms += size
        return turns, terms

    # -- rebuild and stats ----------------------------------------------------------------------

    def rebuild(self, *, progress: Callable[[int], None] | None = None, embed: bool = True) -> dict[str, int]:
        """Recompute the turn index, FTS and vectors from the messages. Labels come from
        `labeler` (cleared without one); supersession is cleared, and the consolidation
        layer replays it.

        In batches of messages (by id), the store's lock free between them: one
        transaction held SQLite's write lock 43 s for 26.6k messages, and other
        processes' appends failed past their busy timeout. The first transaction drops
        the vectors and the supersessions; each batch's rows are decoded, labelled and
        counted outside the lock, then its turn and FTS rows replaced in one short
        transaction (sized as an erasure's batches, a pause as long after each). Every
        message has its turn and FTS rows at every commit (the old ones until its batch
        replaces them), so readers mid-way read as they did after the old single
        transaction (no vectors until they are embedded again); a message appended
        between a batch's read and its transaction keeps the rows its append wrote. A process killed
        mid-way leaves the batches done rebuilt and the rest as they were; the vectors'
        width stays recorded without its table, so the next catch-up (or `repair`)
        re-embeds every turn, and a rerun rebuilds the rest. Rows of a conversation not
        (or no longer) bound to a name (a fork being copied, an erasure's detached rows)
        are left to their owner."""
        with self._tx() as c:
            c.execute(f"DELETE FROM {STATEMENT_TABLE}")  # replayed with the labels
            c.execute(f"DELETE FROM {RECHECK_TABLE}")  # the replay decides again
            # unconditionally: another process may have made the table since we opened.
            # Its width stays in `meta` (and in this process): a catch-up that finds the
            # table gone, here or in another process, mid-way or after a kill, marks every
            # turn for re-embedding (`_ensure_vec_table`), so the turns not rewritten yet
            # are embedded again too
            c.execute(f"DROP TABLE IF EXISTS {VEC_TABLE}")
        with self._scope_sizes_lock:  # counted from the FTS text rewritten here
            self._scope_sizes.clear()
        n, after, limit = 0, -1, REBUILD_BATCH_MESSAGES
        while True:
            rows = self._read(
                "SELECT m.conversation_id, m.position, m.id, m.role, m.body, m.session_id, m.created_at, "
                "(SELECT " + SCOPE_SQL + " FROM conversations c WHERE c.id = m.conversation_id) "
                "FROM messages m WHERE m.id > ? ORDER BY m.id LIMIT ?", (after, limit))
            last = len(rows) < limit
            upto = int(rows[-1][2]) if rows and not last else None  # the last batch: every id above
            read = {int(r[2]): (str(r[0]), int(r[1])) for r in rows}
            turns, fts, keep = self._rebuild_rows(rows)
            self._step("rebuild:read")
            began = time.perf_counter()
            with self._tx() as c:
                n += self._rebuild_batch(c, after, upto, read, turns, fts, keep)
            held = time.perf_counter() - began
            self._step("rebuild:batch")
            if last:
                break
            after = int(upto)  # type: ignore[arg-type]
            limit = max(REBUILD_BATCH_MESSAGES, self._next_batch(limit, held))
            time.sleep(min(held, ERASE_PAUSE_MAX_S))
        with self._scope_sizes_lock:
            self._scope_sizes.clear()
        if not self._has_vec():  # every turn is rewritten unembedded: the table is made without marking them
            self._vec_dim = None
        embedded = self.index_pending(progress=progress) if embed else 0
        return {"turns": n, "embedded": embedded}

    def _rebuild_rows(self, rows: Sequence[Any]) -> tuple[list[tuple[Any, ...]], list[tuple[int, str, str]], list[int]]:
        """Outside the lock: the turn rows and FTS rows of a rebuild's batch of messages
        (conversation, position, id, role, body, session, created, scope), and the ids of
        those of a conversation bound to no name (scope None), left as they are."""
        turns: list[tuple[Any, ...]] = []
        fts: list[tuple[int, str, str]] = []
        keep: list[int] = []
        for conv, pos, mid, role, body, session, created, scope in rows:
            if scope is None:
                keep.append(int(mid))
                continue
            data = self._rebuild_body(conv, pos, role, body)
            with remembered_for(memo_scope(self.db_uuid, conv)):  # its label and count, for it alone
                lab = rebuilt_labels(self.labeler, role, data)
                n_tokens = message_tokens(self.tokens, data)
            turns.append((conv, pos, mid, role, session, n_tokens, content_hash(data), created, *lab))
            fts.append((int(mid), search_text(data), str(scope)))
        return turns, fts, keep

    def _rebuild_batch(self, c: Connection, after: int, upto: int | None, read: Mapping[int, tuple[str, int]],
                       turns: Sequence[tuple[Any, ...]], fts: Sequence[tuple[int, str, str]], keep: Sequence[int]) -> int:
        """Inside a rebuild's transaction: replace the turn and FTS rows with ids in
        (after, upto] (every id above `after` when upto is None; orphans included) by
        `turns` and `fts`, but those of `keep`, of messages erased since they were read
        (`read`: id -> (conversation, position) of the messages the batch read; their rows
        are gone with them), and of messages appended since: the read was outside this
        transaction, so the last batch's range (every id above) holds the appends other
        processes committed meanwhile, which this batch has no rows for: their appends
        wrote them (labelled as appends label; the relabelling after reads them). Before,
        they were deleted and nothing written in their place, so each such message was
        missing from search and from context() (a hole in the recent turns) until the
        next rebuild. Returns how many turns it wrote."""
        hi = upto if upto is not None else MAX_ROWID
        now = {int(r[0]): (str(r[1]), int(r[2])) for r in c.execute(
            "SELECT id, conversation_id, position FROM messages WHERE id > ? AND id <= ?", (after, hi))}
        # messages of the range this batch has no rows for (appended since its read; an id
        # reused by one, after the newest message was erased), left as their append wrote them
        unread = [i for i, m in now.items() if read.get(i) != m]
        c.execute("CREATE TEMP TABLE IF NOT EXISTS rebuild_keep(id INTEGER PRIMARY KEY)")
        c.execute("DELETE FROM temp.rebuild_keep")
        c.executemany("INSERT INTO temp.rebuild_keep(id) VALUES (?)", [(i,) for i in (*keep, *unread)])
        c.execute("DELETE FROM turns WHERE id > ? AND id <= ? AND id NOT IN (SELECT id FROM temp.rebuild_keep)",
                  (after, hi))
        c.execute("DELETE FROM temp.rebuild_keep")
        live = {i for i, m in now.items() if read.get(i) == m}
        turns = [t for t in turns if int(t[2]) in live]
        if self._has_vec():  # made again meanwhile (a catch-up): these turns are embedded anew
            c.executemany(f"DELETE FROM {VEC_TABLE} WHERE rowid = ?", [(t[2],) for t in turns])
        c.executemany(
            "INSERT INTO turns(conversation_id, position, id, role, session_id, tokens, content_hash, "
            "created_at, intent, load_bearing, priority, label_reason) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", turns)
        # FTS rows that already hold exactly the text and scope the log gives are kept:
        # a secure delete costs 0.3-3 ms a row (rewriting every row held the lock 4-8 s a
        # batch of 1,000-5,000), and the same row indexes to the same entries
        want = {f[0]: (f[1], f[2]) for f in fts if f[0] in live}
        kept = {*keep, *unread}
        have = {int(r[0]): (r[1], r[2]) for r in c.execute(
            "SELECT rowid, text, scope FROM messages_fts WHERE rowid > ? AND rowid <= ?", (after, hi))}
        c.executemany("DELETE FROM messages_fts WHERE rowid = ?",
                      [(i,) for i, v in have.items() if i not in kept and want.get(i) != v])
        c.executemany("INSERT INTO messages_fts(rowid, text, scope) VALUES (?, ?, ?)",
                      [(i, *v) for i, v in want.items() if have.get(i) != v])
        return len(turns)

    def integrity(self) -> dict[str, int]:
        """Counts that show whether the derived indexes match the log."""
        msgs = self._read("SELECT COUNT(*) FROM messages")[0][0]
        turns = self._read("SELECT COUNT(*) FROM turns")[0][0]
        fts = self._read("SELECT COUNT(*) FROM messages_fts")[0][0]
        vec = self._read(f"SELECT COUNT(*) FROM {VEC_TABLE}")[0][0] if self._has_vec() else 0
        return {"messages": msgs, "turns": turns, "fts": fts, "vectors": vec}

    def repair(self) -> dict[str, int]:
        """Fill derived rows that are missing (e.g. a vector table dropped): cheap when
        nothing is missing, a rebuild of what is when something is."""
        counts = self.integrity()
        if counts["turns"] != counts["messages"] or counts["fts"] != counts["messages"]:
            return self.rebuild()
        if self._vec_dim is not None and not self._has_vec():
            self._vec_dim = None
            with self._tx() as c:
                c.execute("DELETE FROM meta WHERE key IN ('vec_dim', ?)", (VEC_MODEL_KEY,))
                c.execute("UPDATE turns SET embedded = 0")
        return {"turns": 0, "embedded": self.index_pending()}

    # -- the warm tier's tables (tiers.warm stores and reads its views through these) ---------

    def latest_session_summaries(self, conversation_id: str) -> list[SummaryRow]:
        return [self._summary(r) for r in self._read(
            f"SELECT {self._SUMMARY_COLS} FROM summaries s WHERE conversation_id = ?1 AND kind = 'session' "
            "AND version = (SELECT MAX(version) FROM summaries WHERE conversation_id = ?1 AND kind = 'session' "
            "AND key = s.key) ORDER BY start_position, key", (conversation_id,))]

    def session_summary_ends(self, conversation_id: str) -> dict[str, int]:
        # an end that cannot be used is no view's: that session reads as never summarized
        return {r[0]: e for r in self._read(
            "SELECT key, end_position FROM summaries s WHERE conversation_id = ?1 AND kind = 'session' AND "
            "version = (SELECT MAX(version) FROM summaries WHERE conversation_id = ?1 AND kind = 'session' "
            "AND key = s.key)", (conversation_id,)) if (e := view_end(r[1])) is not None}

    # put_summary's engine parts (tiers.dialect.SharedQueries.put_summary)

    def _lock_summaries(self, c: Connection, conversation_id: str) -> None:
        # BEGIN IMMEDIATE already serialises every writer of the file; the conversation
        # row, not its messages: a detached one (`_detach`) still has messages until
        # its last batch, which would delete the summary written meanwhile
        self._require_in(c, conversation_id)

    def _drop_old_warm_folds(self, c: Connection, conversation_id: str, keep: int) -> None:
        c.execute(
            "DELETE FROM checkpoints WHERE conversation_id = ?1 AND json_valid(metadata) "
            "AND json_extract(metadata, '$.source') = 'warm' AND id NOT IN (SELECT id FROM checkpoints "
            "WHERE conversation_id = ?1 AND json_valid(metadata) AND json_extract(metadata, '$.source') "
            "= 'warm' ORDER BY id DESC LIMIT ?2)", (conversation_id, keep))

    def record_summary_error(self, conversation_id: str, kind: str, key: str, error: str, *, keep: int) -> None:
        with self._tx() as c:
            if not self._conversation_held(c, conversation_id):
                return  # erased while its refresh waited: the error may quote its turns
            c.execute("INSERT INTO summary_errors(conversation_id, kind, key, error, at) VALUES (?,?,?,?,?)",
                      (conversation_id, kind, key, without_nul(error), time.time()))
            c.execute(
                "DELETE FROM summary_errors WHERE conversation_id = ?1 AND kind = ?2 AND key = ?3 AND id <= "
                "(SELECT id FROM summary_errors WHERE conversation_id = ?1 AND kind = ?2 AND key = ?3 "
                " ORDER BY id DESC LIMIT 1 OFFSET ?4)", (conversation_id, kind, key, keep))


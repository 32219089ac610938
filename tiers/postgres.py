"""Cold tier on PostgreSQL + pgvector: the store interface (tiers.store.ColdLog) for
services that outgrow one machine. Same contract as the SQLite log (tiers.cold).

Invariants (docs/design.md, "The invariants"), and how this engine keeps them:

- Append-only in the database: row triggers refuse every UPDATE of `messages`, and every
  DELETE unless the transaction set `tiermem.retention = 'on'` (`SET LOCAL`, which only
  the retention operations do and which ends with their transaction); a statement
  trigger refuses TRUNCATE.
- Positions come from a per-conversation counter row in one statement
  (`UPDATE conversations SET next_position = next_position + n ... RETURNING`), never
  from `MAX(position) + 1`, which races under READ COMMITTED (two writers read the same
  MAX). The counter row's lock serialises the writers of one conversation only.
- One lock order, so no two writers of a conversation deadlock: its conversations row
  first (an append's counter UPDATE, a supersession's views_seq UPDATE, FOR UPDATE or
  FOR SHARE for a keyed append, a pin, a view, a fork, an erasure; set_labels and a
  supersession that only labels take it FOR NO KEY UPDATE, `_lock_turn_writers`), then
  its turn rows in position order (each writer sorts what it updates), then its
  pin_versions row, which the triggers on turns, pins and statement rows move
  (migrate-store locks it right after the conversation's). So every writer that updates
  a conversation's turns or moves its pin version holds its row first, and they take
  turns. The vectors' writer (`_STORE_VECTORS`) takes turn rows only, by id (position
  order within a conversation: ids are drawn in it), and moves no pin version. Outside
  the order: the whole-table maintenance of a new vector width (`_ensure_vec_dim`), and
  `rebuild`'s first transaction (supersession's rows cleared) and last (rows of no
  message). Before 2026-12-06
  set_labels took no conversation lock and its turns in its caller's order, the pin
  version between them: with a supersession or another set_labels on the same
  conversation, a deadlock (40P01, one rolled back; tests/test_postgres_label_lock_order.py).
- set_labels holds a conversation's row for one short batch at a time, so an append
  (whose counter UPDATE waits for that row) does not wait out its lock_timeout behind a
  pass over every turn (a rebuild's relabelling): it commits in batches (tiers.dialect
  LABEL_BATCH_TURNS: ~30 ms each, a pause as long after each), each in the order above;
  a reader between two sees the batches before it done, each changed turn having moved
  the pin version once. As one transaction it held the row 0.8-3.3 s for 10k turns (2
  loaded cores), and appends behind it failed busy (tests/test_labels_append_during_pass.py).
  So does `rebuild`'s rewrite of the turn rows: a batch of messages a transaction
  (REBUILD_BATCH_MESSAGES, ~30 ms each), in the order above: one conversation's, or
  several small conversations' whole (their rows in id order, as an erasure takes them,
  then their turns in id order, as the vectors' writer does). As one
  transaction its DELETE FROM turns moved and held the pin_versions row of each
  conversation with a load-bearing turn to its end (20k turns: 3.6 s; a load-bearing
  append with a 300 ms lock_timeout failed busy) and a plain append committed inside it
  failed the rebuild (UniqueViolation; tests/test_postgres_rebuild_append.py).
- One domain action, one transaction: an append (one message or a batch) is ONE
  statement (counter row, messages, turn rows and FTS rows in data-modifying CTEs),
  sent on an autocommit connection, so it is its own transaction and, when the
  conversation exists, one round trip; the first append of a conversation creates it
  and appends in one explicit transaction. Fork, prune, erasure and a warm write are
  one transaction each.
- An append with an idempotency key is one explicit transaction instead: the
  conversation's row locked first (it orders the conversation's writers), then the key
  looked up; the same request again writes nothing and answers the recorded positions,
  another one is refused; a new key is recorded with the rows (ON CONFLICT DO NOTHING:
  a conflict rolls this transaction's work back and answers the other's record). The
  records (`idempotency_keys`) live as long as their conversation: no expiry.
- Migrations are an ordered list of named functions, each applied in its own
  transaction under an advisory lock and recorded in `schema_migrations`; a database
  recorded at a newer version than this code is refused before anything is written;
  one at this code's version opens without writing (no CREATE ... IF NOT EXISTS
  either), so a read-only database (a hot standby) serves reads and refuses writes
  with SQLSTATE 25006 (tiers.files: 503, nothing written).
- No statement waits for a lock longer than `lock_timeout_ms` (Config.busy_timeout_ms,
  set as `lock_timeout` on each session: the store's pool at connect, a caller's pool for
  each checkout, unless None), so an operator's LOCK TABLE or an erasure's rewrite
  makes a write fail busy (lock_not_available: 503, nothing written) instead of hang.
  Where waiting is the design the transaction lifts it (`SET LOCAL lock_timeout = 0`):
  bootstrap and migrations behind another process's, the vectors' width being set, an
  erasure or prune behind another (bounded by the maintenance deadline).
- No operation waits on the server for ever: each checkout of a connection is cut
  (socket shutdown by a watchdog thread: StoreStalled, 503; the pool discards the
  connection) once it has lasted `operation_timeout_s` (OPERATION_TIMEOUT_S) past the lock
  wait allowed, `maintenance_timeout_s` (MAINTENANCE_TIMEOUT_S) for migrations, rewrites,
  index builds, rebuilds and an erasure's or prune's transaction (as long as its rows make it),
  or the end of `connection_wait` (a health probe's few seconds). A server that takes the
  query and never answers (stopped with SIGSTOP, a silent proxy) is not seen by TCP or by
  PostgreSQL's own timeouts; before, a worker waited on it for ever. Every connection
  tiermem opens itself (its pool's; outside it, `owned_connection`: the bootstrap's and
  migrate-store's look at a schema, watched as a checkout is) gives up a connect after
  CONNECT_TIMEOUT_S unless the URL or PGCONNECT_TIMEOUT sets its own (`connect_options`).
  Both deadlines are finite numbers of seconds above 0 (refused otherwise, naming the
  setting), and an error in a round of the watchdog is logged and the round retried
  (WATCHDOG_RETRY_S): its thread never ends before the store is closed.
- A connection lost in an operation (its backend ended by `pg_terminate_backend`, a
  shutdown, a crash or a failover: SQLSTATE class 08 or 57P, or the driver finding it
  closed) reaches the caller as StoreUnavailable (`connection_lost`, the driver's error
  chained; 503, a write in flight may or may not have committed), raised where a
  checkout is taken (`_conn`, `owned_connection`: `connection_lost_as_unavailable`), its
  message the store's redacted URL and the kind of failure, never the driver's text,
  which can quote the statement. The pool discards the connection: the next operation
  runs on a new one. Busy (a lock or statement timeout) and the caller's data refused
  stay the driver's own errors (tiers.errors StoreUnavailable: both engines alike).
- A cut connection's backend does not outlive its client by more than
  CLIENT_CHECK_INTERVAL_MS (`client_connection_check_interval`, PostgreSQL 14+): set on
  each session of the store's own pool, and for each maintenance transaction on a
  caller's connection (`SET LOCAL`; reclaim()'s VACUUM, outside any transaction, sets it
  with a statement_timeout inside the maintenance deadline for the checkout only, set
  back with CALLER_SETTINGS: the server ends it there, no cut, no backend left queued
  for the tables' locks; on our own pool the VACUUM has that statement_timeout too, reset
  after it, so the pool keeps the connection), so the locks of a cut erasure
  (ERASURE_ORDER_LOCK, its rows) or migration are released then, not when its statement
  would have ended. So the store needs PostgreSQL 14 or later (MIN_SERVER_VERSION_NUM):
  an older server is refused at the store's first connection (ServerTooOld, naming its
  version and the minimum; its own pool or a caller's), before anything is written.
- A transaction left idle by its client does not hold its locks for ever: every session
  of the store has an `idle_in_transaction_session_timeout` (IDLE_IN_TRANSACTION_SETTING),
  the length of the checkout's deadline (`operation_timeout_s` plus the lock wait; the
  maintenance deadline's within `_maintenance`, for that checkout only), set where the
  other settings are (at connect, SET LOCAL per checkout in transaction mode, a caller's
  connection for the checkout, its value set back). A writer whose process is stopped
  inside its transaction (SIGSTOP: docker pause, a frozen VM, a debugger; its watchdog
  stopped with it) is ended by the server then, its transaction rolled back (nothing of
  it written; resumed, it gets StoreUnavailable saying just that, `idle_ended`, whether
  it reads the server's end of the session or its own watchdog, resumed too, cut the
  connection first while it sat idle in the transaction: not a server that did not answer
  (StoreStalled) nor a write that "may or may not have committed"), and the conversation's
  other writers go on; before, each failed busy at its lock_timeout for as long as it
  stayed stopped (tests/test_postgres_paused_writer.py, test_postgres_paused_writer_said.py).
- A catch-up (`index_pending`) stores its pool of vectors a batch per statement, each its
  own transaction and checkout, committed and hooked before the next, so a server slower
  than `operation_timeout_s` for a whole pool still stores it a batch at a time, and a
  failure keeps the batches committed before it (tests/test_postgres_index_pool_deadline.py).
- Keys (incarnations) are recorded in `conversation_keys`, never deleted from, so a key
  is never issued twice; names are unique per namespace.
- Erasure deletes every row of a key from every table, derived or not, leaves a
  tombstone with counts and no content, then reclaims. PostgreSQL has no secure_delete:
  a plain VACUUM leaves fragments of a deleted tuple in the page's free space and a GIN
  index keeps every lexeme it ever saw. So by default (`erase_scrub="full"`) the
  affected tables are rewritten (`VACUUM (FULL, ANALYZE)`: new files, indexes rebuilt,
  the old files truncated at commit), then pg_statistic (STATISTICS_TABLE: the old rows of
  the planner's statistics, sampled while the erased rows were there, gone with its old
  file; a role that may not VACUUM it, neither superuser nor the database's owner nor
  holding MAINTAIN on it, gets `scrubbed` false and a logged warning; its own statement,
  waiting for its lock at most STATISTICS_LOCK_TIMEOUT_MS, since every session of the
  database queues behind that wait: past it `scrubbed` false naming it, the tables done,
  its rewrite alone owed, SCRUB_STATISTICS_KEY): no data file of the
  cluster holds the erased bytes afterwards (tests/test_erasure_postgres.py reads them,
  tests/test_postgres_erasure_statistics.py pg_statistic's). Before the rewrite, the statistics ANALYZE would
  not replace are cleared (`clear_stale_statistics`: a table left empty keeps what was
  sampled before, live in pg_stats; a role that may not clear them gets `scrubbed` false),
  and what users wrote is never sampled (UNSAMPLED_COLUMNS, m013;
  tests/test_postgres_erasure_empty_stats.py). Unless a snapshot older than
  the erasure is open (a report's REPEATABLE READ transaction on any table, a session idle
  in a transaction that holds an xid, a prepared transaction, a replication slot's xmin):
  the rewrite copies the deleted rows it may still see into the new files. The scrub asks
  the server for those (SNAPSHOT_HOLDERS_SQL, before and after the rewrite; the erasure's
  xid is in its marker), and before pg_statistic's rewrite for any snapshot older than the
  tables' ANALYZE (one begun during their rewrite too); a holder running a statement (an
  autovacuum worker's ANALYZE, a query in flight) is waited for first, at most
  `holder_grace_ms` (HOLDER_GRACE_MS; tests/test_postgres_erasure_holder_grace.py): any
  left, and it answers `scrubbed` false, logs what holds one (pid,
  prepared xid or slot, no text) and stays owed, rewritten again at the next open, erasure
  or reclaim() (tests/test_postgres_erasure_open_snapshot.py). It takes each table's
  ACCESS EXCLUSIVE lock for its rewrite (writers wait, at most `lock_timeout_ms`: then
  503 busy, nothing written; the rewrite waits for a table's readers as long at most,
  then gives up: not scrubbed, finished at the next open or erasure); `erase_scrub="vacuum"` is
  the fast, non-blocking choice that does not guarantee it. Beyond the data files
  PostgreSQL cannot scrub: WAL segments (pg_wal, and any archive or replica) keep the
  records until recycled, and freed file-system blocks are the OS's (README).
  Once an erasure has committed nothing fails it (it returns its report): a step after
  the commit that fails (the caller's `on_erased`, the scrub, the size after it; no
  pooled connection in time, a lock timeout) is left owed, recorded with the commit
  (`redis_purge`, the scrub's marker) and done later. The open that finds the scrub
  owed runs it; failing or stalled there (StoreStalled past the maintenance deadline),
  it stays owed and the store opens all the same (logged): the next open retries. Both
  scrubs, the erasure's own and the open's, wait for a table's lock at most
  `lock_timeout_ms` (where the store sets none, SCRUB_LOCK_TIMEOUT_MS: not the
  maintenance deadline's hour).
- Keywords: a generated `tsvector` column with a GIN index, ranked bm25-like (per
  term: idf in the scope times `ts_rank` with length normalisation, summed); the query
  is built from the words of the user's text, each quoted as a lexeme, so no input can
  break `to_tsquery`'s syntax. Meaning: pgvector
  `<->` (L2 over the embedder's unit vectors, so the order is cosine's): an exact scan
  of a conversation's rows; over a namespace, an HNSW index with iterative scans
  (recall 0.96 at k=20 on 20k clustered vectors, a quarter of them in the namespace);
  rows tied at the k-th distance (equal vectors) go to the earliest ids: a tie seen
  there is asked for again by its exact distance (a scan of the namespace's rows).
- A stored row that cannot be decoded is logged, counted and skipped; neighbours load.

Ownership: a store given a URL opens its own pool and closes it; a store given a
`psycopg_pool.ConnectionPool` uses it and closes nothing. Every session the store uses
runs READ COMMITTED, which the waits above are written for, whatever the server's
default_transaction_isolation (`ISOLATION`: set on each connection of its pool, and on a
caller's connection at each checkout, as the search path is). A caller's connection is
given back as it was lent: the settings the store sets (CALLER_SETTINGS: search path,
isolation, lock_timeout, synchronous_commit, hnsw.*; statement_timeout and the client
check for reclaim()'s VACUUM, which runs outside a transaction, where no SET LOCAL
reaches, and so ends at the maintenance deadline on the server, not by a cut of the
caller's connection) hold for the checkout only, the
caller's values read at its start and set back at its end (`_borrowed`), also when the
operation failed. All tables live in one PostgreSQL schema (`schema`, default
`tiermem`): several stores can share a database.

Behind a pooler in transaction mode (PgBouncer's pool_mode = transaction: `pool_mode`,
Config.cold_pool_mode "transaction", POOL_MODES) no session of the server is the store's
for longer than a transaction, so nothing above is set for a session: each checkout is one
transaction, begun READ COMMITTED, its settings SET LOCAL (`_local_sql`); no statement is
prepared on the server; the owed scrub takes no session advisory lock; a VACUUM names its
tables with their schema and sets no deadline on the server (the checkout's cut is its
deadline). erase_scrub "full" is refused there (`check_pool_mode`: its VACUUM FULL's lock
wait cannot be bounded without a session), and so is a caller's pool. Session mode (the
default) is direct PostgreSQL or a pooler in session mode
(tests/test_postgres_pgbouncer.py runs both behind a real PgBouncer).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import select
import socket
import struct
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from tiermem.tiers.catchup import Claims, Deciding, TextsAhead
from tiermem.tiers.cold import (
    KEY_SEPARATOR,
    KEY_SUFFIX_HEX,
    SCRUB_PENDING_KEY,
    Label,
    content_hash,
    rebuilt_labels,
)
from tiermem.tiers.dialect import (
    ERASURE_ORDER,
    MAX_TURN_TOKENS,
    POSTGRES,
    PRUNE_IDLE_SQL,
    SalvagedRows,
    SharedQueries,
    owed_erasure,
    view_end,
    without_nul,
)
from tiermem.tiers.embed import Embedder, checked_identity, embedder_identity, memo_scope, remembered_for
from tiermem.tiers.errors import (
    ConversationNotFound,
    EmbeddingModelConflict,
    PositionOutOfRange,
    SchemaTooNew,
    ServerTooOld,
    StoreStalled,
    StoreUnavailable,
    StoreUnreachable,
    ValidationError,
    embedding_conflict,
    shown,
)
from tiermem.tiers.files import UNREACHABLE_SQLSTATES
from tiermem.tiers.models import (
    DEFAULT_FORK_MAX_ID_CHARS,
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
    CONVERSATION_DELETE_TRIGGER,
    COPIED_DIGEST_PREFIX,
    DEFAULT_BUSY_TIMEOUT_MS,
    PIN_CANDIDATES_INDEX,
    RECHECK_TABLE,
    ROWS_DELETED_WITH_CONVERSATION,
    SESSION_TURNS_INDEX,
    SUPERSEDED_PINS_INDEX,
    SUPERSESSION_VERSION_COLUMN,
    TOKENIZER_KEY,
    TOMBSTONE_NEWEST_COLUMN,
    TOMBSTONES_BY_NAME_INDEX,
    UNRECORDED,
    VEC_MODEL_KEY,
)
from tiermem.tiers.search import query_words
from tiermem.tiers.statements import TABLE as STATEMENT_TABLE
from tiermem.tiers.statements import StatementRow, postgres_migration
from tiermem.tiers.store import (
    INDEX_POOL_BATCHES,
    VIEWS_BEHIND_SQL,
    VIEWS_SEQ_START,
    VIEWS_UNCHECKED,
    SummaryRow,
    TurnFact,
    check_expected,
    pool_rows,
)
from tiermem.tiers.tokens import TokenCounter, message_tokens

try:
    import psycopg
    from psycopg import pq
    from psycopg import sql as pgsql
    from psycopg.adapt import Dumper
    from psycopg.conninfo import conninfo_to_dict, make_conninfo
    from psycopg.types import TypeInfo
    from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout
except ImportError as exc:  # pragma: no cover - the `postgres` extra is not installed
    raise ImportError(f"the PostgreSQL cold store needs tiermem[postgres] (psycopg, psycopg-pool): {exc}") from exc

log = logging.getLogger("tiermem.postgres")

DEFAULT_SCHEMA = "tiermem"
DEFAULT_POOL_MIN = 1
DEFAULT_POOL_MAX = 8
POOL_OPEN_TIMEOUT_S = 30.0
# how long an operation waits for a pooled connection (psycopg_pool's default) before it
# fails with StoreUnreachable (503, nothing written): the server down, at max_connections,
# or every connection of the pool in use
POOL_WAIT_S = 30.0
# How long the store's pool tries to open a connection (1, 2, 4... s apart, doubling)
# before it gives up (and, where operations wait, starts over: _reconnect_failed).
# psycopg_pool's default, 300 s, let the gap between tries reach 32 s: after a 60 s
# outage the first operation once the database was back waited 28 s. Short, so that no
# gap passes ~2 s; a connection attempt costs a failed connect() while the server is down.
RECONNECT_GIVE_UP_S = 3.0
# How long one connection attempt of the store's pool may go unanswered (libpq's
# connect_timeout: whole seconds, at least 2), where the URL (or PGCONNECT_TIMEOUT) sets
# none. psycopg's default, 130 s, kept a pool worker on a server that accepts and never
# answers (stopped with SIGSTOP, a silent proxy) that long: the pool grew no connection and
# found no server back meanwhile. A healthy server answers a connect in milliseconds; a
# distant one with TLS in well under a second.
CONNECT_TIMEOUT_S = 10
CONNECT_TIMEOUT_ENV = "PGCONNECT_TIMEOUT"  # libpq's: the operator's own, kept as the URL's
# A statement's wait for a lock (lock_timeout, each session of the store's pool): the
# store's `lock_timeout_ms`, Config.busy_timeout_ms as on SQLite. Past it the statement
# fails with lock_not_available (tiers.files: 503 busy, nothing written) instead of
# waiting on an operator's LOCK TABLE or an erasure's VACUUM FULL for as long as they
# last. PostgreSQL reads 0 as "wait forever", busy_timeout_ms = 0 as "do not wait": that
# is sent as the least wait it takes.
LEAST_LOCK_TIMEOUT_MS = 1
# The longest one checkout of a connection (an operation: its statements and commit) may
# go without finishing, past the lock wait it may spend (lock_timeout_ms, added to it),
# before its connection is cut (StoreStalled: 503). PostgreSQL's own timeouts cannot end
# it when the server never answers: a server stopped with SIGSTOP, or a proxy that
# accepts and goes silent, keeps the socket open (the kernel ACKs, so TCP keepalives and
# tcp_user_timeout see nothing), and psycopg waits on it for ever: a worker lost per
# request. Generous, so that a slow but alive query is not cut.
OPERATION_TIMEOUT_S = 60.0
# ... and of the maintenance that is long by design: a migration, a table rewrite after an
# erasure (VACUUM FULL: left owed when cut, as after any failure), an index build, a rebuild
MAINTENANCE_TIMEOUT_S = 3600.0
# The watchdog's longest sleep while every deadline is further away: Condition.wait refuses
# a timeout past threading.TIMEOUT_MAX (~292 years: OverflowError), which a finite but huge
# deadline reaches; waking then only recomputes
WATCHDOG_LONGEST_SLEEP_S = 3600.0
# after an unexpected error in the watchdog's round (logged), the next round comes this
# much later: not a busy loop where the error repeats, and a cut owed is still made
WATCHDOG_RETRY_S = 0.5
# where waiting is the design (a migration, the vectors' width: a process waits while
# another does it; an erasure behind another), the transaction lifts the limit for itself
# (SET LOCAL)
WAIT_FOR_LOCKS_SQL = "SET LOCAL lock_timeout = 0"
# How often a backend of the store checks, while it runs a statement, that its client is
# still there (client_connection_check_interval, PostgreSQL 14+; the server's default 0:
# never). A backend does not notice its client leave until it next reads or writes the
# socket: a connection cut by the watchdog (StoreStalled) or a killed process left its
# backend running the statement to its end, its transaction's locks held meanwhile. An
# erasure cut inside a long deletion kept ERASURE_ORDER_LOCK and its rows, so every other
# erasure waited for a transaction that could only roll back. The check is a poll() of the
# socket once an interval while a statement runs: nothing while idle or per round trip.
CLIENT_CHECK_INTERVAL_MS = 1000
# ... set on each session of the store's own pool; on a caller's connection, never for its
# session: for each of tiermem's maintenance transactions only (ends with it)
CLIENT_CHECK_SQL = f"SET client_connection_check_interval TO {CLIENT_CHECK_INTERVAL_MS}"
CLIENT_CHECK_LOCAL_SQL = f"SET LOCAL client_connection_check_interval TO {CLIENT_CHECK_INTERVAL_MS}"
# How long a session of the store may sit idle inside a transaction before the server ends
# it (idle_in_transaction_session_timeout; the server's default, 0, is never): the length of
# the checkout's own deadline (`_idle_in_transaction_ms`: operation_timeout_s plus the lock
# wait, as `_deadline`), so it never ends a live operation its watchdog would not cut; under
# `_maintenance`, the maintenance deadline's, for that checkout only. Before, a writer whose
# process stopped between two statements of its transaction (SIGSTOP: docker pause, a frozen
# VM, a debugger), its watchdog stopped with it, held what it had locked for as long as it
# stayed stopped: a keyed append's conversation row, so every other writer of that
# conversation failed busy at its lock_timeout, for ever (a killed writer's connection
# closes, and its transaction rolls back). Now the server rolls the stopped one's
# transaction back (nothing of it written) and closes its session; the writers behind it
# go on. PostgreSQL takes at most INT_MAX milliseconds.
IDLE_IN_TRANSACTION_SETTING = "idle_in_transaction_session_timeout"
IDLE_IN_TRANSACTION_MAX_MS = 2**31 - 1
# a connection's states between two statements of a transaction (libpq's PQtransactionStatus):
# cut so, its client was not waiting on the server and had sent no COMMIT (`_Watchdog._round`)
IDLE_IN_TRANSACTION_STATES = frozenset({pq.TransactionStatus.INTRANS, pq.TransactionStatus.INERROR})
# The oldest server the store runs on (libpq's server_version number: major * 10000 +
# minor from PostgreSQL 10 on): client_connection_check_interval came with PostgreSQL 14,
# and an older server refuses the SET (unrecognized configuration parameter). Refused when
# the store first connects (ServerTooOld) rather than run without the check, which would
# give back what it exists for: a cut erasure's or migration's locks held until its
# statement ended. PostgreSQL 13 is out of upstream support since November 2025.
MIN_SERVER_VERSION_NUM = 140000
# server_version_num's layout: major * 10000 + minor from PostgreSQL 10 on; before it
# major * 10000 + second part * 100 + minor (9.6.24 is 90624)
SERVER_VERSION_MAJOR = 10000
SERVER_VERSION_PART = 100
FIRST_TWO_PART_VERSION_NUM = 100000
# What a step after an erasure's commit (its scrub, the size after it) may fail with: a
# statement's error, or no pooled connection in time (StoreUnreachable: another request
# took the pool's last one). Either leaves the step owed, never fails the erasure.
AFTER_COMMIT_ERRORS = (psycopg.Error, StoreUnavailable)
MAX_DENSE_K = 4096  # as the SQLite engine's vec0 limit: callers see one bound
HNSW_EF_SEARCH = 100  # candidates per namespace search (pgvector's default 40 gave recall 0.88 at 10k)
HNSW_EF_SEARCH_MAX = 1000  # pgvector's upper bound
FTS_CONFIG = "english"  # stemmer and stopwords of the tsvector column
# PostgreSQL refuses a tsvector over 1,048,575 bytes; measured, a text's tsvector is at most
# ~2.4x its UTF-8 size (distinct numbers; hex words 1.8x, CJK 1.3x), so one message's index
# text is cut here with room to spare. Words past it are found by meaning only (SQLite's
# FTS5 indexes them all).
MAX_FTS_TEXT_BYTES = 256 * 1024
SCHEMA_PATTERN = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
# `rebuild` rewrites the turn and FTS rows in batches of messages, each one transaction
# in the writers' lock order (the conversations' rows, their turns, their pin versions):
# the first REBUILD_BATCH_MESSAGES, each next one sized from the last to hold its rows about
# REBUILD_BATCH_TARGET_S (within MIN..MAX). A conversation larger than a batch is its own
# batches, a pause as long as its row was held between two once held a spell (at most
# REBUILD_PAUSE_MAX_S; `_spell_begin`), where a queued append gets in; smaller ones share
# a batch, and none waits for a pause (the next batch takes other rows). As one
# transaction the rewrite held the pin version of every conversation with a load-bearing
# turn (its DELETE's trigger moved them) to its end: 20k turns, 3.6 s on 2 loaded cores.
REBUILD_BATCH_MESSAGES = 200
REBUILD_BATCH_MIN_MESSAGES = 16
REBUILD_BATCH_MAX_MESSAGES = 5000
REBUILD_BATCH_TARGET_S = 0.03
REBUILD_PAUSE_MAX_S = 1.0
RETENTION_GUC = "tiermem.retention"  # the one setting under which messages may be deleted
# the advisory lock (with the schema) under which an erasure numbers its tombstones, so
# their ids grow in commit order (`SharedQueries.erased_after`)
ERASURE_ORDER_LOCK = "tiermem-tombstones"
# the advisory lock (with the schema) under which one session finishes an OWED scrub (an
# open's, or a running Memory's indexer thread's: `_finish_scrub`), session-scoped as the
# VACUUM runs outside a transaction. Each server's finisher fires within one indexer wake
# of the others' (60 s owed seen by all): without it a second server read the marker the
# first was about to delete, its VACUUM FULL waited behind the first's, then rewrote every
# table again (a second stall of the whole store) or gave up with a false warning. Tried,
# never waited for: busy, the holder finishes it. An erasure's own scrub does not take it
OWED_SCRUB_LOCK = "tiermem-owed-scrub"
# "on": a commit returns once its WAL is on disk (an fsync per append: 1.5-5 ms on this
# machine's disk). "off": it returns at once and the WAL writer flushes within ~0.6 s; a
# crash of the server or the OS may lose the last such commits, never corrupts or
# reorders (the durability class of SQLite's synchronous=NORMAL, the SQLite default).
SYNCHRONOUS_COMMIT = ("on", "off")
# The isolation level every wait of this engine is written for (module docstring), set on
# each of its sessions rather than taken from the server: under a role's or database's
# default_transaction_isolation of 'repeatable read' or 'serializable', a writer that
# waited on a row lock (FOR UPDATE, the counter row, ON CONFLICT) failed with 40001 when
# the holder committed, and a migration that waited on its advisory lock would read the
# schema version from before the other process's migration (a snapshot of before the wait)
ISOLATION = "read committed"
# How the store's connections reach the server (Config.cold_pool_mode). "session": each
# connection is one server session of its own (PostgreSQL directly, or a pooler such as
# PgBouncer in pool_mode = session), so what a session sets at connect (`_session_sql`)
# holds for every later statement. "transaction": a pooler in transaction mode (PgBouncer's
# pool_mode = transaction) hands each transaction (each autocommit statement) to whichever
# server connection is free, so nothing of a session holds past its transaction. There,
# measured through PgBouncer 1.18 with two stores of two schemas sharing its servers, the
# session mode's statements ran under another store's search_path ("relation conversations
# does not exist", or another schema's tables), and psycopg's server-side prepared
# statements were missing or duplicate on the next server ("prepared statement _pg3_9
# does not exist"). So in "transaction" mode the store's connections prepare nothing
# (prepare_threshold None), run every operation as one transaction (no autocommit), begun
# READ COMMITTED by the driver (`isolation_level`), and set its settings with SET LOCAL at
# each checkout (`_local_sql`), which end with it and so never reach another client.
# Session-level advisory locks are not used there (`_owed_scrub_lock`).
POOL_MODES = ("session", "transaction")
DEFAULT_ISOLATION_SQL = f"SET default_transaction_isolation TO '{ISOLATION}'"
# Every setting the store gives a session (ISOLATION, `_session_sql`). On a caller's
# connection they hold for tiermem's checkout only: read before ours are set and set back
# when it is given back (`_borrowed`). Kept, they broke the caller's own queries: its
# UPDATE failed after 1 ms (lock_timeout), its serializable transactions ran read
# committed, its tables were looked up in tiermem's schema first.
CALLER_SETTINGS = ("search_path", "synchronous_commit", "default_transaction_isolation", "lock_timeout",
                   "hnsw.iterative_scan", "hnsw.ef_search", "statement_timeout", "client_connection_check_interval",
                   IDLE_IN_TRANSACTION_SETTING)
# the caller's values; NULL where undefined (hnsw.*, before pgvector is loaded in the session)
SAVE_CALLER_SETTINGS_SQL = "SELECT " + ", ".join(f"current_setting('{name}', true)" for name in CALLER_SETTINGS)
# reclaim()'s VACUUM runs outside a transaction, where no SET LOCAL reaches: its deadline is
# the server's (statement_timeout, and the client check, set for the statement: on a
# caller's connection set back with CALLER_SETTINGS, on our own pool's statement_timeout
# reset after it), ending this long before the checkout's cut, so that the server's cancel,
# which keeps the connection (and the caller's settings, set back), comes first. Cut
# instead, the pool (the caller's or ours) lost the connection, and on a caller's its
# backend stayed queued for the tables' locks, every later reader of them behind it.
SERVER_DEADLINE_LEAD_S = 0.5
# The longest an erasure's scrub waits for a table's lock, the erasure's own after its
# commit (`_erase`) or one left owed at an open (`_finish_scrub`), where the store sets no
# lock_timeout (`lock_timeout_ms=None`: the server's, 0 by default, is no limit):
# Config's busy_timeout_ms default, the wait the rewrite is documented to give a table's
# readers. The scrub stays owed when it gives up (`scrubbed: false`; the next open,
# erasure or reclaim() retries); without it, the erasure's caller, or the open, waited on
# a reader's lock up to the maintenance deadline (an hour).
SCRUB_LOCK_TIMEOUT_MS = DEFAULT_BUSY_TIMEOUT_MS
LEAST_STATEMENT_TIMEOUT_MS = 1  # statement_timeout 0 is "none"
# A lock on one of the store's tables as a whole (not on a row) that another session holds
# or waits for, in a mode that stops a write to it (ROW EXCLUSIVE, which every write takes,
# conflicts with SHARE and above): an erasure's or reclaim()'s VACUUM FULL (ACCESS
# EXCLUSIVE), a LOCK TABLE, an ALTER TABLE, a CREATE INDEX. A request still waiting counts:
# every later locker of the table queues behind it. `locked_table` asks it after a lock
# timeout, which does not say what it waited for.
TABLE_LOCKED_SQL = (
    "SELECT c.relname FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
    "WHERE l.locktype = 'relation' AND l.pid <> pg_backend_pid() "
    "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
    "AND c.relnamespace = to_regnamespace(%s) "
    "AND l.mode IN ('ShareLock', 'ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock') "
    "ORDER BY l.granted DESC, c.relname LIMIT 1")
MS_PER_S = 1000
# After an erasure or prune: "full" rewrites the affected tables (no erased byte left in
# any data file; blocks writers of each table while it is rewritten), "vacuum" marks the
# space reusable without blocking (fragments and GIN lexemes stay until reused/reindexed).
ERASE_SCRUB = ("full", "vacuum")
# what reclaim() vacuums: every table that holds a conversation's rows or its name; meta
# too, for migrate-store's digest of a copied conversation (COPIED_DIGEST_PREFIX), a few
# rows, rewritten in milliseconds
RECLAIM_TABLES = ("messages", "turns", "messages_fts", "messages_vec", "summaries", "summary_errors", "checkpoints",
                  "pins", "plans", "statement_supersessions", "view_claims", "idempotency_keys", "view_failures",
                  "supersession_rechecks", "conversations", "meta")
# The planner's column statistics (ANALYZE's sampled values: a text column's histogram
# bounds and most common values, a tsvector's most common lexemes), one catalog for the
# whole database. The scrub's ANALYZE UPDATEs a table's rows of it, and the old ones, sampled
# while the erased rows were there, stay in its pages (dead, or in the free space once
# pruned): so the scrub rewrites it too, after the tables' VACUUM (its ANALYZE committed,
# so the old rows are dead to it). Its VACUUM needs more than the store's tables:
# STATISTICS_MAY_VACUUM_SQL.
STATISTICS_TABLE = "pg_catalog.pg_statistic"
# ... in a statement of its own, with a lock wait of its own: its rewrite takes an ACCESS
# EXCLUSIVE lock on a catalog that every session of the database reads (the planner's
# lookup of a table's statistics, in any schema), and while the rewrite waits for a
# reader of it (an open transaction that read pg_stats: a monitoring query, a dump) every
# such lookup queues behind it. In the tables' VACUUM it waited the store's lock_timeout
# (3 s here: another application's fresh query took 2.28 s instead of 0.01 s). Past this
# wait it gives up: `scrubbed: false` naming it (ErasureReport.not_rewritten), the tables
# rewritten all the same, and only its rewrite owed (SCRUB_STATISTICS_KEY): retried, with
# the same wait, at the next open, erasure or reclaim().
STATISTICS_LOCK_TIMEOUT_MS = 100
STATISTICS_VACUUM_SQL = f"VACUUM FULL {STATISTICS_TABLE}"  # no ANALYZE: the server skips pg_statistic's
# meta: pg_statistic's rewrite owed alone (the tables' done). Its value: the next xid after
# the tables' ANALYZE (32-bit, as _next_xid): a snapshot at or before it may still see the
# old rows, and the retry asks for those after its rewrite (SNAPSHOT_HOLDERS_SQL)
SCRUB_STATISTICS_KEY = "scrub_statistics_pending"
STATISTICS_OWED_SQL = ("INSERT INTO meta(key, value) VALUES (%s, %s) "
                       "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value")
# Whether the session's role may VACUUM pg_statistic, by the server's own rule: its owner (a
# superuser, or a member), the database's owner (any non-shared catalog), and from
# PostgreSQL 17 on a role with MAINTAIN on it (pg_maintain's members too). One it may not is
# skipped with a WARNING only, not an error, so the store asks first.
STATISTICS_MAY_VACUUM_SQL = (
    "SELECT pg_has_role((SELECT relowner FROM pg_class WHERE oid = 'pg_catalog.pg_statistic'::regclass), 'USAGE') "
    "OR pg_has_role((SELECT datdba FROM pg_database WHERE datname = current_database()), 'USAGE')")
STATISTICS_MAINTAIN_SQL = " OR has_table_privilege('pg_catalog.pg_statistic', 'MAINTAIN')"
MAINTAIN_PRIVILEGE_VERSION_NUM = 170000  # PostgreSQL 17: GRANT MAINTAIN, pg_maintain
# Statistics ANALYZE does not replace: it writes a table's rows of pg_statistic only when its
# sample holds a row (analyze.c: numrows > 0), and only for the columns it samples. So a table
# an erasure emptied (every conversation erased, or pruned) kept the values sampled before as
# LIVE rows, readable in pg_stats (a message's words, its session id, metadata, the
# conversation's id and namespace) and copied into pg_statistic's new file by its rewrite,
# while the erasure answered `scrubbed: true`; and a column whose statistics target is 0
# (UNSAMPLED_COLUMNS) keeps what was sampled before it was set. The scrub (and m013) clears
# both (`clear_stale_statistics`), before the tables' VACUUM (FULL, ANALYZE): a table still
# empty then gets none back, one written meanwhile is sampled again, and the cleared rows'
# bytes go with pg_statistic's old file.
STALE_STATISTICS_SQL = (
    "SELECT s.tablename::text, s.attname::text FROM pg_catalog.pg_stats s "
    "JOIN pg_catalog.pg_attribute a ON a.attrelid = format('%%I.%%I', s.schemaname, s.tablename)::regclass "
    "AND a.attname = s.attname WHERE s.schemaname = current_schema() AND s.tablename = ANY(%(tables)s) "
    "AND (a.attstattarget = 0 OR s.tablename = ANY(%(empty)s)) ORDER BY 1, 2")
# Clearing a column's statistics: a superuser DELETEs its pg_statistic rows; from PostgreSQL
# 18 on the table's owner (MAINTAIN on it) may call pg_clear_attribute_stats. Before 18 a
# role that is not superuser cannot: the scrub then answers `scrubbed` false, saying so.
CLEAR_ATTRIBUTE_STATS_VERSION_NUM = 180000
IS_SUPERUSER_SQL = "SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user"
DELETE_STATISTICS_SQL = (
    "DELETE FROM pg_catalog.pg_statistic s USING pg_catalog.pg_attribute a "
    "WHERE a.attrelid = s.starelid AND a.attnum = s.staattnum "
    "AND s.starelid = format('%%I.%%I', current_schema(), %s::text)::regclass AND a.attname = %s")
CLEAR_ATTRIBUTE_STATS_SQL = "SELECT pg_catalog.pg_clear_attribute_stats(current_schema(), %s, %s, false)"
# Text columns that hold what users wrote (or what was made from it: a summary, a label's
# reason, a plan, an error quoting it) and that no query compares by value: no plan needs
# their sampled values, so ANALYZE never samples them (STATISTICS 0, m013_no_sampled_text).
# The columns queries filter or join on keep theirs (conversation_id, namespace, session_id,
# tsv: the GIN index's choice over a conversation's or namespace's index), cleared by the
# scrub where their table is left empty.
UNSAMPLED_COLUMNS = (("messages", "body"), ("messages", "metadata"), ("messages_fts", "text"),
                     ("checkpoints", "summary"), ("checkpoints", "metadata"), ("plans", "plan"),
                     ("summaries", "body"), ("summary_errors", "error"), ("turns", "label_reason"))


def clear_stale_statistics(c: Conn, tables: Sequence[str]) -> list[tuple[str, str]]:
    """Clear the statistics of `tables` (in the session's schema) that ANALYZE will not
    replace (STALE_STATISTICS_SQL): every column of a table with no row, and each column
    whose statistics target is 0. Returns the (table, column) pairs left because the role
    may not clear them (CLEAR_ATTRIBUTE_STATS_VERSION_NUM): empty when done."""
    empty = [t for t in tables if c.execute(pgsql.SQL("SELECT NOT EXISTS (SELECT 1 FROM {})").format(
        pgsql.Identifier(t))).fetchone()[0]]
    stale = [(str(r[0]), str(r[1])) for r in c.execute(STALE_STATISTICS_SQL,
                                                          {"tables": list(tables), "empty": empty}).fetchall()]
    if not stale:
        return []
    row = c.execute(IS_SUPERUSER_SQL).fetchone()
    if row is not None and row[0]:
        statement = DELETE_STATISTICS_SQL
    elif c.info.server_version >= CLEAR_ATTRIBUTE_STATS_VERSION_NUM:
        statement = CLEAR_ATTRIBUTE_STATS_SQL
    else:
        return stale
    c.cursor().executemany(statement, stale)
    return []
# VACUUM FULL copies into the new files every deleted row that a snapshot still open may
# see (not yet dead to all: the server's horizon), so the erased text outlives the rewrite
# while a snapshot older than the erasure is open: a report's REPEATABLE READ transaction
# (on any table of the database), a session idle in a transaction holding an xid, a
# prepared transaction, a replication slot's xmin or catalog_xmin (a standby's
# hot_standby_feedback through its slot or its walsender's xmin). The scrub asks before
# its rewrite which of those hold a snapshot (or an xid) at or before the erasure's
# transaction, and after it which ones opened before the rewrite are still open (they kept
# pg_statistic's old rows, which the rewrite's ANALYZE replaced): any, and the scrub is not
# done (`scrubbed: false`, still owed; logged naming them). The rows of this database's
# sessions (and of those in none, a walsender's), not this connection's own, nor a lazy
# VACUUM's (pg_stat_progress_vacuum), whose snapshot the server's horizon ignores.
# `age()` of both in one statement: the xids compared modulo 2^32, as the server does.
# Visible to any role (pg_stat_activity's xid columns are not restricted to its members).
# The second column: whether the holder is running a statement (HOLDER_GRACE_MS).
SNAPSHOT_HOLDERS_SQL = (
    "SELECT 'backend pid ' || pid, state = 'active' FROM pg_stat_activity "
    "WHERE pid <> pg_backend_pid() "
    "AND (datid IS NULL OR datid = (SELECT oid FROM pg_database WHERE datname = current_database())) "
    "AND pid NOT IN (SELECT pid FROM pg_stat_progress_vacuum) "
    "AND (age(backend_xmin) >= age(%(xid)s::text::xid) OR age(backend_xid) >= age(%(xid)s::text::xid)) "
    "UNION ALL SELECT 'prepared transaction ' || transaction, false FROM pg_prepared_xacts "
    "WHERE database = current_database() AND age(transaction) >= age(%(xid)s::text::xid) "
    "UNION ALL SELECT 'replication slot ' || quote_ident(slot_name::text), false FROM pg_replication_slots "
    "WHERE age(xmin) >= age(%(xid)s::text::xid) OR age(catalog_xmin) >= age(%(xid)s::text::xid) "
    "ORDER BY 1")
# A holder running a statement (pg_stat_activity state 'active': an autovacuum worker's
# ANALYZE, which holds a snapshot for its sample, a manual ANALYZE, a query in flight, an
# append queued behind the rewrite's lock) mostly ends within milliseconds: on a busy server
# an autovacuum ANALYZE of another table, begun just before the erasure committed, made it
# answer `scrubbed: false` (the whole scrub owed to the next open) for a worker gone ~100 ms
# later. So before each rewrite the scrub asks again every HOLDER_POLL_MS, while every
# holder it finds is running a statement, for at most this long (the store's
# `holder_grace_ms`): once none is left it rewrites. One still there after it, or any that
# is not running one (idle in a transaction: it waits on its client; a prepared
# transaction, a replication slot), is answered at once as before: not scrubbed, owed.
# No lock is held while it waits (the connection is between statements).
HOLDER_GRACE_MS = 500
HOLDER_GRACE_MAX_MS = 60_000  # `holder_grace_ms` at most: the erasure's caller waits it
HOLDER_POLL_MS = 10
# ErasureReport.not_rewritten where such a snapshot is the cause, with what holds it
SNAPSHOT_HELD_NOTE = "deleted rows kept: a snapshot older than the erasure is open ({holders})"


class _HeldLog:
    """What the owed scrub last found holding it, per store (its URL and schema): an open
    the holder outlives asks again at each open of the store, and would log the same line
    each time. Logged at WARNING when new (another erasure, another holder), else DEBUG."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[tuple[str, str], tuple[str | None, tuple[str, ...]]] = {}

    def level(self, store: tuple[str, str], marker: str | None, held: Sequence[str]) -> int:
        seen = (marker, tuple(held))
        with self._lock:
            repeated = self._last.get(store) == seen
            self._last[store] = seen
        return logging.DEBUG if repeated else logging.WARNING

    def forget(self, store: tuple[str, str]) -> None:
        with self._lock:
            self._last.pop(store, None)


HELD_LOG = _HeldLog()
# The next xid to be assigned: a snapshot at or before it was open before the rewrite began
NEXT_XID_SQL = "SELECT pg_snapshot_xmax(pg_current_snapshot())::text"
# The scrub's marker (SCRUB_PENDING_KEY) holds the newest erasure's xid (xid8, decimal) that
# it is owed for: a later erasure's replaces an older one's, whichever commits first (the
# marker row's lock orders them). A marker of an older version ('1', below the first normal
# xid) or not a number names none and stays so: its scrub counts every snapshot older than
# the rewrite instead (NEXT_XID_SQL).
SCRUB_MARKER_SQL = (
    "INSERT INTO meta(key, value) VALUES (%s, pg_current_xact_id()::text) ON CONFLICT (key) DO UPDATE SET value = "
    "CASE WHEN meta.value !~ '^[0-9]{1,20}$' THEN meta.value WHEN meta.value::numeric < 3 THEN meta.value "
    "ELSE GREATEST(meta.value::numeric, EXCLUDED.value::numeric)::text END")
FIRST_NORMAL_XID = 3  # xids 0-2 are the server's own (invalid, bootstrap, frozen)
XID_MODULUS = 2 ** 32  # a 32-bit xid is the low word of an xid8
# Tables whose rows belong to one conversation key; an erasure empties them for that key
# (messages and conversations go last, with the guard armed).
CONVERSATION_TABLES = ("turns", "messages_fts", "messages_vec", "checkpoints", "pins", "plans", "summaries",
                       "summary_errors", "statement_supersessions", "view_claims", "idempotency_keys",
                       "view_failures", "supersession_rechecks")

Conn = Any  # psycopg.Connection; kept loose so callers need not import psycopg


# ----------------------------------------------------------------------------------
# Migrations: an ordered, append-only list of named functions. Released steps are never
# edited; a change is a new step. Each runs in its own transaction, under an advisory
# lock, and is recorded in schema_migrations.


def m001_log(c: Conn) -> None:
    c.execute("""CREATE TABLE conversations(
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        namespace TEXT NOT NULL,
        parent_id TEXT,
        fork_position BIGINT,
        created_at DOUBLE PRECISION NOT NULL,
        last_message_at DOUBLE PRECISION NOT NULL,
        next_position BIGINT NOT NULL DEFAULT 0,
        UNIQUE (namespace, name))""")
    c.execute("CREATE INDEX conversations_by_last ON conversations(last_message_at)")
    c.execute("CREATE TABLE conversation_keys(key TEXT PRIMARY KEY, issued_at DOUBLE PRECISION NOT NULL)")
    c.execute("CREATE SEQUENCE messages_id_seq")
    c.execute("""CREATE TABLE messages(
        conversation_id TEXT NOT NULL,
        position BIGINT NOT NULL CHECK (position >= 0),
        id BIGINT NOT NULL UNIQUE,
        role TEXT NOT NULL,
        body TEXT NOT NULL,
        session_id TEXT,
        metadata TEXT,
        created_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (conversation_id, position))""")
    c.execute("""CREATE FUNCTION tm_messages_refuse_update() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'messages are append-only: UPDATE is refused' USING ERRCODE = 'restrict_violation';
        END $$""")
    c.execute(f"""CREATE FUNCTION tm_messages_guard_delete() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF coalesce(current_setting('{RETENTION_GUC}', true), '') <> 'on' THEN
            RAISE EXCEPTION 'messages are append-only: DELETE only through prune' USING ERRCODE = 'restrict_violation';
          END IF;
          RETURN OLD;
        END $$""")
    c.execute("""CREATE FUNCTION tm_messages_refuse_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'messages are append-only: TRUNCATE is refused' USING ERRCODE = 'restrict_violation';
        END $$""")
    c.execute("CREATE TRIGGER messages_no_update BEFORE UPDATE ON messages "
              "FOR EACH ROW EXECUTE FUNCTION tm_messages_refuse_update()")
    c.execute("CREATE TRIGGER messages_no_delete BEFORE DELETE ON messages "
              "FOR EACH ROW EXECUTE FUNCTION tm_messages_guard_delete()")
    c.execute("CREATE TRIGGER messages_no_truncate BEFORE TRUNCATE ON messages "
              "FOR EACH STATEMENT EXECUTE FUNCTION tm_messages_refuse_truncate()")
    c.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    c.execute("INSERT INTO meta(key, value) VALUES ('db_uuid', %s)", (uuid.uuid4().hex,))


def m002_index(c: Conn) -> None:
    # the turn index and the search indexes: derived, rebuildable from messages
    c.execute("""CREATE TABLE turns(
        conversation_id TEXT NOT NULL,
        position BIGINT NOT NULL,
        id BIGINT NOT NULL UNIQUE,
        role TEXT NOT NULL,
        session_id TEXT,
        tokens INTEGER NOT NULL,
        content_hash TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        embedded SMALLINT NOT NULL DEFAULT 0,
        intent TEXT,
        load_bearing SMALLINT,
        priority INTEGER,
        label_reason TEXT,
        superseded_by BIGINT,
        speaker TEXT,
        PRIMARY KEY (conversation_id, position))""")
    c.execute("CREATE INDEX turns_pending ON turns(conversation_id, position) WHERE embedded = 0")
    c.execute("CREATE INDEX turns_load_bearing ON turns(conversation_id, position) WHERE load_bearing = 1")
    c.execute("CREATE INDEX turns_by_role ON turns(conversation_id, role, position)")
    c.execute(f"""CREATE TABLE messages_fts(
        id BIGINT PRIMARY KEY,
        conversation_id TEXT NOT NULL,
        namespace TEXT NOT NULL,
        text TEXT NOT NULL,
        tsv tsvector GENERATED ALWAYS AS (to_tsvector('{FTS_CONFIG}', text)) STORED)""")
    c.execute("CREATE INDEX messages_fts_tsv ON messages_fts USING gin(tsv)")
    c.execute("CREATE INDEX messages_fts_by_conv ON messages_fts(conversation_id)")
    c.execute("CREATE INDEX messages_fts_by_namespace ON messages_fts(namespace)")
    # no fixed width: the embedder decides it (meta 'vec_dim'); a new width empties it
    c.execute("""CREATE TABLE messages_vec(
        id BIGINT PRIMARY KEY,
        conversation_id TEXT NOT NULL,
        namespace TEXT NOT NULL,
        position BIGINT NOT NULL,
        embedding vector NOT NULL)""")
    c.execute("CREATE INDEX messages_vec_by_conv ON messages_vec(conversation_id, position)")
    c.execute("CREATE INDEX messages_vec_by_namespace ON messages_vec(namespace)")


def m003_user_state(c: Conn) -> None:
    c.execute("""CREATE TABLE checkpoints(
        id BIGSERIAL PRIMARY KEY,
        conversation_id TEXT NOT NULL,
        position BIGINT NOT NULL,
        summary TEXT NOT NULL,
        metadata TEXT,
        created_at DOUBLE PRECISION NOT NULL)""")
    c.execute("CREATE INDEX checkpoints_by_conv ON checkpoints(conversation_id, position)")
    c.execute("""CREATE TABLE pins(
        conversation_id TEXT NOT NULL,
        position BIGINT NOT NULL,
        priority INTEGER NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (conversation_id, position))""")
    c.execute("""CREATE TABLE plans(
        id BIGSERIAL PRIMARY KEY,
        conversation_id TEXT NOT NULL,
        last_position BIGINT NOT NULL,
        plan TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL)""")
    c.execute("CREATE INDEX plans_by_conv ON plans(conversation_id, last_position)")
    c.execute("""CREATE TABLE tombstones(
        id BIGSERIAL PRIMARY KEY,
        key TEXT NOT NULL,
        namespace TEXT NOT NULL,
        name TEXT NOT NULL,
        reason TEXT NOT NULL CHECK (reason IN ('prune', 'erase')),
        messages BIGINT NOT NULL,
        summaries BIGINT NOT NULL,
        checkpoints BIGINT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        deleted_at DOUBLE PRECISION NOT NULL)""")
    c.execute("CREATE INDEX tombstones_by_namespace ON tombstones(namespace, deleted_at)")
    c.execute("CREATE TABLE redis_purge(key TEXT PRIMARY KEY, at DOUBLE PRECISION NOT NULL)")


def m004_pin_versions(c: Conn) -> None:
    # what the SQLite engine's m012 does: a per-key counter moved by triggers whenever
    # what the planner may pin could have changed, for every writer in any process.
    # Rows are never deleted (keys are never reused either).
    c.execute("CREATE TABLE pin_versions(conversation_id TEXT PRIMARY KEY, version BIGINT NOT NULL)")
    c.execute("""CREATE FUNCTION tm_bump_pin_version() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          INSERT INTO pin_versions(conversation_id, version)
            VALUES (CASE WHEN TG_OP = 'DELETE' THEN OLD.conversation_id ELSE NEW.conversation_id END, 1)
            ON CONFLICT (conversation_id) DO UPDATE SET version = pin_versions.version + 1;
          RETURN NULL;
        END $$""")
    c.execute("CREATE TRIGGER pin_version_turn_insert AFTER INSERT ON turns FOR EACH ROW "
              "WHEN (NEW.load_bearing = 1) EXECUTE FUNCTION tm_bump_pin_version()")
    c.execute("CREATE TRIGGER pin_version_turn_update AFTER UPDATE OF load_bearing, priority, superseded_by "
              "ON turns FOR EACH ROW WHEN (OLD.load_bearing IS DISTINCT FROM NEW.load_bearing "
              "OR OLD.priority IS DISTINCT FROM NEW.priority OR OLD.superseded_by IS DISTINCT FROM NEW.superseded_by) "
              "EXECUTE FUNCTION tm_bump_pin_version()")
    c.execute("CREATE TRIGGER pin_version_turn_delete AFTER DELETE ON turns FOR EACH ROW "
              "WHEN (OLD.load_bearing = 1) EXECUTE FUNCTION tm_bump_pin_version()")
    c.execute("CREATE TRIGGER pin_version_pins AFTER INSERT OR UPDATE OR DELETE ON pins FOR EACH ROW "
              "EXECUTE FUNCTION tm_bump_pin_version()")


def m005_summaries(c: Conn) -> None:
    # the warm tier's versioned views (tiers/warm.py) and their refresh errors
    c.execute("""CREATE TABLE summaries(
        id BIGSERIAL PRIMARY KEY,
        conversation_id TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('rolling', 'constraints', 'session')),
        key TEXT NOT NULL DEFAULT '',
        version INTEGER NOT NULL CHECK (version >= 1),
        start_position BIGINT NOT NULL,
        end_position BIGINT NOT NULL,
        body TEXT NOT NULL,
        tokens INTEGER NOT NULL,
        summarizer TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        UNIQUE (conversation_id, kind, key, version))""")
    c.execute("""CREATE TABLE summary_errors(
        id BIGSERIAL PRIMARY KEY,
        conversation_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        key TEXT NOT NULL DEFAULT '',
        error TEXT NOT NULL,
        at DOUBLE PRECISION NOT NULL)""")
    c.execute("CREATE INDEX summary_errors_by_view ON summary_errors(conversation_id, kind, key, id)")


def m006_know2(c: Conn) -> None:
    # statement-level supersession (tiers/statements.py), as the SQLite engine's m014_statement_supersessions
    postgres_migration(c)


def m007_view_claims(c: Conn) -> None:
    # a lease per warm view being refreshed, as the SQLite engine's m015_view_claims
    c.execute("""CREATE TABLE view_claims(
        conversation_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        key TEXT NOT NULL,
        holder TEXT NOT NULL,
        expires_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (conversation_id, kind, key))""")


def m008_views_behind(c: Conn) -> None:
    # the scheduler's sweep reads only conversations written since their views were
    # last found current, as the SQLite engine's m019_views_behind
    c.execute(f"ALTER TABLE conversations ADD COLUMN views_seq BIGINT NOT NULL DEFAULT {VIEWS_SEQ_START}")
    c.execute(f"ALTER TABLE conversations ADD COLUMN views_checked_seq BIGINT NOT NULL DEFAULT {VIEWS_UNCHECKED}")
    c.execute("ALTER TABLE conversations ADD COLUMN views_through BIGINT NOT NULL DEFAULT -1")
    c.execute(f"CREATE INDEX conversations_views_behind ON conversations(id) WHERE {VIEWS_BEHIND_SQL}")


def m009_index_pin_candidates(c: Conn) -> None:
    # the top `limit` unsuperseded load-bearing turns by (priority, position) read as a
    # backward index scan that stops at the limit, and the superseded ones by position,
    # as the SQLite engine's m023_index_pin_candidates: turns_load_bearing (by position)
    # made PostgreSQL read every load-bearing turn of the conversation and sort them
    c.execute(f"CREATE INDEX {PIN_CANDIDATES_INDEX} ON turns(conversation_id, priority, position) "
              "WHERE load_bearing = 1 AND superseded_by IS NULL")
    c.execute(f"CREATE INDEX {SUPERSEDED_PINS_INDEX} ON turns(conversation_id, position) "
              "WHERE load_bearing = 1 AND superseded_by IS NOT NULL")


def m010_idempotency_keys(c: Conn) -> None:
    # appends made with an idempotency key, as the SQLite engine's m024_idempotency_keys:
    # recorded in the append's transaction, kept as long as the conversation (the erasure
    # deletes them with its other rows, CONVERSATION_TABLES; the foreign key makes any
    # other deletion of the conversation take them too)
    c.execute("""CREATE TABLE idempotency_keys(
        conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        idem_key TEXT NOT NULL,
        fingerprint BYTEA NOT NULL,
        first_position BIGINT NOT NULL,
        message_count INTEGER NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (conversation_id, idem_key))""")


def m011_view_failures(c: Conn) -> None:
    # a warm view whose latest refresh failed, as the SQLite engine's m025_view_failures
    # (deleted with its conversation by the erasure, CONVERSATION_TABLES)
    c.execute("""CREATE TABLE view_failures(
        conversation_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        key TEXT NOT NULL,
        failures INTEGER NOT NULL,
        first_at DOUBLE PRECISION NOT NULL,
        retry_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (conversation_id, kind, key))""")


def m012_index_turns_by_session(c: Conn) -> None:
    # one session's turns after a position (a session view's freshness, whether a refresh
    # has anything to add, the refresh's read) seek to the session instead of reading
    # every later turn of the conversation, as the SQLite engine's m026_index_turns_by_session
    c.execute(f"CREATE INDEX {SESSION_TURNS_INDEX} ON turns(conversation_id, session_id, position) "
              "WHERE session_id IS NOT NULL")


def m013_no_sampled_text(c: Conn) -> None:
    # ANALYZE no longer samples what users wrote (UNSAMPLED_COLUMNS), and what it sampled
    # before is cleared (it would stay: STALE_STATISTICS_SQL), where the role may
    for table, column in UNSAMPLED_COLUMNS:
        c.execute(pgsql.SQL("ALTER TABLE {} ALTER COLUMN {} SET STATISTICS 0").format(
            pgsql.Identifier(table), pgsql.Identifier(column)))
    left = clear_stale_statistics(c, sorted({t for t, _ in UNSAMPLED_COLUMNS}))
    if left:
        log.warning("the statistics sampled before of %s stay (the role may not clear them: neither superuser, "
                    "nor PostgreSQL 18's pg_clear_attribute_stats); the next erasure's scrub reports them",
                    ", ".join(f"{t}.{a}" for t, a in left))


def m014_supersession_versions(c: Conn) -> None:
    # the counter only supersession moves, in the conversation's pin_versions row (the
    # row the same writes lock already), as the SQLite engine's m027_supersession_versions;
    # re-runnable, as that one (a store rolled back to an older version runs it again)
    col = SUPERSESSION_VERSION_COLUMN
    c.execute(f"ALTER TABLE pin_versions ADD COLUMN IF NOT EXISTS {col} BIGINT NOT NULL DEFAULT 0")
    c.execute(f"""CREATE OR REPLACE FUNCTION tm_bump_supersession_version() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          INSERT INTO pin_versions(conversation_id, version, {col})
            VALUES (CASE WHEN TG_OP = 'DELETE' THEN OLD.conversation_id ELSE NEW.conversation_id END, 0, 1)
            ON CONFLICT (conversation_id) DO UPDATE SET {col} = pin_versions.{col} + 1;
          RETURN NULL;
        END $$""")
    # name: (event, condition)
    triggers = {
        "supersession_version_turn_insert": ("AFTER INSERT ON turns", "NEW.superseded_by IS NOT NULL"),
        "supersession_version_turn_update": ("AFTER UPDATE OF superseded_by ON turns",
                                             "OLD.superseded_by IS DISTINCT FROM NEW.superseded_by"),
        "supersession_version_turn_delete": ("AFTER DELETE ON turns", "OLD.superseded_by IS NOT NULL"),
        "supersession_version_statements": (f"AFTER INSERT OR DELETE ON {STATEMENT_TABLE}", "true"),
    }
    for name, (event, when) in triggers.items():
        table = event.rsplit(" ON ", 1)[1]
        c.execute(f"DROP TRIGGER IF EXISTS {name} ON {table}")
        c.execute(f"CREATE TRIGGER {name} {event} FOR EACH ROW WHEN ({when}) "
                  "EXECUTE FUNCTION tm_bump_supersession_version()")


def m015_tokenizer_recorded(c: Conn) -> None:
    # the tokenizer that counted turns.tokens, recorded in meta ('' for a store made
    # before: counted by the one configured then, recorded at its next open without a
    # recount), as the SQLite engine's m028_tokenizer_recorded (tiers.recount)
    c.execute("INSERT INTO meta(key, value) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING",
              (TOKENIZER_KEY, UNRECORDED))


def m016_supersession_rechecks(c: Conn) -> None:
    # the corrections to search by meaning again once every turn before them is embedded,
    # as the SQLite engine's m029_supersession_rechecks (derived; rebuild clears it)
    c.execute(f"CREATE TABLE IF NOT EXISTS {RECHECK_TABLE}(conversation_id TEXT NOT NULL, "
              "position BIGINT NOT NULL, PRIMARY KEY (conversation_id, position))")


def m017_conversation_delete_trigger(c: Conn) -> None:
    # as the SQLite engine's m032: an older tiermem still running beside this one erases
    # with its own list of tables (98529cc's had neither view_claims nor the tables after
    # it). idempotency_keys goes by its foreign key (ON DELETE CASCADE), which any code's
    # delete fires; the other small tables of a conversation had none, so this trigger
    # deletes their rows inside whatever session deletes the row (unqualified names: the
    # session's search_path, the store's schema, as for tm_bump_pin_version). Rows such a
    # process already left are deleted here once.
    tables = [t for t in ROWS_DELETED_WITH_CONVERSATION if t != "idempotency_keys"]
    deletes = " ".join(f"DELETE FROM {t} WHERE conversation_id = OLD.id;" for t in tables)
    # OR REPLACE / IF EXISTS: a store whose recorded steps were rolled back by hand (or a
    # rerun after a crash between DDL statements on a pooler) runs the step again
    c.execute(f"""CREATE OR REPLACE FUNCTION tm_conversation_delete_rows() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          {deletes}
          DELETE FROM meta WHERE key = '{COPIED_DIGEST_PREFIX}' || OLD.id;
          RETURN NULL;
        END $$""")
    c.execute(f"DROP TRIGGER IF EXISTS {CONVERSATION_DELETE_TRIGGER} ON conversations")
    c.execute(f"CREATE TRIGGER {CONVERSATION_DELETE_TRIGGER} AFTER DELETE ON conversations FOR EACH ROW "
              "EXECUTE FUNCTION tm_conversation_delete_rows()")
    for t in tables:
        c.execute(f"DELETE FROM {t} x WHERE NOT EXISTS (SELECT 1 FROM conversations c WHERE c.id = x.conversation_id)")


def m018_index_tombstones_by_name(c: Conn) -> None:
    # as the SQLite engine's m033: an import's `erasures_of` seeks each name instead of
    # reading every tombstone of the namespace per group of names (review r_c5 F2)
    c.execute(f"CREATE INDEX IF NOT EXISTS {TOMBSTONES_BY_NAME_INDEX} ON tombstones(namespace, name, reason, deleted_at)")


def m019_tombstone_newest_message(c: Conn) -> None:
    # as the SQLite engine's m034: each tombstone records the newest created_at among its
    # erased messages, so an import refuses an erased line stamped ahead of the server
    # clock; old tombstones keep NULL (the erasure time alone, as before)
    c.execute(f"ALTER TABLE tombstones ADD COLUMN IF NOT EXISTS {TOMBSTONE_NEWEST_COLUMN} DOUBLE PRECISION")


MIGRATIONS: list[Callable[[Conn], None]] = [
    m001_log,
    m002_index,
    m003_user_state,
    m004_pin_versions,
    m005_summaries,
    m006_know2,
    m007_view_claims,
    m008_views_behind,
    m009_index_pin_candidates,
    m010_idempotency_keys,
    m011_view_failures,
    m012_index_turns_by_session,
    m013_no_sampled_text,
    m014_supersession_versions,
    m015_tokenizer_recorded,
    m016_supersession_rechecks,
    m017_conversation_delete_trigger,
    m018_index_tombstones_by_name,
    m019_tombstone_newest_message,
]


def schema_version() -> int:
    return len(MIGRATIONS)


def redact(url: str) -> str:
    """The URL without its password (for errors, logs and stats)."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "postgresql://(unparseable url)"
    params.pop("password", None)
    return make_conninfo("", **{k: v for k, v in params.items() if v is not None})


def sets_connect_timeout(url: str) -> bool:
    """Whether the URL gives connections a connect_timeout of its own, or libpq's
    environment does (PGCONNECT_TIMEOUT): then the store's pool keeps it."""
    try:
        given = conninfo_to_dict(url).get("connect_timeout")
    except psycopg.ProgrammingError:  # unparseable: the pool's connect says so, naming it
        given = None
    return given is not None or bool(os.environ.get(CONNECT_TIMEOUT_ENV))


def connect_options(url: str, *, pool_mode: str = "session") -> dict[str, Any]:
    """The options of every connection tiermem opens to `url` (its pool's and its one-off
    ones, `owned_connection`): autocommit, and CONNECT_TIMEOUT_S as libpq's
    connect_timeout unless the URL or the environment sets one (`sets_connect_timeout`).
    Behind a pooler in transaction mode (`pool_mode`, POOL_MODES) no statement is prepared
    on the server: the next transaction may run on a server connection that has not got
    it (or has another's of the same name)."""
    options: dict[str, Any] = {"autocommit": True}
    if pool_mode == "transaction":
        options["prepare_threshold"] = None
    if not sets_connect_timeout(url):
        options["connect_timeout"] = CONNECT_TIMEOUT_S
    return options


def deadline_seconds(field: str, parameter: str, value: object) -> float:
    """A watchdog deadline's seconds, refused (ValidationError naming `field`, the setting
    the user set) unless a finite number more than 0: an infinite one is no deadline (and
    once crashed the watchdog's thread: no checkout was ever cut again), NaN compares
    false to every time."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise ValidationError(field, f"{parameter} must be a finite number of seconds more than 0, got {shown(value)}")
    return float(value)


def server_version_name(version_num: int) -> str:
    """A server_version_num as PostgreSQL names the release ("13.16", "9.6.24")."""
    major, rest = divmod(version_num, SERVER_VERSION_MAJOR)
    if version_num >= FIRST_TWO_PART_VERSION_NUM:
        return f"{major}.{rest}"
    return f"{major}.{rest // SERVER_VERSION_PART}.{rest % SERVER_VERSION_PART}"


def check_server_version(where: str, version_num: int) -> None:
    """Refuse a server older than MIN_SERVER_VERSION_NUM (ServerTooOld, naming both
    versions and what needs the newer one); `version_num` is the connection's
    server_version_num (psycopg's `conn.info.server_version`)."""
    if version_num < MIN_SERVER_VERSION_NUM:
        raise ServerTooOld(where, f"{server_version_name(version_num)} (server_version_num {version_num})",
                           str(MIN_SERVER_VERSION_NUM // SERVER_VERSION_MAJOR),
                           "client_connection_check_interval, which ends the server's work for a connection "
                           "cut at its deadline")


def query_lexemes(text: str) -> list[str]:
    """`to_tsquery` arguments from arbitrary user text, one per word (tiers.search's
    query_words), each quoted as a lexeme: no input can break the syntax."""
    return [f"'{w}'" for w in query_words(text)]


class _KeyTaken(Exception):
    """Rolls back an append whose idempotency key another transaction recorded first
    (`PostgresStore._append_keyed`); never leaves the store."""


class Vec:
    """A vector parameter, sent in pgvector's binary format (`vector_recv`: uint16 dim,
    uint16 unused, big-endian float4s): exact, and ~500x cheaper to encode than the text
    form (1M synthetic vectors of 384 floats: under a second, not ~15 minutes)."""

    __slots__ = ("data",)

    def __init__(self, v: np.ndarray) -> None:
        self.data = np.asarray(v, dtype=">f4").ravel()


class _VecDumper(Dumper):
    format = pq.Format.BINARY

    def dump(self, obj: Any) -> bytes:
        return struct.pack(">HH", obj.data.size, 0) + obj.data.tobytes()


def vector_bytes(sent: bytes | None) -> bytes | None:
    """pgvector's binary send format (uint16 dim, uint16 unused, big-endian float4s) as
    the float32 native bytes the SQLite engine returns."""
    if sent is None:
        return None
    return np.frombuffer(sent, dtype=">f4", offset=4).astype(np.float32).tobytes()


def fts_text(body: dict[str, Any]) -> str:
    """A message's keyword index text on PostgreSQL: its search text without NUL (text
    cannot hold it; the JSON body escapes it), cut at MAX_FTS_TEXT_BYTES (a tsvector
    over 1 MiB is refused, and any message up to max_content_bytes must be storable)."""
    text = without_nul(search_text(body))
    raw = text.encode("utf-8")
    if len(raw) > MAX_FTS_TEXT_BYTES:  # a cut character at the end is dropped
        text = raw[:MAX_FTS_TEXT_BYTES].decode("utf-8", errors="ignore")
    return text


def count_round_trips(store: PostgresStore, fn: Callable[[], Any]) -> int:
    """Diagnostics (tests, benchmarks): how many client/server round trips `fn` makes on
    `store`, counted from libpq's protocol trace (one ReadyForQuery per round trip: a
    simple query, or an extended-protocol Sync). The store must have been opened with
    `pool_max=1`, so that its one connection is the one traced."""
    pool = store._pool
    if pool is None or pool.max_size != 1:
        raise ValidationError("pool_max", "count_round_trips needs a store opened with pool_max=1")
    with tempfile.TemporaryFile() as f:
        fd = os.dup(f.fileno())  # libpq's FILE owns a copy; closed after untrace
        with pool.connection() as conn:
            conn.pgconn.trace(fd)
            conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS)
        try:
            fn()
        finally:
            with pool.connection() as conn:
                conn.pgconn.untrace()  # flushes the trace
            os.close(fd)
        f.seek(0)
        return sum(1 for line in f if b"\tReadyForQuery" in line)


def speaker_name(body: dict[str, Any]) -> str | None:
    """The `speaker` column of a turn: the message's `name`, without NUL (`without_nul`)."""
    name = body.get("name")
    return without_nul(name) if isinstance(name, str) else None


class _Watch:
    """One checkout under the watchdog: its deadline (monotonic) and our own duplicate of
    its socket (so that a cut never reaches a descriptor number the driver has closed and
    the process reused); once cut, whether the connection sat idle inside a transaction
    then (`idle`: this process was not waiting on the server, it had stopped between two
    statements, and no COMMIT had been sent)."""

    __slots__ = ("cut", "fd", "idle", "pgconn", "until")

    def __init__(self, until: float, fd: int, pgconn: Any) -> None:
        self.until = until
        self.fd = fd
        self.pgconn = pgconn
        self.cut = False
        self.idle = False


def _idle_in_transaction(pgconn: Any) -> bool:
    """Whether the connection sits between two statements of a transaction now (read on
    the watchdog's thread: a field of libpq's, no round trip); False when it cannot be
    read (closed meanwhile), so a cut is never held up by it."""
    try:
        return pgconn.transaction_status in IDLE_IN_TRANSACTION_STATES
    except Exception:
        return False


class _Watchdog:
    """Cuts the connection of a checkout that outlives its deadline: shutdown() of its
    socket, so the driver's wait for the server's answer ends at once (the server
    "closed the connection"), the connection is broken and its pool discards it. One
    thread per store, started with the first checkout; a checkout costs a dup() and,
    when its deadline is the nearest, a wake-up of that thread."""

    def __init__(self, name: str, step: Callable[[str], None]) -> None:
        self._name = name
        self._step = step  # the store's fault hook (tests): a round that fails
        self._cond = threading.Condition()
        self._watches: set[_Watch] = set()
        self._thread: threading.Thread | None = None
        self._next: float | None = None  # when the thread wakes next; None: only when told
        self._closed = False

    @contextlib.contextmanager
    def watching(self, conn: Conn, until: float, where: str, limit: str) -> Iterator[_Watch]:
        """Within it `conn` is cut at `until`; a driver error that the cut caused is
        raised as StoreStalled (from it), naming `limit` (the settings that made the
        deadline, with their values: `operation_limit`), unless the connection sat idle
        in its transaction when cut, or the server ended it for that: StoreUnavailable
        saying so (`idle_ended`: nothing of the transaction committed). Yields the watch
        (its `cut` and `idle` read after the block, by a COMMIT outside it)."""
        watch = _Watch(until, os.dup(conn.fileno()), conn.pgconn)
        with self._cond:
            self._watches.add(watch)
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            if self._next is None or until < self._next:
                self._cond.notify()
        started = time.monotonic()
        try:
            yield watch
        except psycopg.Error as exc:
            # to a tenth of a second: the deadline as configured, not the few ms the
            # checkout took before the watch began (60 s read "59.998 s")
            seconds = round(until - started, 1)
            if isinstance(exc, psycopg.errors.IdleInTransactionSessionTimeout) or (watch.cut and watch.idle):
                raise StoreUnavailable(where, idle_ended(seconds, limit), connection_lost=True) from exc
            if watch.cut:
                raise StoreStalled(where, seconds, limit) from exc
            raise
        finally:
            with self._cond:  # a cut happens under this lock: none after it
                self._watches.discard(watch)
            os.close(watch.fd)

    def _run(self) -> None:
        with self._cond:
            while not self._closed:
                try:
                    sleep_s = self._round()
                except Exception:
                    # the one thread that cuts every checkout of the store: ended, no stalled
                    # operation would ever end again. A cut the round owed and did not begin
                    # stays owed: made at the next round
                    log.exception("the PostgreSQL deadline watchdog failed; it keeps watching")
                    self._next = time.monotonic() + WATCHDOG_RETRY_S
                    sleep_s = WATCHDOG_RETRY_S
                self._cond.wait(sleep_s)

    def _round(self) -> float | None:
        """Cut every checkout past its deadline; how long to sleep until the next one (None:
        until told). Called with the lock held."""
        now = time.monotonic()
        for watch in self._watches:
            if not watch.cut and watch.until <= now:
                self._step("watchdog:cut")  # a round failing here leaves the cut owed
                # marked before the shutdown: the driver's error it causes may be read at once.
                # Idle in its transaction: the checkout's thread is not waiting on the server
                # (stopped between two statements: SIGSTOP, a debugger), no COMMIT was sent
                watch.idle = _idle_in_transaction(watch.pgconn)
                watch.cut = True
                log.warning("a PostgreSQL connection got no answer before its deadline: cutting it")
                sock = socket.socket(fileno=watch.fd)
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:  # already closed by the server: the driver has its error
                    pass
                finally:
                    sock.detach()  # the descriptor stays the watch's, closed with it
        pending = [w.until for w in self._watches if not w.cut]
        self._next = min(pending) if pending else None
        return None if self._next is None else min(max(self._next - now, 0.0), WATCHDOG_LONGEST_SLEEP_S)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()


# how much of the server's primary message for a lost connection (SQLSTATE class 08 or
# 57P: "terminating connection due to administrator command") StoreUnavailable quotes
LOST_MESSAGE_CHARS = 120


def lost_connection(exc: psycopg.OperationalError, conn: Conn | None) -> bool:
    """Whether `exc` says the connection was lost, not the operation refused: the server
    ended the session or is shutting down or starting (SQLSTATE class 08 or 57P:
    pg_terminate_backend's admin_shutdown, a crash, a failover), or the driver found the
    connection closed under it ("server closed the connection unexpectedly", no SQLSTATE).
    Not a lock or statement timeout (55P03, 57014: busy), nor any other refusal."""
    if exc.sqlstate is not None:
        return exc.sqlstate.startswith(UNREACHABLE_SQLSTATES)
    return conn is not None and conn.closed


def lost_detail(exc: psycopg.Error) -> str:
    """StoreUnavailable's detail for a lost connection: the driver's error class, the
    SQLSTATE and the server's primary message where it sent one, never the driver's whole
    text (a libpq message can carry an earlier statement's "LINE 1: ..." excerpt)."""
    kind = type(exc).__name__
    if exc.sqlstate is not None:
        primary = (exc.diag.message_primary or "").strip().splitlines()
        said = f": {primary[0][:LOST_MESSAGE_CHARS]}" if primary else ""
        what = f"{kind}, SQLSTATE {exc.sqlstate}{said}"
    else:
        what = f"{kind}: the server closed it or the network failed"
    return (f"the connection to the server was lost ({what}); a write in flight may or may not have committed, "
            "and the next operation opens a new connection")


def idle_ended(seconds: float | None = None, limit: str | None = None) -> str:
    """StoreUnavailable's detail for a transaction ended while it sat idle: the server's
    idle_in_transaction_session_timeout (IDLE_IN_TRANSACTION_SETTING) ended its session, or
    the watchdog cut its connection at the checkout's deadline, which is as long (`seconds`,
    `limit`: the settings it came from, where known). Either way this process had stopped
    inside the transaction (SIGSTOP, a frozen VM, a debugger) and sent no COMMIT, so the
    transaction was rolled back: nothing of it committed, which a lost connection's "may
    or may not have committed" would deny."""
    length = f" (the checkout's deadline, {seconds:g} s: {limit})" if seconds is not None and limit else ""
    return (f"its transaction sat idle past {IDLE_IN_TRANSACTION_SETTING}{length}, this process stopped or "
            "paused inside it, so its session was ended and the transaction rolled back: nothing of it "
            "committed; the next operation opens a new connection")


@contextlib.contextmanager
def connection_lost_as_unavailable(where: str, conn: Callable[[], Conn | None],
                                   idle: Callable[[], bool] = lambda: False) -> Iterator[None]:
    """Within it, a driver error that says the connection was lost (`lost_connection`)
    is raised as StoreUnavailable naming `where` (`connection_lost`, from it): the error
    a caller of the store sees for it, as for a server it cannot reach. `conn`: the
    block's connection once it has one; `idle`: whether the watchdog cut it while it sat
    idle in its transaction (a COMMIT after the watch, the pool's in transaction mode,
    meets that cut: `idle_ended`)."""
    try:
        yield
    except psycopg.OperationalError as exc:
        if not lost_connection(exc, conn()):
            raise
        detail = idle_ended() if idle() else lost_detail(exc)
        raise StoreUnavailable(where, detail, connection_lost=True) from exc
    except psycopg.errors.IdleInTransactionSessionTimeout as exc:
        # the server ended the session of a transaction left idle past its limit
        # (IDLE_IN_TRANSACTION_SETTING: its process was stopped), rolled back; the driver
        # files it under class 25, not 08, and the connection is gone all the same
        raise StoreUnavailable(where, idle_ended(), connection_lost=True) from exc


def operation_limit(operation_timeout_s: float, lock_timeout_ms: int | None) -> str:
    """The settings an operation's deadline comes from, with their values, as Config
    names them (a StoreStalled's `limit`): "cold_operation_timeout_s=5 +
    busy_timeout_ms=1000" (the lock wait it may spend added), without a lock wait
    where none is set."""
    limit = f"cold_operation_timeout_s={operation_timeout_s:g}"
    return limit if not lock_timeout_ms else f"{limit} + busy_timeout_ms={lock_timeout_ms}"


# the watchdog of the connections opened outside any store's pool (`owned_connection`
# without a store's own): one per process, its thread started by the first
_ONE_OFF_WATCHDOG = _Watchdog("tiermem-one-off-deadlines", lambda step: None)


@contextlib.contextmanager
def owned_connection(url: str, *, where: str, timeout_s: float, limit: str, watchdog: _Watchdog | None = None,
                     pool_mode: str = "session") -> Iterator[Conn]:
    """A connection tiermem opens and closes itself, outside a pool (a store's bootstrap,
    migrate-store's look at a schema before or after its store): `connect_options`, so a
    server that accepts and never answers fails the connect as the pool's would
    (StoreUnavailable naming `where`), and cut by `watchdog` (StoreStalled) once the block
    has lasted `timeout_s` past the connect, as a pooled checkout is at its deadline
    (`limit`: the settings `timeout_s` came from, named in the StoreStalled)."""
    try:
        conn = psycopg.connect(url, **connect_options(url, pool_mode=pool_mode))
    except psycopg.OperationalError as exc:
        raise StoreUnavailable(where, str(exc)) from exc
    with (connection_lost_as_unavailable(where, lambda: conn), conn,
          (watchdog or _ONE_OFF_WATCHDOG).watching(conn, time.monotonic() + timeout_s, where, limit)):
        yield conn


def check_pool_mode(pool_mode: str, erase_scrub: str, *, caller_pool: bool = False) -> None:
    """Refuse a `pool_mode` not in POOL_MODES, and what cannot work behind a pooler in
    transaction mode (ValidationError naming the setting): erase_scrub "full", whose
    VACUUM FULL runs outside a transaction, so its lock wait, deadline and the session's
    advisory lock that keeps two servers from rewriting every table twice cannot be
    set for it there (its ACCESS EXCLUSIVE request would queue every reader of the table
    behind it for up to the maintenance deadline); and a caller's pool, whose
    connections (autocommit, prepared statements) the caller configures."""
    if pool_mode not in POOL_MODES:
        raise ValidationError("cold_pool_mode", f"must be one of {POOL_MODES}, got {shown(pool_mode)}")
    if pool_mode != "transaction":
        return
    if erase_scrub == "full":
        raise ValidationError("cold_pool_mode", "'transaction' (a pooler such as PgBouncer in pool_mode = "
                                                "transaction) cannot run cold_erase_scrub = 'full' (its VACUUM FULL "
                                                "needs one server session for its lock wait and deadline): set "
                                                "cold_erase_scrub = 'vacuum', or point cold_url at PostgreSQL or a "
                                                "session-mode pool")
    if caller_pool:
        raise ValidationError("cold_pool_mode", "'transaction' is for the store's own pool (a URL); a caller's "
                                                "pool configures its own connections (autocommit off, "
                                                "prepare_threshold None behind a transaction-mode pooler)")


def erasure_xid(marker: str | None) -> str | None:
    """The erasure's xid that the scrub's marker names (SCRUB_MARKER_SQL), as a 32-bit xid's
    text; None where there is no marker or it names none (an older version's '1')."""
    if marker is None or not re.fullmatch(r"[0-9]{1,20}", marker) or int(marker) < FIRST_NORMAL_XID:
        return None
    return str(int(marker) % XID_MODULUS)


class PostgresStore(SharedQueries):
    """The log on PostgreSQL. Thread-safe (a connection pool); many processes and
    machines may open the same database and schema at once."""

    dialect = POSTGRES
    _log = log
    # a writer waiting for a conversation's row is queued and woken by the commit: a pause
    # as long as the spell held it lets it in before the next batch on that row. The spell
    # is per row (a batch on another conversation's row holds off no append to this
    # one): about one batch (LABEL_BATCH_TARGET_S, REBUILD_BATCH_TARGET_S)
    _SPELL_WHOLE_STORE = False
    _SPELL_S = 0.03

    def _lock_pause(self, held: float) -> float:
        return min(held, REBUILD_PAUSE_MAX_S)

    def __init__(
        self,
        url: str | None = None,
        *,
        pool: ConnectionPool | None = None,
        tokens: TokenCounter,
        embedder: Embedder | None = None,
        schema: str = DEFAULT_SCHEMA,
        pool_max: int = DEFAULT_POOL_MAX,
        pool_wait_s: float = POOL_WAIT_S,
        lock_timeout_ms: int | None = DEFAULT_BUSY_TIMEOUT_MS,
        synchronous_commit: str = "on",
        erase_scrub: str = "full",
        operation_timeout_s: float = OPERATION_TIMEOUT_S,
        maintenance_timeout_s: float = MAINTENANCE_TIMEOUT_S,
        holder_grace_ms: int = HOLDER_GRACE_MS,
        pool_mode: str = "session",
    ) -> None:
        if (url is None) == (pool is None):
            raise ValidationError("cold_url", "give a postgresql:// URL or a connection pool (exactly one)")
        check_pool_mode(pool_mode, erase_scrub, caller_pool=pool is not None)
        self.pool_mode = pool_mode
        self._per_transaction = pool_mode == "transaction"  # POOL_MODES: nothing of a session holds
        if synchronous_commit not in SYNCHRONOUS_COMMIT:
            raise ValidationError("cold_synchronous_commit", f"must be one of {SYNCHRONOUS_COMMIT}")
        self._synchronous_commit = synchronous_commit
        # turns a catch-up of this store is embedding now: another leaves them (Claims)
        self._claims = Claims()
        # turns a catch-up of this store read and has not yet hooked: an append waits (Deciding)
        self._deciding = Deciding()
        if lock_timeout_ms is not None and lock_timeout_ms < 0:
            raise ValidationError("busy_timeout_ms", f"must be 0 or more milliseconds, got {lock_timeout_ms}")
        # None: the server's (or the caller's) lock_timeout is left as it is
        self._lock_timeout_ms = None if lock_timeout_ms is None else max(lock_timeout_ms, LEAST_LOCK_TIMEOUT_MS)
        self._busy_timeout_ms = lock_timeout_ms  # as configured (0, not the least sent): what errors name
        if erase_scrub not in ERASE_SCRUB:
            raise ValidationError("cold_erase_scrub", f"must be one of {ERASE_SCRUB}")
        self.erase_scrub = erase_scrub
        # bool is an int, and a float would poll a fraction of a millisecond: refused
        if type(holder_grace_ms) is not int or not 0 <= holder_grace_ms <= HOLDER_GRACE_MAX_MS:
            raise ValidationError("holder_grace_ms", f"must be a whole number of milliseconds from 0 to "
                                                     f"{HOLDER_GRACE_MAX_MS}, got {shown(holder_grace_ms)}")
        # how long a scrub waits for a snapshot holder running a statement (HOLDER_GRACE_MS)
        self.holder_grace_ms = holder_grace_ms
        # an operation's checkout is cut past this (the lock wait it may spend added to it);
        # named as Config names it, as busy_timeout_ms is
        self.operation_timeout_s = deadline_seconds("cold_operation_timeout_s", "operation_timeout_s",
                                                    operation_timeout_s)
        # ... and a checkout of work long by design (`_maintenance`) past this
        self.maintenance_timeout_s = deadline_seconds("maintenance_timeout_s", "maintenance_timeout_s",
                                                      maintenance_timeout_s)
        if not SCHEMA_PATTERN.match(schema):
            raise ValidationError("schema", "must be a lowercase SQL identifier of at most 63 characters")
        self.tokens = tokens
        self.embedder = embedder
        self.schema = schema
        # called after each committed batch of `index_pending` with the turns it embedded
        # (see ColdLog.on_embedded)
        self.on_embedded: Callable[[list[tuple[str, int, np.ndarray]]], None] | None = None
        self.on_hooked: Callable[[list[str]], None] | None = None  # (see ColdLog.on_hooked)
        # the turns whose hook failed, decided again by the next call (tiers.owed)
        self._owed = OwedDecisions(
            read_keys=lambda: [str(r[0]) for r in self._read(
                "SELECT key FROM meta WHERE substr(key, 1, %s) = %s", (len(OWED_PREFIX), OWED_PREFIX))],
            read_mark=lambda: next((str(r[0]) for r in self._read(
                "SELECT value FROM meta WHERE key = %s", (OWED_MARK_KEY,))), None),
            record=self._owed_record, forget=self._meta_keys_delete,
            turns=lambda ids: [(int(r[0]), str(r[1]), int(r[2])) for r in self._read(
                "SELECT id, conversation_id, position FROM turns WHERE embedded = 1 AND id = ANY(%s::int8[]) "
                "ORDER BY id", (ids,))],
            vectors=self.embeddings)
        self.texts_ahead: TextsAhead | None = None  # unused here: the catch-up is not pipelined
        self.labeler: Callable[[str, str, dict[str, Any]], Label] | None = None  # ColdLog.labeler
        self.path = redact(url) if url is not None else "postgresql (caller's pool)"
        self._salvaged_rows = SalvagedRows()  # (conversation, kind, row)
        self._fault: Callable[[str], None] | None = None  # tests inject failures mid-transaction
        self._lock = threading.Lock()
        self._waits = threading.local()  # connection_wait's deadline and _maintenance, per thread
        self._watchdog = _Watchdog(f"tiermem-{schema}-deadlines", self._step)
        self._search_path = schema  # completed with the vector extension's schema below
        self._owns_pool = pool is None
        self._vec_dim: int | None = None  # the vectors' width once known (meta 'vec_dim')
        self._vec_model: str | None = None  # the embedder's identity once checked (meta 'vec_model')
        if url is not None:
            try:
                self._bootstrap(url)
            except BaseException:
                self._watchdog.close()  # its thread, started by the bootstrap's connection
                raise
            kwargs = connect_options(url, pool_mode=pool_mode)
            if self._per_transaction:
                kwargs["autocommit"] = False  # each checkout one transaction, its settings SET LOCAL
            pool = ConnectionPool(url, min_size=DEFAULT_POOL_MIN, max_size=pool_max, timeout=pool_wait_s, open=False,
                                  kwargs=kwargs, configure=self._configure,
                                  check=self._check_idle, reconnect_timeout=RECONNECT_GIVE_UP_S,
                                  reconnect_failed=self._reconnect_failed, name=f"tiermem-{schema}")
            try:
                pool.open(wait=True, timeout=POOL_OPEN_TIMEOUT_S)
            except Exception as exc:
                pool.close()
                raise StoreUnavailable(self.path, str(exc)) from exc
        assert pool is not None
        self._pool: ConnectionPool | None = pool
        try:
            if not self._owns_pool:
                with pool.connection() as c, self._borrowed(c, DEFAULT_ISOLATION_SQL):
                    self._bootstrap_on(c)
            self.version = self._migrate()
            self.db_uuid: str = self._read("SELECT value FROM meta WHERE key = 'db_uuid'")[0][0]
        except BaseException:
            self.close()
            raise
        # the turns' counts recounted on this open, made under another tokenizer than this
        # store's (tiers.recount); the caller drops what holds the old ones (tiermem.Memory).
        # A read-only database (a standby) is found by its refusal of the write, if one is due.
        # Before the owed scrub: that is the open's last, best-effort step (a server gone
        # there leaves it owed to the next open, and the store opens)
        try:
            self.tokenizer_recount: Recount | None = check_tokenizer(self)
        except BaseException:
            self.close()
            raise
        self._finish_scrub()

    def _scrub_owed(self) -> bool:
        return bool(self._read("SELECT 1 FROM meta WHERE key IN (%s, %s) LIMIT 1",
                               (SCRUB_PENDING_KEY, SCRUB_STATISTICS_KEY)))

    def _finish_scrub(self, *, owed_for_s: float | None = None) -> None:
        """An erasure whose rewrite did not run (its process died after the commit, or
        the VACUUM failed) is scrubbed now, at the next open, or by a running process
        that saw it owed `owed_for_s` (`finish_owed_scrub`; `owed_erasure` words the log).
        One that fails or stalls here leaves the scrub owed (its marker kept) and the
        store open: the next open (or erasure, or reclaim()) retries."""
        erasure, retry = owed_erasure(owed_for_s)
        try:
            owed = {r[0] for r in self._read("SELECT key FROM meta WHERE key IN (%s, %s)",
                                             (SCRUB_PENDING_KEY, SCRUB_STATISTICS_KEY))}
            if SCRUB_PENDING_KEY not in owed:
                if owed and self._rewrite_owed_statistics():  # the tables' done: pg_statistic's alone
                    log.info("finished the rewrite of %s that an erasure's scrub owed", STATISTICS_TABLE)
                return
            # else still owed, or not allowed pg_statistic (_reclaim logged which), or another
            # session of the store finishing it (or finished it) meanwhile: quiet
            if self._scrub(owed=True):
                log.info("finished the scrub of %s", erasure)
        except AFTER_COMMIT_ERRORS:
            # a lock timeout (a table's reader), a read-only role; or StoreStalled: a rewrite
            # longer than the maintenance deadline, which would fail every open as long as
            # that lasts, the store unusable meanwhile
            log.warning("could not finish the scrub of %s now; %s", erasure, retry, exc_info=True)

    # -- plumbing ------------------------------------------------------------------

    def _bootstrap(self, url: str) -> None:
        """Before the pool exists: refuse a newer schema, make the schema and extension. The
        pool's connect timeout (a URL's own kept); cut at the maintenance deadline, as it may
        wait for another process's bootstrap."""
        with owned_connection(url, where=self.path, timeout_s=self.maintenance_timeout_s,
                              limit=f"maintenance_timeout_s={self.maintenance_timeout_s:g}",
                              watchdog=self._watchdog, pool_mode=self.pool_mode) as conn:
            if self._per_transaction:  # each transaction's BEGIN names it: no session setting
                conn.isolation_level = psycopg.IsolationLevel.READ_COMMITTED
            else:
                conn.execute(DEFAULT_ISOLATION_SQL)  # autocommit: every later statement's
            self._bootstrap_on(conn)

    def _bootstrap_on(self, conn: Conn) -> None:
        """On a connection running ISOLATION already. A server older than
        MIN_SERVER_VERSION_NUM is refused first, before anything is read or written (the
        version comes with the connection: no round trip)."""
        check_server_version(self.path, conn.info.server_version)
        found = self._recorded_version(conn)
        if found > schema_version():
            raise SchemaTooNew(f"{self.path} schema {self.schema}", found, schema_version())
        ext_schema = self._vector_schema(conn)
        if ext_schema is None or found == 0:
            # only where something is missing: a read-only database (a hot standby, a role
            # with default_transaction_read_only) refuses CREATE ... IF NOT EXISTS too, and
            # its store must still open for reads
            with conn.transaction():
                # CREATE EXTENSION / SCHEMA race between processes opening a fresh database
                conn.execute(WAIT_FOR_LOCKS_SQL)  # a URL's or caller's lock_timeout too
                conn.execute("SELECT pg_advisory_xact_lock(hashtext('tiermem-bootstrap'))")
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                conn.execute(pgsql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(pgsql.Identifier(self.schema)))
                ext_schema = self._vector_schema(conn)
        assert ext_schema is not None  # created just above
        self._search_path = f'"{self.schema}", "{ext_schema}"'
        # the vector type (and its array type) of this database, for Vec parameters
        info = TypeInfo.fetch(conn, f'"{ext_schema}".vector')
        if info is None:  # pragma: no cover - created just above
            raise StoreUnavailable(self.path, "the vector extension's type is missing")
        self._vec_info = info
        self._vec_dumper = type("VecDumper", (_VecDumper,), {"oid": info.oid})

    @staticmethod
    def _vector_schema(conn: Conn) -> str | None:
        """The schema of the vector extension, None where it is not created."""
        row = conn.execute("SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
                           "WHERE e.extname = 'vector'").fetchone()
        return None if row is None else str(row[0])

    def _register_vec(self, conn: Conn) -> None:
        self._vec_info.register(conn)
        conn.adapters.register_dumper(Vec, self._vec_dumper)

    def _recorded_version(self, conn: Conn) -> int:
        exists = conn.execute("SELECT to_regclass(%s)", (f'"{self.schema}".schema_migrations',)).fetchone()[0]
        if exists is None:
            return 0
        row = conn.execute(pgsql.SQL("SELECT COALESCE(MAX(version), 0) FROM {}.schema_migrations").format(
            pgsql.Identifier(self.schema))).fetchone()
        return int(row[0])

    def _session_sql(self, *, maintenance: bool = False) -> str:
        """The settings of a session: `maintenance`, with the idle-in-transaction limit of
        a checkout under `_maintenance` (IDLE_IN_TRANSACTION_SETTING)."""
        lock_timeout = "" if self._lock_timeout_ms is None else f"; SET lock_timeout TO {self._lock_timeout_ms}"
        return (f"SET search_path TO {self._search_path}; SET synchronous_commit TO {self._synchronous_commit}; "
                f"SET hnsw.iterative_scan TO relaxed_order; SET hnsw.ef_search TO {HNSW_EF_SEARCH}"
                f"{lock_timeout}; {self._idle_sql(maintenance=maintenance)}")

    def _idle_in_transaction_ms(self, *, maintenance: bool) -> int:
        """IDLE_IN_TRANSACTION_SETTING's value: the length of a checkout's deadline
        (`_deadline`), an operation's or, `maintenance`, the maintenance deadline's."""
        seconds = (self.maintenance_timeout_s if maintenance
                   else self.operation_timeout_s + (self._lock_timeout_ms or 0) / MS_PER_S)
        return min(math.ceil(seconds * MS_PER_S), IDLE_IN_TRANSACTION_MAX_MS)

    def _idle_sql(self, *, maintenance: bool) -> str:
        return f"SET {IDLE_IN_TRANSACTION_SETTING} TO {self._idle_in_transaction_ms(maintenance=maintenance)}"

    def _local_sql(self) -> str:
        """`_session_sql` (for this thread's checkout: `_maintenance` or not) and the
        client check as SET LOCAL: the settings of one transaction, for a pooler in
        transaction mode (POOL_MODES), sent as a checkout's first statements (`_conn`) and
        again where a checkout begins another transaction."""
        maintenance = bool(getattr(self._waits, "maintenance", False))
        return "; ".join(part.replace("SET ", "SET LOCAL ", 1)
                         for part in f"{self._session_sql(maintenance=maintenance)}; {CLIENT_CHECK_SQL}".split("; "))

    def _idle_limit_restored(self, conn: Conn) -> None:
        """After a maintenance checkout of our pool's session (`_conn`): the operations'
        idle-in-transaction limit set back before the pool has the connection again; a
        connection it fails on is closed (the pool replaces it), never kept with the
        maintenance deadline's. Never raises."""
        if conn.closed or conn.broken:
            return  # the pool replaces it
        try:
            if conn.info.transaction_status != pq.TransactionStatus.IDLE:
                conn.rollback()  # as the pool's return would
            conn.execute(self._idle_sql(maintenance=False))
        except psycopg.Error as exc:
            log.warning("could not set the operations' %s back after a maintenance checkout (%s); closing the "
                        "connection, so that the pool replaces it", IDLE_IN_TRANSACTION_SETTING, str(exc).strip())
            conn.close()

    def _check_idle(self, conn: Conn) -> None:
        """At each checkout of our pool: a connection the server spoke on while it sat idle
        (the FATAL of a restart or of pg_terminate_backend, or its end) is tried with an
        empty query, and the pool replaces it when that fails, so the next operation after
        a restart runs instead of failing once per idle connection. A quiet socket (the
        usual case) costs no round trip: one select() that does not wait. One found dead,
        the pool's other idle connections are tried at once (pool.check()): the pool
        sleeps between failed checks of one checkout (1, 2, 4 s...), and four dead ones
        after a restart cost the first operation 7 s."""
        if not select.select([conn.fileno()], [], [], 0)[0]:
            return
        try:
            ConnectionPool.check_connection(conn)
        except psycopg.Error:
            pool = self._pool
            if pool is not None:
                pool.check()  # the others too: discarded and replaced now, not one per sleep
            raise

    @staticmethod
    def _reconnect_failed(pool: ConnectionPool) -> None:
        """The pool gave up reconnecting (RECONNECT_GIVE_UP_S). Where operations wait for
        a connection, a new series of attempts starts at once (pool.check() grows the
        pool), so that the database back is found within the first steps of a backoff
        (1, 2 s), not after a doubling series that had reached half a minute."""
        if pool.get_stats().get("requests_waiting", 0):
            pool.check()

    def _configure(self, conn: Conn) -> None:
        if self._per_transaction:
            # nothing for the session (another client's next transaction gets its server
            # connection): each BEGIN names the isolation, each checkout SETs LOCAL the rest
            conn.isolation_level = psycopg.IsolationLevel.READ_COMMITTED
        else:
            # our pool's: autocommit; the client check for the session, as it is ours
            conn.execute(f"{DEFAULT_ISOLATION_SQL}; {self._session_sql()}; {CLIENT_CHECK_SQL}")
        self._register_vec(conn)

    @contextlib.contextmanager
    def connection_wait(self, seconds: float) -> Iterator[None]:
        """Within it, this thread's operations end within `seconds` of its start, the wait
        for a pooled connection (StoreUnreachable past it) instead of the pool's wait and
        the server's answers (StoreStalled: the connection cut) instead of the operations'
        timeout: a health probe says "down" while a request would still be waiting (its
        callers give up sooner), also when the server takes the query and never answers."""
        before = getattr(self._waits, "until", None), getattr(self._waits, "until_limit", None)
        self._waits.until = time.monotonic() + seconds
        self._waits.until_limit = f"connection_wait={seconds:g}"  # what the errors name
        try:
            yield
        finally:
            self._waits.until, self._waits.until_limit = before

    @contextlib.contextmanager
    def _maintenance(self) -> Iterator[None]:
        """Within it, this thread's checkouts are cut past `maintenance_timeout_s`
        (MAINTENANCE_TIMEOUT_S) instead of the operations' timeout: work long by design
        (migrations, rewrites, index builds, an erasure or prune)."""
        before = getattr(self._waits, "maintenance", False)
        self._waits.maintenance = True
        try:
            yield
        finally:
            self._waits.maintenance = before

    def _deadline(self) -> tuple[float, str]:
        """When a checkout that starts now is cut: connection_wait's end where one is set,
        else the maintenance or the operation timeout (past the lock wait allowed); with
        the settings it came from, as a StoreStalled names them."""
        until: float | None = getattr(self._waits, "until", None)
        if until is not None:
            return until, str(getattr(self._waits, "until_limit", "connection_wait"))
        if getattr(self._waits, "maintenance", False):
            return time.monotonic() + self.maintenance_timeout_s, f"maintenance_timeout_s={self.maintenance_timeout_s:g}"
        lock_wait_s = (self._lock_timeout_ms or 0) / 1000
        return (time.monotonic() + self.operation_timeout_s + lock_wait_s,
                operation_limit(self.operation_timeout_s, self._busy_timeout_ms))

    def _pool_limits(self, pool: ConnectionPool, wait_s: float | None) -> tuple[float, str, str]:
        """A StoreUnreachable's (seconds waited, the setting that bounded the wait, the
        pool waited on): as Config names them for our own pool ("cold_pool_wait_s=2",
        "cold_pool_size=1"), the pool's own for a caller's; under connection_wait, its
        seconds (`wait_s`, what was left of them)."""
        own = self._owns_pool
        size = f"cold_pool_size={pool.max_size}" if own else f"the caller's pool of max_size={pool.max_size}"
        if wait_s is not None:
            return round(wait_s, 1), str(getattr(self._waits, "until_limit", "connection_wait")), size
        wait = f"cold_pool_wait_s={pool.timeout:g}" if own else f"the caller's pool's timeout={pool.timeout:g}"
        return pool.timeout, wait, size

    @contextlib.contextmanager
    def _conn(self) -> Iterator[Conn]:
        pool = self._pool  # read once: close() on another thread sets it to None meanwhile
        if pool is None:
            raise StoreUnavailable(self.path, "the store is closed")
        until: float | None = getattr(self._waits, "until", None)
        wait_s = None if until is None else max(until - time.monotonic(), 0.0)  # None: the pool's own
        conn: Conn | None = None
        watch: _Watch | None = None
        # the store's edge: a connection lost in the operation (or in the pool's return of
        # it: a COMMIT) reaches the caller as StoreUnavailable, outside the watchdog's
        # StoreStalled for a connection it cut (one cut idle in its transaction: said so)
        with connection_lost_as_unavailable(self.path, lambda: conn,
                                            lambda: watch is not None and watch.cut and watch.idle), \
                contextlib.ExitStack() as stack:
            try:
                conn = stack.enter_context(pool.connection(timeout=wait_s))
            except PoolTimeout as exc:  # only the checkout: nothing of this operation was sent
                raise StoreUnreachable(self.path, *self._pool_limits(pool, wait_s)) from exc
            except PoolClosed as exc:  # closed since it was read (close()), or a caller's pool its owner closed
                raise StoreUnavailable(self.path, "the connection pool is closed") from exc
            # before the caller's settings are read: that round trip is bounded too
            until, limit = self._deadline()
            watch = stack.enter_context(self._watchdog.watching(conn, until, self.path, limit))
            before_checkout = getattr(self._waits, "checkout_until", None)
            self._waits.checkout_until = until  # for a statement given a server deadline (reclaim)
            stack.callback(setattr, self._waits, "checkout_until", before_checkout)
            maintenance = bool(getattr(self._waits, "maintenance", False))
            if not self._owns_pool:  # the caller's connection: ours for this checkout, then theirs again
                stack.enter_context(self._borrowed(
                    conn, f"{DEFAULT_ISOLATION_SQL}; {self._session_sql(maintenance=maintenance)}"))
                self._register_vec(conn)
            elif self._per_transaction:  # the checkout's transaction begins (READ COMMITTED) with them
                conn.execute(self._local_sql())
            elif maintenance:  # our session's idle limit is the operations' (`_configure`): this checkout's
                conn.execute(self._idle_sql(maintenance=True))
                stack.callback(self._idle_limit_restored, conn)
            yield conn

    @contextlib.contextmanager
    def _borrowed(self, conn: Conn, ours: str) -> Iterator[None]:
        """A caller's connection for one checkout: its values of CALLER_SETTINGS are read,
        `ours` (SET statements) is set, in one round trip, and the caller's are set back
        when the block ends, whatever happened in it. In transaction mode the checkout's
        transaction is ISOLATION itself (SET TRANSACTION must come before the read) and is
        ended here as the pool's return would end it (commit, or rollback on an error),
        so that the settings put back are not undone by that rollback."""
        first = "" if conn.autocommit else f"SET TRANSACTION ISOLATION LEVEL {ISOLATION}; "
        cur = conn.execute(f"{first}{SAVE_CALLER_SETTINGS_SQL}; {ours}")
        if first:
            cur.nextset()  # past the SET TRANSACTION's empty result
        saved = cur.fetchone()
        ok = False
        try:
            yield
            ok = True
        finally:
            try:
                if not conn.autocommit and conn.info.transaction_status != pq.TransactionStatus.IDLE:
                    if ok:
                        conn.commit()  # what the pool's return would do; its failure is the operation's
                    else:
                        with contextlib.suppress(psycopg.Error):  # the connection gone: nothing to restore
                            conn.rollback()
            finally:
                self._give_back(conn, saved)

    def _give_back(self, conn: Conn, saved: Sequence[str | None]) -> None:
        """Set the caller's values `saved` back on its connection; never raises. A
        connection it fails on is closed (the pool replaces it) rather than given back
        holding tiermem's settings."""
        if conn.closed or conn.broken:
            return  # the pool replaces it: none of ours goes back
        restore = pgsql.SQL("; ").join(
            # None: undefined before; "": a placeholder with no value (hnsw.* before pgvector
            # is loaded; never a value of these settings): reset to what it was
            pgsql.SQL("RESET {}").format(pgsql.SQL(name)) if not value
            else pgsql.SQL("SELECT set_config({}, {}, false)").format(pgsql.Literal(name), pgsql.Literal(value))
            for name, value in zip(CALLER_SETTINGS, saved, strict=True))
        try:
            if conn.info.transaction_status != pq.TransactionStatus.IDLE:
                conn.rollback()  # a commit above failed: nothing of it is left to keep
            conn.execute(restore)
            if not conn.autocommit:
                conn.commit()
        except psycopg.Error as exc:
            log.warning("could not set the caller's session settings back on its connection (%s); "
                        "closing it, so that its pool replaces it", str(exc).strip())
            conn.close()

    @contextlib.contextmanager
    def _tx(self) -> Iterator[Conn]:
        """One transaction on one pooled connection (READ COMMITTED; the row locks each
        operation takes are named where it takes them)."""
        with self._conn() as conn, conn.transaction():
            if not self._owns_pool and getattr(self._waits, "maintenance", False):
                # long and holding locks others wait on (an erasure's ERASURE_ORDER_LOCK):
                # ended by the server once its client is gone, as on our own sessions
                conn.execute(CLIENT_CHECK_LOCAL_SQL)
            yield conn

    def _statement(self, conn: Conn, sql: str, params: Mapping[str, Any]) -> list[Any]:
        """One statement as its own transaction, prepared (it is sent often; never behind a
        pooler in transaction mode, POOL_MODES): on an autocommit connection one round
        trip, its commit included; on a caller's pool in transaction mode, wrapped in one
        transaction and committed here."""
        prepare = None if self._per_transaction else True
        if conn.autocommit:
            return list(conn.execute(sql, params, prepare=prepare).fetchall())
        with conn.transaction():
            return list(conn.execute(sql, params, prepare=prepare).fetchall())

    def _read(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[Any]:
        with self._conn() as conn:
            return list(conn.execute(sql, params).fetchall())

    # -- raw access for the storage layer's own tools (tiers.store.SqlAccess) ----------

    def reading(self) -> contextlib.AbstractContextManager[Conn]:
        """A pooled connection (autocommit) for a sequence of reads."""
        return self._conn()

    def transaction(self) -> contextlib.AbstractContextManager[Conn]:
        """One write transaction on one pooled connection."""
        return self._tx()

    def maintenance(self) -> contextlib.AbstractContextManager[None]:
        """(SqlAccess) Within it, this thread's checkouts are cut at the maintenance
        deadline instead of the operations' (`_maintenance`): for a tool's statement long
        by design on a large store; a stalled server is still cut, later."""
        return self._maintenance()

    def locked_table(self) -> str | None:
        """The name of a table of the store another session holds (or waits for) locked
        whole in a mode that stops writes to it (TABLE_LOCKED_SQL: an erasure's VACUUM
        FULL), None when none is. For a caller whose statement met the lock timeout,
        which does not say whether a row's lock or a table's made it wait: a table's
        stops every conversation's writes alike."""
        rows = self._read(TABLE_LOCKED_SQL, (self.schema,))
        return str(rows[0][0]) if rows else None

    def ensure_vector_width(self, dim: int, model: str | None = None) -> None:
        """Make the vectors `dim` wide (a new width empties them, as a new embedder does),
        recorded as `model`'s (another model than recorded empties them too)."""
        self._ensure_vec_dim(dim, model)

    def _migrate(self) -> int:
        supported = schema_version()
        with self._maintenance(), self._conn() as conn:
            # versions only grow: a store already at this code's version needs no lock and
            # no write (a read-only database opens)
            found = self._recorded_version(conn)
            if found > supported:
                raise SchemaTooNew(f"{self.path} schema {self.schema}", found, supported)
            if found == supported:
                return found
            with conn.transaction():
                conn.execute(WAIT_FOR_LOCKS_SQL)  # behind another process's migration
                conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"tiermem-migrate-{self.schema}",))
                conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations(version INTEGER PRIMARY KEY, "
                             "name TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL)")
            while True:
                with conn.transaction():
                    # and its steps' table locks behind readers; on a caller's connection the
                    # client check for this transaction (ours has it for the session)
                    conn.execute(WAIT_FOR_LOCKS_SQL if self._owns_pool else f"{WAIT_FOR_LOCKS_SQL}; {CLIENT_CHECK_LOCAL_SQL}")
                    conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"tiermem-migrate-{self.schema}",))
                    found = self._recorded_version(conn)  # another process may have migrated
                    if found > supported:
                        raise SchemaTooNew(f"{self.path} schema {self.schema}", found, supported)
                    if found == supported:
                        return found
                    step = MIGRATIONS[found]
                    step(conn)
                    conn.execute("INSERT INTO schema_migrations(version, name, applied_at) VALUES (%s, %s, %s)",
                                 (found + 1, step.__name__, time.time()))

    def migrations(self) -> list[tuple[int, str]]:
        """(version, name) of every applied step, in order."""
        return [(int(r[0]), r[1]) for r in self._read("SELECT version, name FROM schema_migrations ORDER BY version")]

    def _location(self) -> str:
        return self.path

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None and self._owns_pool:
            pool.close()
        self._watchdog.close()

    # -- conversations ----------------------------------------------------------------

    def _claim_conversation(self, c: Conn, name: str, namespace: str, now: float) -> tuple[str, bool]:
        """The key of (namespace, name), created if missing, its row locked until the
        caller's transaction ends (an erasure waits for the append, or the append sees
        it gone and creates a new incarnation)."""
        while True:
            row = c.execute("SELECT id FROM conversations WHERE namespace = %s AND name = %s FOR UPDATE",
                            (namespace, name)).fetchone()
            if row is not None:
                return str(row[0]), False
            key = self._issue_key(c, name, now)
            made = c.execute(
                "INSERT INTO conversations(id, name, namespace, created_at, last_message_at) VALUES (%s,%s,%s,%s,0) "
                "ON CONFLICT (namespace, name) DO NOTHING RETURNING id", (key, name, namespace, now)).fetchone()
            if made is not None:
                return key, True
            # another writer created it first: its key wins (ours stays issued, unused)

    @staticmethod
    def _issue_key(c: Conn, name: str, now: float) -> str:
        key = name
        while c.execute("INSERT INTO conversation_keys(key, issued_at) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                        (key, now)).rowcount == 0:
            key = f"{name}{KEY_SEPARATOR}{uuid.uuid4().hex[:KEY_SUFFIX_HEX]}"
        return key

    def names_of(self, keys: Sequence[str]) -> dict[str, str]:
        if not keys:
            return {}
        return {str(k): str(n) for k, n in self._read("SELECT id, name FROM conversations WHERE id = ANY(%s)",
                                                        (sorted(set(keys)),))}

    @staticmethod
    def _require_in(c: Conn, key: str) -> None:
        # FOR SHARE: an erasure of this key waits for the caller's transaction
        if c.execute("SELECT 1 FROM conversations WHERE id = %s FOR SHARE", (key,)).fetchone() is None:
            raise ConversationNotFound(key_name(key))

    @staticmethod
    def _lock_turn_writers(c: Conn, key: str) -> None:
        # the first lock of the writers' order (module docstring): the conversation's row,
        # FOR NO KEY UPDATE as an append's and a supersession's UPDATE of it take it, so
        # the writers of its turns and pin version take turns. A key erased meanwhile has
        # no row and no turns: the caller's UPDATEs then find nothing, as before
        c.execute("SELECT 1 FROM conversations WHERE id = %s FOR NO KEY UPDATE", (key,))

    def list_conversations(self, namespace: str, *, exclude: str | None = None, limit: int | None = None) -> list[str]:
        return [r[0] for r in self._read(
            "SELECT id FROM conversations WHERE namespace = %s AND id IS DISTINCT FROM %s ORDER BY name LIMIT %s",
            (namespace, exclude, limit))]

    # -- append -----------------------------------------------------------------------

    # One statement for the whole batch, and on the common path (the conversation exists)
    # one round trip: no BEGIN, no SELECT ... FOR UPDATE, no COMMIT of its own. Sent on an
    # autocommit connection, the statement is its own transaction (DESIGN invariant 7:
    # every row of the batch, or none). The UPDATE of the counter row, found by
    # (namespace, name), is the lock that orders the writers of one conversation (it is
    # held until that implicit commit) and hands out the n positions at once; the
    # messages, their turn rows and FTS rows are written by data-modifying CTEs of the
    # same statement from the unnested columns. No row updated (the conversation does
    # not exist, or an erasure removed it while we waited for its lock): nothing was
    # written, and `append_batch` takes the creating path.
    _APPEND_COLUMNS = (("role", "text"), ("body", "text"), ("session", "text"), ("meta", "text"),
                       ("created", "float8"), ("tokens", "int4"), ("hash", "text"), ("intent", "text"),
                       ("lb", "int2"), ("prio", "int4"), ("reason", "text"), ("speaker", "text"),
                       ("fts", "text"))
    _APPEND_TEMPLATE = (
        "WITH v AS (SELECT * FROM unnest("
        + ", ".join(f"%({n})s::{t}[]" for n, t in _APPEND_COLUMNS)
        + ") WITH ORDINALITY AS v(" + ", ".join(n for n, _t in _APPEND_COLUMNS) + ", ord)), "
        "c AS (UPDATE conversations SET next_position = next_position + %(n)s, views_seq = views_seq + 1, "
        "  last_message_at = GREATEST(last_message_at, (SELECT MAX(created) FROM v)) WHERE {where} "
        "  RETURNING id, next_position - %(n)s AS base, namespace), "
        # each row once, materialised (it is read three times, and nextval is volatile):
        # positions base .. base + n - 1 in the caller's order, ids drawn in that order
        # (volatile target-list expressions are evaluated after the sort)
        "r AS MATERIALIZED (SELECT c.id AS conv, c.base + v.ord - 1 AS pos, nextval('messages_id_seq') AS mid, "
        "  c.namespace AS ns, v.* FROM c, v ORDER BY v.ord), "
        "m AS (INSERT INTO messages(conversation_id, position, id, role, body, session_id, metadata, created_at) "
        "  SELECT conv, pos, mid, role, body, session, meta, created FROM r), "
        "t AS (INSERT INTO turns(conversation_id, position, id, role, session_id, tokens, content_hash, created_at, "
        "  intent, load_bearing, priority, label_reason, speaker) "
        "  SELECT conv, pos, mid, role, session, tokens, hash, created, intent, lb, prio, reason, speaker FROM r), "
        "f AS (INSERT INTO messages_fts(id, conversation_id, namespace, text) SELECT mid, conv, ns, fts FROM r) "
        # and the newest tombstone, read in passing (AppendResult.erasure_mark): how the
        # append learns of erasures by other processes without a round trip of its own
        "SELECT conv, pos, (SELECT MAX(id) FROM tombstones) FROM r ORDER BY pos"
    )
    # the common path: the counter row by the caller's (namespace, name)
    _APPEND_BY_NAME = _APPEND_TEMPLATE.format(where="namespace = %(ns)s AND name = %(name)s")
    # inside the creating transaction, once the key is known and its row locked
    _APPEND_BY_KEY = _APPEND_TEMPLATE.format(where="id = %(key)s")

    def _append_params(self, msgs: Sequence[Message], labels: Sequence[Label | None] | None) -> dict[str, Any]:
        """The batch as one array per column (encoded before any row is locked: nothing
        slow happens while the counter row is held)."""
        cols: dict[str, list[Any]] = {n: [] for n, _t in self._APPEND_COLUMNS}
        for i, msg in enumerate(msgs):
            body = msg.body()
            label = labels[i] if labels is not None else None
            intent, lb, prio, reason = label if label is not None else (None, None, None, None)
            cols["role"].append(msg.role)
            cols["body"].append(json.dumps(body, ensure_ascii=False, separators=(",", ":")))
            cols["session"].append(msg.session_id)
            cols["meta"].append(json.dumps(msg.metadata, ensure_ascii=False) if msg.metadata is not None else None)
            cols["created"].append(float(msg.created_at if msg.created_at is not None else time.time()))
            cols["tokens"].append(message_tokens(self.tokens, body))
            cols["hash"].append(content_hash(body))
            cols["intent"].append(intent)
            cols["lb"].append(None if lb is None else int(lb))
            cols["prio"].append(prio)
            cols["reason"].append(reason)
            cols["speaker"].append(speaker_name(body))
            cols["fts"].append(fts_text(body))
        params: dict[str, Any] = dict(cols)
        params["n"] = len(msgs)
        return params

    def append(self, conversation_id: str, msg: Message, *, namespace: str = "default") -> int:
        return self.append_many(conversation_id, [msg], namespace=namespace)[0]

    def append_many(self, conversation_id: str, msgs: Sequence[Message], *, namespace: str = "default",
                    labels: Sequence[Label | None] | None = None) -> list[int]:
        return self.append_batch(conversation_id, msgs, namespace=namespace, labels=labels).positions

    def append_batch(self, name: str, msgs: Sequence[Message], *, namespace: str = "default",
                     labels: Sequence[Label | None] | None = None, idempotency_key: str | None = None,
                     fingerprint: bytes | None = None, expect_position: int | None = None,
                     expect_key: str | None = None) -> AppendResult:
        if not msgs:
            return AppendResult(self.key_of(namespace, name) or "", [], False)
        if labels is not None and len(labels) != len(msgs):
            raise ValueError("labels must match messages one to one")
        if (idempotency_key is None) != (fingerprint is None):
            raise ValueError("idempotency_key and fingerprint go together")
        params = self._append_params(msgs, labels)
        params["ns"], params["name"] = namespace, name
        if (idempotency_key is not None and fingerprint is not None) or expect_position is not None:
            return self._append_keyed(name, namespace, params, idempotency_key, fingerprint,
                                      expect_position, expect_key)
        with self._conn() as conn:
            rows = self._statement(conn, self._APPEND_BY_NAME, params)
            if rows:
                return AppendResult(str(rows[0][0]), [int(r[1]) for r in rows], False,
                                    erasure_mark=int(rows[0][2] or 0))
            # the conversation does not exist (first append, or erased meanwhile): create
            # it and append in one transaction
            with conn.transaction():
                key, created = self._claim_conversation(conn, name, namespace, time.time())
                params["key"] = key
                rows = conn.execute(self._APPEND_BY_KEY, params).fetchall()
        return AppendResult(key, [int(r[1]) for r in rows], created, erasure_mark=int(rows[0][2] or 0))

    def _append_keyed(self, name: str, namespace: str, params: dict[str, Any], idempotency_key: str | None,
                      fingerprint: bytes | None, expect_position: int | None = None,
                      expect_key: str | None = None) -> AppendResult:
        """An append under an idempotency key or an expected position, in one explicit
        transaction: the conversation's row locked first (`_claim_conversation`: FOR
        UPDATE, or created), which orders every writer of the conversation (an erasure
        too), so the key's record, looked up next, is one a concurrent append under the
        same key committed before we got the lock (READ COMMITTED: each statement sees
        what committed before it), and the row's next_position, read next, stays what
        the check saw until the batch is written. No record:
        the batch is written and the key recorded with ON CONFLICT DO NOTHING; should
        another transaction have recorded it all the same, this one's work is rolled back
        and the answer is that record's (nothing written twice)."""
        taken = False
        with self._conn() as conn:
            try:
                with conn.transaction():
                    now = time.time()
                    key, created = self._claim_conversation(conn, name, namespace, now)
                    replayed = None
                    if idempotency_key is not None and fingerprint is not None and not created:
                        replayed = self._replayed(conn, key, idempotency_key, fingerprint)
                    if replayed is not None:  # nothing written: the transaction ends empty
                        return AppendResult(key, replayed, False, replayed=True)
                    if expect_position is not None:  # raising rolls back a conversation created above
                        found = 0 if created else int(conn.execute(
                            "SELECT next_position FROM conversations WHERE id = %s", (key,)).fetchone()[0])
                        check_expected(name, key, found, expect_position, expect_key, created=created,
                                       db_uuid=self.db_uuid)
                    params["key"] = key
                    positions = [int(r[1]) for r in conn.execute(self._APPEND_BY_KEY, params).fetchall()]
                    if idempotency_key is None or fingerprint is None:
                        return AppendResult(key, positions, created)
                    if not self._record_key(conn, key, idempotency_key, fingerprint, positions, now):
                        taken = True
                        raise _KeyTaken
            except _KeyTaken:
                pass
            if taken and idempotency_key is not None and fingerprint is not None:
                # rolled back: the record another transaction committed is the answer
                with conn.transaction():
                    replayed = self._replayed(conn, key, idempotency_key, fingerprint)
                if replayed is None:
                    raise RuntimeError(f"idempotency key of {key!r} vanished after a conflict on it")
                return AppendResult(key, replayed, False, replayed=True)
        return AppendResult(key, positions, created)

    # -- embeddings (derived, outside the write transaction) ------------------------------

    def _ensure_vec_dim(self, dim: int, model: str | None = None) -> None:
        """The vectors' width is the embedder's; a new width or another model (`model`,
        the embedder's `model_identity()`, recorded as `vec_model`; None until the model has
        loaded, `embedder_identity`) empties the derived vectors and marks every turn for
        re-embedding. Vectors that carry no identity (stored before it was recorded)
        adopt `model`, as on SQLite."""
        with self._maintenance(), self._tx() as c:
            c.execute(WAIT_FOR_LOCKS_SQL)  # behind another process setting it (an index build)
            # exclusive: no catch-up's store (which holds it shared) is between its check
            # of the recorded model and its commit
            c.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self._vec_lock_key,))
            row = c.execute("SELECT value FROM meta WHERE key = 'vec_dim'").fetchone()
            got = c.execute("SELECT value FROM meta WHERE key = %s", (VEC_MODEL_KEY,)).fetchone()
            recorded = str(got[0]) if got else None
            if row is not None and int(row[0]) == dim and (model is None or recorded in (None, model)):
                if model is not None and recorded is None:
                    c.execute("INSERT INTO meta(key, value) VALUES (%s, %s)", (VEC_MODEL_KEY, model))
                self._vec_dim = dim
                self._vec_model = model or recorded
                return
            if row is not None:
                log.warning("the stored vectors are %s-wide from model %s, the embedder's %d-wide from %s: "
                            "re-embedding every turn", row[0], recorded or "unrecorded", dim, model or "unrecorded")
                # TRUNCATE, not DELETE: the index built below in this transaction still
                # sees the rows a DELETE removed (dead, not gone) and failed on their old
                # width ("expected 256 dimensions, not 384"), rolling the switch back at
                # every catch-up for good. It takes the ACCESS EXCLUSIVE lock the DROP
                # INDEX below takes anyway; no trigger or foreign key is on this table.
                c.execute("TRUNCATE messages_vec")
                c.execute("UPDATE turns SET embedded = 0")
            # An HNSW index for namespace-wide search (the column has no fixed width, so
            # the index is on its cast to this width); a conversation's own search stays
            # an exact scan of its rows through the btree.
            c.execute("DROP INDEX IF EXISTS messages_vec_hnsw")
            c.execute(f"CREATE INDEX messages_vec_hnsw ON messages_vec USING hnsw "
                      f"((embedding::vector({int(dim)})) vector_l2_ops)")
            c.execute("INSERT INTO meta(key, value) VALUES ('vec_dim', %s) "
                      "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", (str(dim),))
            if model is not None:
                c.execute("INSERT INTO meta(key, value) VALUES (%s, %s) "
                          "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", (VEC_MODEL_KEY, model))
            else:
                c.execute("DELETE FROM meta WHERE key = %s", (VEC_MODEL_KEY,))
        self._vec_dim = dim
        self._vec_model = model

    @property
    def _vec_lock_key(self) -> str:
        """The advisory lock of the schema's vector model: `_ensure_vec_dim` holds it
        exclusive while it switches, a catch-up's store shared."""
        return f"tiermem-vecdim-{self.schema}"

    def _width_conflict(self, ours: int) -> EmbeddingModelConflict | None:
        """After the database refused a vector (a dimension error): the clear error when
        another process has set the store's vectors to another width than `ours` (this
        process's), else None (the database's error stands). Read afresh, and the cached
        width left this process's: taking the store's as a new one would empty the other
        process's vectors, and the two would wipe each other's in turn."""
        return self._model_conflict(ours)

    def _model_conflict(self, ours_dim: int | None, c: Conn | None = None) -> EmbeddingModelConflict | None:
        """The error when the store's vectors, read afresh (in `c`'s transaction, or on
        their own), are recorded as another width than `ours_dim` or another model than
        this process's (`_vec_model`, once checked): another live process, opened later,
        switched them. None where they are this process's or a side is not known yet."""
        sql = "SELECT key, value FROM meta WHERE key IN ('vec_dim', %s)"
        rows = c.execute(sql, (VEC_MODEL_KEY,)).fetchall() if c is not None else self._read(sql, (VEC_MODEL_KEY,))
        got = {str(k): str(v) for k, v in rows}
        if ours_dim is None or "vec_dim" not in got:
            return None
        return embedding_conflict(f"{self.path} schema {self.schema}", int(got["vec_dim"]), ours_dim,
                                  got.get(VEC_MODEL_KEY), self._vec_model)

    # True when the store's vectors are recorded as another width (first parameter) or
    # another model (second) than this process's, as a search's or read's condition: a
    # subquery of no column of the rows, so planned once per statement (PostgreSQL's
    # one-time filter, no index lost), no round trip more. A NULL parameter (not known)
    # compares as unequal to nothing.
    _NOT_OURS = ("EXISTS (SELECT 1 FROM meta WHERE (key = 'vec_dim' AND value <> %s::text) "
                 "OR (key = 'vec_model' AND value <> %s::text))")
    _NOT_OURS_NAMED = _NOT_OURS.replace("%s::text", "%(gd)s::text", 1).replace("%s::text", "%(gm)s::text", 1)

    def _ours(self, dim: int | None) -> tuple[str | None, str | None]:
        """`_NOT_OURS`'s parameters for this process's vectors `dim` wide."""
        return (None if dim is None else str(dim)), self._vec_model

    def _raise_not_ours(self, rows: Sequence[Sequence[Any]], column: int) -> None:
        """EmbeddingModelConflict when a read's `_NOT_OURS` column (at `column`) says that
        the vectors it read are not this process's model's (read afresh for the message)."""
        if rows and rows[0][column]:
            conflict = self._model_conflict(self._own_dim())
            if conflict is not None:
                raise conflict

    def _own_dim(self) -> int | None:
        """The width this process's reads of stored vectors are checked by (`_NOT_OURS`):
        None without an embedder (a tool reading the log compares no vectors, whichever
        model made them)."""
        return self._vec_dim if self.embedder is not None else None

    def _recorded_vec_model(self) -> str | None:
        rows = self._read("SELECT value FROM meta WHERE key = %s", (VEC_MODEL_KEY,))
        return str(rows[0][0]) if rows else None

    def prepare_vectors(self, dim: int) -> None:
        """Make the vector table ready for `dim`-wide vectors now (else the first
        `index_pending` does)."""
        self._ensure_vec_dim(dim, embedder_identity(self.embedder) if self.embedder is not None else None)

    def drop_vector_index(self) -> None:
        """Before a bulk load of vectors: without the HNSW index, inserts are several
        times faster (namespace-wide dense search scans meanwhile). `create_vector_index`
        afterwards."""
        with self._maintenance(), self._tx() as c:
            c.execute("DROP INDEX IF EXISTS messages_vec_hnsw")

    def create_vector_index(self, dim: int) -> None:
        """(Re)build the HNSW index of namespace-wide dense search for `dim`-wide vectors."""
        with self._maintenance(), self._tx() as c:
            c.execute(f"CREATE INDEX IF NOT EXISTS messages_vec_hnsw ON messages_vec USING hnsw "
                      f"((embedding::vector({int(dim)})) vector_l2_ops)")

    _STORE_VECTORS = (
        "WITH v AS (SELECT * FROM unnest(%(ids)s::int8[], %(vecs)b::vector[]) AS v(id, vec)), "
        # the batch's conversation keys too: the distribution key (docs/postgres-distribution.md)
        "l AS (SELECT t.id FROM turns t WHERE t.id = ANY(%(ids)s::int8[]) AND t.conversation_id = ANY(%(convs)s::text[]) "
        "  AND t.embedded = 0 ORDER BY t.id FOR UPDATE), "
        "u AS (UPDATE turns t SET embedded = 1 FROM conversations c WHERE t.id = ANY(ARRAY(SELECT id FROM l)) "
        "  AND t.embedded = 0 "
        "  AND c.id = t.conversation_id RETURNING t.id, t.conversation_id, t.position, c.namespace), "
        "i AS (INSERT INTO messages_vec(id, conversation_id, namespace, position, embedding) "
        "  SELECT u.id, u.conversation_id, u.namespace, u.position, v.vec FROM u JOIN v ON v.id = u.id) "
        "SELECT u.id FROM u ORDER BY u.id"
    )

    def index_pending(self, *, conversation_id: str | None = None, batch: int = 64, max_rows: int | None = None,
                      progress: Callable[[int], None] | None = None, end: int | None = None,
                      pool_batches: int = INDEX_POOL_BATCHES, stop: Callable[[], bool] | None = None,
                      namespace: str | None = None, read_claimed: bool = False) -> int:
        if self.embedder is None:
            return 0
        model = checked_identity(self.embedder, self._recorded_vec_model)
        # checked once per store, not per call (4 round trips)
        if self._vec_dim != self.embedder.dim or (model is not None and self._vec_model != model):
            self._ensure_vec_dim(self.embedder.dim, model)
        self._owed.retry(self.on_embedded)  # a decision a failed hook owes comes first (log order)
        claims = self._claims
        mine: set[int] = set()  # the turns this call holds (tiers.catchup.Claims)
        # the turns this call read and has not hooked yet (tiers.catchup.Deciding)
        undecided: Counter[tuple[str, int]] = Counter()
        try:
            return self._index_pools(conversation_id, batch, max_rows, progress, end, pool_batches, stop, namespace,
                                     mine, undecided, read_claimed)
        finally:  # read, not stored (an error, a stop): pending again, for whichever catch-up comes
            claims.release(list(mine), mine)
            self._deciding.release_all(undecided)

    def wait_decided(self, conversation_id: str, positions: Sequence[int] | None, timeout_s: float) -> bool:
        """`ColdLog.wait_decided`."""
        return self._deciding.wait(conversation_id, positions, timeout_s)

    def undecided_conversations(self) -> set[str]:
        """`ColdLog.undecided_conversations`."""
        return self._deciding.conversations()

    def _index_pools(self, conversation_id: str | None, batch: int, max_rows: int | None,
                     progress: Callable[[int], None] | None, end: int | None, pool_batches: int,
                     stop: Callable[[], bool] | None, namespace: str | None, mine: set[int],
                     undecided: Counter[tuple[str, int]], read_claimed: bool) -> int:
        """`index_pending`'s loop; the turns it claims are added to `mine`, and held in
        `undecided` until their hook ran (tiers.catchup.Deciding). `read_claimed`: the
        turns another catch-up holds are read too (not left out by the query), their
        claims left to it (tiers.catchup.Claims)."""
        embedder = self.embedder
        assert embedder is not None  # index_pending returned 0 without one
        claims = self._claims
        done = 0
        pool = batch * max(1, pool_batches)  # as in tiers.cold: embedded together, hooked per batch
        while (max_rows is None or done < max_rows) and not (stop is not None and stop()):
            limit = pool if max_rows is None else min(pool, max_rows - done)
            where = "t.embedded = 0" + (" AND t.conversation_id = %s" if conversation_id is not None else "")
            params: tuple[Any, ...] = (conversation_id,) if conversation_id is not None else ()
            if conversation_id is None and namespace is not None:
                where += " AND t.conversation_id IN (SELECT id FROM conversations WHERE namespace = %s)"
                params = (namespace,)
            if conversation_id is not None and end is not None:
                where += " AND t.position <= %s"
                params = (conversation_id, end)
            # each read starts again from the first pending turn: those another catch-up of
            # this process holds are left out by the query itself (read and claimed as one
            # step, Claims), unless `read_claimed`: then none is (each pool is stored, or found
            # stored by its claimant, before the next read: no turn is read twice)
            with claims.lock:
                rows = self._read(
                    "SELECT t.conversation_id, t.position, t.id, m.body FROM turns t JOIN messages m ON m.id = t.id "
                    f"WHERE {where} AND NOT (t.id = ANY(%s::bigint[])) ORDER BY t.conversation_id, t.position "
                    "LIMIT %s", (*params, [] if read_claimed else claims.held(), limit))
                if not rows:
                    break
                rows = rows[:pool_rows([len(r[3]) for r in rows])]  # long texts: the rest in the next pool
                claims.take([int(r[2]) for r in rows], mine)
                # held before the lock ends: a reader that finds them claimed finds them held
                self._deciding.hold([(r[0], int(r[1])) for r in rows], undecided)
            texts = []
            for r in rows:
                try:
                    texts.append(search_text(loads_stored(r[3])))
                except (ValueError, TypeError, AttributeError):
                    texts.append("")  # salvage: an undecodable row still gets marked
            with remembered_for([memo_scope(self.db_uuid, str(r[0])) for r in rows]):  # each for its conversation
                vecs = embedder.embed(texts)
            # a model's width shows, and its identity is known, only once it has loaded
            # (`embedder_identity`): one that fails to load never replaces the recorded one
            model = embedder_identity(embedder)
            if vecs.ndim == 2 and (vecs.shape[1] != self._vec_dim or (model is not None and model != self._vec_model)):
                self._ensure_vec_dim(int(vecs.shape[1]), model)
            by_id = {int(r[2]): (r[0], int(r[1]), v) for r, v in zip(rows, vecs, strict=True)}
            ids = sorted(by_id)
            # A statement per batch, each its own transaction and checkout (so its own
            # operation deadline), committed and hooked before the next: a slow server
            # still stores the pool a batch at a time. As one statement for the whole pool
            # (16 batches), a pool that outlasted cold_operation_timeout_s was cut
            # (StoreStalled), nothing of it stored, and every retry read the same pool and
            # was cut again: the background catch-up never embedded a turn
            # (tests/test_postgres_index_pool_deadline.py).
            hooked: set[str] = set()  # the conversations with a turn stored by this pool
            try:
                for first in range(0, len(ids), batch):
                    done_ids = self._store_vector_batch(ids[first:first + batch], by_id, int(vecs.shape[1]), mine)
                    stored: list[tuple[str, int, np.ndarray]] = [by_id[i] for i in done_ids]
                    hooked.update(turn[0] for turn in stored)
                    if stored and self.on_embedded is not None:
                        try:
                            self.on_embedded(stored)
                        except Exception:  # derived work: the vectors are stored, indexing goes on
                            log.exception("after-embedding hook failed for %d turns; the next catch-up decides them",
                                          len(stored))
                            self._owed.owe(done_ids)  # they are embedded: nothing else would
            finally:  # also when a later batch failed: those stored are hooked, their rechecks due
                if hooked and self.on_hooked is not None:
                    try:  # each conversation once the pool's hooks have all run (log order)
                        self.on_hooked(sorted(hooked))
                    except Exception:  # derived work, as the hook's: indexing goes on
                        log.exception("after-pool hook failed; the next catch-up's runs again")
            self._deciding.release([(r[0], int(r[1])) for r in rows], undecided)  # hooked (or another's to hook)
            done += len(rows)
            if progress is not None:
                progress(len(rows))
        return done

    def _store_vector_batch(self, ids: list[int], by_id: dict[int, tuple[str, int, np.ndarray]], dim: int,
                            mine: set[int]) -> list[int]:
        """One batch of a catch-up's pool (`ids`, in id order) stored in one statement, its
        own transaction; its claims released once committed. The ids of the turns it
        stored, in id order (log order within a conversation): one already embedded, or
        erased, is not."""
        # The turn rows' locks decide, taken in id order (two processes catching up the same
        # turns never deadlock): a second process finds embedded = 1, an erased turn is
        # gone; neither stores a vector.
        try:
            with self._tx() as c:
                # behind a process switching the model or width (`_ensure_vec_dim`), whose
                # switch the read after it, a statement of its own, then sees: one opened
                # later wins, and this model's vectors stored beside its would mix two models
                # unseen (same width; or, without the HNSW index's cast during a bulk load,
                # `drop_vector_index`, store another width)
                c.execute("SELECT pg_advisory_xact_lock_shared(hashtext(%s))", (self._vec_lock_key,))
                conflict = self._model_conflict(dim, c)
                if conflict is not None:
                    raise conflict
                done_ids = [int(r[0]) for r in self._statement(c, self._STORE_VECTORS, {
                    "ids": ids, "vecs": [Vec(by_id[i][2]) for i in ids],
                    "convs": sorted({by_id[i][0] for i in ids})})]
        except psycopg.errors.DataException as exc:  # the index's cast to another width
            conflict = self._width_conflict(dim)
            if conflict is not None:
                raise conflict from exc
            raise
        self._claims.release(ids, mine)  # committed: a read now finds embedded = 1
        return done_ids

    def _owed_record(self, keys: list[str], mark: str) -> None:
        """tiers.owed's rows, and its mark that sends the other processes to read them."""
        with self._tx() as c:
            c.execute("INSERT INTO meta(key, value) SELECT k, '1' FROM unnest(%s::text[]) AS k "
                      "ON CONFLICT (key) DO NOTHING", (keys,))
            c.execute("INSERT INTO meta(key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                      (OWED_MARK_KEY, mark))

    def _meta_keys_delete(self, keys: list[str]) -> None:
        with self._tx() as c:
            c.execute("DELETE FROM meta WHERE key = ANY(%s::text[])", (keys,))

    def embeddings(self, conversation_id: str, positions: Sequence[int]) -> dict[int, np.ndarray]:
        if not positions:
            return {}
        rows = self._read(f"SELECT position, vector_send(embedding), {self._NOT_OURS} FROM messages_vec "
                          "WHERE conversation_id = %s AND position = ANY(%s)",
                          (*self._ours(self._own_dim()), conversation_id, list(positions)))
        self._raise_not_ours(rows, 2)
        out: dict[int, np.ndarray] = {}
        for pos, sent, _not_ours in rows:
            b = vector_bytes(sent)
            if b is not None:
                out[int(pos)] = np.frombuffer(b, dtype=np.float32)
        return out

    def turn_facts(self, conversation_id: str, *, after: int = -1,
                   positions: Sequence[int] | None = None, limit: int | None = None) -> list[TurnFact]:
        with_text = positions is None
        # tokens and time NULL where out of range (a negative count, a NaN time), so that the
        # one-pass conversion below fails for such a row (`usable_facts`)
        cols = (f"t.id, t.position, CASE WHEN t.tokens BETWEEN 0 AND {MAX_TURN_TOKENS} THEN t.tokens END, "
                f"CASE WHEN t.created_at BETWEEN 0 AND {MAX_TIMESTAMP} THEN t.created_at END, t.session_id, "
                "vector_send(v.embedding), t.speaker, " + ("f.text" if with_text else "NULL")
                # whether the vectors are another model's (`_NOT_OURS`): computed once per read
                + f", {self._NOT_OURS}")
        join = "LEFT JOIN messages_vec v ON v.id = t.id AND t.embedded = 1 "
        if with_text:
            join += "LEFT JOIN messages_fts f ON f.id = t.id "
        if positions is not None:
            if not positions:
                return []
            sql = (f"SELECT {cols} FROM turns t {join}WHERE t.conversation_id = %s AND t.position = ANY(%s) "
                   "ORDER BY t.position")
            params: tuple[Any, ...] = (*self._ours(self._own_dim()), conversation_id, list(positions))
        else:
            sql = (f"SELECT {cols} FROM turns t {join}WHERE t.conversation_id = %s AND t.position > %s "
                   "AND t.position <= %s ORDER BY t.position")
            params = (*self._ours(self._own_dim()), conversation_id, after, MAX_POSITION)
            if limit is not None:
                sql += " LIMIT %s"
                params += (limit,)
        rows = self._read(sql, params)
        # another process's model's vectors never reach the turn cache
        self._raise_not_ours(rows, 8)
        return self.usable_facts(conversation_id, rows, lambda r: (
            int(r[0]), int(r[1]), int(r[2]), float(r[3]), r[4], vector_bytes(r[5]), r[6], r[7]),
            limit=limit, positions=positions)

    def indexed_texts(self, conversation_id: str, positions: Sequence[int]) -> dict[int, str]:
        if not positions:
            return {}
        rows = self._read("SELECT t.position, f.text FROM turns t JOIN messages_fts f ON f.id = t.id "
                          "WHERE t.conversation_id = %s AND t.position = ANY(%s)", (conversation_id, list(positions)))
        return {int(p): text for p, text in rows if isinstance(text, str)}

    # -- reads --------------------------------------------------------------------------

    def get(self, conversation_id: str, positions: Sequence[int]) -> list[StoredMessage]:
        if not positions:
            return []
        rows = self._read(self._SELECT + "WHERE m.conversation_id = %s AND m.position = ANY(%s) ORDER BY m.position",
                          (conversation_id, list(positions)))
        return [m for m in map(self._decode, rows) if m is not None]

    def get_many(self, keys: Sequence[tuple[str, int]]) -> list[StoredMessage]:
        if not keys:
            return []
        # one round trip for every conversation: unnest the pairs and join
        rows = self._read(
            "SELECT m.conversation_id, m.position, m.role, m.body, m.session_id, m.metadata, m.created_at, t.tokens "
            "FROM unnest(%s::text[], %s::bigint[]) AS k(conv, pos) "
            "JOIN messages m ON m.conversation_id = k.conv AND m.position = k.pos "
            "LEFT JOIN turns t ON t.conversation_id = m.conversation_id AND t.position = m.position "
            "ORDER BY m.conversation_id, m.position",
            ([k[0] for k in keys], [int(k[1]) for k in keys]))
        # grouped by conversation in first-seen order, as the SQLite engine answers
        order = {c: i for i, c in enumerate(dict.fromkeys(k[0] for k in keys))}
        out = [m for m in map(self._decode, rows) if m is not None]
        out.sort(key=lambda m: (order[m.conversation_id], m.position))
        return out

    def _turns(self, where: str, params: Sequence[Any] | Mapping[str, Any]) -> list[TurnRow]:
        return self._turn_rows(self._read(self._TURN_SELECT + where, params))

    def turns_at(self, conversation_id: str, positions: Sequence[int]) -> list[TurnRow]:
        if not positions:
            return []
        return self._turns("WHERE t.conversation_id = %s AND t.position = ANY(%s) ORDER BY t.position",
                           (conversation_id, list(positions)))

    def pinned_turns(self, conversation_id: str) -> list[TurnRow]:
        return self._turns("WHERE t.conversation_id = %(c)s AND (t.load_bearing = 1 OR p.priority IS NOT NULL) "
                           "ORDER BY t.position", {"c": conversation_id})

    def pin_candidates(self, conversation_id: str, *, min_priority: int, limit: int) -> list[TurnRow]:
        # the explicit pins and the auto-pin candidates, each its own top `limit`, in one round
        # trip. "Not pinned" tests the join's own column (p.position), which the planner
        # turns into an anti join; on p.priority it estimated a handful of rows and sorted
        # every candidate (a bitmap scan of turns_pin_candidates: 42 ms at 30k, not 0.06)
        rows = self._read(
            "(" + self._TURN_SELECT.replace("FROM turns t LEFT JOIN pins p ON", "FROM pins p JOIN turns t ON")
            + "WHERE p.conversation_id = %(c)s ORDER BY p.priority DESC, t.position DESC LIMIT %(l)s) UNION ALL ("
            + self._TURN_SELECT + "WHERE t.conversation_id = %(c)s AND t.load_bearing = 1 AND t.priority >= %(m)s "
            "AND t.superseded_by IS NULL AND p.position IS NULL ORDER BY t.priority DESC, t.position DESC LIMIT %(l)s)",
            {"c": conversation_id, "l": limit, "m": min_priority})
        turns = self._turn_rows(rows)
        turns.sort(key=lambda t: (-(t.pinned_priority if t.pinned_priority is not None else t.priority), -t.position))
        return turns[:limit]

    def superseded_pins(self, conversation_id: str, *, min_priority: int, limit: int) -> list[TurnRow]:
        # an anti join on p.position, as pin_candidates'
        return self._turns(
            "WHERE t.conversation_id = %s AND t.load_bearing = 1 AND t.priority >= %s "
            "AND t.superseded_by IS NOT NULL AND p.position IS NULL ORDER BY t.position DESC LIMIT %s",
            (conversation_id, min_priority, limit))

    # -- derived labels and user state ------------------------------------------------------

    def set_superseded_statements(self, conversation_id: str, rows: Sequence[StatementRow], *,
                                  over: Collection[int] = ()) -> None:
        if not rows:
            return
        with self._tx() as c:
            # the sweep looks again (`set_superseded`): the conversation's row first, as an append
            c.execute("UPDATE conversations SET views_seq = views_seq + 1 WHERE id = %s", (conversation_id,))
            if over:  # a row naming a hidden turn is replaced (tiers.statements)
                c.cursor().executemany(
                    f"DELETE FROM {STATEMENT_TABLE} WHERE conversation_id = %s AND position = %s AND start = %s "
                    "AND superseded_by = ANY(%s)",
                    [(conversation_id, r.position, r.start, sorted(over)) for r in rows])
            c.cursor().executemany(
                f'INSERT INTO {STATEMENT_TABLE}(conversation_id, position, start, "end", superseded_by) '
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                [(conversation_id, r.position, r.start, r.end, r.superseded_by) for r in rows])

    def superseded_statements(self, conversation_id: str, positions: Sequence[int] | None = None
                              ) -> list[StatementRow]:
        sql = f'SELECT position, start, "end", superseded_by FROM {STATEMENT_TABLE} WHERE conversation_id = %s'
        if positions is None:
            got = self._read(sql + " ORDER BY position, start", (conversation_id,))
        else:
            got = self._read(sql + " AND position = ANY(%s) ORDER BY position, start",
                             (conversation_id, sorted(set(positions))))
        return [StatementRow(int(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in got]

    def set_pin(self, conversation_id: str, position: int, priority: int | None) -> int | None:
        with self._tx() as c:
            self._require_in(c, conversation_id)
            last = c.execute("SELECT COALESCE(MAX(position), -1) FROM messages WHERE conversation_id = %s",
                             (conversation_id,)).fetchone()[0]
            if not 0 <= position <= last:
                raise PositionOutOfRange("position", position, int(last))
            if priority is None:
                cur = c.execute("DELETE FROM pins WHERE conversation_id = %s AND position = %s",
                                (conversation_id, position))
            else:
                cur = c.execute("INSERT INTO pins(conversation_id, position, priority, created_at) VALUES (%s,%s,%s,%s) "
                                "ON CONFLICT (conversation_id, position) DO UPDATE SET priority = EXCLUDED.priority, "
                                "created_at = EXCLUDED.created_at", (conversation_id, position, priority, time.time()))
            if cur.rowcount <= 0:
                return None
            # the trigger's row lock is held to the commit: the version is this write's
            return int(c.execute("SELECT version FROM pin_versions WHERE conversation_id = %s",
                                 (conversation_id,)).fetchone()[0])

    # -- checkpoint / fork / retention ---------------------------------------------------------

    def fork(self, conversation_id: str, up_to: int, *, new_id: str | None = None,
             max_id_chars: int = DEFAULT_FORK_MAX_ID_CHARS) -> str:
        with self._tx() as c:
            row = c.execute(
                "SELECT namespace, name, (SELECT COALESCE(MAX(position), -1) FROM messages WHERE conversation_id = %(c)s) "
                "FROM conversations WHERE id = %(c)s FOR SHARE", {"c": conversation_id}).fetchone()
            namespace, child_name = self._fork_name(c, conversation_id, row, up_to, new_id, max_id_chars)
            now = time.time()
            child = self._issue_key(c, child_name, now)
            last_at = c.execute("SELECT MAX(created_at) FROM messages WHERE conversation_id = %s AND position <= %s",
                                (conversation_id, up_to)).fetchone()[0]
            made = c.execute(
                "INSERT INTO conversations(id, name, namespace, parent_id, fork_position, created_at, last_message_at, "
                "next_position) VALUES (%s,%s,%s,%s,%s,%s,%s,%s) ON CONFLICT (namespace, name) DO NOTHING RETURNING id",
                (child, child_name, namespace, conversation_id, up_to, now, last_at, up_to + 1)).fetchone()
            if made is None:  # created by another writer since the check above
                raise ValidationError("new_id", f"conversation {child_name!r} already exists")
            self._step("fork:conversation")
            bad = [int(r[1]) for r in c.execute(self._SELECT + "WHERE m.conversation_id = %s AND m.position <= %s",
                                                (conversation_id, up_to)).fetchall()
                   if self._decode(r) is None]
            args = {"child": child, "parent": conversation_id, "up": up_to, "skip": bad, "ns": namespace}
            c.execute(
                "INSERT INTO messages(conversation_id, position, id, role, body, session_id, metadata, created_at) "
                "SELECT %(child)s, position, nextval('messages_id_seq'), role, body, session_id, metadata, created_at "
                "FROM messages WHERE conversation_id = %(parent)s AND position <= %(up)s "
                "AND position <> ALL(%(skip)s::bigint[]) ORDER BY position", args)
            self._step("fork:messages")
            # the child's rows join its own new messages on position for their new ids
            c.execute(
                "INSERT INTO turns(conversation_id, position, id, role, session_id, tokens, content_hash, created_at, "
                "embedded, intent, load_bearing, priority, label_reason, superseded_by, speaker) "
                "SELECT %(child)s, t.position, m.id, t.role, t.session_id, t.tokens, t.content_hash, t.created_at, "
                "t.embedded, t.intent, t.load_bearing, t.priority, t.label_reason, "
                "CASE WHEN t.superseded_by <= %(up)s THEN t.superseded_by END, t.speaker "
                "FROM turns t JOIN messages m ON m.conversation_id = %(child)s AND m.position = t.position "
                "WHERE t.conversation_id = %(parent)s AND t.position <= %(up)s", args)
            c.execute(
                "INSERT INTO messages_fts(id, conversation_id, namespace, text) "
                "SELECT m.id, %(child)s, %(ns)s, f.text FROM messages p JOIN messages_fts f ON f.id = p.id "
                "JOIN messages m ON m.conversation_id = %(child)s AND m.position = p.position "
                "WHERE p.conversation_id = %(parent)s AND p.position <= %(up)s", args)
            self._step("fork:index")
            c.execute(
                "INSERT INTO messages_vec(id, conversation_id, namespace, position, embedding) "
                "SELECT m.id, %(child)s, %(ns)s, v.position, v.embedding FROM messages_vec v "
                "JOIN messages m ON m.conversation_id = %(child)s AND m.position = v.position "
                "WHERE v.conversation_id = %(parent)s AND v.position <= %(up)s", args)
            # a turn marked embedded whose vector drifted away: catch-up recomputes it
            c.execute("UPDATE turns t SET embedded = 0 WHERE t.conversation_id = %(child)s AND t.embedded = 1 "
                      "AND NOT EXISTS (SELECT 1 FROM messages_vec v WHERE v.id = t.id)", args)
            self._step("fork:vectors")
            c.execute(
                "INSERT INTO checkpoints(conversation_id, position, summary, metadata, created_at) "
                "SELECT %(child)s, position, summary, metadata, created_at FROM checkpoints "
                "WHERE conversation_id = %(parent)s AND position <= %(up)s ORDER BY position DESC, id DESC LIMIT 1",
                args)
            # the newest rolling view inside the prefix, as the child's first version (tiers.cold)
            c.execute(
                "INSERT INTO summaries(conversation_id, kind, key, version, start_position, end_position, body, tokens, "
                "summarizer, created_at) SELECT %(child)s, kind, key, 1, start_position, end_position, body, tokens, "
                "summarizer, created_at FROM summaries WHERE conversation_id = %(parent)s AND kind = 'rolling' "
                "AND key = '' AND end_position <= %(up)s ORDER BY version DESC LIMIT 1", args)
            c.execute(
                "INSERT INTO pins(conversation_id, position, priority, created_at) "
                "SELECT %(child)s, position, priority, created_at FROM pins WHERE conversation_id = %(parent)s "
                "AND position <= %(up)s AND position <> ALL(%(skip)s::bigint[])", args)
            c.execute(
                f'INSERT INTO {STATEMENT_TABLE}(conversation_id, position, start, "end", superseded_by) '
                f'SELECT %(child)s, position, start, "end", superseded_by FROM {STATEMENT_TABLE} '
                "WHERE conversation_id = %(parent)s AND superseded_by <= %(up)s "
                "AND position <> ALL(%(skip)s::bigint[])", args)
            self._step("fork:checkpoint")
        return child

    def files_bytes(self) -> int:
        """Bytes of this schema's tables and indexes (PostgreSQL's, not a file)."""
        return int(self._read(
            "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind IN ('r', 'm')",
            (self.schema,))[0][0])

    def prune(self, older_than: float, *, namespace: str | None = None, all_namespaces: bool = False,
              on_erased: Callable[[Sequence[str]], None] | None = None) -> ErasureReport:
        if all_namespaces == (namespace is not None):
            raise ValidationError("namespace", "give a namespace, or all_namespaces=True (not both)")
        where, params = self._prune_where(older_than, namespace)
        return self._erase(where, params, reason="prune", on_erased=on_erased)

    def prune_preview(self, older_than: float, *, namespace: str | None = None,
                      all_namespaces: bool = False) -> ErasureReport:
        """See `ColdStore.prune_preview`: what `prune` would erase now, erasing nothing."""
        if all_namespaces == (namespace is not None):
            raise ValidationError("namespace", "give a namespace, or all_namespaces=True (not both)")
        return self._prune_preview(*self._prune_where(older_than, namespace))

    @staticmethod
    def _prune_where(older_than: float, namespace: str | None) -> tuple[str, tuple[Any, ...]]:
        """The conversations `prune` takes (idle since before the cutoff: PRUNE_IDLE_SQL),
        as a condition over `conversations` and its parameters."""
        where = PRUNE_IDLE_SQL.format(cutoff="%s")
        if namespace is None:
            return where, (older_than, older_than)
        return f"{where} AND namespace = %s", (older_than, older_than, namespace)

    def delete_conversation(self, conversation_id: str, *,
                            on_erased: Callable[[Sequence[str]], None] | None = None) -> ErasureReport:
        report = self._erase("id = %s", (conversation_id,), reason="erase", on_erased=on_erased)
        if not report.conversations:
            raise ConversationNotFound(key_name(conversation_id))
        return report

    def delete_namespace(self, namespace: str, *, on_erased: Callable[[Sequence[str]], None] | None = None
                         ) -> ErasureReport:
        return self._erase("namespace = %s OR starts_with(namespace, %s)", (namespace, namespace + "/"),
                           reason="erase", on_erased=on_erased)

    def _erase(self, where: str, params: Sequence[Any], *, reason: str,
               on_erased: Callable[[Sequence[str]], None] | None = None) -> ErasureReport:
        """The one deletion path of both retention operations (DESIGN invariant 3), in one
        transaction; `on_erased(keys)` runs once after its commit."""
        report = ErasureReport(bytes_before=self.files_bytes())
        now = time.time()
        # maintenance: an erasure of a large namespace is one transaction, as long as its
        # rows make it; cut at the operations' deadline it would roll back, and so would
        # every retry (the namespace could never be erased). A stalled server is still cut.
        with self._maintenance(), self._tx() as c:
            # an erasure is a legal obligation: it waits for the locks it needs (another
            # erasure's rows and ERASURE_ORDER_LOCK, its rewrite's tables, an append in
            # flight) instead of failing busy at lock_timeout, bounded by the maintenance
            # deadline; what waits on it is what waited before (its own locks unchanged)
            c.execute(WAIT_FOR_LOCKS_SQL)
            # FOR UPDATE: appends to these conversations finish first, later ones wait
            # and then find the name free (a new incarnation)
            keys = [r[0] for r in c.execute(f"SELECT id FROM conversations WHERE {where} ORDER BY id FOR UPDATE",
                                            params).fetchall()]
            if not keys:
                report.bytes_after = report.bytes_before  # nothing erased, nothing reclaimed
                return report
            # the newest created_at among its messages (TOMBSTONE_NEWEST_COLUMN): last_message_at,
            # which every append and fork keeps at their MAX (tiers.cold `_tombstones`)
            rows = c.execute(
                "SELECT c.id, c.namespace, c.name, c.created_at, "
                "(SELECT COUNT(*) FROM messages m WHERE m.conversation_id = c.id), "
                "(SELECT COUNT(*) FROM summaries s WHERE s.conversation_id = c.id), "
                "(SELECT COUNT(*) FROM checkpoints k WHERE k.conversation_id = c.id), c.last_message_at "
                f"FROM conversations c WHERE c.id = ANY(%s) ORDER BY {ERASURE_ORDER}", (keys,)).fetchall()
            # tombstone ids in commit order: another process reads the erasures past the
            # last id it saw (`erased_after`), and a BIGSERIAL drawn by a transaction that
            # commits after one holding a higher id would fall behind its mark, unseen.
            # Taken after the rows' locks; an erasure holding it waits for no other erasure.
            # Transaction-scoped: released at commit or rollback, so a connection cut by
            # the watchdog or returned to a pool after an error holds it no more
            c.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"{ERASURE_ORDER_LOCK}-{self.schema}",))
            for key, ns, name, created, n_msgs, n_sum, n_cp, newest in rows:
                c.execute("INSERT INTO tombstones(key, namespace, name, reason, messages, summaries, checkpoints, "
                          f"created_at, deleted_at, {TOMBSTONE_NEWEST_COLUMN}) "
                          "VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                          (key, ns, name, reason, n_msgs, n_sum, n_cp, created, now, newest))
                report.tombstones.append({"id": name, "namespace": ns, "reason": reason, "messages": int(n_msgs),
                                          "summaries": int(n_sum), "checkpoints": int(n_cp), "created_at": created,
                                          "deleted_at": now})
                report.keys.append(key)
                report.conversation_ids.append(name)
                report.namespaces.append(ns)
                report.messages += int(n_msgs)
            report.conversations = len(rows)
            for table in CONVERSATION_TABLES:
                c.execute(f"DELETE FROM {table} WHERE conversation_id = ANY(%s)", (keys,))
            c.execute(f"SET LOCAL {RETENTION_GUC} = 'on'")
            c.execute("DELETE FROM messages WHERE conversation_id = ANY(%s)", (keys,))
            c.execute(f"SET LOCAL {RETENTION_GUC} = 'off'")
            c.execute("DELETE FROM conversations WHERE id = ANY(%s)", (keys,))
            # migrate-store's record of its copy of each (tiers.cold._forget_copied)
            c.execute("DELETE FROM meta WHERE key = ANY(%s)", ([COPIED_DIGEST_PREFIX + k for k in keys],))
            # owed after the commit, recorded with it (tiers.cold: the same)
            c.cursor().executemany("INSERT INTO redis_purge(key, at) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                                   [(k, now) for k in keys])
            # the marker names this transaction (SCRUB_MARKER_SQL): the scrub asks which
            # snapshots are older than it (SNAPSHOT_HOLDERS_SQL)
            c.execute(SCRUB_MARKER_SQL, (SCRUB_PENDING_KEY,))
        # committed: from here on nothing may raise, or the caller never learns which keys
        # went (a 503 "nothing was written" for an erasure that happened: a retry finds
        # nothing, the erasure hooks never run) and their Redis keys and in-process copies
        # outlive the erasure. What is left undone is owed and recorded with the commit
        # (redis_purge, the scrub's marker): done later, never lost.
        self._step("erase:committed")
        if on_erased is not None:
            try:
                on_erased(report.keys)
            except Exception:  # the caller's work after the commit: its own owed records stay
                log.exception("erasure: committed, but dropping the erased keys' copies failed")
        report.wal_truncated = False  # PostgreSQL's WAL keeps the records (module docstring)
        missed: list[str] = []
        try:
            report.scrubbed = self._scrub(missed)
            report.not_rewritten = "; ".join(missed)
        except AFTER_COMMIT_ERRORS as exc:  # a lock timeout, a dropped connection, none in time
            report.scrubbed = False
            log.warning("erasure: the rows are deleted but the tables were not rewritten (%s); "
                        "their bytes stay in the data files until the next open of the store, the next "
                        "erasure or reclaim()",
                        str(exc).strip())
        try:
            report.bytes_after = self.files_bytes()
        except AFTER_COMMIT_ERRORS:
            report.bytes_after = report.bytes_before  # unknown: claim nothing reclaimed
        self._salvaged_rows.forget(report.keys)  # their bad rows no longer exist either
        return report

    def reclaim(self, *, full: bool | None = None) -> bool:
        """Hand the space of deleted rows back. `full` (default: `erase_scrub == "full"`)
        rewrites the tables, so no data file holds a deleted byte afterwards; else a plain
        VACUUM makes the space reusable at once instead of at autovacuum's pace. VACUUM
        cannot run in a transaction: on a caller's pool in transaction mode the connection
        is switched to autocommit for it and back. Returns whether the scrub is
        guaranteed: the tables rewritten, and pg_statistic after their ANALYZE (False,
        logged, where the role may not VACUUM it: STATISTICS_TABLE), with no snapshot
        open that the rewrite had to keep deleted rows for (False, logged naming what holds
        one, and an erasure's scrub still owed: SNAPSHOT_HOLDERS_SQL). Raises psycopg.Error when the VACUUM fails,
        StoreStalled when it has not finished by the maintenance deadline: cancelled by
        the server just inside it (`_server_deadline`; the connection kept, on our own
        pool as on a caller's), or cut where the server did not answer at all."""
        return self._reclaim(full=full, lock_timeout_ms=None)

    def _scrub(self, missed: list[str] | None = None, *, owed: bool = False) -> bool:
        """An erasure's scrub (reclaim() at the store's erase_scrub), its own or one owed at
        an open: a table's lock waited for at most the store's lock_timeout, or where it
        sets none SCRUB_LOCK_TIMEOUT_MS (LockNotAvailable past it), not up to the
        maintenance deadline. reclaim() called by an operator keeps the session's.
        `missed` gets what the scrub did not rewrite, and why (`_reclaim`). A snapshot
        older than the erasure still open is asked for before the rewrite, not after it:
        the rewrite would keep the rows it may see, so it is skipped, the scrub owed.
        `owed`: one left owed (`_finish_scrub`), done by one session at a time (`_reclaim`)."""
        return self._reclaim(lock_timeout_ms=SCRUB_LOCK_TIMEOUT_MS if self._lock_timeout_ms is None else None,
                             missed=missed, holders_first=True, owed=owed)

    def _reclaim(self, *, full: bool | None = None, lock_timeout_ms: int | None,
                 missed: list[str] | None = None, holders_first: bool = False, owed: bool = False) -> bool:
        """reclaim(), its VACUUM waiting for a table's lock at most `lock_timeout_ms`
        where given (LockNotAvailable past it, a psycopg.Error), for a store that sets no
        lock_timeout of its own: set for the statement, and reset after it on our own pool
        as statement_timeout is (on a caller's, CALLER_SETTINGS sets it back). pg_statistic
        after the tables, its lock waited for at most STATISTICS_LOCK_TIMEOUT_MS: past it
        False, the tables' scrub done and pg_statistic's owed alone (SCRUB_STATISTICS_KEY).
        `missed`, where given, gets what was not rewritten, and why (a line for
        ErasureReport.not_rewritten: STATISTICS_TABLE, or SNAPSHOT_HELD_NOTE).
        `holders_first` (an erasure's scrub, its own or one owed at an open): where the
        marker names the erasure's xid and a snapshot at or before it is still open
        (SNAPSHOT_HOLDERS_SQL), nothing is rewritten: the rewrite would copy the rows that
        snapshot may see into the new files, and an owed scrub retried at every open
        rewrote every table of the store (ACCESS EXCLUSIVE, 0.5-1 s at 30,000 messages)
        at each, for nothing, as long as the holder lasted. False, still owed.
        `owed` (a scrub left owed, `_finish_scrub`): under OWED_SCRUB_LOCK, tried; False,
        nothing done or logged, where another session holds it (it finishes the scrub) or
        the marker is gone once it is had (another session finished it)."""
        assert lock_timeout_ms is None or self._lock_timeout_ms is None  # else the session's is the store's
        full = self.erase_scrub == "full" if full is None else full
        held: list[str] = []
        stale: list[tuple[str, str]] = []  # clear_stale_statistics: what the role may not clear
        with self._maintenance(), self._conn() as conn, self._owed_scrub_lock(conn, owed) as mine:
            if not mine:
                return False  # another session finishes this owed scrub
            # pg_statistic after the tables (STATISTICS_TABLE), where the role may rewrite it
            statistics = full and self._may_vacuum_statistics(conn)
            locked = False  # pg_statistic's lock held by another session past its wait
            analyzed = ""  # the next xid after the tables' ANALYZE (SCRUB_STATISTICS_KEY)
            row = conn.execute("SELECT value FROM meta WHERE key = %s", (SCRUB_PENDING_KEY,)).fetchone()
            marker: str | None = row[0] if row else None
            if owed and marker is None:
                return False  # finished by another session before the lock was had: not by us
            owed_xid = erasure_xid(marker) if full and holders_first else None
            if owed_xid is not None:  # asked before the rewrite: what it could not scrub
                held = self._lasting_holders(conn, owed_xid)  # one running a statement waited for
                if held:
                    return self._held(marker, held, missed, rewritten=False)
            # ANALYZE too: the planner's statistics again, sampled from the rows left
            # the tables named with their schema: behind a pooler in transaction mode the
            # VACUUM (outside a transaction) runs on a server session of no search path of ours
            vacuum = ("VACUUM (FULL, ANALYZE) " if full else "VACUUM ") + ", ".join(
                f'"{self.schema}".{table}' for table in RECLAIM_TABLES)
            switched = not conn.autocommit
            if switched:
                conn.commit()  # the session settings of the checkout; autocommit needs no open transaction
                conn.autocommit = True
            try:
                if full:  # SNAPSHOT_HOLDERS_SQL: the snapshots that keep deleted rows in the new files
                    began = self._next_xid(conn)
                    held = self._lasting_holders(conn, erasure_xid(marker) or began)
                    with conn.transaction():  # what the ANALYZE below would leave: STALE_STATISTICS_SQL
                        stale = clear_stale_statistics(conn, RECLAIM_TABLES)
                self._server_deadline(conn, vacuum, lock_timeout_ms=lock_timeout_ms)
                if statistics:  # the tables' ANALYZE committed: the old rows are dead before this xid
                    analyzed = self._next_xid(conn)
                    # pg_statistic's rewrite keeps its old rows for any snapshot older than
                    # that ANALYZE's commit, one begun during the tables' rewrite too (its
                    # xmin newer than `began`, so the check after would not count it, and one
                    # ended before that check went unseen): asked for here, before, its
                    # statement-running holders waited for (HOLDER_GRACE_MS). Any left, and
                    # the rewrite is skipped: it would keep them, and hold the catalog's lock
                    # (every session's planning waits on it) for nothing. Not when a holder
                    # is known already: the answer is false whatever it finds
                    later = [] if held else self._lasting_holders(conn, self._xid_before(analyzed))
                    held = sorted(set(held) | set(later))
                    locked = not later and not self._rewrite_statistics(conn)
                if full:
                    held = sorted(set(held) | set(self._snapshot_holders(conn, began)))
                if not held:
                    # done as far as this role can: a retry at each open would rewrite every
                    # table again and still not be allowed pg_statistic. The marker read
                    # before the rewrite only: an erasure that committed during it owes its own
                    with conn.transaction():  # the tables' scrub done, pg_statistic's owed or not
                        if self._per_transaction:  # autocommit since the VACUUM: a new transaction
                            conn.execute(self._local_sql())
                        if locked:
                            conn.execute(STATISTICS_OWED_SQL, (SCRUB_STATISTICS_KEY, analyzed))
                        elif full:  # rewritten, or the role may not: a retry would not be either
                            conn.execute("DELETE FROM meta WHERE key = %s", (SCRUB_STATISTICS_KEY,))
                        conn.execute("DELETE FROM meta WHERE key = %s AND value = %s", (SCRUB_PENDING_KEY, marker))
            finally:
                if switched:
                    conn.autocommit = False
        if held:
            return self._held(marker, held, missed, rewritten=True)
        HELD_LOG.forget((self.path, self.schema))
        if locked:
            log.warning("the tables were rewritten, but not %s: another session held a lock on it (an open "
                        "transaction that read pg_stats) past %d ms, the most its rewrite waits, every other "
                        "session's statistics lookups queued behind it; its old rows may still hold values "
                        "sampled from deleted rows: not scrubbed (its rewrite alone owed: the next open, erasure "
                        "or reclaim() retries)", STATISTICS_TABLE, STATISTICS_LOCK_TIMEOUT_MS)
            if missed is not None:
                missed.append(f"{STATISTICS_TABLE} (another session held its lock; retried at the next open, "
                              "erasure or reclaim())")
            return False
        if stale:
            log.warning("the tables were rewritten, but the statistics ANALYZE does not replace (of a table left "
                        "empty, or a column no longer sampled) stay in %s: the role may not clear them (neither "
                        "superuser, nor PostgreSQL 18's pg_clear_attribute_stats): not scrubbed. Stale: %s",
                        STATISTICS_TABLE, ", ".join(f"{t}.{a}" for t, a in stale))
            if missed is not None:
                missed.append(f"{STATISTICS_TABLE}: statistics of {len(stale)} columns ANALYZE does not replace "
                              "(the role may not clear them)")
            return False
        if full and not statistics:
            log.warning("the tables were rewritten, but not %s: the role may not VACUUM it (it is neither "
                        "superuser nor the database's owner, and has no MAINTAIN on it), so its old rows may "
                        "still hold values sampled from deleted rows: not scrubbed. A role that may: "
                        "VACUUM FULL %s", STATISTICS_TABLE, STATISTICS_TABLE)
            if missed is not None:
                missed.append(f"{STATISTICS_TABLE} (the role may not VACUUM it; a role that may: "
                              f"VACUUM FULL {STATISTICS_TABLE})")
        return statistics

    @contextlib.contextmanager
    def _owed_scrub_lock(self, conn: Conn, owed: bool) -> Iterator[bool]:
        """OWED_SCRUB_LOCK on `conn` for the block, where `owed` (else True, no lock):
        whether it is had (tried, not waited for). Released after the block, whatever
        happened in it; where that fails the connection is closed (its session's end
        releases it), so no pooled connection keeps it: every other session's owed scrub
        would be skipped as long as it lived."""
        if not owed or self._per_transaction:
            # behind a pooler in transaction mode a session's lock stays on a server
            # connection that other clients get (and the unlock may run on another): not
            # taken. Its scrub is a plain VACUUM there (erase_scrub "full" is refused,
            # `check_pool_mode`), which blocks no reader or writer: two at once cost a
            # second pass, not the second stall of the whole store the lock prevents
            yield True
            return
        key = f"{OWED_SCRUB_LOCK}-{self.schema}"
        row = conn.execute("SELECT pg_try_advisory_lock(hashtext(%s))", (key,)).fetchone()
        if not conn.autocommit:
            # the marker is read after this in a snapshot taken after the lock was had (the
            # holder's delete of it committed before it let go)
            conn.commit()
        if not (row and row[0]):
            yield False
            return
        try:
            yield True
        finally:
            try:
                if conn.info.transaction_status == pq.TransactionStatus.INERROR:
                    conn.rollback()
                conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (key,))
                if not conn.autocommit:
                    conn.commit()
            except psycopg.Error:
                conn.close()

    def _held(self, marker: str | None, held: Sequence[str], missed: list[str] | None, *, rewritten: bool) -> bool:
        """The scrub not done, a snapshot older than the erasure open (`held`: what holds
        one): logged (at WARNING once for the same marker and holders, DEBUG at each
        open after that: HELD_LOG), named in `missed`; False."""
        holders = ", ".join(held)
        log.log(HELD_LOG.level((self.path, self.schema), marker, held),
                "a snapshot older than the erasure is still open, so a rewrite keeps the deleted rows it may "
                "see: %s, not scrubbed (still owed: the next open, erasure or reclaim() rewrites once it has "
                "ended). Held by: %s",
                "the tables were rewritten all the same" if rewritten else "the tables were not rewritten", holders)
        if missed is not None:
            missed.append(SNAPSHOT_HELD_NOTE.format(holders=holders))
        return False

    def _rewrite_statistics(self, conn: Conn) -> bool:
        """STATISTICS_VACUUM_SQL on `conn` (autocommit, outside a transaction, under the
        maintenance deadline as `_server_deadline` runs it), its lock waited for at most
        STATISTICS_LOCK_TIMEOUT_MS: False where another session held it that long (nothing
        rewritten). The session's lock_timeout (the store's, a caller's, or one
        `_server_deadline` set back) is its own again after it."""
        row = conn.execute("SELECT current_setting('lock_timeout')").fetchone()
        assert row is not None
        conn.execute(f"SET lock_timeout TO {STATISTICS_LOCK_TIMEOUT_MS}")
        try:
            self._server_deadline(conn, STATISTICS_VACUUM_SQL)
        except psycopg.errors.LockNotAvailable:
            return False
        finally:
            if not (conn.closed or conn.broken):  # a cut one is the pool's to replace
                conn.execute("SELECT set_config('lock_timeout', %s, false)", (row[0],))
        return True

    def _rewrite_owed_statistics(self) -> bool:
        """pg_statistic's rewrite alone, owed by a scrub that rewrote the tables but not it
        (SCRUB_STATISTICS_KEY), at an open: its lock waited for at most
        STATISTICS_LOCK_TIMEOUT_MS. Returns whether it is done: the marker gone, unless its
        lock was held again or a snapshot that may see the old rows (one at or before the
        marker's xid, SNAPSHOT_HOLDERS_SQL) is still open (logged; still owed). That
        snapshot is asked for first: while one is open, pg_statistic is not rewritten (its
        ACCESS EXCLUSIVE lock, which every session's planning waits for, at each open for
        nothing), and the same holders are logged at WARNING once, then DEBUG."""
        with self._maintenance(), self._conn() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = %s", (SCRUB_STATISTICS_KEY,)).fetchone()
            if row is None:
                return True
            may = self._may_vacuum_statistics(conn)  # in its own transaction, before autocommit
            switched = not conn.autocommit
            if switched:
                conn.commit()
                conn.autocommit = True
            try:
                # asked once, before: a snapshot begun after it is newer than the marker's
                # xid (one at or before it held an xid or an older snapshot, found here)
                held = self._lasting_holders(conn, row[0]) if may else []
                done = may and not held and self._rewrite_statistics(conn)
                if not may or (done and not held):  # a role that may not: no retry makes it so
                    conn.execute("DELETE FROM meta WHERE key = %s AND value = %s", (SCRUB_STATISTICS_KEY, row[0]))
            finally:
                if switched:
                    conn.autocommit = False
        if not may:
            log.warning("%s is not rewritten: the role may not VACUUM it (no longer owed: no retry makes it so). "
                        "A role that may: VACUUM FULL %s", STATISTICS_TABLE, STATISTICS_TABLE)
        elif held:
            log.log(HELD_LOG.level((self.path, self.schema), row[0], held),
                    "%s is still not rewritten (a snapshot that may see its old rows is open, held by: %s): still "
                    "owed, the next open, erasure or reclaim() retries", STATISTICS_TABLE, ", ".join(held))
        elif not done:
            log.warning("%s is still not rewritten (another session held its lock past %d ms): still owed, the "
                        "next open, erasure or reclaim() retries", STATISTICS_TABLE, STATISTICS_LOCK_TIMEOUT_MS)
        return done and not held

    @staticmethod
    def _next_xid(conn: Conn) -> str:
        """The next xid the server assigns (NEXT_XID_SQL), as a 32-bit xid's text."""
        row = conn.execute(NEXT_XID_SQL).fetchone()
        assert row is not None
        return str(int(row[0]) % XID_MODULUS)

    @staticmethod
    def _snapshot_holders(conn: Conn, xid: str) -> list[str]:
        """What holds a snapshot or an xid at or before `xid` (SNAPSHOT_HOLDERS_SQL): each
        as its kind and pid, prepared transaction's xid or slot's name, no text of it."""
        return [r[0] for r in conn.execute(SNAPSHOT_HOLDERS_SQL, {"xid": xid}).fetchall()]

    def _lasting_holders(self, conn: Conn, xid: str) -> list[str]:
        """`_snapshot_holders` before a rewrite, asked again every HOLDER_POLL_MS while
        each holder found is running a statement, for at most the store's holder_grace_ms:
        what still holds one then (empty once all have ended). One not running a statement
        is answered at once: waiting would not change the answer."""
        until = time.monotonic() + self.holder_grace_ms / 1000
        while True:
            rows = conn.execute(SNAPSHOT_HOLDERS_SQL, {"xid": xid}).fetchall()
            left = until - time.monotonic()
            if not rows or left <= 0 or not all(r[1] for r in rows):
                return [r[0] for r in rows]
            if not conn.autocommit:
                # pg_stat_activity is read once per transaction: the next ask needs a new one
                conn.commit()
            time.sleep(min(HOLDER_POLL_MS / 1000, left))

    @staticmethod
    def _xid_before(xid: str) -> str:
        """The xid assigned just before `xid` (a 32-bit xid's text), wrapping past the
        server's own (FIRST_NORMAL_XID) as the server does."""
        normal = XID_MODULUS - FIRST_NORMAL_XID
        return str((int(xid) - FIRST_NORMAL_XID - 1) % normal + FIRST_NORMAL_XID)

    @staticmethod
    def _may_vacuum_statistics(conn: Conn) -> bool:
        """Whether the session's role may VACUUM pg_statistic (STATISTICS_MAY_VACUUM_SQL),
        read in its own transaction (a caller's connection in transaction mode is
        committed right after, before its VACUUM)."""
        query = STATISTICS_MAY_VACUUM_SQL
        if conn.info.server_version >= MAINTAIN_PRIVILEGE_VERSION_NUM:
            query += STATISTICS_MAINTAIN_SQL
        row = conn.execute(query).fetchone()
        return bool(row and row[0])

    def _server_deadline(self, conn: Conn, statement: str, *, lock_timeout_ms: int | None = None) -> None:
        """`statement` on a connection in autocommit, outside any transaction (a VACUUM),
        where no SET LOCAL reaches, under a deadline on the server: the client check, and a
        statement_timeout ending it SERVER_DEADLINE_LEAD_S before the checkout is cut
        (StoreStalled when the server cancelled it there; the connection is kept). On a
        caller's connection both are the caller's again when the checkout ends
        (CALLER_SETTINGS). On our own pool's, the client check is the session's own value
        already, and statement_timeout is reset to the session's own (the URL's, the
        role's or the server's: our sessions set none) after the statement; a connection
        where that fails is closed, for the pool to replace, rather than given back with a
        deadline of seconds on every later statement. `lock_timeout_ms`, where given (a
        store that sets none of its own), is the statement's lock_timeout, set and reset
        alike."""
        if self._per_transaction:
            # behind a pooler in transaction mode a session SET would stay on a server
            # connection other clients get, the statement run on another: none is sent.
            # The checkout's cut (StoreStalled) is its deadline; a plain VACUUM (the only
            # one there: `check_pool_mode`) waits for no reader's or writer's lock
            conn.execute(statement)
            return
        until: float = self._waits.checkout_until
        timeout_ms = max(int((until - time.monotonic() - SERVER_DEADLINE_LEAD_S) * MS_PER_S),
                         LEAST_STATEMENT_TIMEOUT_MS)
        timeout_s = timeout_ms / MS_PER_S
        lock_timeout = "" if lock_timeout_ms is None else f"; SET lock_timeout TO {lock_timeout_ms}"
        conn.execute(f"SET statement_timeout TO {timeout_ms}; {CLIENT_CHECK_SQL}{lock_timeout}")
        sent = time.monotonic()
        try:
            conn.execute(statement)
        except psycopg.errors.QueryCanceled as exc:
            # the server's own timer starts when the statement arrives: one that fired has
            # run at least as long here. Sooner, someone else cancelled it (pg_cancel_backend)
            if time.monotonic() - sent < timeout_s:
                raise
            raise StoreStalled(self.path, round(timeout_s, 1),
                               f"the rest of maintenance_timeout_s={self.maintenance_timeout_s:g}",
                               cancelled=True) from exc
        finally:
            if self._owns_pool:
                self._reset_statement_timeout(conn, lock_timeout=lock_timeout_ms is not None)

    def _reset_statement_timeout(self, conn: Conn, *, lock_timeout: bool = False) -> None:
        """Our own pool's connection after `_server_deadline`: its statement_timeout (and
        where `lock_timeout`, its lock_timeout: a store that sets none) the session's own
        again (the URL's, role's or server's); never raises (the statement's outcome is
        the one reported)."""
        if conn.closed or conn.broken:
            return  # cut: the pool replaces it
        try:
            conn.execute("RESET statement_timeout" + ("; RESET lock_timeout" if lock_timeout else ""))
        except psycopg.Error:
            log.warning("could not reset statement_timeout after a VACUUM; closing the connection "
                        "(the pool opens another)", exc_info=True)
            conn.close()

    def analyze(self) -> None:
        """Refresh the planner's statistics of every conversation table now (after a bulk
        load, before autovacuum gets to it: plans chosen on stale counts scan too much)."""
        with self._maintenance(), self._conn() as conn:
            conn.execute("ANALYZE " + ", ".join(RECLAIM_TABLES))

    def defer_purge(self, keys: Sequence[str]) -> None:
        if not keys:
            return
        with self._tx() as c:
            c.cursor().executemany("INSERT INTO redis_purge(key, at) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                                   [(k, time.time()) for k in keys])

    def deferred_purges(self) -> list[str]:
        return [r[0] for r in self._read("SELECT key FROM redis_purge ORDER BY at, key")]

    def purged(self, keys: Sequence[str]) -> None:
        with self._tx() as c:
            c.execute("DELETE FROM redis_purge WHERE key = ANY(%s)", (list(keys),))

    # -- search ----------------------------------------------------------------------------

    def search_dense(self, query_vec: np.ndarray, k: int, *, conversation_id: str | None = None,
                     namespace: str | None = None, exclude: str | None = None,
                     before: int | None = None) -> list[tuple[str, int, float]]:
        try:
            return self._search_dense(query_vec, k, conversation_id=conversation_id, namespace=namespace,
                                      exclude=exclude, before=before)
        except psycopg.errors.DataException as exc:  # "different vector dimensions 384 and 256"
            conflict = self._width_conflict(int(np.asarray(query_vec).size))
            if conflict is not None:
                raise conflict from exc
            raise

    def _search_dense(self, query_vec: np.ndarray, k: int, *, conversation_id: str | None,
                      namespace: str | None, exclude: str | None, before: int | None) -> list[tuple[str, int, float]]:
        k = max(1, min(int(k), MAX_DENSE_K))
        q = Vec(query_vec)
        ours = int(np.asarray(query_vec).size)
        gd, gm = self._ours(ours)
        if conversation_id is not None:
            if conversation_id == exclude:
                return []
            # none of another model's vectors (`_NOT_OURS`), not even where their width is this one's
            rows = self._read("SELECT conversation_id, position, embedding <-> %(q)b::vector AS d FROM messages_vec "
                              f"WHERE conversation_id = %(c)s AND position < %(b)s AND NOT {self._NOT_OURS_NAMED} "
                              "ORDER BY d, position LIMIT %(k)s",
                              {"q": q, "c": conversation_id, "k": k, "b": before if before is not None else 2**62,
                               "gd": gd, "gm": gm})
        else:
            if namespace is None:
                raise ValidationError("conversation_id", "search needs a conversation or a namespace")
            dim = self._vec_dim or self._read_vec_dim()
            if dim is None or dim != int(np.asarray(query_vec).size):
                return []  # no vectors yet, or another model's
            # iterative scans (pgvector 0.8): the index keeps walking until k rows of this
            # namespace are found instead of filtering a fixed ef_search set; relaxed
            # order, so the rows are sorted again below. Both are session settings of
            # every connection (`_session_sql`): one round trip, unless k needs a wider
            # candidate list than the session's, set for this transaction only.
            scope = (f"SELECT conversation_id, position, embedding::vector({dim}) <-> %(q)b::vector({dim}) AS d, id "
                     "FROM messages_vec WHERE namespace = %(n)s AND conversation_id IS DISTINCT FROM %(x)s "
                     f"AND NOT {self._NOT_OURS_NAMED} ")
            # one row past the k-th: whether the k-th distance is tied beyond the answer
            params: dict[str, Any] = {"q": q, "n": namespace, "x": exclude, "k": k + 1, "gd": gd, "gm": gm}
            if k < HNSW_EF_SEARCH:
                rows = self._read(scope + "ORDER BY d LIMIT %(k)s", params)
            else:
                with self._tx() as c:
                    c.execute(f"SET LOCAL hnsw.ef_search = {min(HNSW_EF_SEARCH_MAX, k + 1)}")
                    rows = c.execute(scope + "ORDER BY d LIMIT %(k)s", params).fetchall()
            # ties by the row's id, as the keyword search breaks them: never by key, whose
            # spelling tells whether the id is (or was) used in another namespace
            rows.sort(key=lambda r: (r[2], r[3]))
            # another row at the k-th distance: equal vectors, of which the index walk may
            # have met any (a tie only inside the answer still re-asks: the walk may have
            # missed an earlier copy)
            if len(rows) >= k and sum(r[2] == rows[k - 1][2] for r in rows) > 1:
                rows = self._tied_at(scope, params, rows, k)
            rows = rows[:k]
        if not rows:  # none, or none of this process's model: which one, read only now
            conflict = self._model_conflict(ours)
            if conflict is not None:
                raise conflict
        return [(r[0], int(r[1]), float(r[2])) for r in rows]

    def _tied_at(self, scope: str, params: dict[str, Any], rows: list[Any], k: int) -> list[Any]:
        """The answer when more rows share the k-th distance than fit in it (equal
        vectors: a text written again, a fork's copies): `ORDER BY d LIMIT` keeps any
        of the tied rows (a top-N sort's pick, or whichever the HNSW walk met first), so
        the tied rows are asked for again by that exact distance (the same expression,
        so equal floats) and the earliest ids kept. That query filters instead of
        ordering by distance, so it reads the namespace's rows through its btree: paid
        only when a tie crosses the k-th place."""
        tied = rows[k - 1][2]
        nearer = [r for r in rows if r[2] < tied]
        again = self._read(f"SELECT * FROM ({scope}) s WHERE d = %(t)s ORDER BY id LIMIT %(m)s",
                           {**params, "t": tied, "m": k - len(nearer)})
        return nearer + again

    def _read_vec_dim(self) -> int | None:
        rows = self._read("SELECT value FROM meta WHERE key = 'vec_dim'")
        self._vec_dim = int(rows[0][0]) if rows else None
        return self._vec_dim

    def search_bm25(self, query: str, k: int, *, conversation_id: str | None = None,
                    namespace: str | None = None, exclude: str | None = None) -> list[tuple[str, int, float]]:
        terms = query_lexemes(query)
        if not terms:
            return []
        if conversation_id is not None:
            scope = "f.conversation_id = %(c)s"
            total = "(SELECT next_position FROM conversations WHERE id = %(c)s)"
        elif namespace is not None:
            scope = "f.namespace = %(n)s AND f.conversation_id IS DISTINCT FROM %(x)s"
            # the scope's own documents: the excluded conversation is not in it
            total = ("(SELECT SUM(next_position) FROM conversations WHERE namespace = %(n)s "
                     "AND id IS DISTINCT FROM %(x)s)")
        else:
            raise ValidationError("conversation_id", "search needs a conversation or a namespace")
        # bm25's shape on PostgreSQL's parts: per query term, idf (from the term's
        # document frequency in the scope) times ts_rank of the term with
        # normalisation 1 (divided by 1 + log(document length)), summed; negated so
        # lower is better, as FTS5's bm25. The OR query is matched once through the GIN
        # index; document frequencies are counted among those matches, which hold
        # every document of the scope that contains any query term.
        rows = self._read(
            # numnode > 0: a word that is a stopword of PostgreSQL's dictionary (not of
            # ours, e.g. "about") makes an empty tsquery, and every `@@` against an empty
            # tsquery sends the client a NOTICE: one per row and term (2.7 s for a 300-turn
            # conversation before this filter; tests/test_postgres_search.py)
            # MATERIALIZED: inlined, `terms` and `df` were re-evaluated for every hit row
            # (df's count over the hits once per hit: quadratic in the matches)
            f"WITH terms AS MATERIALIZED (SELECT tq FROM (SELECT to_tsquery('{FTS_CONFIG}', w) AS tq "
            "  FROM unnest(%(terms)s::text[]) AS u(w)) x WHERE numnode(tq) > 0), "
            f"hits AS MATERIALIZED (SELECT f.id, f.tsv FROM messages_fts f WHERE {scope} "
            f"  AND f.tsv @@ to_tsquery('{FTS_CONFIG}', %(q)s)), "
            "df AS MATERIALIZED (SELECT t.tq, (SELECT COUNT(*) FROM hits h WHERE h.tsv @@ t.tq) AS n FROM terms t), "
            f"total AS (SELECT GREATEST(COALESCE({total}, 0), 1)::float8 AS n) "
            "SELECT m.conversation_id, m.position, "
            "  -SUM(ln(1 + (total.n - df.n + 0.5) / (df.n + 0.5)) * ts_rank(h.tsv, df.tq, 1)) AS s "
            "FROM hits h JOIN df ON df.n > 0 AND h.tsv @@ df.tq CROSS JOIN total JOIN messages m ON m.id = h.id "
            "GROUP BY m.conversation_id, m.position, m.id ORDER BY s, m.id LIMIT %(k)s",
            {"terms": terms, "q": " | ".join(terms), "c": conversation_id, "n": namespace, "x": exclude, "k": k})
        return [(r[0], int(r[1]), float(r[2])) for r in rows]

    # -- rebuild and stats ----------------------------------------------------------------------

    def rebuild(self, *, progress: Callable[[int], None] | None = None, embed: bool = True) -> dict[str, int]:
        """Recompute the turn index, FTS and vectors from the messages, as `ColdStore.
        rebuild`: labels from `labeler`, supersession cleared (the consolidation layer
        replays it).

        The rows are rewritten in batches of messages (REBUILD_BATCH_MESSAGES, sized to
        hold their locks ~REBUILD_BATCH_TARGET_S): read, decoded, labelled and counted
        outside any transaction, then their turn, FTS and vector rows replaced in one
        short transaction that holds the conversations' rows first, as every writer of
        their turns does (`_lock_turn_writers`). A conversation larger than a batch is
        rewritten in batches of its messages by position, a pause between two once its
        row has been held a spell (`_spell_begin`); smaller ones share a batch
        (`_rebuild_group`), several conversations a transaction, their rows taken in id
        order as an erasure takes them, then their turns in id order as the vectors'
        writer takes them, so neither deadlocks it (one transaction each cost 2,000
        conversations of 10 messages 4.0-5.1 s against 1.6-1.9 s as one transaction).
        As one transaction over every turn, its `DELETE FROM turns` moved and held to its
        end the pin version of every conversation with a load-bearing turn: a
        load-bearing append waited for the whole rewrite (20k turns: 3.6 s) and failed
        busy past a short lock timeout; a plain one committed inside it and the rewrite
        then failed on its turn row (UniqueViolation: the DELETE had not seen it, the
        read after it had). A batch ends at the last position it read, so a message
        appended since keeps the rows its append wrote. Every message has its turn and
        FTS rows at every commit (the old ones until its batch replaces them); a process
        killed mid-way leaves each turn as it was or rebuilt, with its vector or marked
        for the next catch-up, and a rerun rebuilds the rest (supersession stays cleared
        until one completes)."""
        with self._maintenance():
            with self._tx() as c:
                c.execute(f"DELETE FROM {STATEMENT_TABLE}")  # replayed with the labels
                c.execute(f"DELETE FROM {RECHECK_TABLE}")  # the replay decides again
            n, limit = 0, REBUILD_BATCH_MESSAGES
            group: list[tuple[str, str]] = []
            grouped = 0  # messages of `group`, by its conversations' counters (an upper bound)
            for conv, namespace, size in self._read(
                    "SELECT id, namespace, next_position FROM conversations ORDER BY id"):
                if int(size) == 0:
                    continue  # no message: no rows to write (the last transaction drops any)
                if group and grouped + int(size) > limit:
                    got, limit = self._rebuild_group(group, limit)
                    n, group, grouped = n + got, [], 0
                if int(size) > limit:
                    got, limit = self._rebuild_conversation(str(conv), str(namespace), limit)
                    n += got
                else:
                    group.append((str(conv), str(namespace)))
                    grouped += int(size)
            if group:
                n += self._rebuild_group(group, limit)[0]
            with self._tx() as c:
                # rows of no message, or of one whose conversation row is gone (none is
                # rebuilt above): the whole-table DELETE took them before
                c.execute("DELETE FROM turns t WHERE NOT EXISTS (SELECT 1 FROM messages m "
                          "JOIN conversations v ON v.id = m.conversation_id WHERE m.id = t.id)")
                c.execute("DELETE FROM messages_fts f WHERE NOT EXISTS (SELECT 1 FROM turns t WHERE t.id = f.id)")
                c.execute("DELETE FROM messages_vec e WHERE NOT EXISTS (SELECT 1 FROM turns t WHERE t.id = e.id)")
        embedded = self.index_pending(progress=progress) if embed else 0
        return {"turns": n, "embedded": embedded}

    def _rebuilt_rows(self, rows: Sequence[Sequence[Any]], namespaces: Mapping[str, str]
                      ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        """`rebuild`'s turn and FTS rows of messages read as (conversation, position, id,
        role, body, session, created), decoded, labelled and counted."""
        turn_rows: list[tuple[Any, ...]] = []
        fts_rows: list[tuple[Any, ...]] = []
        for conv, pos, mid, role, body, session, created in rows:
            data = self._rebuild_body(conv, pos, role, body)
            with remembered_for(memo_scope(self.db_uuid, conv)):  # its label and count, for it alone
                lab = rebuilt_labels(self.labeler, role, data)
                n_tokens = message_tokens(self.tokens, data)
            turn_rows.append((conv, pos, mid, role, session, n_tokens, content_hash(data), created,
                              speaker_name(data), *lab))
            fts_rows.append((mid, conv, namespaces[conv], fts_text(data)))
        return turn_rows, fts_rows

    def _write_rebuilt(self, c: Conn, ids: list[int], turn_rows: list[tuple[Any, ...]],
                       fts_rows: list[tuple[Any, ...]]) -> int:
        """Inside a rebuild's transaction, its conversations' rows locked and the turn rows
        of the positions read deleted: the FTS and vector rows of `ids` replaced, the turn
        and FTS rows of those still there (an erasure since took its rows with it) written.
        Returns how many turns it wrote."""
        live = {int(r[0]) for r in c.execute("SELECT id FROM messages WHERE id = ANY(%s)", (ids,))}
        c.execute("DELETE FROM messages_fts WHERE id = ANY(%s)", (ids,))
        c.execute("DELETE FROM messages_vec WHERE id = ANY(%s)", (ids,))  # embedded again (catch-up)
        cur = c.cursor()
        cur.executemany("INSERT INTO turns(conversation_id, position, id, role, session_id, tokens, "
                        "content_hash, created_at, speaker, intent, load_bearing, priority, label_reason) "
                        "VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                        [t for t in turn_rows if int(t[2]) in live])
        cur.executemany("INSERT INTO messages_fts(id, conversation_id, namespace, text) VALUES (%s,%s,%s,%s)",
                        [f for f in fts_rows if int(f[0]) in live])
        return len(live)

    @staticmethod
    def _next_rebuild_batch(limit: int, held: float) -> int:
        return max(REBUILD_BATCH_MIN_MESSAGES,
                   min(REBUILD_BATCH_MAX_MESSAGES, int(limit * REBUILD_BATCH_TARGET_S / max(held, 1e-3))))

    def _rebuild_group(self, group: Sequence[tuple[str, str]], limit: int) -> tuple[int, int]:
        """`rebuild`'s rewrite of conversations whose messages fit one batch, in one
        transaction; returns how many turns it wrote and the next batch's size."""
        keys = [conv for conv, _ns in group]
        rows = self._read(
            "SELECT conversation_id, position, id, role, body, session_id, created_at FROM messages "
            "WHERE conversation_id = ANY(%s) ORDER BY conversation_id, position", (keys,))
        if not rows:
            return 0, limit
        turn_rows, fts_rows = self._rebuilt_rows(rows, dict(group))
        upto: dict[str, int] = {}
        for r in rows:
            upto[str(r[0])] = int(r[1])  # the last position read of each (rows by position)
        ids = [int(r[2]) for r in rows]
        self._step("rebuild:read")
        began = time.perf_counter()
        with self._tx() as c:
            # the writers' lock order, for several conversations: their rows in id order
            # (as an erasure takes them, ERASURE's `ORDER BY id FOR UPDATE`: the sort is
            # below the row locks, so they are taken in that order), then their turns in id
            # order (as the vectors' writer takes them; within a conversation that is
            # position order), then the pin versions the DELETE's trigger moves
            c.execute("SELECT id FROM conversations WHERE id = ANY(%s) ORDER BY id FOR NO KEY UPDATE", (keys,))
            c.execute("SELECT id FROM turns WHERE conversation_id = ANY(%s) ORDER BY id FOR UPDATE", (keys,))
            # the positions read, no further: a message appended since keeps its rows
            c.execute("DELETE FROM turns t USING unnest(%s::text[], %s::int8[]) AS r(conv, upto) "
                      "WHERE t.conversation_id = r.conv AND t.position <= r.upto", (list(upto), list(upto.values())))
            n = self._write_rebuilt(c, ids, turn_rows, fts_rows)
        held = time.perf_counter() - began
        self._step("rebuild:batch")
        return n, self._next_rebuild_batch(len(rows), held)  # from what it held: the counters overcount

    def _rebuild_conversation(self, conv: str, namespace: str, limit: int) -> tuple[int, int]:
        """`rebuild`'s rewrite of one conversation's rows, in batches; returns how many
        turns it wrote and the next batch's size."""
        n, after = 0, -1
        while True:
            rows = self._read(
                "SELECT conversation_id, position, id, role, body, session_id, created_at FROM messages "
                "WHERE conversation_id = %s AND position > %s ORDER BY position LIMIT %s", (conv, after, limit))
            if not rows:
                return n, limit
            turn_rows, fts_rows = self._rebuilt_rows(rows, {conv: namespace})
            ids = [int(r[2]) for r in rows]
            self._step("rebuild:read")
            self._spell_begin(conv)  # a pause first, if its row has been held a spell
            began = time.perf_counter()
            with self._tx() as c:
                self._lock_turn_writers(c, conv)
                # the positions read, no further: a message appended since keeps its rows
                c.execute("DELETE FROM turns WHERE conversation_id = %s AND position > %s AND position <= %s",
                          (conv, after, int(rows[-1][1])))
                n += self._write_rebuilt(c, ids, turn_rows, fts_rows)
            held = time.perf_counter() - began
            self._spell_end(conv, held)
            self._step("rebuild:batch")
            if len(rows) < limit:
                return n, limit
            after = int(rows[-1][1])
            limit = self._next_rebuild_batch(limit, held)

    def integrity(self) -> dict[str, int]:
        r = self._read("SELECT (SELECT COUNT(*) FROM messages), (SELECT COUNT(*) FROM turns), "
                       "(SELECT COUNT(*) FROM messages_fts), (SELECT COUNT(*) FROM messages_vec)")[0]
        return {"messages": int(r[0]), "turns": int(r[1]), "fts": int(r[2]), "vectors": int(r[3])}

    def repair(self) -> dict[str, int]:
        counts = self.integrity()
        if counts["turns"] != counts["messages"] or counts["fts"] != counts["messages"]:
            return self.rebuild()
        return {"turns": 0, "embedded": self.index_pending()}

    # what a commit's latency and durability depend on (reported by the benchmarks)
    SERVER_SETTINGS = ("server_version", "synchronous_commit", "fsync", "wal_sync_method", "full_page_writes",
                       "commit_delay", "wal_level")

    def server_settings(self) -> dict[str, str]:
        """The server's values of SERVER_SETTINGS, as this store's sessions see them, and
        the vector extension's version."""
        rows = self._read("SELECT name, setting FROM pg_settings WHERE name = ANY(%s)", (list(self.SERVER_SETTINGS),))
        out = {str(n): str(v) for n, v in rows}
        out["vector"] = str(self._read("SELECT extversion FROM pg_extension WHERE extname = 'vector'")[0][0])
        return out

    # -- the warm tier's tables ---------------------------------------------------------------

    def latest_session_summaries(self, conversation_id: str) -> list[SummaryRow]:
        rows = [self._summary(r) for r in self._read(
            f"SELECT DISTINCT ON (key) {self._SUMMARY_COLS} FROM summaries WHERE conversation_id = %s "
            "AND kind = 'session' ORDER BY key, version DESC", (conversation_id,))]
        return sorted(rows, key=lambda s: (s[4], s[2]))

    def session_summary_ends(self, conversation_id: str) -> dict[str, int]:
        # an end that cannot be used is no view's: that session reads as never summarized
        return {r[0]: e for r in self._read(
            "SELECT DISTINCT ON (key) key, end_position FROM summaries WHERE conversation_id = %s "
            "AND kind = 'session' ORDER BY key, version DESC", (conversation_id,)) if (e := view_end(r[1])) is not None}

    # put_summary's engine parts (tiers.dialect.SharedQueries.put_summary)

    def _lock_summaries(self, c: Conn, conversation_id: str) -> None:
        # FOR UPDATE on the conversation row: two refreshers of one conversation take
        # turns, so the version numbers they compute never collide
        if c.execute("SELECT 1 FROM conversations WHERE id = %s FOR UPDATE", (conversation_id,)).fetchone() is None:
            raise ConversationNotFound(key_name(conversation_id))

    def _drop_old_warm_folds(self, c: Conn, conversation_id: str, keep: int) -> None:
        # warm folds are the checkpoints whose metadata says so; IS JSON first, so a
        # caller's metadata that is not JSON is kept, never parsed
        c.execute(
            "WITH warm AS (SELECT id FROM checkpoints WHERE conversation_id = %(c)s AND "
            "  CASE WHEN metadata IS JSON OBJECT THEN metadata::json ->> 'source' END = 'warm') "
            "DELETE FROM checkpoints WHERE id IN (SELECT id FROM warm) "
            "AND id NOT IN (SELECT id FROM warm ORDER BY id DESC LIMIT %(n)s)",
            {"c": conversation_id, "n": keep})

    def record_summary_error(self, conversation_id: str, kind: str, key: str, error: str, *, keep: int) -> None:
        with self._tx() as c:
            if not self._conversation_held(c, conversation_id):
                return  # erased while its refresh waited: the error may quote its turns
            c.execute("INSERT INTO summary_errors(conversation_id, kind, key, error, at) VALUES (%s,%s,%s,%s,%s)",
                      (conversation_id, kind, key, without_nul(error), time.time()))
            c.execute(
                "DELETE FROM summary_errors WHERE conversation_id = %(c)s AND kind = %(k)s AND key = %(y)s AND id <= "
                "(SELECT id FROM summary_errors WHERE conversation_id = %(c)s AND kind = %(k)s AND key = %(y)s "
                " ORDER BY id DESC LIMIT 1 OFFSET %(n)s)", {"c": conversation_id, "k": kind, "y": key, "n": keep})

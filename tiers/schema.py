"""The SQLite schema and its connections: the driver, the ordered list of migrations,
and `connect` / `migrate`.

Invariants:
- Migrations are an ordered, append-only list of small named functions; released steps
  are never edited (a change is a new step). Each runs in its own transaction under the
  write lock and bumps `PRAGMA user_version`, which records what has been applied.
- A database newer than the code is refused before anything writes to it or chmods it
  (its header is read first; when a WAL is there, `user_version` through a read-only
  connection, since a newer version may be only in the WAL; then again under the lock)
  and is left untouched: the file and its WAL as they were.
- The file is created 0600 before WAL mode exists, so the -wal and -shm sidecars get the
  same mode; `secure_delete` is on for every connection (erased text is overwritten).
- A file written by a tiermem before `secure_delete` (schema < SECURE_DELETE_SINCE) is
  flagged when migrated (RESIDUE_KEY) and rewritten once by the scrub its open owes
  (VACUUM, tiers/cold.py); an erasure is not reported scrubbed while that is owed.
- Deleting a conversation's row deletes its rows in the small tables added since m014
  (a trigger, m032), inside whatever process deletes it: an older one still running too.
"""

from __future__ import annotations

import os
import time
import urllib.parse
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tiermem.tiers.errors import DriverUnavailable, SchemaTooNew, ValidationError
from tiermem.tiers.files import WAL_SUFFIXES, create_private_file, database_writable, refuse_newer_header
from tiermem.tiers.statements import TABLE as STATEMENT_TABLE
from tiermem.tiers.statements import sqlite_migration
from tiermem.tiers.store import VIEWS_BEHIND_SQL, VIEWS_SEQ_START, VIEWS_UNCHECKED

# Driver: sqlean.py. The stdlib sqlite3 of many Python builds (this machine's included)
# is compiled without `enable_load_extension`, so sqlite-vec cannot load through it.
# sqlean.py is a drop-in DB-API module with its own SQLite (3.50, FTS5 included) that
# can load extensions, and ships wheels for Linux, macOS and Windows on x86-64 and
# arm64; pysqlite3-binary is Linux-x86-64 only, and apsw has a different API.
try:
    import sqlean as sqlite3
except ImportError as exc:  # pragma: no cover - the dependency is declared
    raise DriverUnavailable(str(exc)) from exc


DEFAULT_BUSY_TIMEOUT_MS = 5000
SCRUB_PENDING_KEY = "scrub_pending"  # meta: an erasure committed, its reclaim not yet done
# meta: the file may hold text deleted before `secure_delete` (a store an older tiermem
# wrote): the next scrub rewrites the whole file (VACUUM, tiers/cold.py ColdStore.reclaim)
RESIDUE_KEY = "residue_before_secure_delete"
# The schema version of the first code that set `secure_delete` on every connection
# (c7ecb6b, which added m013): code at a lower version wrote without it, so a store it
# wrote may hold deleted rows' text in free space, and in unused space inside pages it
# split or trimmed, where no later secure_delete delete reaches it
SECURE_DELETE_SINCE = 13
# c7ecb6b's commit time (2026-12-01 09:25:26 UTC), unix seconds: a conversation key
# issued before it was issued by code without `secure_delete` (m031)
SECURE_DELETE_RELEASED_AT = 1796117126.0
# meta key prefix, + a conversation's key: the digest migrate-store's copy of that
# conversation was written with (tiers.migrate_store). It names the conversation and
# digests its content, so an erasure deletes it with the conversation's other rows
COPIED_DIGEST_PREFIX = "migrated_digest:"
WAL_SWITCH_RETRY_S = 0.01  # between attempts to switch a contended fresh file to WAL
DEFAULT_CACHE_KIB = 64 * 1024  # vec0 inserts across many partitions crawl with a small cache
# the driver's base error, for callers that map a damaged or unreadable file to an HTTP status
DriverDatabaseError = sqlite3.DatabaseError
# the driver's error for a write a row already there refuses (a unique key, a trigger)
DriverIntegrityError = sqlite3.IntegrityError
VEC_TABLE = "messages_vec"
VEC_MODEL_KEY = "vec_model"  # meta: the identity of the model the stored vectors come from
TOKENIZER_KEY = "tokenizer"  # meta: the tokenizer every turns.tokens was counted with (tiers.recount)
UNRECORDED = ""  # its value in a store made before m028: counted by the one configured then
# Vector slots per vec0 chunk. vec0 gives every partition (conversation) chunks of its
# own, allocated whole: at sqlite-vec's default of 1,024 slots x 384 dims x 4 B a
# conversation of 2 turns cost 1.5 MiB of file. 64 slots (96 KiB at 384 dims) keep a
# 20k-turn conversation's KNN as fast as 1,024 did (17.7 against 17.4 ms; 32 slots took
# 26.8 ms) with 100 small conversations in 9.6 MiB instead of 150. vec0 requires a
# multiple of 8.
VEC_CHUNK_SLOTS = 64


def vec_table_sql(name: str, dim: int) -> str:
    """The DDL of the vec0 vector table `name` for `dim`-wide vectors, one partition per
    conversation key."""
    return (f"CREATE VIRTUAL TABLE IF NOT EXISTS {name} USING vec0("
            f"conversation_id TEXT PARTITION KEY, embedding float[{int(dim)}], chunk_size={VEC_CHUNK_SLOTS})")

# the FTS5 tokenizer of messages_fts (m005, m011); erasure tokenizes erased text with it
FTS_TOKENIZE = "porter unicode61 remove_diacritics 2"
# The FTS `scope` column of a message: a token for its conversation and one for its
# namespace (hex of the UTF-8 id: any id becomes one alphanumeric token). `c` is the
# conversations row.
SCOPE_SQL = "('c' || lower(hex(c.id)) || ' n' || lower(hex(c.namespace)))"

Connection = Any  # sqlean.Connection; the driver ships no type stubs


# ----------------------------------------------------------------------------------
# Migrations: an ordered, append-only list. Released steps are never edited; a change
# is a new step. Each runs in its own transaction and bumps PRAGMA user_version.


def m001_create_conversations(c: Connection) -> None:
    c.execute(
        """CREATE TABLE conversations(
            id TEXT PRIMARY KEY,
            namespace TEXT NOT NULL,
            parent_id TEXT,
            fork_position INTEGER,
            created_at REAL NOT NULL,
            last_message_at REAL NOT NULL
        )"""
    )
    c.execute("CREATE INDEX conversations_by_namespace ON conversations(namespace, id)")
    c.execute("CREATE INDEX conversations_by_last ON conversations(last_message_at)")


def m002_create_messages(c: Connection) -> None:
    # (conversation_id, position) is the primary key; `id` is a second, store-assigned
    # integer that FTS and vec0 rows key on (both need an integer rowid), declared as a
    # column so that VACUUM can never renumber it.
    c.execute(
        """CREATE TABLE messages(
            conversation_id TEXT NOT NULL,
            position INTEGER NOT NULL CHECK (position >= 0),
            id INTEGER NOT NULL UNIQUE,
            role TEXT NOT NULL,
            body TEXT NOT NULL,
            session_id TEXT,
            metadata TEXT,
            created_at REAL NOT NULL,
            PRIMARY KEY (conversation_id, position)
        )"""
    )
    # prune arms this guard inside its own transaction; no other connection can see it.
    c.execute("CREATE TABLE prune_guard(armed INTEGER NOT NULL)")
    c.execute(
        """CREATE TRIGGER messages_no_update BEFORE UPDATE ON messages
           BEGIN SELECT RAISE(ABORT, 'messages are append-only: UPDATE is refused'); END"""
    )
    c.execute(
        """CREATE TRIGGER messages_no_delete BEFORE DELETE ON messages
           WHEN NOT EXISTS (SELECT 1 FROM prune_guard WHERE armed = 1)
           BEGIN SELECT RAISE(ABORT, 'messages are append-only: DELETE only through prune'); END"""
    )


def m003_create_turns(c: Connection) -> None:
    c.execute(
        """CREATE TABLE turns(
            conversation_id TEXT NOT NULL,
            position INTEGER NOT NULL,
            id INTEGER NOT NULL UNIQUE,
            role TEXT NOT NULL,
            session_id TEXT,
            tokens INTEGER NOT NULL,
            content_hash TEXT NOT NULL,
            created_at REAL NOT NULL,
            embedded INTEGER NOT NULL DEFAULT 0,
            intent TEXT,
            load_bearing INTEGER,
            priority INTEGER,
            label_reason TEXT,
            superseded_by INTEGER,
            PRIMARY KEY (conversation_id, position)
        )"""
    )
    c.execute("CREATE INDEX turns_pending ON turns(embedded) WHERE embedded = 0")
    c.execute("CREATE INDEX turns_unlabeled ON turns(conversation_id, position) WHERE intent IS NULL")


def m004_create_checkpoints(c: Connection) -> None:
    c.execute(
        """CREATE TABLE checkpoints(
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            conversation_id TEXT NOT NULL,
            position INTEGER NOT NULL,
            summary TEXT NOT NULL,
            metadata TEXT,
            created_at REAL NOT NULL
        )"""
    )
    c.execute("CREATE INDEX checkpoints_by_conv ON checkpoints(conversation_id, position)")


def m005_create_fts(c: Connection) -> None:
    c.execute(
        "CREATE VIRTUAL TABLE messages_fts USING fts5(text, tokenize='porter unicode61 remove_diacritics 2')"
    )


def m006_create_meta_and_pins(c: Connection) -> None:
    c.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    c.execute("INSERT INTO meta(key, value) VALUES ('db_uuid', ?)", (uuid.uuid4().hex,))
    # Explicit pins are user state, not derived: rebuild() keeps them.
    c.execute(
        """CREATE TABLE pins(
            conversation_id TEXT NOT NULL,
            position INTEGER NOT NULL,
            priority INTEGER NOT NULL,
            created_at REAL NOT NULL,
            PRIMARY KEY (conversation_id, position)
        )"""
    )


def m007_index_load_bearing(c: Connection) -> None:
    # the planner reads a conversation's load-bearing turns on every context() call
    c.execute("CREATE INDEX turns_load_bearing ON turns(conversation_id, position) WHERE load_bearing = 1")
    c.execute("CREATE INDEX turns_by_role ON turns(conversation_id, role, position)")


def m008_create_plans(c: Connection) -> None:
    # optional (Config.store_plans): answers "why did it load this on turn 37?" later
    c.execute(
        """CREATE TABLE plans(
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            conversation_id TEXT NOT NULL,
            last_position INTEGER NOT NULL,
            plan TEXT NOT NULL,
            created_at REAL NOT NULL
        )"""
    )
    c.execute("CREATE INDEX plans_by_conv ON plans(conversation_id, last_position)")


def m009_messages_no_replace(c: Connection) -> None:
    # REPLACE (or INSERT OR REPLACE) settles a key conflict by deleting the stored row,
    # and that delete fires no DELETE trigger unless recursive_triggers is on, which a
    # raw connection never turns on: it would overwrite a message. A BEFORE INSERT
    # trigger sees the conflict first. Appends never conflict (both keys are MAX + 1).
    c.execute(
        """CREATE TRIGGER messages_no_replace BEFORE INSERT ON messages
           WHEN EXISTS (SELECT 1 FROM messages WHERE conversation_id = NEW.conversation_id
                                                 AND position = NEW.position)
             OR EXISTS (SELECT 1 FROM messages WHERE id = NEW.id)
           BEGIN SELECT RAISE(ABORT, 'messages are append-only: a stored message cannot be replaced'); END"""
    )


def m010_create_summaries(c: Connection) -> None:
    # the warm tier's versioned summary views (tiers/warm.py) and its refresh errors
    c.execute(
        """CREATE TABLE summaries(
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            conversation_id TEXT NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('rolling', 'constraints', 'session')),
            key TEXT NOT NULL DEFAULT '',
            version INTEGER NOT NULL CHECK (version >= 1),
            start_position INTEGER NOT NULL,
            end_position INTEGER NOT NULL,
            body TEXT NOT NULL,
            tokens INTEGER NOT NULL,
            summarizer TEXT NOT NULL,
            created_at REAL NOT NULL,
            UNIQUE(conversation_id, kind, key, version)
        )"""
    )
    c.execute(
        """CREATE TABLE summary_errors(
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            conversation_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            key TEXT NOT NULL DEFAULT '',
            error TEXT NOT NULL,
            at REAL NOT NULL
        )"""
    )
    c.execute(
        "CREATE INDEX summary_errors_by_view ON summary_errors(conversation_id, kind, key, id)"
    )


def m011_fts_scope_column(c: Connection) -> None:
    # bm25 over the whole table, then filtering to one conversation, grows with the
    # database (414 ms at 1M turns). A `scope` column holding one token for the
    # conversation and one for its namespace lets FTS5 intersect with that token's
    # doclist first (`scope : "c<hex>" AND text : (...)`), so the cost follows the
    # conversation's size. Derived data: rebuilt from the old table in place.
    c.execute(
        "CREATE VIRTUAL TABLE messages_fts_new USING fts5(text, scope, "
        "tokenize='porter unicode61 remove_diacritics 2')"
    )
    c.execute(
        "INSERT INTO messages_fts_new(rowid, text, scope) SELECT f.rowid, f.text, " + SCOPE_SQL + " "
        "FROM messages_fts f JOIN messages m ON m.id = f.rowid JOIN conversations c ON c.id = m.conversation_id"
    )
    c.execute("DROP TABLE messages_fts")
    c.execute("ALTER TABLE messages_fts_new RENAME TO messages_fts")


def m012_pin_versions(c: Connection) -> None:
    # A per-conversation counter that moves whenever what the planner may pin could have
    # changed: a load-bearing turn arrives, leaves or is relabelled, a supersession is
    # recorded, a pin is set or removed. Triggers keep it exact for every writer, in any
    # process, so a reader can keep the pinned block between turns and re-read it only
    # when the counter moved (one primary-key read, against 2-5 ms at 20k turns). Rows
    # are never deleted, so a pruned and re-created conversation never reuses a version.
    c.execute("CREATE TABLE pin_versions(conversation_id TEXT PRIMARY KEY, version INTEGER NOT NULL)")
    bump = ("INSERT INTO pin_versions(conversation_id, version) VALUES ({conv}, 1) "
            "ON CONFLICT(conversation_id) DO UPDATE SET version = version + 1;")
    c.execute("CREATE TRIGGER pin_version_turn_insert AFTER INSERT ON turns WHEN NEW.load_bearing = 1 "
              f"BEGIN {bump.format(conv='NEW.conversation_id')} END")
    c.execute("CREATE TRIGGER pin_version_turn_update AFTER UPDATE OF load_bearing, priority, superseded_by ON turns "
              "WHEN OLD.load_bearing IS NOT NEW.load_bearing OR OLD.priority IS NOT NEW.priority "
              "OR OLD.superseded_by IS NOT NEW.superseded_by "
              f"BEGIN {bump.format(conv='NEW.conversation_id')} END")
    c.execute("CREATE TRIGGER pin_version_turn_delete AFTER DELETE ON turns WHEN OLD.load_bearing = 1 "
              f"BEGIN {bump.format(conv='OLD.conversation_id')} END")
    for event, row in (("INSERT", "NEW"), ("UPDATE", "NEW"), ("DELETE", "OLD")):
        c.execute(f"CREATE TRIGGER pin_version_pins_{event.lower()} AFTER {event} ON pins "
                  f"BEGIN {bump.format(conv=row + '.conversation_id')} END")


def m013_conversation_incarnations(c: Connection) -> None:
    # Derived state belongs to an incarnation, not to an id string (DESIGN invariant 9),
    # and ids are unique per namespace (invariant 10). `conversations.id` becomes the
    # conversation's *key*, its incarnation, which every other table already keys on;
    # `name` is the id a caller knows, unique within its namespace. A conversation that
    # existed before this step keeps its id as its key, so nothing is rewritten.
    # `conversation_keys` holds every key ever issued and is never deleted from: a new
    # incarnation can never be handed a key (and so the Redis keys, cached views, vector
    # partition or pinned-block versions) of one that was pruned or erased.
    c.execute("ALTER TABLE conversations ADD COLUMN name TEXT")
    c.execute("UPDATE conversations SET name = id")
    c.execute("CREATE UNIQUE INDEX conversations_by_name ON conversations(namespace, name)")
    c.execute("CREATE TABLE conversation_keys(key TEXT PRIMARY KEY, issued_at REAL NOT NULL)")
    # pin_versions rows outlive prune, so they name keys of conversations already gone
    c.execute("INSERT OR IGNORE INTO conversation_keys(key, issued_at) SELECT id, created_at FROM conversations")
    c.execute("INSERT OR IGNORE INTO conversation_keys(key, issued_at) SELECT conversation_id, 0 FROM pin_versions")
    # What is left of a pruned or erased conversation: who, when, how much; no content.
    c.execute(
        """CREATE TABLE tombstones(
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            key TEXT NOT NULL,
            namespace TEXT NOT NULL,
            name TEXT NOT NULL,
            reason TEXT NOT NULL CHECK (reason IN ('prune', 'erase')),
            messages INTEGER NOT NULL,
            summaries INTEGER NOT NULL,
            checkpoints INTEGER NOT NULL,
            created_at REAL NOT NULL,
            deleted_at REAL NOT NULL
        )"""
    )
    c.execute("CREATE INDEX tombstones_by_namespace ON tombstones(namespace, deleted_at)")
    # Keys erased while Redis was unreachable: their Redis keys are deleted when it returns.
    c.execute("CREATE TABLE redis_purge(key TEXT PRIMARY KEY, at REAL NOT NULL)")


def m014_statement_supersessions(c: Connection) -> None:
    # statement-level supersession (tiers/statements.py): which part of a turn holding
    # several facts a later turn superseded; derived, cleared by rebuild
    sqlite_migration(c)


def m015_view_claims(c: Connection) -> None:
    # a lease per warm view being refreshed (tiers.store.ColdLog.claim_view), so two
    # processes on one file do not run the summarizer for the same view twice; a holder
    # that died frees it when expires_at (unix seconds) passes
    c.execute(
        """CREATE TABLE view_claims(
            conversation_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            key TEXT NOT NULL,
            holder TEXT NOT NULL,
            expires_at REAL NOT NULL,
            PRIMARY KEY (conversation_id, kind, key)
        )"""
    )


def m016_vec_small_chunks(c: Connection) -> None:
    # The vector table was made with vec0's default chunk (1,024 slots: 1.5 MiB per
    # conversation however short). Re-made with VEC_CHUNK_SLOTS, its vectors copied, not
    # recomputed (derived, but re-embedding costs model time). vec0 cannot be renamed (its
    # shadow tables keep the old name), so the vectors go through a second table and
    # back, and the table ends under its own name. secure_delete (on for every
    # connection) zeroes the dropped tables' pages, so no erased vector survives in them;
    # their free pages go back to the file system here.
    row = c.execute("SELECT value FROM meta WHERE key = 'vec_dim'").fetchone()
    if row is None or c.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (VEC_TABLE,)).fetchone() is None:
        return  # no vectors yet: the table is made with small chunks on first use
    dim = int(row[0])
    copy = VEC_TABLE + "_rechunk"
    for source, target in ((VEC_TABLE, copy), (copy, VEC_TABLE)):
        c.execute(vec_table_sql(target, dim))
        # by partition: each conversation's vectors fill its chunks in turn
        c.execute(f"INSERT INTO {target}(rowid, conversation_id, embedding) "
                  f"SELECT rowid, conversation_id, embedding FROM {source} ORDER BY conversation_id, rowid")
        c.execute(f"DROP TABLE {source}")
    # each step of this pragma frees one page: without fetchall() it frees one
    c.execute("PRAGMA incremental_vacuum").fetchall()


def m017_fts_secure_delete(c: Connection) -> None:
    # FTS5 kept an erased row's terms in its index segments until they merged, so every
    # erasure merged the whole index ('optimize': 259 ms of a 30-turn erasure at 60k
    # turns, growing with every tenant's text). With 'secure-delete' a delete removes the
    # row's entries from the segments at once; erasure merges only when a page key of
    # the segment index (messages_fts_idx) still spells a prefix of an erased term that
    # no live term has (tiers/cold.py ColdStore._fts_keys_leak). A persistent setting of
    # the table (its _config row); SQLite >= 3.42.
    c.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('secure-delete', 1)")


def m018_index_pending_by_conversation(c: Connection) -> None:
    # A namespace's catch-up and its stats' pending count walked turns_pending (every
    # tenant's turns waiting for a vector, by rowid) and kept their own: another
    # tenant's import backlog made them slow (stats(namespace=) 110x). This index lets
    # them start from the namespace's conversations; its rows are in rowid order within
    # a conversation (the rowid closes every index key), so a catch-up resumes by rowid.
    c.execute("CREATE INDEX turns_pending_by_conv ON turns(conversation_id) WHERE embedded = 0")


def m019_views_behind(c: Connection) -> None:
    # The scheduler's sweep read every conversation's frontier each tick, under the
    # store's lock (141 ms at 2,010 conversations, growing with the whole store, every
    # 30 s). Each append batch now bumps `views_seq`; the sweep records the value at
    # which it found every view covering the log (`views_checked_seq`, and the last
    # position then, `views_through`), and reads only the rows where the two differ,
    # through this partial index. Existing rows start behind: the first sweep after the
    # upgrade looks at each once, as every sweep did before.
    c.execute(f"ALTER TABLE conversations ADD COLUMN views_seq INTEGER NOT NULL DEFAULT {VIEWS_SEQ_START}")
    c.execute(f"ALTER TABLE conversations ADD COLUMN views_checked_seq INTEGER NOT NULL DEFAULT {VIEWS_UNCHECKED}")
    c.execute("ALTER TABLE conversations ADD COLUMN views_through INTEGER NOT NULL DEFAULT -1")
    c.execute(f"CREATE INDEX conversations_views_behind ON conversations(id) WHERE {VIEWS_BEHIND_SQL}")


def m020_fts_rebuild_after_plain_erasures(c: Connection) -> None:
    # Before m017 an erasure deleted its FTS rows plainly and then merged the index
    # ('optimize'). For rows written in batches (an import, `append_many` of a history)
    # that merge left erased terms in a live leaf of the merged segment: bytes in the
    # file after the erasure's scrub, which no query reaches but a reader of the file
    # does (found 2026-12-05 with a namespace of 1,500 such turns). A store that erased
    # anything may hold them: its index is rebuilt from the stored text once (0.8 s at
    # 60k messages), and the scrub the open runs next (`SCRUB_PENDING_KEY`) hands the
    # freed pages back and truncates the WAL that holds their images.
    if c.execute("SELECT 1 FROM tombstones LIMIT 1").fetchone() is None:
        return
    c.execute("INSERT INTO messages_fts(messages_fts) VALUES ('rebuild')")
    c.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, '1')", (SCRUB_PENDING_KEY,))


def m021_erasures_owed(c: Connection) -> None:
    # A conversation too large to erase in one transaction without stalling every other
    # writer (SQLite has one) is detached first: its tombstone written and its metadata
    # row deleted in one short transaction, so no read reaches it from then on and its
    # id is free; its rows are then deleted in batches. This table records the keys
    # whose rows are still owed, so a process killed between batches leaves them to the
    # next open or the next erasure (`ColdStore.finish_owed_erasures`), never to nobody.
    # IF NOT EXISTS: a store rolled back to an older version number (as the upgrade
    # tests do) runs this again over the table it has
    c.execute("CREATE TABLE IF NOT EXISTS erase_owed(key TEXT PRIMARY KEY, reason TEXT NOT NULL, at REAL NOT NULL)")


PENDING_BY_POSITION_INDEX = "turns_pending_by_pos"  # m022; tiers.cold names it (INDEXED BY)


def m022_index_pending_by_position(c: Connection) -> None:
    # One conversation's catch-up (an append's own embedding pass, a search's, a view
    # refresh's) reads its pending turns in position order after a resume position. No
    # index held both: SQLite walked the primary key from the resume position on and
    # looked up every turn to test `embedded = 0` (60,030 turns per call when the newest
    # of a 60k-turn conversation is the one pending), or sorted turns_pending_by_conv's.
    # This one holds only the pending turns, in position order: a seek. turns_pending_by_conv
    # stays: a namespace's catch-up resumes by rowid through it (INDEXED BY).
    # IF NOT EXISTS: a store rolled back to an older version number (as the upgrade
    # tests do) runs this again over the index it has
    c.execute(f"CREATE INDEX IF NOT EXISTS {PENDING_BY_POSITION_INDEX} ON turns(conversation_id, position) "
              "WHERE embedded = 0")


# m023; tiers.cold names them (INDEXED BY)
PIN_CANDIDATES_INDEX = "turns_pin_candidates"
SUPERSEDED_PINS_INDEX = "turns_superseded_pins"


def m023_index_pin_candidates(c: Connection) -> None:
    # The planner's pinned block (on a pin version change) and supersession (on every
    # correction) read a conversation's best load-bearing, not superseded turns: the top
    # `limit` by priority, then newest. turns_load_bearing is by position only, so SQLite
    # read every one of them and sorted (29,700 turns of a 60k-turn conversation, 29 ms).
    # This one holds exactly those turns in (priority, position) order: a backward walk
    # that stops after `limit`. The superseded ones (the plan's "superseded by" notes,
    # newest first) get their own, by position: the walk of turns_load_bearing tested
    # `superseded_by` turn by turn and, with few superseded, read them all. Each append
    # of a load-bearing turn writes one more index entry; a supersession moves one.
    # IF NOT EXISTS: a store rolled back to an older version number (as the upgrade
    # tests do) runs this again over the indexes it has
    c.execute(f"CREATE INDEX IF NOT EXISTS {PIN_CANDIDATES_INDEX} ON turns(conversation_id, priority, position) "
              "WHERE load_bearing = 1 AND superseded_by IS NULL")
    c.execute(f"CREATE INDEX IF NOT EXISTS {SUPERSEDED_PINS_INDEX} ON turns(conversation_id, position) "
              "WHERE load_bearing = 1 AND superseded_by IS NOT NULL")


def m024_idempotency_keys(c: Connection) -> None:
    # An append made with an idempotency key records it here in the append's own
    # transaction: the request's fingerprint (sha256, tiers.models.append_fingerprint) and
    # the positions written (one batch is contiguous: first and count), so a retry of a
    # timed-out append answers those positions instead of storing the messages twice.
    # Scoped to the conversation's key (its incarnation: a re-created conversation starts
    # with none); kept as long as the conversation, deleted with it by every retention
    # operation (cold.CONVERSATION_TABLES: SQLite's foreign keys are off). WITHOUT ROWID:
    # the primary key is the only way in, and the row is stored once, in its b-tree.
    # IF NOT EXISTS: a store rolled back to an older version number (as the upgrade
    # tests do) runs this again over the table it has
    c.execute(
        """CREATE TABLE IF NOT EXISTS idempotency_keys(
            conversation_id TEXT NOT NULL,
            idem_key TEXT NOT NULL,
            fingerprint BLOB NOT NULL,
            first_position INTEGER NOT NULL,
            message_count INTEGER NOT NULL,
            created_at REAL NOT NULL,
            PRIMARY KEY (conversation_id, idem_key)
        ) WITHOUT ROWID"""
    )

def m025_view_failures(c: Connection) -> None:
    # A warm view whose latest refresh failed (consolidation.views): how many refreshes in
    # a row failed, since when, and when the scheduler may try it again (unix seconds), so
    # every process's scheduler backs off from it alike, and the operator's stats count
    # the failing views. No text: the error itself stays in summary_errors. The row goes
    # with the view's next successful refresh, and with its conversation
    # (cold.CONVERSATION_TABLES). IF NOT EXISTS: a store rolled back to an older version
    # number (as the upgrade tests do) runs this again over the table it has
    c.execute(
        """CREATE TABLE IF NOT EXISTS view_failures(
            conversation_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            key TEXT NOT NULL,
            failures INTEGER NOT NULL,
            first_at REAL NOT NULL,
            retry_at REAL NOT NULL,
            PRIMARY KEY (conversation_id, kind, key)
        ) WITHOUT ROWID"""
    )


SESSION_TURNS_INDEX = "turns_by_session"  # m026


def m026_index_turns_by_session(c: Connection) -> None:
    # A session view's reads (its freshness: the session's turns after the view's end,
    # counted, on every inspector panel and read of its lag; whether a refresh has
    # anything to add; the refresh's own read of them) ask for one session's turns of a
    # conversation after a position. No index held the session: SQLite walked the primary
    # key from that position to the end of the log and tested every turn's session_id
    # (20,000 turns per view for the oldest of 2,000 sessions, ~2-5 ms; the inspector's
    # 50 panels a page paid it 50 times). This one holds a conversation's turns by
    # session, in position order: a seek to the session's turns after the position. Turns
    # without a session (most of an import's) are left out, so they cost an append
    # nothing; `session_id = ?` implies the index's condition on both engines.
    # IF NOT EXISTS: a store rolled back to an older version number (as the upgrade
    # tests do) runs this again over the index it has
    c.execute(f"CREATE INDEX IF NOT EXISTS {SESSION_TURNS_INDEX} ON turns(conversation_id, session_id, position) "
              "WHERE session_id IS NOT NULL")


# m027: the column of pin_versions that only supersession moves (tiers.store `supersession_version`)
SUPERSESSION_VERSION_COLUMN = "supersessions"


def m027_supersession_versions(c: Connection) -> None:
    # The warm sweep asks whether a view shows as current a line corrected or retracted
    # since it last looked (consolidation.views `_stale_outdated`). It keyed that on the
    # pin version, which every load-bearing append moves too: each such append cost the
    # check of every view of the conversation (its bodies and the turns they cite), 169 ms
    # at 20,000 turns / 2,000 sessions. This counter moves only when supersession does: a
    # turn's `superseded_by` set, changed or cleared, a turn written or deleted with one
    # set (a fork's or a copy's rows), a statement row written or deleted. It lives in the
    # conversation's pin_versions row, which the same writes already move (the same row
    # lock on PostgreSQL: no new lock order), and starts at 0 for existing rows: a
    # process remembers what it checked in memory only, so nothing older is compared.
    # The row is inserted with version 0 when missing: whichever of this trigger and the
    # pin version's fires first, the version moves by one, as it did before this step.
    # Re-runnable: a store rolled back to an older version number (as the upgrade tests
    # do) runs this again over the column and triggers it has.
    columns = {r[1] for r in c.execute("PRAGMA table_info(pin_versions)").fetchall()}
    if SUPERSESSION_VERSION_COLUMN not in columns:
        c.execute(f"ALTER TABLE pin_versions ADD COLUMN {SUPERSESSION_VERSION_COLUMN} INTEGER NOT NULL DEFAULT 0")
    bump = (f"INSERT INTO pin_versions(conversation_id, version, {SUPERSESSION_VERSION_COLUMN}) VALUES ({{conv}}, 0, 1) "
            f"ON CONFLICT(conversation_id) DO UPDATE SET {SUPERSESSION_VERSION_COLUMN} = "
            f"{SUPERSESSION_VERSION_COLUMN} + 1;")
    # name: (event, the row whose conversation it names, condition)
    triggers = {
        "supersession_version_turn_insert": ("AFTER INSERT ON turns", "NEW", "NEW.superseded_by IS NOT NULL"),
        "supersession_version_turn_update": ("AFTER UPDATE OF superseded_by ON turns", "NEW",
                                             "OLD.superseded_by IS NOT NEW.superseded_by"),
        "supersession_version_turn_delete": ("AFTER DELETE ON turns", "OLD", "OLD.superseded_by IS NOT NULL"),
        "supersession_version_statement_insert": (f"AFTER INSERT ON {STATEMENT_TABLE}", "NEW", "1"),
        "supersession_version_statement_delete": (f"AFTER DELETE ON {STATEMENT_TABLE}", "OLD", "1"),
    }
    for name, (event, row, when) in triggers.items():
        c.execute(f"CREATE TRIGGER IF NOT EXISTS {name} {event} WHEN {when} "
                  f"BEGIN {bump.format(conv=row + '.conversation_id')} END")


def m028_tokenizer_recorded(c: Connection) -> None:
    # The tokenizer that counted turns.tokens is recorded in meta (tiers.recount
    # TOKENIZER_KEY), so that a store opened under another one recounts them instead of
    # keeping counts the hot budget and the planner add up as the new one's. A store made
    # before this step was counted by the tokenizer configured then, which nothing
    # recorded: '' (UNRECORDED), which its next open replaces by its own tokenizer without
    # a recount. The step also keeps an older tiermem, which would count its appends with
    # its own tokenizer unchecked, from opening the store. Re-runnable (OR IGNORE): a store
    # rolled back to an older version number (as the upgrade tests do) keeps its record
    c.execute("INSERT OR IGNORE INTO meta(key, value) VALUES (?, ?)", (TOKENIZER_KEY, UNRECORDED))


RECHECK_TABLE = "supersession_rechecks"  # m029; PostgreSQL m016 (tiers.postgres)


def m029_supersession_rechecks(c: Connection) -> None:
    # A correction decided while turns before it had no vector yet (an import's pool in
    # the background indexer's hands, a nested catch-up whose model call failed) cannot
    # find, by meaning, a statement among them, and that statement's own check, once it
    # is embedded, looks back only: one row per such correction, re-checked once every
    # turn before it is embedded (consolidation.supersede `Superseder.recheck`). Derived:
    # rebuild clears it (the replay decides again). IF NOT EXISTS: a store rolled back to
    # an older version number (as the upgrade tests do) runs this again
    c.execute(f"CREATE TABLE IF NOT EXISTS {RECHECK_TABLE}(conversation_id TEXT NOT NULL, "
              "position INTEGER NOT NULL, PRIMARY KEY (conversation_id, position))")


FORK_PARENT_COLUMN = "parent"  # m030: erase_owed's column naming an unpublished fork's parent


def m030_fork_parent_owed(c: Connection) -> None:
    # An unpublished fork's record in erase_owed names the conversation it copies, so that
    # an erasure of that conversation (another process's) finds the unfinished copy of its
    # text and deletes it with the rest (`ColdStore._erase_forks_of`): before, the copy
    # stayed until the fork's next batch noticed, and the erasure answered scrubbed. NULL
    # for every other record, and for a fork recorded before this step (or by an older
    # tiermem still running): not known, which an erasure reports as not scrubbed while
    # such a fork is being copied. Re-runnable: a store rolled back to an older version
    # number (as the upgrade tests do) runs this again over the column it has
    columns = {r[1] for r in c.execute("PRAGMA table_info(erase_owed)").fetchall()}
    if FORK_PARENT_COLUMN not in columns:
        c.execute(f"ALTER TABLE erase_owed ADD COLUMN {FORK_PARENT_COLUMN} TEXT")


def m031_residue_before_secure_delete(c: Connection) -> None:
    # A store that an older tiermem wrote before `secure_delete` (SECURE_DELETE_SINCE)
    # may hold deleted text anywhere in the file: rows erased by that code, and the unused
    # space of pages it split (a reviewer found 8 copies of a conversation erased after
    # the upgrade in an interior page of `messages`, scrubbed=True). `migrate` flags a
    # store it takes across that version (`owe_residue_vacuum`); this step flags one that
    # an earlier tiermem took across it, where the key of a conversation issued before that
    # code was released tells (m013 copied each existing conversation's created_at).
    # A store that held no conversation then, or whose clock was wrong, is not told apart.
    if c.execute("SELECT 1 FROM conversation_keys WHERE issued_at < ? LIMIT 1",
                 (SECURE_DELETE_RELEASED_AT,)).fetchone() is not None:
        owe_residue_vacuum(c)


# m032: the conversation-keyed tables an older tiermem's erasure may not know of (m014
# and after), emptied of a conversation's rows when its row goes
ROWS_DELETED_WITH_CONVERSATION = (STATEMENT_TABLE, "view_claims", "idempotency_keys", "view_failures",
                                  RECHECK_TABLE)
CONVERSATION_DELETE_TRIGGER = "conversations_delete_rows"  # m032


def m032_conversation_delete_trigger(c: Connection) -> None:
    # An older tiermem still running beside a newer one (it opened the file before the
    # newer one migrated it, and keeps its own list of tables) erases a conversation
    # without the rows of tables added after it: an idempotency key's fingerprint of the
    # erased request, its view failures and claims, its pending rechecks stayed (found by
    # a reviewer with 98529cc). PostgreSQL's tables have foreign keys ON DELETE CASCADE,
    # which fire for any code; SQLite's foreign keys are off, so this trigger does it,
    # inside whatever process deletes the row. Small per-conversation tables only: the
    # rows of a large one (turns, messages) go in batches (ColdStore._purge_owed), and a
    # trigger would delete them all in the detaching transaction. Rows such a process
    # already left are deleted here once (a key with rows still owed keeps them: its purge
    # deletes them; an unpublished fork's too).
    deletes = " ".join(f"DELETE FROM {t} WHERE conversation_id = OLD.id;" for t in ROWS_DELETED_WITH_CONVERSATION)
    c.execute(f"CREATE TRIGGER IF NOT EXISTS {CONVERSATION_DELETE_TRIGGER} AFTER DELETE ON conversations BEGIN "
              f"{deletes} DELETE FROM meta WHERE key = '{COPIED_DIGEST_PREFIX}' || OLD.id; END")
    for t in ROWS_DELETED_WITH_CONVERSATION:
        c.execute(f"DELETE FROM {t} WHERE conversation_id NOT IN (SELECT id FROM conversations) "
                  "AND conversation_id NOT IN (SELECT key FROM erase_owed)")


TOMBSTONES_BY_NAME_INDEX = "tombstones_by_name"  # m033; PostgreSQL m018 (tiers.postgres)


def m033_index_tombstones_by_name(c: Connection) -> None:
    # an import's check for erased conversations (`erasures_of`: by namespace and names,
    # 500 a statement) read every tombstone of the namespace for each group of names
    # (tombstones_by_namespace is by time): 20,000 names x 200,000 tombstones took 5.3 s
    # (review r_c5 F2). IF NOT EXISTS: a rerun after a crash mid-step
    c.execute(f"CREATE INDEX IF NOT EXISTS {TOMBSTONES_BY_NAME_INDEX} ON tombstones(namespace, name, reason, deleted_at)")


# m034; PostgreSQL m019 (tiers.postgres): the newest created_at among a tombstone's erased
# messages (Unix seconds, the conversation's last_message_at; NULL: a tombstone written
# before it, or by an older tiermem still running)
TOMBSTONE_NEWEST_COLUMN = "newest_message_at"


def m034_tombstone_newest_message(c: Connection) -> None:
    # An import refused lines of a conversation erased on request only when created at or
    # before the erasure's server time: lines a client stamped ahead of the server clock
    # (a clock skewed forward, or a made-up future created_at) were read as written after
    # the erasure, and the erased text came back. Each tombstone records the newest
    # created_at among its rows, so the import refuses up to whichever is later
    # (tiers.dialect `erasures_of`). Old tombstones keep NULL: the erasure time alone, as
    # before. Checked first: a rerun after a crash mid-step finds the column there
    columns = {r[1] for r in c.execute("PRAGMA table_info(tombstones)").fetchall()}
    if TOMBSTONE_NEWEST_COLUMN not in columns:
        c.execute(f"ALTER TABLE tombstones ADD COLUMN {TOMBSTONE_NEWEST_COLUMN} REAL")


def owe_residue_vacuum(c: Connection) -> None:
    """Inside a migration's transaction: flag the store as possibly holding text deleted
    before `secure_delete` (RESIDUE_KEY), and owe a scrub (SCRUB_PENDING_KEY), which the
    open after the migration runs: ColdStore.reclaim rewrites the file (VACUUM) and clears
    both only once that succeeded."""
    c.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, '1')", [(RESIDUE_KEY,), (SCRUB_PENDING_KEY,)])


MIGRATIONS: list[Callable[[Connection], None]] = [
    m001_create_conversations,
    m002_create_messages,
    m003_create_turns,
    m004_create_checkpoints,
    m005_create_fts,
    m006_create_meta_and_pins,
    m007_index_load_bearing,
    m008_create_plans,
    m009_messages_no_replace,
    m010_create_summaries,
    m011_fts_scope_column,
    m012_pin_versions,
    m013_conversation_incarnations,
    m014_statement_supersessions,
    m015_view_claims,
    m016_vec_small_chunks,
    m017_fts_secure_delete,
    m018_index_pending_by_conversation,
    m019_views_behind,
    m020_fts_rebuild_after_plain_erasures,
    m021_erasures_owed,
    m022_index_pending_by_position,
    m023_index_pin_candidates,
    m024_idempotency_keys,
    m025_view_failures,
    m026_index_turns_by_session,
    m027_supersession_versions,
    m028_tokenizer_recorded,
    m029_supersession_rechecks,
    m030_fork_parent_owed,
    m031_residue_before_secure_delete,
    m032_conversation_delete_trigger,
    m033_index_tombstones_by_name,
    m034_tombstone_newest_message,
]
def schema_version() -> int:
    """The schema version this code writes. Every layer's tables live in the one list of
    migrations (the warm tier's too): a process that imports only the cold tier agrees on
    the version with one that imports all."""
    return len(MIGRATIONS)


# ----------------------------------------------------------------------------------
# Connections


def _create_private_file(path: Path) -> bool:
    """Create `path` (and its directory) with mode 0600 before SQLite opens it, so the
    WAL sidecars, which SQLite creates with the database file's mode, are 0600 too. An
    existing file is left as it is here (True only when this call created the file)."""
    return create_private_file(path)


def connect(
    path: Path, *, busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS, synchronous: str = "NORMAL"
) -> Connection:
    """Open (creating if needed) a tiermem database with sqlite-vec loaded."""
    import sqlite_vec

    if path.exists() and not database_writable(path):
        from tiermem.tiers.readonly import connect_read_only

        return connect_read_only(path, schema_version())
    refuse_newer_header(path, schema_version())
    _refuse_newer_in_wal(path)
    created = _create_private_file(path)
    if not created and os.stat(path).st_mode & 0o077:  # an older tiermem's wider file: tighten it
        os.chmod(path, 0o600)  # before SQLite opens it and creates the WAL sidecars with its mode
    conn = sqlite3.connect(
        str(path), isolation_level=None, check_same_thread=False, timeout=busy_timeout_ms / 1000
    )
    conn.enable_load_extension(True)
    sqlite_vec.load(conn)
    conn.enable_load_extension(False)
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    # Refuse a newer schema before anything below writes to the file (switching a
    # rollback-journal database to WAL rewrites its header): the error promises that
    # the database is left untouched. migrate() checks again under the write lock.
    found = conn.execute("PRAGMA user_version").fetchone()[0]
    if found > schema_version():
        conn.close()
        raise SchemaTooNew(str(path), found, schema_version())
    # auto_vacuum can only be chosen before the first table exists; INCREMENTAL lets
    # prune hand freed pages back to the file system.
    if conn.execute("PRAGMA page_count").fetchone()[0] == 0:
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
    _switch_to_wal(conn, busy_timeout_ms)
    if synchronous not in ("NORMAL", "FULL"):
        raise ValidationError("sqlite_synchronous", "must be NORMAL or FULL")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    conn.execute(f"PRAGMA cache_size = -{DEFAULT_CACHE_KIB}")
    # deleted content is overwritten, not left in free space: an erased conversation's
    # text must not be recoverable from the file (DESIGN invariant 3)
    conn.execute("PRAGMA secure_delete = ON")
    conn.execute("PRAGMA temp_store = MEMORY")
    return conn


def _refuse_newer_in_wal(path: Path) -> None:
    """Raise SchemaTooNew when a newer version is recorded only in the WAL (a newer
    tiermem killed, or still running, since its migration), before anything chmods the
    file or opens it for writing. The header does not show it, and a read-write
    connection that finds it cannot leave untouched what it found: closing the last
    connection checkpoints the WAL into the file and deletes the sidecars. A read-only
    one writes neither (it may rebuild the -shm index, as any reader does)."""
    wal = path.with_name(path.name + WAL_SUFFIXES[0])
    try:
        if wal.stat().st_size == 0:
            return
    except FileNotFoundError:
        return
    uri = "file:" + urllib.parse.quote(str(path.absolute())) + "?mode=ro"
    try:
        probe = sqlite3.connect(uri, uri=True, isolation_level=None)
        try:
            found = probe.execute("PRAGMA user_version").fetchone()[0]
        finally:
            probe.close()
    except sqlite3.Error:
        return  # unreadable here: the read-write connection's own check below still refuses
    if found > schema_version():
        raise SchemaTooNew(str(path), found, schema_version())


def _switch_to_wal(conn: Connection, busy_timeout_ms: int) -> None:
    """`PRAGMA journal_mode = WAL`, retried while another process holds the file. Two
    processes opening a fresh (rollback-journal) file at once both take a shared lock and
    both need an exclusive one to switch: SQLite answers one of them "database is locked"
    at once, without its busy handler (deadlock avoidance), so the wait is done here."""
    deadline = time.monotonic() + busy_timeout_ms / 1000
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(WAL_SWITCH_RETRY_S)


def migrate(conn: Connection, path: str) -> int:
    """Apply pending migrations; refuse a database newer than this code."""
    supported = schema_version()
    found = conn.execute("PRAGMA user_version").fetchone()[0]
    if found > supported:
        raise SchemaTooNew(path, found, supported)
    started = found  # 0: a new file (nothing was written without secure_delete)
    while found < supported:
        conn.execute("BEGIN IMMEDIATE")
        try:
            # another process may have migrated while we waited for the lock
            found = conn.execute("PRAGMA user_version").fetchone()[0]
            if found > supported:
                raise SchemaTooNew(path, found, supported)
            if found < supported:
                MIGRATIONS[found](conn)
                if found + 1 == SECURE_DELETE_SINCE and started > 0:
                    # written by code without secure_delete: the file is rewritten once (m031)
                    owe_residue_vacuum(conn)
                conn.execute(f"PRAGMA user_version = {found + 1}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:  # SQLite may have rolled back itself (cold.ColdStore._tx)
                conn.execute("ROLLBACK")
            raise
        found = conn.execute("PRAGMA user_version").fetchone()[0]
    return int(found)

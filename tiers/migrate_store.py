"""Copy a cold log from one engine to the other: SQLite -> PostgreSQL (`tiermem
migrate-store --to postgresql://...`) and back (`--from postgresql://... --to PATH`).

What is copied, per conversation *incarnation* (its key), verbatim (but for derived text,
below): the conversation row
(key, name, namespace, parent, fork position, created and last-message times), every
message (position, role, body text byte for byte, session, metadata, created_at), the turn
index with its labels, exact token counts, content hashes and supersessions, the vectors,
checkpoints, explicit pins, stored plans, warm summaries (every version) and their refresh
errors, and the idempotency keys of its appends (a retry after the move is still answered
from them). With the vectors, the identity of the model they come from (meta `vec_model`):
the target re-embeds them when another model opens it, as the source would. And for the whole store: every key ever issued (`conversation_keys`, so the target
never hands out a key of an erased conversation), the tombstones and pending Redis purges.
The full-text rows are recomputed from the bodies (each engine has its own index format).
Internal message ids are the source's, each plus one offset (`ID_OFFSET`: 0 into an
empty target, else the target's highest id when the copy began, so the copied rows come
after its own), and the target's numbering is moved past the last of them: by every run
with conversations to copy, before it writes (a resumed run too: the source may have grown
since the first run, and the ids it copies now pass that run's reservation), and within a
conversation's transaction where its ids pass what the run reserved (a source whose
writers were not stopped). Searches on
both engines break exact ties by that id (equal vectors: equal texts, a fork's copies of
its parent's rows; equal keyword scores), so tied rows of different conversations come in
the source's order after the copy, although the copy writes one conversation at a time,
in key order. A target writer that was not stopped can take an id a conversation still
to copy needs (SQLite numbers an append MAX(id) + 1: one between an interrupted run and
its resume, or during the copy; PostgreSQL's sequence: one between the preflight's read of
it and the run's reservation, or one after the first run where the source grew before the
resume): that conversation's transaction finds the id taken and moves the offset, for it
and every conversation after it, past the target's highest id (ID_OFFSET updated with it,
so a resume numbers the rest alike; a warning logged, the report's `offset_moves`). The
trade: the copy completes instead of failing at every resume, and exact ties keep the
source's order within the rows copied before the move and within those copied after it,
while between the two groups those copied after come last (after the target's rows
written meanwhile too). The target keeps its own database id (`db_uuid`),
so caches keyed by the source's are not trusted for it.

Derived and diagnostic text is not the user's data: a warm fold's text (a checkpoint whose
metadata says `"source": "warm"`) and a view's refresh error are copied with each NUL a
space (`tiers.dialect.without_nul`, the rule both engines write them by now; a SQLite
store an older tiermem wrote may still hold a NUL there), and a turn's speaker is derived
from the copied body by the target's own rule. Both sides are read through that same rule
before they are digested, so the verification compares the text as the target holds it,
and a NUL there neither refuses the copy nor fails it. A NUL in the user's data (a
message's body, metadata or session, a caller's own checkpoint, a view's body, a plan) is
refused as below: that is copied byte for byte or not at all. PostgreSQL text holds no
NUL, so the PostgreSQL -> SQLite direction copies its text as it is.

Invariants:

- Verified: each conversation is written in one target transaction that reads it back,
  digests it (sha256 over every copied field) and commits only if the digest equals the
  source's and each message's id is its source id plus the offset; at the end every
  conversation, the key set and the tombstones are compared again on both sides, and the
  counts reported (a copy the source has not changed since it was written, and no
  target writer either, compares as the source's whatever the target computed on its
  own since: below).
- Owed decisions carried: a turn whose supersession decision the source owes (its
  `on_embedded` hook failed after its vector's commit, under a lock: tiers/owed.py, meta
  OWED_PREFIX + its id) is recorded owed in the target too, under the id it has there
  (the source's plus the offset, moved or not), in the transaction writing its
  conversation (a fresh copy, or one brought up to the source's; the report's
  `owed_decisions` counts them). The copy writes its vector and `embedded = 1`, so no
  catch-up there embeds it again: the target's next `index_pending` decides it from that
  record, in a process that holds the target open too: the same transaction sets the
  record's mark (OWED_MARK_KEY), which sends such a process to read the records again
  (before 2026-12-06 it read them once per store object, and decided them only once
  reopened: tests/test_owed_reload_live.py). (Before 2026-12-06 the record was not copied, and a correction owed in the
  source was never decided in the target: the old value stayed current there for good;
  tests/test_migrate_store_owed.py.) The record is not digested (the decision the target
  makes is what it computes on its own, below). Not carried: an owed decision whose meta
  write failed too (only the source's process knew it), and one owed in the source after
  an older tiermem copied the conversation, which a rerun finds identical and leaves.
- Owed re-checks carried: a correction decided while a turn before it had no vector (the
  `supersession_rechecks` rows, RECHECK_TABLE: consolidation.supersede `Superseder.recheck`
  searches it by meaning again once every turn before it has one) is owed its re-check in
  the target too, by position, in the transaction writing its conversation (a fresh copy,
  or one brought up to the source's, which replaces the target's rows with the source's
  as it does the turn labels; the report's `owed_rechecks` counts them). The turns the
  source had no vector for are copied without one, so the target's catch-up that embeds
  the last of them re-checks it (its pool's hook, `ColdLog.on_hooked`). Not digested, as
  the owed decisions: the target removes a row as it re-checks it. (Before 2026-12-07 the
  rows were not copied: the target's catch-up embedded the statement the correction
  revises, found nothing to re-check, and that statement stayed current there for good;
  tests/test_migrate_store_rechecks.py.) As in the source, a row whose earlier turns all
  had vectors already (a re-check that failed there and waits for that conversation's
  next stored pool) waits in the target for its next append's catch-up.
- Refused before anything is written: a target that already holds conversations, keys or
  tombstones (unless `into_non_empty`, and then no source key or name may be in use
  there; a source conversation of a name the target erased on request, created at or
  before that erasure, is refused naming the erasure, since it is the erased data from a
  copy made before it: `tiermem import --restore-erased` restores it knowingly), the
  source itself, a row of the user's data the target cannot store (PostgreSQL
  text holds no NUL; derived text has a space in its place, above),
  vectors of another width than the target's, or of another recorded model, source ids
  that numbered after the target's would pass MAX_ROW_ID. A target schema or file this
  run created is removed again when it refuses; if that removal fails, the refusal is
  still the error raised, and the removal's failure is logged and noted on it (naming
  the target to check). So with a side that fails to close after any error of the run:
  the run's error is the one raised, the close's failure logged and noted on it, and
  the rest of the cleanup (the other side's close, the removal) still done.
- Resumable and idempotent: the target records `migrated_from` (the source's db_uuid) in
  the first transaction, with every key and tombstone and the id offset (`ID_OFFSET`, which
  a resumed run keeps); each run moves the numbering past the last id it copies, so an
  append to the target after any run draws a free id. A rerun into it
  copies only the conversations not there yet (not those the target erased, below),
  checks that those already there are
  identical (or brings them up to the source's, below), and writes nothing when all are
  (but the digest of an identical copy an older tiermem made without one, below). An interrupted run loses at most the
  conversation it was writing, and resumes where it stopped even when the target was
  appended to meanwhile (the offset moves past such rows, above).
- Marked until verified: before a run's first copy (a first run or a merge, or a resume
  with conversations to copy, bring up to the source's or erase) the target records its
  own mark (meta UNFINISHED_PREFIX + the source's db_uuid: the source's label, when the run
  began, whether the target held conversations of its own then; a resume keeps its first
  run's), deleted in the transaction that records that run's verified copy (DONE). Each
  run writes and clears its own source's mark only (before, one mark per store: a
  verified merge from A cleared B's and the target opened missing part of B,
  tests/test_migrate_store_marks.py), and a run into a store holding another source's
  mark is refused before writing (OtherCopyUnfinished: finish that copy first), since
  it would take the target's MARKER and that source's rerun could no longer resume and
  clear its mark. A run killed, cut by a deadline or failed leaves its mark. Where the
  target held no conversation of its own as the run began (new, tombstones and keys
  only, or holding only this source's earlier copy: a resume or a rerun carrying the
  source's erasures or growth), `Memory` refuses the store
  (`check_finished`: MigrationUnfinished naming the source, when the run began and what
  to do), so a service pointed at a half-copied target does not serve part of the
  history as all of it (before 2026-12-07 it opened as any store:
  tests/test_migrate_store_unfinished.py). A merge (`--into-non-empty`) into a store
  with conversations of its own leaves them whole (each conversation is copied in its own
  transaction): `Memory` opens it, logging a warning per mark and listing them in
  `stats()` (`unfinished_copies`), so a restart during a merge into a live store, or
  after one failed, is not refused. A marked store is refused as a source (its copy would
  verify, and open, as whole). A rerun finishes its copy and clears its mark;
  `accept_unfinished` (`--accept-unfinished`) clears every mark knowingly, copying
  nothing, where the sources are gone. A rerun of a verified copy with nothing to write
  writes no mark. The one-per-store mark a tiermem of 2026-12-07 wrote (meta UNFINISHED)
  still refuses, and is cleared by a run of the source it names.
- Grown in the source: the log is append-only, so a conversation the source appended to
  after it was copied (between an interrupted run and its resume, or after a verified
  run) holds the target's copy as its prefix. A resume or rerun copies its new messages,
  numbered as a fresh conversation's (source id plus the recorded offset; a taken id
  moves the offset, above), and writes its derived rows (turn labels and supersessions,
  keyword index, vectors, pins, checkpoints, plans, summaries, idempotency keys) again
  from the source's, replacing the target's, in one transaction that reads the whole
  conversation back and compares it as a fresh copy's, and that moves its `views_seq` as
  an append does (on both engines; SQLite's did not before 2026-12-06), so the target's
  warm-view sweep looks at its views again and refreshes those the new messages left
  behind. Where the target changed that
  copy's derived rows since (a pin set there: a target writer that was not stopped; its
  digest is no longer the one recorded, below), the run is refused instead, naming the
  conversation, since the rewrite would drop that change (only a copy an older tiermem
  made, with no digest recorded, is still grown over it; a rerun that finds such a copy
  identical to the source's records its digest, in a short transaction that reads it
  again, so the source's later changes to it are followed). Where the target's copy is not
  such a prefix (its conversation row or a copied message differs, or it holds more
  messages than the source: the target was written to in that conversation, or the
  source changed as an append-only log cannot), the run is refused (MigrationMismatch)
  and that conversation left as it is.
- Changed in the source without new messages (a pin set or cleared, a checkpoint, a
  label, a plan, a summary after it was copied): each conversation's copy records, in
  its transaction, the digest it was written with (meta COPIED_DIGEST + key, `copy_digest`:
  the whole copy's, and one per part a writer changes: the conversation row, messages,
  pins, a caller's checkpoints, idempotency keys, stored plans). A resume or
  rerun rewrites such a conversation's derived rows from the source's, as for a grown one,
  where the target's copy still has that digest. Where it does not (a target writer that
  was not stopped changed it: the refusal names the parts), or where none was recorded (a
  tiermem before 2026-12-06 copied it, so a source change cannot be told from a target
  writer's; a rerun that found the copy identical before the change recorded one), the
  run is refused (MigrationMismatch naming the conversation and what to do) and nothing
  written. What the target computes on its own is no change of the copy: the vectors a
  catch-up or a context() there embedded for messages the source had none for yet
  (appended without the indexer, or ahead of it), the turn index with the labels and
  supersessions decided then, statement supersessions, warm views, folds and refresh
  errors. Where the source changed the conversation, the rewrite replaces them with the
  source's and the target computes them again (its catch-up embeds what has no vector);
  where it did not (its digest still the whole one recorded), the copy is left as it is
  and the verification takes it as the source's (`_as_copied`: every part a writer
  changes as recorded; a plan a read kept there, store_plans, is kept too). A stored plan
  the target kept is counted as a change where the rewrite would lose it. (Before
  2026-12-06 the digest was the whole copy's only, so a read on the target that embedded a
  message refused every later rerun, the source's change or erasure of that conversation
  with it.) A copy recorded whole (`record_digest`, by a tiermem of 2026-12-06 before
  that) is compared whole, and a rerun that finds it identical to the source's records it
  by part.
- Erased in the target: a conversation a target writer erased after a run copied it
  (delete_conversation, delete_namespace, prune) leaves its tombstone there, its key still
  issued. A resume or rerun leaves it out, erased: the target's erasure is the user's
  latest word, also where the source gained messages in it since and where the target
  gave its name to a new conversation. A warning names it and says that the source still
  holds it, the report's `erased_in_target` counts it, and the verification compares the
  rest. (Before 2026-12-06 such a rerun read it as not copied yet, its key being issued,
  and copied it back beside its tombstone.) Only a tombstone of that incarnation counts
  (its namespace, name and created_at the source conversation's): a key is the bare name
  the first time a store uses it, so the target's own conversation of that name, created
  there and erased, may hold the same key. A source conversation whose key the target
  issued to such a conversation of its own is refused by name before anything is written
  (a key is never given to a second conversation); it is not left out as erased.
- Erased in the source: a conversation the source erased after a run copied it (its
  tombstone there) is erased in the target too by a resume or rerun, with the target's
  own erasure path (`delete_conversation`: its tombstone, the copy's digest row, the
  scrub as the target is configured), where the target's conversation under that key is
  that incarnation (namespace, name and created_at the tombstone's) and its copy is as the
  run wrote it (the digest recorded, COPIED_DIGEST). The report's `erased_from_source`
  counts it. Its Redis keys (owed in the target's `redis_purge` by that erasure) are
  deleted by the caller's `on_erased` (the CLI: with the config's Redis, else the target
  data dir's embedded one only while it runs; a migration starts no Redis), else by the
  next Memory that opens on the target (the source's own pending purges, copied across,
  may owe them again: deleting them twice is a no-op). Where a target writer changed that
  copy since (one that was not stopped: a pin, an append, a caller's checkpoint; not what
  the target computes on its own, above, nor the plans its reads kept, which the erasure
  takes with it), or no digest was recorded (a tiermem before 2026-12-06 copied it), the
  run is refused before anything is written, naming it: erasing it would lose that change.
  (Before 2026-12-06 the rerun copied the tombstone and left the conversation readable
  beside it.) A tombstone of an incarnation the target holds one of too (erased on both
  sides) is not copied again: the target's own stands for it, and the verification
  compares the tombstones so (key, namespace, name, created_at). The run reads the
  source's tombstones before its first write and erases there what the source erased
  since the preflight too, and it never copies a tombstone whose conversation the target
  still holds: the erasure reaches the target as one transaction (the target's tombstone
  and its rows), so at every point a kill can stop the run the target holds that
  conversation either readable with no tombstone (not told yet: a source erasure after
  that read fails the verification, which names it, and the rerun erases it) or erased
  with one tombstone. (Before 2026-12-06 the tombstones were read after the run's first
  write: an erasure in the source while that write waited on a target lock had its
  tombstone carried beside the copy, which stayed readable, verified so; the next rerun
  erased it and left two tombstones of it. tests/test_migrate_store_erased_during_run.py.)
- A verification that finds a difference names the side that differs, with each side's
  message count (`differing_side`, `stones_lacking`): the source changed since the copy
  (its digest no longer the one recorded), the target changed it (the parts, as
  `copy_changes` names them), the target lacks a conversation, keys or tombstones (how
  many of how many). Before 2026-12-06 each conversation's asked "did the source change
  during the copy?", also where a target writer had changed it.
- A target writer that writes while the run copies (it was not stopped) and puts a row
  in the way of a conversation's write, in the window between the run's checks and that
  conversation's transaction (a conversation of the same name created there, a position
  or an id drawn meanwhile), is a MigrationRefused naming the conversation and what to do
  (stop the target's writers and rerun), not the engine's raw integrity error: that
  conversation is rolled back, those copied before it kept, and a rerun resumes (or, where
  the writer's row stays in the way, refuses it by name before writing).
- The transaction that brings a copied conversation up to the source's (grown or
  changed) holds it against the target's writers from its re-check to its commit: on
  PostgreSQL its conversation and pin_versions rows FOR UPDATE, taken before the re-check
  reads the copy (a pin, an append or an erasure there waits for the commit, and is then
  a change the next rerun refuses by name); SQLite's BEGIN IMMEDIATE holds the file.
  (Before 2026-12-06 a pin committed between the re-check and the rewrite, READ
  COMMITTED, was deleted with the derived rows without a word.)
- No connection is held for longer as the store grows: each conversation is read and
  written with checkouts of its own (the resume check, the copy, the verification), so
  PostgreSQL's per-operation deadline (`operation_timeout_s`: a checkout is cut past it,
  StoreStalled) holds for any store size. Only the statements over the whole store (the
  lists of conversations, keys and tombstones, and the one transaction writing every key,
  tombstone and purge) run under the engines' maintenance deadline (`SqlAccess.maintenance`).
  A server that stops answering is cut at those deadlines; a rerun resumes. The looks at
  a PostgreSQL schema outside its store (does the source hold a log, does the target's
  schema exist, its removal on refusal) are connections of their own
  (`tiers.postgres.owned_connection`): the stores' connect timeout, and cut at the
  operations' deadline as a checkout is.
- The PostgreSQL side is reached as the config's `cold_pool_mode` says (`pool_mode`,
  tiers.postgres POOL_MODES), its store and those looks alike: behind a pooler in
  transaction mode (PgBouncer's pool_mode = transaction) nothing is prepared on the server
  and every setting is SET LOCAL in each checkout's transaction, as a Memory's store does.
  What that mode cannot run (`check_pool_mode`: erase_scrub "full", the default, whose
  VACUUM FULL needs one server session) is refused naming cold_pool_mode before either
  side is opened. (Before 2026-12-07 the setting was ignored here: a copy through a
  transaction-mode pooler ran its session settings and prepared statements on server
  connections other clients get.)
- The source is only read (opening it brings an older SQLite file to this code's schema,
  as any open does). Stop its writers first: a conversation that changes during the copy
  fails the final comparison instead of being copied half-new (a rerun then copies what
  it gained, above).
- The source must exist: a SQLite file (or a data dir holding one) with SQLite's header,
  or a PostgreSQL schema holding a log. A mistyped `--from` is refused naming it, before
  anything is opened, instead of being created empty and "copied" (0 conversations),
  which would mark the target as migrated and refuse the real run after it.
- A target file that exists is checked to be a SQLite database (its header) before
  anything opens or chmods it: `--to notes.txt` is refused naming `--to` and left as it was.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from tiermem.tiers.cold import ColdStore
from tiermem.tiers.dialect import without_nul
from tiermem.tiers.errors import (
    MigrationMismatch,
    MigrationRefused,
    MigrationUnfinished,
    OtherCopyUnfinished,
    ValidationError,
)
from tiermem.tiers.files import SQLITE_HEADER
from tiermem.tiers.models import loads_stored, search_text
from tiermem.tiers.owed import OWED_MARK_KEY, OWED_PREFIX, new_mark
from tiermem.tiers.schema import (
    COPIED_DIGEST_PREFIX,
    DEFAULT_BUSY_TIMEOUT_MS,
    RECHECK_TABLE,
    SCOPE_SQL,
    TOMBSTONE_NEWEST_COLUMN,
    VEC_MODEL_KEY,
    VEC_TABLE,
    DriverIntegrityError,
)
from tiermem.tiers.store import ColdLog, SqlAccess
from tiermem.tiers.tokens import TokenCounter

log = logging.getLogger("tiermem.migrate_store")

MARKER = "migrated_from"  # meta key: the source's db_uuid, written with the keys
ID_OFFSET = "migrated_id_offset"  # meta key: what the copy adds to each source message id
# meta key prefix, + a conversation's key: the digests of that conversation as this run's
# copy wrote it (= the source's then; `copy_digest`: what a writer changes), so a rerun
# tells a source change from a target writer's; an erasure of the conversation deletes it
# (both engines' erasure transaction)
COPIED_DIGEST = COPIED_DIGEST_PREFIX
MAX_ROW_ID = 2**63 - 1  # the largest message id either engine stores (a signed 64-bit integer)
# migrate_store's `fault` step (+ a key) in a grown or changed copy's transaction, after
# its re-check and before its rows are rewritten (tests: a target writer in that window)
CHECKED_STEP = "checked:"
DONE = "migration_verified_at"  # meta key: when the last full verification passed
# meta key: the mark a tiermem of 2026-12-07 wrote, one per store whatever the source;
# still read (refusing, as then), cleared by a run of the source it names only
UNFINISHED = "migration_unfinished"
# meta key prefix, + the source's db_uuid: a run from that source is copying into this
# store and has not verified it yet (JSON: the source's label and db_uuid, when the run
# began, whether the target held no conversation of its own then: `target_was_empty`,
# the name 2026-12-07 gave it); written before the run's first copy, deleted
# with DONE's write by a run from that source only. Memory refuses a store holding one of
# a run into an empty target (`check_finished`, MigrationUnfinished), and opens one merged
# into (warning, `unfinished_marks` in its stats); refused as a source here: it may hold
# part of a history only
UNFINISHED_PREFIX = UNFINISHED + ":"
# `--accept-unfinished` on a --to that holds no store
NO_STORE_TO_ACCEPT = "there is no store there and no unfinished copy to accept"
MAX_MARK_SHOWN = 200  # characters of an UNFINISHED value this module did not write that an error shows
POSTGRES_SCHEMES = ("postgresql://", "postgres://")
DATA_DIR_FILE = "tiermem.db"  # the log's file in a data dir (Config.db_filename's default)
MS_PER_S = 1000  # busy_timeout_ms is in milliseconds, deadlines in seconds

Conn = Any
Record = dict[str, Any]


class _Store(ColdLog, SqlAccess, Protocol):
    """What this module asks of an engine: the store interface and its raw access only
    (tests/test_migrate_store_interface.py checks that it touches no private member)."""


# Columns copied per table, in digest order. Vectors and the conversation row are separate.
MESSAGE_COLS = "position, role, body, session_id, metadata, created_at"
TURN_COLS = ("position, role, session_id, tokens, content_hash, created_at, intent, load_bearing, priority, "
             "label_reason, superseded_by")
TABLES: dict[str, tuple[str, str]] = {  # table -> (columns, order)
    "checkpoints": ("position, summary, metadata, created_at", "id"),
    "pins": ("position, priority, created_at", "position"),
    "plans": ("last_position, plan, created_at", "id"),
    "summaries": ("kind, key, version, start_position, end_position, body, tokens, summarizer, created_at",
                  "kind, key, version"),
    "summary_errors": ("kind, key, error, at", "id"),
    # statement-level supersession (tiers/statements.py): derived, but copied like the turn labels
    "statement_supersessions": ('position, start, "end", superseded_by', "position, start"),
    # appends made with an idempotency key: copied, so a retry stays safe across the move
    "idempotency_keys": ("idem_key, fingerprint, first_position, message_count, created_at", "idem_key"),
}
# the last, TOMBSTONE_NEWEST_COLUMN: the newest created_at among the erased messages, which
# the target's imports compare lines with (tiers.store `Erasure`); NULL on older tombstones
TOMBSTONE_COLS = ("key, namespace, name, reason, messages, summaries, checkpoints, created_at, deleted_at, "
                  f"{TOMBSTONE_NEWEST_COLUMN}")
TOMBSTONE_MARKS = ",".join("?" for _ in TOMBSTONE_COLS.split(","))  # one parameter per column
CONV_COLS = "id, name, namespace, parent_id, fork_position, created_at, last_message_at"
WARM_FOLD_SOURCE = "warm"  # a warm fold's checkpoint metadata: {"source": "warm", ...} (SharedQueries.put_summary)
MAX_NAMED_ROWS = 5  # unstorable rows a refusal names per column (the first few: the rest are alike)


def is_postgres(target: str | Path) -> bool:
    return str(target).startswith(POSTGRES_SCHEMES)


def sqlite_path(spec: str | Path) -> Path:
    """The database file a SQLite spec names: a directory (or a name without a suffix that
    does not exist yet) is a data dir, holding DATA_DIR_FILE; anything else is the file."""
    path = Path(spec)
    if path.is_dir() or (not path.suffix and not path.exists()):
        return path / DATA_DIR_FILE
    return path


def check_sqlite_file(path: Path, option: str, *, must_exist: bool, nothing: str = "there is nothing to copy") -> None:
    """Refuse (ValidationError naming `option`) a database file that is not one, before
    SQLite opens it or anything chmods it; with `must_exist` (a source) also one that is
    missing or empty: opening it would create an empty log to copy (`nothing`: what that
    means for the command)."""
    if not path.exists():
        if must_exist:
            raise ValidationError(option, f"{path} does not exist, so {nothing}; name an existing "
                                  "tiermem data dir or database file")
        return
    if not path.is_file():
        raise ValidationError(option, f"{path} is not a file; name a tiermem data dir or database file")
    try:
        with open(path, "rb") as f:
            header = f.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise ValidationError(option, f"{path} cannot be read: {exc.strerror or exc}") from None
    if not header:
        if must_exist:  # SQLite would take it for an empty database
            raise ValidationError(option, f"{path} is empty, so {nothing}; name a tiermem database")
        return  # an empty file is an empty SQLite database: a target like a new file
    if header != SQLITE_HEADER:
        raise ValidationError(option, f"{path} is not a SQLite database (its first bytes are not SQLite's header); "
                              "name a tiermem data dir or database file" + ("" if must_exist else
                                                                         ", or a path that does not exist yet"))


@dataclass(frozen=True)
class UnfinishedMark:
    """One run's mark (meta UNFINISHED_PREFIX + the source's db_uuid, or the one-per-store
    UNFINISHED of 2026-12-07): which source, when the run began, and whether the target
    was empty then (`refuses`: all it holds may be part of that history, so it is not
    opened; a merge's target holds its own data whole, so it opens with a warning)."""

    key: str
    source: str
    source_uuid: str | None
    started_at: float
    refuses: bool

    def error(self, where: str) -> MigrationUnfinished:
        return MigrationUnfinished(where, self.source, self.started_at)

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "started_at": self.started_at, "refuses_open": self.refuses}


def _parse_mark(key: str, value: str) -> UnfinishedMark:
    """The mark stored under `key`; one this module did not write refuses, naming its text."""
    try:
        mark = json.loads(value)
        # a 2026-12-07 mark has no target_was_empty: it refused every open, and still does
        return UnfinishedMark(key, str(mark["source"]), None if mark.get("source_uuid") is None
                              else str(mark["source_uuid"]), float(mark["started_at"]),
                              bool(mark.get("target_was_empty", True)))
    except (ValueError, KeyError, TypeError, AttributeError):  # not this module's JSON: still unfinished
        return UnfinishedMark(key, f"a source it does not name ({value[:MAX_MARK_SHOWN]!r})", None, 0.0, True)


# every mark: the 2026-12-07 key, and the per-source ones (substr: LIKE's _ is a wildcard)
MARKS_SQL = "SELECT key, value FROM meta WHERE key = ? OR substr(key, 1, ?) = ? ORDER BY key"
MARKS_PARAMS = (UNFINISHED, len(UNFINISHED_PREFIX), UNFINISHED_PREFIX)


def _marks(rows: Sequence[Sequence[Any]]) -> list[UnfinishedMark]:
    """The marks of MARKS_SQL's rows, the oldest run first."""
    return sorted((_parse_mark(str(k), str(v)) for k, v in rows), key=lambda m: (m.started_at, m.key))


def _mark_key(source_uuid: str) -> str:
    return UNFINISHED_PREFIX + source_uuid


def _runs_own(mark: UnfinishedMark, source_uuid: str) -> bool:
    """Whether a run from the source `source_uuid` clears `mark`: its own key, or the
    2026-12-07 key where that mark names this source; never another source's mark (a
    merge from A verified says nothing of B's cut copy)."""
    return mark.key == _mark_key(source_uuid) or (mark.key == UNFINISHED and mark.source_uuid == source_uuid)


def unfinished_marks(store: SqlAccess) -> list[UnfinishedMark]:
    """Every migrate-store run into `store` that has not verified its copy, the oldest first."""
    with store.reading() as c:
        rows = c.execute(store.dialect.sql(MARKS_SQL), MARKS_PARAMS).fetchall()
    return _marks(rows)


def check_finished(store: SqlAccess, spec: str | Path, schema: str = "tiermem") -> list[UnfinishedMark]:
    """Raise MigrationUnfinished where `store` (opened on `spec`, and `schema` for
    PostgreSQL) is the target of a migrate-store run into an empty target that has not
    verified its copy (the oldest such run named): Memory calls it as it opens its store,
    so that a service pointed at a half-copied store refuses to start instead of serving
    part of the history as all. Returns the unfinished merges' marks (into a store that
    held its own data: that is whole, the merged conversations may be partial), which
    the caller warns of."""
    marks = unfinished_marks(store)
    for mark in marks:
        if mark.refuses:
            raise mark.error(store_label(spec, schema))
    return marks


def store_label(spec: str | Path, schema: str) -> str:
    """How reports and errors name a side (a URL without its password)."""
    if is_postgres(spec):
        from tiermem.tiers.postgres import redact

        return f"{redact(str(spec))} schema {schema}"
    return str(sqlite_path(spec))


@dataclass
class MigrationReport:
    source: str
    target: str
    resumed: bool = False  # the target already held part of this source's copy
    conversations: int = 0  # in the source (= verified in the target)
    copied: int = 0  # written by this run
    already_present: int = 0  # verified identical and left alone
    offset_moves: int = 0  # times the id offset moved past target rows written during the copy
    erased_in_target: int = 0  # source conversations the target erased after they were copied: left out
    erased_from_source: int = 0  # conversations the source erased after they were copied: erased in the target now
    owed_decisions: int = 0  # turns the source owed a supersession decision, owed in the target now (tiers.owed)
    # corrections the source owed a supersession re-check, owed in the target now (RECHECK_TABLE)
    owed_rechecks: int = 0
    messages: int = 0
    vectors: int = 0
    keys: int = 0
    tombstones: int = 0
    digest: str = ""  # sha256 over every conversation's digest, the keys and the tombstones
    seconds: float = 0.0
    copied_ids: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("copied_ids")
        return out


def _digest(obj: Any) -> str:
    def enc(o: Any) -> Any:
        if isinstance(o, bytes | bytearray | memoryview):
            return {"bytes": bytes(o).hex()}
        raise TypeError(type(o).__name__)

    return hashlib.sha256(json.dumps(obj, default=enc, ensure_ascii=False, separators=(",", ":")).encode()).hexdigest()


def is_warm_fold(metadata: Any) -> bool:
    """Whether a checkpoint's metadata marks it as a warm fold (derived text), as the
    engines tell them apart; unreadable metadata is a caller's checkpoint."""
    if not isinstance(metadata, str):
        return False
    try:
        meta = json.loads(metadata)
    except ValueError:
        return False
    return isinstance(meta, dict) and meta.get("source") == WARM_FOLD_SOURCE


def _derived(table: str, row: list[Any]) -> list[Any]:
    """A row of `table` (its TABLES columns) with its derived text as the target stores it
    (`without_nul`): a warm fold's summary, a refresh error. Applied to both sides' reads,
    so the digests compare what the target holds; other columns are left byte for byte."""
    if table == "checkpoints" and isinstance(row[1], str) and is_warm_fold(row[2]):
        return [row[0], without_nul(row[1]), *row[2:]]
    if table == "summary_errors" and isinstance(row[2], str):
        return [row[0], row[1], without_nul(row[2]), *row[3:]]
    return row


def _num(v: Any) -> Any:
    # SMALLINT/INTEGER/BIGINT and REAL/DOUBLE come back as int and float on both engines;
    # a stored integer-valued REAL read as int elsewhere must not change the digest
    return float(v) if isinstance(v, float) else v


class _Side:
    """One engine, reached through the store's own connection (this module is part of
    the storage layer, the only place SQL lives)."""

    def __init__(self, spec: str | Path, *, schema: str, tokens: TokenCounter, source: bool = False,
                 busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS, operation_timeout_s: float | None = None,
                 erase_scrub: str | None = None, pool_mode: str = "session", existing: bool = False) -> None:
        """`source`: the side is read and must exist (a file or schema holding a log): it
        is refused, naming --from, before anything is created; `existing`: a target that
        must exist alike (`accept_unfinished`), refused naming --to. `busy_timeout_ms`,
        `operation_timeout_s`, `erase_scrub` and `pool_mode` (PostgreSQL; None: the store's
        default) as the stores take them."""
        self.pool_mode = pool_mode
        self.postgres = is_postgres(spec)
        self.role = "source" if source else "target"
        self.fault: Callable[[str], None] | None = None  # migrate_store's `fault`: "close:<role>" (tests)
        self.created = False  # this run made the file or schema (removed again on refusal)
        self.spec = str(spec)
        self.schema = schema
        self.label = store_label(spec, schema)
        if self.postgres:
            from tiermem.tiers.postgres import (
                ERASE_SCRUB,
                OPERATION_TIMEOUT_S,
                PostgresStore,
                operation_limit,
            )

            # a look at the schema outside the store (before it is opened, after it is
            # closed) is one operation: its deadline, the lock wait added, as the store's
            # (and named so in a StoreStalled)
            look_op_s = OPERATION_TIMEOUT_S if operation_timeout_s is None else operation_timeout_s
            self._look_s = look_op_s + busy_timeout_ms / MS_PER_S
            self._look_limit = operation_limit(look_op_s, busy_timeout_ms)
            if source and not self._pg_has_log():
                raise ValidationError("--from", f"{self.label} holds no tiermem log, so there is nothing to copy; "
                                      "check --from and --from-schema")
            if existing and not self._pg_has_log():
                raise ValidationError("--to", f"{self.label} holds no tiermem log, so {NO_STORE_TO_ACCEPT}; "
                                      "check --to and --schema")
            self.created = not self._pg_schema_exists()
            self.store: _Store = PostgresStore(self.spec, tokens=tokens, schema=schema, lock_timeout_ms=busy_timeout_ms,
                                               operation_timeout_s=OPERATION_TIMEOUT_S if operation_timeout_s is None
                                               else operation_timeout_s,
                                               erase_scrub=ERASE_SCRUB[0] if erase_scrub is None else erase_scrub,
                                               pool_mode=pool_mode)
        else:
            path = sqlite_path(spec)  # a data dir (made if missing, for a target), else the file itself
            check_sqlite_file(path, "--from" if source else "--to", must_exist=source or existing,
                              nothing=NO_STORE_TO_ACCEPT if existing else "there is nothing to copy")
            self.created = not path.exists()
            self.store = ColdStore(path, tokens=tokens, busy_timeout_ms=busy_timeout_ms)
            self.path = path

    def _pg_look(self) -> contextlib.AbstractContextManager[Any]:
        """A connection of this run's own outside the store: the store's connect timeout,
        cut past `_look_s` (StoreStalled), as the store's connections are."""
        from tiermem.tiers.postgres import owned_connection

        return owned_connection(self.spec, where=self.label, timeout_s=self._look_s, limit=self._look_limit,
                                pool_mode=self.pool_mode)

    def _pg_schema_exists(self) -> bool:
        with self._pg_look() as c:
            return c.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (self.schema,)).fetchone() is not None

    def _pg_has_log(self) -> bool:
        """The schema exists and holds a log (its meta table): opening one that does not
        would create it."""
        with self._pg_look() as c:
            return c.execute("SELECT 1 FROM pg_tables WHERE schemaname = %s AND tablename = 'meta'",
                             (self.schema,)).fetchone() is not None

    def close(self) -> None:
        try:
            if self.fault is not None:
                self.fault(f"close:{self.role}")  # tests: a close that fails (the store is closed all the same)
        finally:
            self.store.close()

    def remove(self) -> None:
        """Remove what this run created (a refused run writes nothing), once the store is
        closed."""
        if not self.created:
            return
        if self.postgres:
            from psycopg import sql as pgsql

            with self._pg_look() as c:
                c.execute(pgsql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(pgsql.Identifier(self.schema)))
        else:
            for suffix in ("", "-wal", "-shm", "-journal"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(str(self.path) + suffix)

    # -- connections ------------------------------------------------------------------

    @contextlib.contextmanager
    def read(self) -> Iterator[Conn]:
        with self.store.reading() as c:
            yield c

    @contextlib.contextmanager
    def tx(self) -> Iterator[Conn]:
        with self.store.transaction() as c:
            yield c

    def maintenance(self) -> contextlib.AbstractContextManager[None]:
        """Around a statement over the whole store only (see the module's invariants)."""
        return self.store.maintenance()

    def q(self, c: Conn, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """`sql` written with `?` placeholders, in the engine's dialect."""
        return list(c.execute(self.store.dialect.sql(sql), params).fetchall())

    def many(self, c: Conn, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            c.cursor().executemany(self.store.dialect.sql(sql), rows)

    # -- whole-store reads ---------------------------------------------------------------

    def meta(self, c: Conn, key: str) -> str | None:
        rows = self.q(c, "SELECT value FROM meta WHERE key = ?", (key,))
        return str(rows[0][0]) if rows else None

    def set_meta(self, c: Conn, key: str, value: str) -> None:
        self.q(c, "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value "
                  "RETURNING key", (key, value))

    def conversations(self, c: Conn) -> list[tuple[str, str, str]]:
        return [(str(r[0]), str(r[1]), str(r[2])) for r in self.q(c, "SELECT id, namespace, name FROM conversations "
                                                                     "ORDER BY id")]

    def created_at(self, c: Conn, key: str) -> Any:
        """When conversation `key` was created (None: no such conversation)."""
        rows = self.q(c, "SELECT created_at FROM conversations WHERE id = ?", (key,))
        return _num(rows[0][0]) if rows else None

    def lock_conversation(self, c: Conn, key: str) -> None:
        """Inside a write transaction: hold conversation `key` against the target's writers
        until it ends. On PostgreSQL its row FOR UPDATE (every write to a conversation,
        a pin, an append, an erasure, first locks it FOR SHARE or FOR UPDATE: `_require_in`)
        and its pin_versions row (what a pin's trigger moves); SQLite's write transaction
        holds the whole file already."""
        if self.postgres:
            self.q(c, "SELECT 1 FROM conversations WHERE id = ? FOR UPDATE", (key,))
            self.q(c, "SELECT 1 FROM pin_versions WHERE conversation_id = ? FOR UPDATE", (key,))

    def keys(self, c: Conn) -> list[tuple[str, float]]:
        return [(str(r[0]), float(r[1])) for r in self.q(c, "SELECT key, issued_at FROM conversation_keys ORDER BY key")]

    def tombstones(self, c: Conn) -> list[list[Any]]:
        return [[_num(v) for v in r] for r in self.q(c, f"SELECT {TOMBSTONE_COLS} FROM tombstones ORDER BY id")]

    def purges(self, c: Conn) -> list[tuple[str, float]]:
        return [(str(r[0]), float(r[1])) for r in self.q(c, "SELECT key, at FROM redis_purge ORDER BY key")]

    def highest_id(self, c: Conn) -> int:
        """The highest message id this store has handed out (0: none), and on PostgreSQL
        the highest its sequence has (an erased row's id is not handed out again there)."""
        top = int(self.q(c, "SELECT COALESCE(MAX(id), 0) FROM messages")[0][0])
        if self.postgres:
            seq = self.q(c, "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM messages_id_seq")
            top = max(top, int(seq[0][0]))
        return top

    def reserve_ids(self, c: Conn, up_to: int) -> None:
        """Move this store's numbering past `up_to`, so that an append after the copy
        draws an id above every copied row's (on SQLite the next id is MAX(id) + 1 already).
        Idempotent, and never moves PostgreSQL's sequence back."""
        if self.postgres and up_to > 0:
            # only ever forward: a setval to the value read back would undo a concurrent
            # writer's nextval landing between the read and the setval (its id handed out again)
            self.q(c, "SELECT setval('messages_id_seq', ?) FROM messages_id_seq WHERE "
                      "? > CASE WHEN is_called THEN last_value ELSE 0 END", (up_to, up_to))

    def integrity_errors(self) -> tuple[type[Exception], ...]:
        """The engine's errors for a write that a row already there refuses (a unique key,
        an append-only trigger): within the copy, a target writer's row in the way."""
        if self.postgres:
            import psycopg

            return (psycopg.IntegrityError,)
        return (DriverIntegrityError,)

    def taken_id(self, c: Conn, ids: list[int]) -> int | None:
        """The highest of `ids` a message of this store holds already (None: all are free)."""
        if not ids:
            return None
        if self.postgres:
            rows = self.q(c, "SELECT MAX(id) FROM messages WHERE id = ANY(?)", (ids,))
        else:  # one statement for any count: json_each, not a placeholder per id (SQLite caps those)
            rows = self.q(c, "SELECT MAX(id) FROM messages WHERE id IN (SELECT value FROM json_each(?))",
                          (json.dumps(ids),))
        return None if rows[0][0] is None else int(rows[0][0])

    def owed_positions(self, c: Conn, rec: Record) -> list[int]:
        """The positions of conversation `rec`'s (a `record` of this side) turns whose
        supersession decision this store owes (tiers.owed: the `on_embedded` hook failed
        after their vectors' commit; meta OWED_PREFIX + the turn's id), those with a vector."""
        pos_of = {i: int(m[0]) for m, i in zip(rec["messages"], rec["ids"], strict=True)}
        keys = [OWED_PREFIX + str(i) for i in pos_of]
        if not keys:
            return []
        if self.postgres:
            rows = self.q(c, "SELECT key FROM meta WHERE key = ANY(?)", (keys,))
        else:  # one statement for any count (SQLite caps placeholders), as taken_id
            rows = self.q(c, "SELECT key FROM meta WHERE key IN (SELECT value FROM json_each(?))", (json.dumps(keys),))
        vectors = {int(p) for p, _b in rec["vectors"]}
        owed = (pos_of[int(str(r[0])[len(OWED_PREFIX):])] for r in rows)
        return sorted(p for p in owed if p in vectors)

    def recheck_positions(self, c: Conn, key: str) -> list[int]:
        """The positions of conversation `key`'s corrections this store owes a supersession
        re-check (RECHECK_TABLE: decided while a turn before them had no vector; searched
        by meaning again once every turn before them has one), in log order."""
        return [int(r[0]) for r in self.q(c, f"SELECT position FROM {RECHECK_TABLE} WHERE conversation_id = ? "
                                             "ORDER BY position", (key,))]

    def vec_dim(self, c: Conn) -> int | None:
        v = self.meta(c, "vec_dim")
        return int(v) if v is not None else None

    def vec_model(self, c: Conn) -> str | None:
        """The identity of the model the stored vectors come from (None: unrecorded)."""
        return self.meta(c, VEC_MODEL_KEY)

    def has_vectors(self, c: Conn) -> bool:
        if self.postgres:
            return bool(self.q(c, "SELECT 1 FROM messages_vec LIMIT 1"))
        if not self.q(c, "SELECT 1 FROM sqlite_master WHERE name = ?", (VEC_TABLE,)):
            return False
        return bool(self.q(c, "SELECT 1 FROM turns WHERE embedded = 1 LIMIT 1"))

    def unstorable_in_postgres(self, c: Conn) -> list[str]:
        """Rows PostgreSQL text cannot hold: bytes that are not text, or a NUL in the
        user's data. A NUL in derived text (a warm fold, a refresh error) is not one: it is
        copied as a space (`_derived`)."""
        assert not self.postgres
        bad = []
        # (table, column, what names the row, the metadata column telling a warm fold, or
        # None; whether any NUL there is derived text)
        checks: tuple[tuple[str, str, str, str | None, bool], ...] = (
            ("messages", "body", "position", None, False), ("messages", "metadata", "position", None, False),
            ("messages", "session_id", "position", None, False), ("checkpoints", "summary", "position", "metadata", False),
            ("summaries", "body", "version", None, False), ("plans", "plan", "last_position", None, False),
            ("summary_errors", "error", "id", None, True))
        for table, col, where, meta, derived in checks:
            # the rows that may be refused, read whole: a warm fold with a NUL is told apart
            # here (is_warm_fold), by the rule the copy applies, not by SQLite's JSON
            rows = c.execute(f"SELECT conversation_id, {where}, typeof({col}) = 'text', {meta or 'NULL'} "
                             f"FROM {table} WHERE {col} IS NOT NULL AND (typeof({col}) <> 'text' OR "
                             f"instr({col}, char(0)) > 0)")
            named = 0
            for conv, pos, is_text, metadata in rows:
                if is_text and (derived or (meta is not None and is_warm_fold(metadata))):
                    continue
                bad.append(f"{table}.{col} of conversation {conv!r} at {where} {pos}")
                named += 1
                if named == MAX_NAMED_ROWS:
                    break
        return bad

    # -- one conversation -------------------------------------------------------------

    def record(self, c: Conn, key: str) -> Record | None:
        conv = self.q(c, f"SELECT {CONV_COLS} FROM conversations WHERE id = ?", (key,))
        if not conv:
            return None
        rec: Record = {"conversation": [_num(v) for v in conv[0]]}
        msgs = self.q(c, f"SELECT {MESSAGE_COLS}, id FROM messages WHERE conversation_id = ? ORDER BY position", (key,))
        rec["messages"] = [[_num(v) for v in r[:-1]] for r in msgs]
        # not digested: the target's are these plus the copy's offset (the module docstring)
        rec["ids"] = [int(r[-1]) for r in msgs]
        turns = self.q(c, f"SELECT {TURN_COLS}, id FROM turns WHERE conversation_id = ? ORDER BY position", (key,))
        vectors = self._vectors(c, key, [(int(t[0]), int(t[-1])) for t in turns])
        rec["turns"] = [[_num(v) for v in t[:-1]] for t in turns]
        rec["vectors"] = [[pos, vectors[pos]] for pos in sorted(vectors)]
        for table, (cols, order) in TABLES.items():
            rec[table] = [_derived(table, [_num(v) for v in r]) for r in self.q(
                c, f"SELECT {cols} FROM {table} WHERE conversation_id = ? ORDER BY {order}", (key,))]
        pv = self.q(c, "SELECT version FROM pin_versions WHERE conversation_id = ?", (key,))
        rec["pin_version"] = int(pv[0][0]) if pv else 0  # not digested: the target's triggers move it too
        return rec

    def _vectors(self, c: Conn, key: str, turns: list[tuple[int, int]]) -> dict[int, bytes]:
        if self.postgres:
            from tiermem.tiers.postgres import vector_bytes

            out: dict[int, bytes] = {}
            for pos, sent in self.q(c, "SELECT position, vector_send(embedding) FROM messages_vec "
                                       "WHERE conversation_id = ?", (key,)):
                b = vector_bytes(sent)
                if b is not None:
                    out[int(pos)] = b
            return out
        if not self.q(c, "SELECT 1 FROM sqlite_master WHERE name = ?", (VEC_TABLE,)):
            return {}
        out = {}
        for pos, mid in turns:
            row = c.execute(f"SELECT embedding FROM {VEC_TABLE} WHERE rowid = ?", (mid,)).fetchone()
            if row is not None:
                out[pos] = bytes(row[0])
        return out

    def write(self, c: Conn, rec: Record, id_offset: int, *, have: Record | None = None,
              owed: Sequence[int] = (), rechecks: Sequence[int] = ()) -> None:
        """Insert the conversation `rec` (a source's `record`), each message under its
        source id plus `id_offset` (the numbering was moved past them: `reserve_ids`).
        `have`: the target's copy of it, a prefix of `rec` (`copied_prefix`): only the
        messages past it are inserted (those it holds keep their ids), the conversation row
        follows the source's, and every derived row is replaced by `rec`'s, written as for
        a fresh copy (an append relabels earlier turns, pins, summarizes). `owed`: the
        positions whose supersession decision the source owes (`owed_positions`), recorded
        owed here under the id each turn has here (OWED_PREFIX + it, as tiers.owed records
        them), since the copied vector marks the turn embedded and no catch-up here runs the
        hook for it again. `rechecks`: the positions of the corrections the source owes a
        re-check (`recheck_positions`), owed here too (by position: the same on both sides),
        re-checked by the catch-up here that embeds the last turn before each."""
        key, name, ns, parent, fork_pos, created, last_at = rec["conversation"]
        msgs, turns = rec["messages"], rec["turns"]
        vectors = dict((int(p), b) for p, b in rec["vectors"])
        last_pos = max((int(m[0]) for m in msgs), default=-1)
        kept = 0 if have is None else len(have["ids"])
        if have is not None:
            self._clear_derived(c, key, have["ids"])
            # views_seq, on both engines as an append moves it: it puts the conversation
            # back in the target's warm-view sweep (tiers.store VIEWS_BEHIND_SQL), which
            # otherwise, having marked the shorter copy's views current, never looks at
            # them again before the next append, however far behind the copied messages
            self.q(c, "UPDATE conversations SET last_message_at = ?, views_seq = views_seq + 1" +
                   (", next_position = ?" if self.postgres else "") +
                   " WHERE id = ? RETURNING id", (last_at, last_pos + 1, key) if self.postgres else (last_at, key))
        elif self.postgres:
            self.q(c, "INSERT INTO conversations(id, name, namespace, parent_id, fork_position, created_at, "
                      "last_message_at, next_position) VALUES (?,?,?,?,?,?,?,?) RETURNING id",
                   (key, name, ns, parent, fork_pos, created, last_at, last_pos + 1))
        else:
            self.q(c, "INSERT INTO conversations(id, name, namespace, parent_id, fork_position, created_at, "
                      "last_message_at) VALUES (?,?,?,?,?,?,?) RETURNING id",
                   (key, name, ns, parent, fork_pos, created, last_at))
        ids = ([] if have is None else have["ids"]) + [id_offset + i for i in rec["ids"][kept:]]
        id_at = {int(m[0]): i for m, i in zip(msgs, ids, strict=True)}
        self.many(c, "INSERT INTO messages(conversation_id, position, id, role, body, session_id, metadata, "
                     "created_at) VALUES (?,?,?,?,?,?,?,?)",
                  [(key, m[0], id_at[int(m[0])], *m[1:]) for m in msgs[kept:]])
        bodies = {int(m[0]): m[2] for m in msgs}
        turn_rows: list[tuple[Any, ...]] = []
        fts_rows: list[tuple[Any, ...]] = []
        for t in turns:
            pos = int(t[0])
            mid = id_at.get(pos)
            if mid is None:
                continue  # a turn row without its message is drift; rebuild would drop it too
            try:
                body = loads_stored(bodies[pos])
                if not isinstance(body, dict):
                    raise ValueError("not an object")
            except (ValueError, TypeError):
                body = {}  # undecodable (salvaged on every read): no index text
            extra: tuple[Any, ...] = ()
            if self.postgres:
                from tiermem.tiers.postgres import fts_text, speaker_name

                extra = (speaker_name(body),)
                fts_rows.append((mid, key, ns, fts_text(body) if body else ""))
            else:
                fts_rows.append((mid, search_text(body) if body else "", key))
            turn_rows.append((key, pos, mid, *t[1:], 1 if pos in vectors else 0, *extra))
        turn_cols = f"conversation_id, position, id, {TURN_COLS.split(', ', 1)[1]}, embedded"
        if self.postgres:
            turn_cols += ", speaker"
        self.many(c, f"INSERT INTO turns({turn_cols}) VALUES ({','.join('?' * len(turn_cols.split(',')))})", turn_rows)
        if self.postgres:
            from tiermem.tiers.postgres import Vec

            self.many(c, "INSERT INTO messages_fts(id, conversation_id, namespace, text) VALUES (?,?,?,?)", fts_rows)
            self.many(c, "INSERT INTO messages_vec(id, conversation_id, namespace, position, embedding) "
                         "VALUES (?,?,?,?,?)",  # Vec: pgvector's binary form, as the engine sends it
                      [(id_at[p], key, ns, p, Vec(np.frombuffer(b, dtype=np.float32)))
                       for p, b in vectors.items() if p in id_at])
        else:
            self.many(c, "INSERT INTO messages_fts(rowid, text, scope) SELECT ?, ?, " + SCOPE_SQL +
                      " FROM conversations c WHERE c.id = ?", fts_rows)
            self.many(c, f"INSERT INTO {VEC_TABLE}(rowid, conversation_id, embedding) VALUES (?, ?, ?)",
                      [(id_at[p], key, b) for p, b in vectors.items() if p in id_at])
        for table, (cols, _order) in TABLES.items():
            n = len(cols.split(","))
            self.many(c, f"INSERT INTO {table}(conversation_id, {cols}) VALUES (?, {','.join('?' * n)})",
                      [(key, *r) for r in rec[table]])
        # the target's next catch-up decides them (tiers.owed); one its own hook already
        # owes stays as it is (deciding a turn twice changes nothing)
        carried = [(OWED_PREFIX + str(id_at[p]),) for p in owed if p in id_at]
        self.many(c, "INSERT INTO meta(key, value) VALUES (?, '1') ON CONFLICT (key) DO NOTHING", carried)
        if carried:  # a process holding the target open reads the records again (tiers.owed)
            self.many(c, "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                      [(OWED_MARK_KEY, new_mark())])
        # the target's catch-up that embeds the last turn before each re-checks it
        # (its hook, ColdLog.on_hooked); the copied turns without a vector stay pending
        self.many(c, f"INSERT INTO {RECHECK_TABLE}(conversation_id, position) VALUES (?, ?) "
                     "ON CONFLICT (conversation_id, position) DO NOTHING",
                  [(key, int(p)) for p in rechecks if int(p) in id_at])
        bump = f"{self.store.dialect.greatest}(pin_versions.version, excluded.version)"
        self.q(c, "INSERT INTO pin_versions(conversation_id, version) VALUES (?, ?) ON CONFLICT (conversation_id) "
                  f"DO UPDATE SET version = {bump} RETURNING version", (key, rec["pin_version"]))

    def _clear_derived(self, c: Conn, key: str, ids: list[int]) -> None:
        """Delete the derived rows of conversation `key` (whose messages have `ids`): its
        turns, keyword index, vectors and TABLES rows, for `write` to put the source's."""
        self.q(c, "DELETE FROM turns WHERE conversation_id = ? RETURNING id", (key,))
        if self.postgres:
            self.q(c, "DELETE FROM messages_fts WHERE conversation_id = ? RETURNING id", (key,))
            self.q(c, "DELETE FROM messages_vec WHERE conversation_id = ? RETURNING id", (key,))
        else:  # FTS5 and vec0 rows are addressed by rowid (the message id), as cold.py deletes them
            self.many(c, "DELETE FROM messages_fts WHERE rowid = ?", [(i,) for i in ids])
            if self.q(c, "SELECT 1 FROM sqlite_master WHERE name = ?", (VEC_TABLE,)):
                self.many(c, f"DELETE FROM {VEC_TABLE} WHERE rowid = ?", [(i,) for i in ids])
        for table in TABLES:
            self.q(c, f"DELETE FROM {table} WHERE conversation_id = ? RETURNING conversation_id", (key,))
        # the re-checks the target owed for its turn labels, replaced with them by the source's
        self.q(c, f"DELETE FROM {RECHECK_TABLE} WHERE conversation_id = ? RETURNING conversation_id", (key,))

    def ensure_vec_dim(self, dim: int, model: str | None) -> None:
        self.store.ensure_vector_width(dim, model)


NOT_DIGESTED = ("pin_version", "ids")  # a record's parts each engine numbers itself


def record_digest(rec: Record) -> str:
    return _digest({k: v for k, v in rec.items() if k not in NOT_DIGESTED})


# What a rerun asks of the target's copy before it brings it up to the source's or erases
# it (COPIED_DIGEST's value: a digest per part, JSON): the parts only a writer changes,
# with what names each in a refusal. Not among them, what the target computes on its own
# and rebuilds from the messages (vectors and the turn index with its labels and
# supersessions, a catch-up's or a context()'s; statement supersessions; warm views,
# folds and refresh errors, its sweep's): a read there must not pass for a writer's change.
WRITTEN_PARTS: dict[str, str] = {
    "conversation": "its conversation row", "messages": "its messages", "pins": "its pins",
    "checkpoints": "its checkpoints (a caller's own)", "idempotency_keys": "its idempotency keys",
    "plans": "its stored plans",
}
# written by a read on the target too (context() with store_plans), and not rebuildable:
# a rewrite from the source's would lose them; an erasure the user asked for takes them
# anyway, and a copy left as it is keeps them
READ_RECORDS = ("plans",)
WHOLE = "whole"  # COPIED_DIGEST's part: the copy's `record_digest` (= the source's then)


def _written(rec: Record) -> dict[str, str]:
    """The digest of each of WRITTEN_PARTS of `rec` (a caller's checkpoints only: a warm
    fold is its sweep's)."""
    parts = {part: rec[part] for part in WRITTEN_PARTS}
    parts["checkpoints"] = [r for r in rec["checkpoints"] if not is_warm_fold(r[2])]
    return {part: _digest(value) for part, value in parts.items()}


def copy_digest(rec: Record) -> str:
    """What a copy records of conversation `rec` (COPIED_DIGEST + its key) as it wrote it:
    its whole digest (WHOLE) and that of each part a writer changes (WRITTEN_PARTS)."""
    return json.dumps({WHOLE: record_digest(rec), **_written(rec)}, sort_keys=True, separators=(",", ":"))


def _recorded_parts(recorded: str) -> dict[str, Any] | None:
    """COPIED_DIGEST's value `recorded` as `copy_digest` writes it; None: a digest of the
    whole copy (`record_digest`), as a tiermem of 2026-12-06 before `copy_digest` wrote it."""
    try:
        parts = json.loads(recorded)
    except ValueError:
        return None
    return parts if isinstance(parts, dict) else None


def copy_changes(recorded: str, have: Record, *, count_reads: bool = True) -> list[str]:
    """What a target writer changed in the target's copy `have` since the copy recorded
    `recorded` (COPIED_DIGEST's value), named as WRITTEN_PARTS names it ([]: nothing).
    `count_reads=False` (the copy is erased, or left as it is): a read's own records
    (READ_RECORDS) are not counted, as nothing of them is lost. A digest of the whole copy
    (a tiermem of 2026-12-06 before the parts were recorded) tells no part from another:
    any difference counts, a catch-up's vectors too."""
    parts = _recorded_parts(recorded)
    if parts is None:
        return [] if record_digest(have) == recorded else ["its copy, recorded whole by an older tiermem"]
    now = _written(have)
    return [WRITTEN_PARTS[part] for part in WRITTEN_PARTS
            if parts.get(part) != now[part] and (count_reads or part not in READ_RECORDS)]


def _as_copied(src: Record, dst: Record, recorded: str | None) -> bool:
    """Whether the target's copy `dst` of the source's conversation `src` is as the run
    copied it but for what the target computed on its own since (its vectors, labels,
    warm views; a read's plans): the source unchanged since the copy (its whole digest
    the one recorded) and no part a writer changes changed in the target. Such a copy is
    left as it is: rewriting it would only drop what the target computed."""
    parts = None if recorded is None else _recorded_parts(recorded)
    return (recorded is not None and parts is not None and parts.get(WHOLE) == record_digest(src)
            and not copy_changes(recorded, dst, count_reads=False))


def _store_digest(conv_digests: dict[str, str], keys: list[tuple[str, float]], stones: list[list[Any]]) -> str:
    return _digest([sorted(conv_digests.items()), keys, stones])


def migrate_store(source: str | Path, target: str | Path, *, tokens: TokenCounter, source_schema: str = "tiermem",
                  target_schema: str = "tiermem", into_non_empty: bool = False,
                  progress: Callable[[int, int], None] | None = None,
                  fault: Callable[[str], None] | None = None, busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
                  operation_timeout_s: float | None = None, erase_scrub: str | None = None,
                  on_erased: Callable[[ColdLog, Sequence[str]], None] | None = None,
                  pool_mode: str = "session") -> MigrationReport:
    """Copy the log at `source` into `target` (a postgresql:// URL or a SQLite file or
    data dir each), verify it, and report. See the module docstring for the guarantees.
    `fault(step)` is for tests: it is called after each conversation is written, inside
    its transaction (`step` its key), in the transaction bringing a copied conversation up
    to the source's after its re-check and before its rows are rewritten (CHECKED_STEP +
    its key), and as each side is closed ("close:source",
    "close:target": raising there is a close that fails). `busy_timeout_ms` and `operation_timeout_s` open both sides' stores
    (the config's, as every command opens its store; None: PostgresStore's default), and
    `erase_scrub` the PostgreSQL side's (a target's scrubs an erasure the source's took
    there: `_erase_in_target`). `on_erased(target_store, keys)` runs after each such erasure's
    commit, as a Memory's erasure runs its own (the CLI deletes the keys' Redis keys
    there; its failure, logged, leaves them owed in the target's `redis_purge`).
    `pool_mode` (Config.cold_pool_mode) is how the PostgreSQL side's connections reach
    the server, checked with the erase_scrub its store gets before either side opens."""
    if str(source) == str(target) and source_schema == target_schema:
        raise MigrationRefused(str(target), "the target is the source")
    t0 = time.perf_counter()
    # what can be refused without a connection, before either side is opened (opening
    # creates a missing file, schema or data dir)
    if not is_postgres(source):
        check_sqlite_file(sqlite_path(source), "--from", must_exist=True)
    if not is_postgres(target):
        check_sqlite_file(sqlite_path(target), "--to", must_exist=False)
    if is_postgres(source) == is_postgres(target):
        raise MigrationRefused(store_label(target, target_schema),
                               "source and target are the same engine; copy the file or use pg_dump")
    from tiermem.tiers.postgres import ERASE_SCRUB, check_pool_mode

    # what the one PostgreSQL side's store would refuse (naming cold_pool_mode), refused
    # before the SQLite side is opened (which creates a missing target file)
    check_pool_mode(pool_mode, ERASE_SCRUB[0] if erase_scrub is None else erase_scrub)
    src = _Side(source, schema=source_schema, tokens=tokens, source=True, busy_timeout_ms=busy_timeout_ms,
                operation_timeout_s=operation_timeout_s, erase_scrub=erase_scrub, pool_mode=pool_mode)
    src.fault = fault
    try:
        dst = _Side(target, schema=target_schema, tokens=tokens, busy_timeout_ms=busy_timeout_ms,
                    operation_timeout_s=operation_timeout_s, erase_scrub=erase_scrub, pool_mode=pool_mode)
    except BaseException as failed:
        _close_after(src, failed)
        raise
    dst.fault = fault
    report = MigrationReport(source=src.label, target=dst.label)
    try:
        plan = _preflight(src, dst, into_non_empty, report)
    except BaseException as refused:
        _close_after(src, refused)
        _discard_after(dst, refused)
        raise
    try:
        own = _mark_key(plan.source_uuid)
        if plan.writes:  # before the first copy: a run that stops short leaves the target marked
            mark = json.dumps({"source": src.label, "source_uuid": plan.source_uuid, "started_at": time.time(),
                               "target_was_empty": plan.target_was_empty})
            with dst.tx() as c:
                # a resume keeps its first run's mark: when that began, and whether the
                # target was empty then (now it holds that run's part of the copy)
                if dst.meta(c, own) is None:
                    dst.set_meta(c, own, mark)
        _copy(src, dst, plan, report, progress, fault, on_erased)
        _verify(src, dst, report)
        with dst.read() as c:
            done = dst.meta(c, DONE)
            mine = [m.key for m in _marks(dst.q(c, MARKS_SQL, MARKS_PARAMS)) if _runs_own(m, plan.source_uuid)]
        if report.copied or report.erased_from_source or done is None or mine:
            with dst.tx() as c:  # verified whole: this source's mark goes with DONE's write, in one commit;
                # another source's stays (its run never verified its copy)
                dst.set_meta(c, DONE, repr(time.time()))
                for key in mine:
                    dst.q(c, "DELETE FROM meta WHERE key = ? RETURNING key", (key,))
    except BaseException as failed:
        _close_after(src, failed)
        _close_after(dst, failed)
        raise
    try:  # copied and verified: a failure to close is the run's error, both closed first
        src.close()
    finally:
        dst.close()
    report.seconds = round(time.perf_counter() - t0, 3)
    return report


def accept_unfinished(target: str | Path, *, tokens: TokenCounter, target_schema: str = "tiermem",
                      busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS, operation_timeout_s: float | None = None,
                      pool_mode: str = "session") -> tuple[str, list[UnfinishedMark]]:
    """Remove every unfinished-copy mark of `target` (which must exist: nothing is
    created), whatever its source, so that it opens with what the stopped runs copied
    there: the operator's explicit choice where the sources are gone (`tiermem
    migrate-store --to ... --accept-unfinished`); a rerun from each source, which
    finishes its copy and clears its own mark, is the way otherwise. Returns the target's
    label and the marks removed (the oldest run first; none where it held none). Logged
    as a warning each: from here on the store is served as whole."""
    dst = _Side(target, schema=target_schema, tokens=tokens, busy_timeout_ms=busy_timeout_ms,
                operation_timeout_s=operation_timeout_s, pool_mode=pool_mode, existing=True)
    try:
        with dst.tx() as c:
            was = _marks(dst.q(c, MARKS_SQL, MARKS_PARAMS))
            for mark in was:
                dst.q(c, "DELETE FROM meta WHERE key = ? RETURNING key", (mark.key,))
    finally:
        dst.close()
    for mark in was:
        log.warning("migrate-store: %s accepted as it is (--accept-unfinished): it opens from now on, and may lack "
                    "part of the history of %s", dst.label, mark.source)
    return dst.label, was


def _close_after(side: _Side, failed: BaseException) -> None:
    """Close `side` after `failed` (the run's error), which stays the error raised: a
    failure to close is logged and noted on `failed`. Raised instead, it hid what went
    wrong, and skipped the rest of the cleanup (the other side's close, the removal of
    what the run created)."""
    try:
        side.close()
    except Exception as exc:
        log.warning("migrate-store: the run failed (%s), and closing the %s (%s) failed too: %s",
                    str(failed).strip() or type(failed).__name__, side.role, side.label, str(exc).strip(),
                    exc_info=True)
        failed.add_note(f"closing the {side.role} ({side.label}) failed too ({type(exc).__name__}: "
                        f"{str(exc).strip()})")


def _discard_after(dst: _Side, refused: BaseException) -> None:
    """Close the target and remove what this run created there after `refused` (a
    MigrationRefused, or any error of the preflight), which stays the error raised: a
    failed close is noted (`_close_after`) and the removal still tried; the removal's own
    failure (the target's server gone, a DROP refused) is logged, naming what is left, and
    noted on `refused`. Raised instead, it hid why the run was refused."""
    _close_after(dst, refused)
    try:
        dst.remove()
    except Exception as exc:
        left = f"{dst.label} (made by this run)" if dst.created else dst.label
        log.warning("migrate-store: the run was refused (%s), and cleaning up the target failed: %s; "
                    "check %s and remove it if it is left", refused, str(exc).strip(), left, exc_info=True)
        refused.add_note(f"cleaning up the target failed ({type(exc).__name__}: {str(exc).strip()}); "
                         f"check {left} and remove it if it is left")


@dataclass
class _Plan:
    source_uuid: str
    todo: list[str]  # keys to copy
    dim: int | None
    model: str | None  # whose vectors they are (meta vec_model), carried with them
    id_offset: int  # added to each source message id (ID_OFFSET)
    id_top: int  # the highest id a copied message can have: the target's numbering moves past it
    record_offset: bool  # ID_OFFSET is not in the target yet (a first run, or one an older tiermem began)
    # keys copied before whose source changed since (new messages, or derived rows only)
    grown: list[str] = field(default_factory=list)
    # keys the target erased after they were copied (its tombstone): not copied again
    erased: list[str] = field(default_factory=list)
    # keys the source erased after they were copied, whose copy the target holds unchanged:
    # erased there too (`_erase_in_target`)
    erase: list[str] = field(default_factory=list)
    # keys whose copy is identical to the source's with no digest recorded (a tiermem before
    # 2026-12-06 copied them), or one of the whole copy (`_recorded_parts`): recorded now
    # (`_record_digests`)
    undigested: list[str] = field(default_factory=list)
    # the run writes conversations or keys (a first run or a merge, or a resume with some
    # to copy, bring up to the source's or erase): the target is marked UNFINISHED first
    writes: bool = False
    # the target held no conversation of its own as the run began (a first copy, a rerun
    # of the copy it holds, a store of tombstones only): its mark refuses the store's open
    # until verified; a merge's target holds its own data whole, so its mark warns
    target_was_empty: bool = False


def _preflight(src: _Side, dst: _Side, into_non_empty: bool, report: MigrationReport) -> _Plan:
    """Everything that can refuse the run, before anything is written."""
    with src.maintenance(), src.read() as sc:  # whole-store reads (and SQLite's scan for NULs)
        source_uuid = src.meta(sc, "db_uuid") or ""
        src_marks = _marks(src.q(sc, MARKS_SQL, MARKS_PARAMS))
        src_top = src.highest_id(sc)
        src_convs = src.conversations(sc)
        src_keys = {k for k, _ in src.keys(sc)}
        src_stones = src.tombstones(sc)
        dim = src.vec_dim(sc) if src.has_vectors(sc) else None
        model = src.vec_model(sc) if dim is not None else None
        if dst.postgres:
            bad = src.unstorable_in_postgres(sc)
            if bad:
                raise MigrationRefused(dst.label, "PostgreSQL text cannot hold these rows (a NUL byte or binary "
                                       f"data): {'; '.join(bad)}; erase or repair them in the source first")
    with dst.maintenance(), dst.read() as dc:
        marker = dst.meta(dc, MARKER)
        recorded_offset = dst.meta(dc, ID_OFFSET)
        dst_top = dst.highest_id(dc)
        dst_convs = dst.conversations(dc)
        dst_keys = {k for k, _ in dst.keys(dc)}
        stones = dst.tombstones(dc)
        dst_dim = dst.vec_dim(dc) if dst.has_vectors(dc) else None
        dst_model = dst.vec_model(dc) if dst_dim is not None else None
        dst_marks = _marks(dst.q(dc, MARKS_SQL, MARKS_PARAMS))
    if src_marks:  # its copy would be verified whole, and open as whole
        raise MigrationRefused(dst.label, f"the source is not a whole store ({src_marks[0].error(src.label)}); "
                               "nothing was written")
    # another source's copy there never verified: its rerun must find the store as it left
    # it (this run's copy would take the target's copy-of marker and refuse that rerun, so
    # its mark could never be cleared but by --accept-unfinished). A run of the source the
    # target already names as its copy takes the marker from no one: it goes on, so that of
    # two marks (two runs that passed this check at once) one can always be finished
    others = [m for m in dst_marks if not _runs_own(m, source_uuid)]
    if others and marker != source_uuid:
        raise OtherCopyUnfinished(dst.label, others[0].source, others[0].started_at)
    report.resumed = marker == source_uuid
    if marker is not None and marker != source_uuid and not into_non_empty:
        raise MigrationRefused(dst.label, f"it holds a copy of another store ({marker}); pass --into-non-empty "
                               "to merge")
    empty = not (dst_convs or dst_keys or stones)
    # the target's own conversations: not those of this source (a resume's or rerun's
    # earlier copy, its erased ones included), which this run may leave partial. Only
    # these are whole whatever happens to the run, so only these let its mark open the
    # store (keys and tombstones serve nothing; before, a rerun carrying the source's
    # erasures into its own copy, or a copy into a store of tombstones only, opened cut)
    from_source = {k for k, _, _ in src_convs} | {str(stone[0]) for stone in src_stones}
    own_convs = [k for k, _, _ in dst_convs if k not in from_source]
    if not empty and not report.resumed and not into_non_empty:
        raise MigrationRefused(dst.label, f"it is not empty ({len(dst_convs)} conversations, {len(dst_keys)} keys, "
                               f"{len(stones)} tombstones); pass --into-non-empty to merge into it")
    # a resumed copy keeps the offset its first run took (its rows are numbered by it);
    # otherwise the copied rows come after every id the target has handed out
    resume_offset = report.resumed and recorded_offset is not None
    id_offset = int(recorded_offset) if resume_offset and recorded_offset is not None else dst_top
    if id_offset + src_top > MAX_ROW_ID:
        raise MigrationRefused(dst.label, f"its message ids reach {id_offset} and the source's {src_top}: numbered "
                               f"after its own, the copied rows would pass the largest id, {MAX_ROW_ID}")
    if dim is not None and dst_dim is not None and dim != dst_dim:
        raise MigrationRefused(dst.label, f"its vectors are {dst_dim}-dimensional, the source's {dim}")
    if dim is not None and dst_dim is not None and None not in (model, dst_model) and model != dst_model:
        # merged, one model's vectors would be scored against the other's queries
        raise MigrationRefused(dst.label, f"its vectors come from model {dst_model}, the source's from {model}")
    # first, the conversations the source erased since a run copied them: the target's
    # copy goes (_erase_in_target), so it is neither in the way of a name the source gave
    # a new conversation since, nor left readable beside the tombstone the run copies
    erase = _erased_in_source(src_stones, {k for k, _, _ in src_convs}, dst) if report.resumed else []
    by_key = {k: (ns, n) for k, ns, n in dst_convs if k not in erase}
    names = {(ns, n): k for k, ns, n in dst_convs if k not in erase}
    # a key of this source the target holds a tombstone of: the target erased that
    # conversation after a run copied it (a source's erased key is no conversation there),
    # where the tombstone is that incarnation's (`_same_incarnation`)
    erased_there = {str(s[0]): s for s in stones} if report.resumed else {}
    # each name the target erased on request (ns, name) -> the latest erasure's deleted_at:
    # a source conversation of that name created by then is the erased data from a copy
    # made before it, not copied back (as `tiermem import` refuses it: ImportOfErased).
    # The key rules below refuse it too (the target issued the name's bare key, and so did
    # the source), but their message said nothing of an erasure; this one names it
    erasures: dict[tuple[str, str], float] = {}
    for stone in stones:
        named = (str(stone[1]), str(stone[2]))
        if stone[3] == "erase" and float(stone[8]) > erasures.get(named, float("-inf")):
            erasures[named] = float(stone[8])
    todo: list[str] = []
    grown: list[str] = []
    erased: list[str] = []
    undigested: list[str] = []
    for key, ns, name in src_convs:
        if key in erased_there and key not in by_key:
            stone = erased_there[key]
            with src.read() as sc:
                created = src.created_at(sc, key)
            if created is None:  # erased in the source since its list was read: nothing to copy
                continue
            if _same_incarnation(stone, ns, name, created):
                # its key is issued there, so it read as not copied yet and was copied back:
                # the target's erasure is the user's latest word (_verify warns, naming it)
                erased.append(key)
                continue
            # the target's own conversation, erased, that was given the same key (a key is
            # the bare name the first time a store uses it): the source's was never copied,
            # and copying it under a key the target issued to an erased conversation would
            # give that key a second incarnation there (keys are never reused)
            raise MigrationRefused(dst.label, f"conversation {name!r} of namespace {ns!r} (key {key!r}) cannot be "
                                   f"copied: the target issued that key to its own conversation {stone[2]!r} of "
                                   f"namespace {stone[1]!r}, since erased (its tombstone), and a key is never given "
                                   "to a second conversation; nothing was written: copy into an empty target")
        if not report.resumed and (ns, name) in erasures:  # a resumed run: `erased_there` above
            with src.read() as sc:
                created = src.created_at(sc, key)
            if created is not None and float(created) <= erasures[(ns, name)]:
                raise MigrationRefused(dst.label, _erased_there_text(ns, name, float(created), erasures[(ns, name)]))
        if names.get((ns, name), key) != key:
            raise MigrationRefused(dst.label, f"conversation {name!r} of namespace {ns!r} exists there under "
                                   "another key")
        if key in by_key and not report.resumed:
            raise MigrationRefused(dst.label, f"conversation {name!r} of namespace {ns!r} is there already (key "
                                   f"{key!r}) and not from a copy of this source")
        if key in by_key:
            if by_key[key] != (ns, name):
                raise MigrationRefused(dst.label, f"key {key!r} names another conversation there")
            with src.read() as sc:
                a = src.record(sc, key)
            with dst.read() as dc:
                b = dst.record(dc, key)
                recorded = dst.meta(dc, COPIED_DIGEST + key)
            if a is None or b is None:
                # erased since the lists were read: in the source (the run's look at its
                # tombstones erases it in the target, `_copy`), or in the target (left so)
                continue
            if record_digest(a) != record_digest(b) and not _as_copied(a, b, recorded):
                refused = _update_refused(a, b, recorded)
                if refused is not None:
                    raise refused
                grown.append(key)  # the source changed since it was copied: its copy follows
                continue
            if recorded is None or _recorded_parts(recorded) is None:
                undigested.append(key)
            report.already_present += 1
            continue
        if key in dst_keys and not report.resumed:
            raise MigrationRefused(dst.label, f"key {key!r} was already issued there")
        todo.append(key)
    if not report.resumed and (src_keys & dst_keys):
        raise MigrationRefused(dst.label, f"{len(src_keys & dst_keys)} of the source's keys were already issued there")
    return _Plan(source_uuid, todo, dim, model, id_offset, id_offset + src_top, not resume_offset, grown, erased,
                 erase, undigested, writes=not report.resumed or bool(todo or grown or erase),
                 target_was_empty=not own_convs)


def _record_digests(src: _Side, dst: _Side, plan: _Plan) -> None:
    """Record the digest (COPIED_DIGEST, `copy_digest`) of each copy the preflight found
    identical to the source's with none recorded (`plan.undigested`: a tiermem before
    2026-12-06 copied it) or one of the whole copy, each in a short transaction that reads
    the copy again, locked against the target's writers, and records it only where it is
    still the source's and still has none (or that whole copy's). Without it every later
    change of that conversation in the source was refused for good, since a source change
    cannot be told from a target writer's without it; with a whole copy's, after a read
    there embedded what the source had not (`copy_changes`)."""
    for key in plan.undigested:
        with src.read() as sc:
            rec = src.record(sc, key)
        if rec is None:  # erased in the source since the preflight
            continue
        want = record_digest(rec)
        with dst.tx() as c:
            dst.lock_conversation(c, key)
            have = dst.record(c, key)
            recorded = dst.meta(c, COPIED_DIGEST + key)
            if have is None or record_digest(have) != want or recorded not in (None, want):
                continue  # changed on either side meanwhile: the next rerun looks at it again
            dst.set_meta(c, COPIED_DIGEST + key, copy_digest(rec))


def _erased_in_source(stones: list[list[Any]], live: set[str], dst: _Side) -> list[str]:
    """The keys of the source's tombstones (`stones`; `live`: its conversations' keys)
    whose conversation the target still holds as it was copied: that incarnation (its
    namespace, name and created_at the tombstone's) with the digest the copy recorded
    (COPIED_DIGEST). One the target changed since (or that no digest tells: a tiermem
    before 2026-12-06 copied it) is refused by name (`_erase_refused`); a conversation of
    another incarnation under the key is the target's own and left alone."""
    out: list[str] = []
    for stone in stones:
        key = str(stone[0])
        if key in live or key in out:  # a batched erasure still under way in the source
            continue
        with dst.read() as dc:
            have = dst.record(dc, key)
            recorded = dst.meta(dc, COPIED_DIGEST + key)
        if have is None:
            continue
        _key, name, ns = have["conversation"][:3]
        if not _same_incarnation(stone, str(ns), str(name), have["conversation"][5]):
            continue
        refused = _erase_refused(dst, have, recorded)
        if refused is not None:
            raise refused
        out.append(key)
    return out


def _erase_refused(dst: _Side, have: Record, recorded: str | None) -> MigrationRefused | None:
    """Why the target's copy `have` of a conversation the source erased is not erased in
    the target too (None: it is): a target writer changed it since it was copied
    (`copy_changes`, a read's own records and what the target computes on its own not
    counted: the erasure takes them with it), or no digest was recorded."""
    key, name, ns = have["conversation"][:3]
    what = (f"conversation {name!r} of namespace {ns!r} (key {key!r}) was erased in the source after it was copied, "
            "and ")
    if recorded is None:
        why = ("the target records no digest of its copy (a tiermem before 2026-12-06 copied it), so whether a "
               "target writer changed it since cannot be told")
    elif changed := copy_changes(recorded, have, count_reads=False):
        why = (f"the target changed its copy since ({', '.join(changed)}: a target writer that was not stopped), "
               "which erasing it would lose")
    else:
        return None
    return MigrationRefused(dst.label, what + why + "; nothing was written: erase it in the target (tiermem delete) "
                            "if it is to be gone everywhere, then rerun")


def _erase_in_target(dst: _Side, plan: _Plan, report: MigrationReport,
                     on_erased: Callable[[ColdLog, Sequence[str]], None] | None = None) -> None:
    """Erase in the target, by its own erasure path (`delete_conversation`: a tombstone,
    the copy's digest row, the scrub as the target is configured), each conversation the
    source erased after a run copied it (`plan.erase`), checked again first: the target's
    copy still as the run wrote it (else refused by name, as by the preflight)."""
    for key in plan.erase:
        with dst.read() as dc:
            have = dst.record(dc, key)
            recorded = dst.meta(dc, COPIED_DIGEST + key)
        if have is None:  # erased there meanwhile
            continue
        refused = _erase_refused(dst, have, recorded)
        if refused is not None:  # a target writer changed it since the preflight
            raise refused
        _key, name, ns = have["conversation"][:3]
        # the store records the key owed to Redis (redis_purge) with the erasure; `on_erased`
        # pays it now, else a target Memory does when it next opens
        dst.store.delete_conversation(key, on_erased=None if on_erased is None
                                      else lambda keys: on_erased(dst.store, keys))
        log.info("migrate-store: conversation %r of namespace %r (key %r), erased in the source after it was copied, "
                 "is erased in the target (%s) too", name, ns, key, dst.label)
        report.erased_from_source += 1


def _erased_since(plan: _Plan, report: MigrationReport, erase: list[str]) -> None:
    """Add to `plan.erase` the keys of `erase` (`_erased_in_source`, read again by `_copy`)
    the preflight did not find erased: the source erased them since. The preflight
    counted such a copy already there, or planned to bring it up to the source's."""
    for key in erase:
        if key in plan.erase:
            continue
        plan.erase.append(key)
        if key in plan.grown:
            plan.grown.remove(key)
        elif key not in plan.todo:
            report.already_present -= 1


def _copy(src: _Side, dst: _Side, plan: _Plan, report: MigrationReport,
          progress: Callable[[int, int], None] | None, fault: Callable[[str], None] | None,
          on_erased: Callable[[ColdLog, Sequence[str]], None] | None = None) -> None:
    whole_store = not report.resumed or bool((plan.todo or plan.grown) and plan.record_offset)
    # the source's keys, tombstones and pending purges, read before anything is written:
    # a conversation the source erased since the preflight is found here and erased in
    # the target by the target's own erasure (its tombstone and its rows in one
    # transaction, `_erase_in_target`), or refused by name with nothing written; its
    # tombstone is never carried on its own (below). Read after the run's first write,
    # as before 2026-12-06, an erasure in the source while that write waited (a target
    # lock) had its tombstone carried beside the copy, which stayed readable there and
    # was verified so; the next rerun erased it, leaving two tombstones of it
    with src.maintenance(), src.read() as sc:
        keys, stones, purges = src.keys(sc), src.tombstones(sc), src.purges(sc)
        live = {k for k, _, _ in src.conversations(sc)}
    if report.resumed:
        _erased_since(plan, report, _erased_in_source(stones, live, dst))
    if plan.todo or plan.grown or whole_store:
        # the numbering past every id this run can copy, on every run with conversations
        # to copy: a resumed run's plan.id_top is the source's top now, which passes the
        # first run's reservation where the source grew in between (appends to the target
        # then drew copied ids); and before anything else, so that a target writer draws
        # above the copied ids from here on
        with dst.tx() as c:
            dst.reserve_ids(c, plan.id_top)
    # then: the marker, every key ever issued, the tombstones and pending purges, so a
    # half-copied target can never issue a source key to a new conversation: one
    # transaction as large as the store's key set, under the maintenance deadline
    if plan.dim is not None:
        dst.ensure_vec_dim(plan.dim, plan.model)
    # before the tombstones are compared: the target's erasure leaves its own tombstone
    # of that incarnation, which stands for the source's (`_stone_of`)
    _erase_in_target(dst, plan, report, on_erased)
    with dst.maintenance(), dst.read() as c:
        have_keys = {k for k, _ in dst.keys(c)}
        have_stones = {_stone_of(s) for s in dst.tombstones(c)}
        have_purges = {k for k, _ in dst.purges(c)}
        readable = {_stone_of([k, ns, name, None, None, None, None, created]) for k, ns, name, created
                    in dst.q(c, "SELECT id, namespace, name, created_at FROM conversations")}
    keys = [k for k in keys if k[0] not in have_keys]
    # never a tombstone beside the conversation it erased, still readable there: that
    # erasure reaches the target as the target's own (tombstone and rows together), by
    # this run or the next; the verification names it meanwhile
    stones = [s for s in stones if _stone_of(s) not in have_stones and _stone_of(s) not in readable]
    purges = [p for p in purges if p[0] not in have_purges]
    # a finished copy's rerun writes nothing
    if keys or stones or purges or whole_store:
        with dst.maintenance(), dst.tx() as c:
            dst.set_meta(c, MARKER, plan.source_uuid)
            if plan.record_offset:
                dst.set_meta(c, ID_OFFSET, str(plan.id_offset))
            dst.many(c, "INSERT INTO conversation_keys(key, issued_at) VALUES (?, ?) ON CONFLICT (key) DO NOTHING",
                     keys)
            dst.many(c, f"INSERT INTO tombstones({TOMBSTONE_COLS}) VALUES ({TOMBSTONE_MARKS})", stones)
            dst.many(c, "INSERT INTO redis_purge(key, at) VALUES (?, ?) ON CONFLICT (key) DO NOTHING", purges)
    for i, key in enumerate(plan.todo):
        with src.read() as sc:
            rec = src.record(sc, key)
            owed = src.owed_positions(sc, rec) if rec is not None else []
            rechecks = src.recheck_positions(sc, key) if rec is not None else []
        if rec is None:  # erased in the source since the preflight
            continue
        want = record_digest(rec)
        with _in_the_way(dst, rec, report), dst.tx() as c:
            if _renumber_past_taken(dst, c, plan, rec):
                report.offset_moves += 1
            _reserve_grown(dst, c, plan, rec)
            dst.write(c, rec, plan.id_offset, owed=owed, rechecks=rechecks)
            if fault is not None:
                fault(key)
            back = dst.record(c, key)
            got = record_digest(back) if back is not None else ""
            if got != want:  # raising here rolls this conversation back
                raise MigrationMismatch(f"conversation {key!r}", want, got)
            ids = [plan.id_offset + i for i in rec["ids"]]
            if back is not None and back["ids"] != ids:  # the search's tie order (module docstring)
                raise MigrationMismatch(f"conversation {key!r}'s message ids", _digest(ids), _digest(back["ids"]))
            dst.set_meta(c, COPIED_DIGEST + key, copy_digest(rec))
        report.copied += 1
        report.owed_decisions += len(owed)
        report.owed_rechecks += len(rechecks)
        report.copied_ids.append(key)
        if progress is not None:
            progress(i + 1, len(plan.todo))
    for key in plan.grown:
        if _copy_suffix(src, dst, plan, report, key, fault):
            report.copied += 1
            report.copied_ids.append(key)
    _record_digests(src, dst, plan)


def copied_prefix(src: Record, dst: Record) -> int | None:
    """How many of `src`'s messages `dst` (the target's copy of that conversation) holds,
    where that copy is exactly a prefix of it (all of them, where the source gained none):
    the same conversation (its columns but the last message's time, which an append moves)
    and the same first messages, every copied field (the digest of those positions, as the
    verification digests them). None where it is not: the target was written to in that
    conversation, or the source changed in a way an append-only log cannot. Its derived
    rows (labels, vectors, pins, ...) are not compared: an append relabels earlier turns (a
    supersession), and they follow the source."""
    n = len(dst["messages"])
    if n > len(src["messages"]) or src["conversation"][:-1] != dst["conversation"][:-1]:
        return None
    return n if _digest(src["messages"][:n]) == _digest(dst["messages"]) else None


def _update_refused(src: Record, dst: Record, recorded: str | None) -> MigrationMismatch | None:
    """Why the target's copy `dst` of a conversation that differs from the source's `src`
    is not brought up to it (None: it is, `_copy_suffix`). `recorded`: the digest the run
    that copied it wrote with it (COPIED_DIGEST; None: a tiermem before 2026-12-06 copied
    it). The copy is brought up to the source's where it is still what the run wrote
    (`recorded`): where the source gained messages its copy is their prefix, and where it
    gained none the difference is in derived rows (a pin, a checkpoint, a label, a plan, a
    summary). Where a target writer changed it since (`copy_changes`: a pin, a checkpoint,
    a stored plan; one that was not stopped), it is refused: rewriting the derived rows
    from the source's would drop that change without a word. What the target computes on
    its own (vectors a catch-up or a context() embedded there, the labels and
    supersessions it decided then, its warm views) is no such change: the source's
    replace them, and the target computes them again. With no digest recorded, a grown
    copy is grown as since 6b1e54f (the target's derived rows replaced), and one that
    gained no messages is refused, since a source change cannot be told from a target
    writer's."""
    key, name, ns = src["conversation"][:3]
    what = f"conversation {name!r} of namespace {ns!r} (key {key!r}), already in the target"
    want, got = record_digest(src), record_digest(dst)
    n = copied_prefix(src, dst)
    if n is None:
        return MigrationMismatch(what, want, got, "the target's messages there are not the first of the source's "
                                 "(the target was written to in that conversation, or the source changed as an "
                                 "append-only log cannot); stop the target's writers, and copy into an empty target "
                                 "to bring it up to date")
    if recorded is None and n < len(src["messages"]):
        return None
    if recorded is None:
        return MigrationMismatch(what + ", changed in the source without new messages", want, got,
                                 "this target records no digest of its copy (a tiermem before 2026-12-06 copied it), "
                                 "so a change in the source cannot be told from a target writer's; copy into an "
                                 "empty target to bring it up to date")
    changed = copy_changes(recorded, dst)
    if changed:
        grew = f"; the source gained {len(src['messages']) - n} message(s) there" if n < len(src["messages"]) else ""
        return MigrationMismatch(what + f", changed in the target since it was copied ({', '.join(changed)}{grew})",
                                 want, got,
                                 "a target writer that was not stopped changed it (a pin, a checkpoint, a plan kept "
                                 "by context()), and copying the source's over it would lose that; stop the "
                                 "target's writers during a migration, then keep the target as it is (the source's "
                                 "later changes to this conversation are not copied) or copy into an empty target")
    return None


def _copy_suffix(src: _Side, dst: _Side, plan: _Plan, report: MigrationReport, key: str,
                 fault: Callable[[str], None] | None) -> bool:
    """Copy the messages `key` gained in the source since it was copied (the append-only
    log keeps the copied rows as the new ones' prefix), numbered as a fresh conversation's
    (source id plus the offset, moved past a taken id as `_renumber_past_taken` moves it),
    and its derived rows again whole, as a fresh copy writes them; in one transaction that
    checks the target's copy is still that prefix (else MigrationMismatch, nothing written)
    and reads the whole conversation back. Whether anything was written."""
    with src.read() as sc:
        rec = src.record(sc, key)
        owed = src.owed_positions(sc, rec) if rec is not None else []
        rechecks = src.recheck_positions(sc, key) if rec is not None else []
    if rec is None:  # erased in the source since the preflight
        return False
    want = record_digest(rec)
    with _in_the_way(dst, rec, report), dst.tx() as c:
        # before the re-check: a target writer's change committed after it and before the
        # rewrite below would be deleted with the derived rows unseen (PostgreSQL's READ
        # COMMITTED); locked, the writer waits for this transaction, and its change is
        # then a change of the copy the next rerun refuses by name
        dst.lock_conversation(c, key)
        have = dst.record(c, key)
        if have is None or record_digest(have) == want:
            return False  # erased there meanwhile (left erased: _verify), or copied meanwhile
        refused = _update_refused(rec, have, dst.meta(c, COPIED_DIGEST + key))
        if refused is not None:  # the target was written to since the preflight
            raise refused
        if fault is not None:
            fault(CHECKED_STEP + key)
        suffix = {**rec, "ids": rec["ids"][len(have["ids"]):]}
        if _renumber_past_taken(dst, c, plan, suffix):
            report.offset_moves += 1
        _reserve_grown(dst, c, plan, suffix)
        ids = have["ids"] + [plan.id_offset + i for i in suffix["ids"]]
        dst.write(c, rec, plan.id_offset, have=have, owed=owed, rechecks=rechecks)
        if fault is not None:
            fault(key)
        back = dst.record(c, key)
        got = record_digest(back) if back is not None else ""
        if got != want:  # raising here rolls the suffix back
            raise MigrationMismatch(f"conversation {key!r}", want, got)
        if back is not None and back["ids"] != ids:
            raise MigrationMismatch(f"conversation {key!r}'s message ids", _digest(ids), _digest(back["ids"]))
        dst.set_meta(c, COPIED_DIGEST + key, copy_digest(rec))
    report.owed_decisions += len(owed)
    report.owed_rechecks += len(rechecks)
    return True


@contextlib.contextmanager
def _in_the_way(dst: _Side, rec: Record, report: MigrationReport) -> Iterator[None]:
    """Around the transaction writing `rec` (rolled back when it raises): a target row in
    the way of the write (the engine's integrity error) is a target writer that was not
    stopped and wrote during the copy, in the window between this run's checks and its
    write (a conversation of the same name created there, a position or an id drawn while
    this transaction ran). A MigrationRefused naming the conversation and what to do, for
    the engine's raw error (psycopg's UniqueViolation, the SQLite driver's IntegrityError)."""
    try:
        yield
    except dst.integrity_errors() as exc:
        key, name, ns = rec["conversation"][:3]
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise MigrationRefused(dst.label, f"conversation {name!r} of namespace {ns!r} (key {key!r}) could not be "
                               f"written: a row written there during the copy is in the way ({type(exc).__name__}: "
                               f"{detail}); that conversation was rolled back and the {report.copied} copied before "
                               "it are kept; stop the target's writers and rerun, which resumes where this run "
                               "stopped (and names the row if it is still in the way)") from exc


def _renumber_past_taken(dst: _Side, c: Conn, plan: _Plan, rec: Record) -> bool:
    """Inside the transaction writing `rec`: where a target row holds an id one of its
    messages needs (a target writer that was not stopped: an append between an interrupted
    run and its resume, or during the copy; on PostgreSQL one between the preflight's read
    of the sequence and the run's reservation), move the offset past the target's highest
    id for this conversation and the rest, recorded (ID_OFFSET) with this conversation, so
    a resume numbers the rest as this run does. Whether the move was needed (True)."""
    key = rec["conversation"][0]
    taken = dst.taken_id(c, [plan.id_offset + i for i in rec["ids"]])
    if taken is None:
        return False
    top = dst.highest_id(c)  # on PostgreSQL the sequence too: past every id reserved so far
    span = plan.id_top - plan.id_offset  # the source's top this run numbers up to
    if top + max(span, *rec["ids"]) > MAX_ROW_ID:
        raise MigrationRefused(dst.label, f"message id {taken}, which conversation {key!r} needs, was taken there "
                               f"by a row written after the copy began, and numbered after its highest id, {top}, "
                               f"the rest would pass the largest id, {MAX_ROW_ID}; stop the target's writers and "
                               "copy into an empty target")
    log.warning("migrate-store: message id %d, which conversation %r needs, was taken in %s by a row written after "
                "the copy began (stop the target's writers during a copy); it and the conversations after it are "
                "numbered after that store's highest id, %d, so their exact search ties come after the rows copied "
                "before it", taken, key, dst.label, top)
    plan.id_offset, plan.id_top = top, top + span
    dst.set_meta(c, ID_OFFSET, str(top))
    dst.reserve_ids(c, plan.id_top)
    return True


def _reserve_grown(dst: _Side, c: Conn, plan: _Plan, rec: Record) -> None:
    """Inside the transaction writing `rec`: where its ids pass `plan.id_top` (the source
    grew after the preflight read its top: its writers were not stopped), move the
    target's numbering past them too, so no append draws one of them; past MAX_ROW_ID the
    conversation is refused, as the preflight refuses."""
    high = plan.id_offset + max(rec["ids"], default=0)
    if high <= plan.id_top:
        return
    if high > MAX_ROW_ID:
        raise MigrationRefused(dst.label, f"conversation {rec['conversation'][0]!r}'s message ids, numbered after "
                               f"{plan.id_offset}, would pass the largest id, {MAX_ROW_ID}")
    plan.id_top = high
    dst.reserve_ids(c, high)


def _erased_there_text(ns: str, name: str, created: float, erased_at: float) -> str:
    """MigrationRefused's reason for a source conversation the target erased on request
    (its tombstone of reason 'erase' by `name` in `ns`, at `erased_at`) created at or
    before that erasure (`created`): copied, the erased data would be back."""
    when, since = (dt.datetime.fromtimestamp(t, dt.UTC).isoformat(timespec="seconds") for t in (erased_at, created))
    return (f"conversation {name!r} of namespace {ns!r} was erased there on request at {when}, and the source's "
            f"(created {since}) is from before then: copied, the erased data would be back; nothing was written: "
            "erase it in the source first, or, to restore it knowingly, import its export with "
            "`tiermem import --restore-erased`")


def _same_incarnation(stone: Sequence[Any], ns: str, name: str, created_at: Any) -> bool:
    """Whether tombstone `stone` (TOMBSTONE_COLS) is that of the conversation `name` of
    namespace `ns` created at `created_at`: keys are the bare name the first time a store
    uses it, so the same key on both sides may name two unrelated conversations."""
    return (str(stone[1]), str(stone[2]), _num(stone[7])) == (ns, name, _num(created_at))


def _stone_of(stone: Sequence[Any]) -> tuple[Any, ...]:
    """Which conversation's erasure tombstone `stone` (TOMBSTONE_COLS) records: its key,
    namespace, name and created_at. The source's tombstone is in the target when one of
    that incarnation is: erased on both sides (by a target writer, or by a rerun that took
    the source's erasure there, `_erase_in_target`), the target's own stands for it."""
    return (str(stone[0]), str(stone[1]), str(stone[2]), _num(stone[7]))


def _left_erased(dst: _Side, stone: list[Any], messages: int, ns: str, name: str) -> None:
    """Warn that the source's conversation `name` (`messages` long there) is left out:
    the target erased it after a run copied it (`stone`, its tombstone there)."""
    key, reason, deleted_at = stone[0], stone[3], stone[8]
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(deleted_at)))
    log.warning("migrate-store: conversation %r of namespace %r (key %r) was erased in the target (%s) after it "
                "was copied (%s, at %s); it is not copied again, the target's erasure stands. The source still "
                "holds it (%d message(s)): erase it there too if it is to be gone everywhere",
                name, ns, key, dst.label, reason, when, messages)


def differing_side(src: Record | None, dst: Record | None, recorded: str | None) -> str:
    """Which side of a conversation the verification found different differs, with the
    message counts (MigrationMismatch's advice): the source (gone, or changed since the
    copy: its whole digest no longer the one the copy recorded, COPIED_DIGEST), or the
    target (its copy missing, or a part a writer changes no longer as recorded). Before
    2026-12-06 every such mismatch asked 'did the source change during the copy?', also
    where a target writer had changed the copy."""
    if src is None:
        held = len(dst["messages"]) if dst is not None else 0
        return (f"the source no longer holds it (erased there during the run; the target holds {held} message(s) "
                "of it): rerun, which erases it in the target too")
    n_src = len(src["messages"])
    if dst is None:
        return f"the target does not hold it (the source holds {n_src} message(s)): rerun to copy it"
    n_dst = len(dst["messages"])
    counts = f"the source holds {n_src} message(s), the target {n_dst}"
    parts = None if recorded is None else _recorded_parts(recorded)
    if recorded is None:
        return (f"{counts}, and the target records no digest of its copy, so which side changed cannot be told; "
                "stop both sides' writers and copy into an empty target")
    changed = copy_changes(recorded, dst, count_reads=False)
    if changed:
        return (f"the target changed since this copy was written ({', '.join(changed)}; {counts}): a target writer "
                "that was not stopped; stop the target's writers, then keep the target as it is or copy into an "
                "empty target")
    if parts is not None and parts.get(WHOLE) != record_digest(src):
        return (f"the source changed since it was copied ({counts}): its writers were not stopped; rerun to copy "
                "the change")
    return f"the target's copy differs from the source's ({counts}); rerun, or copy into an empty target"


def stones_lacking(lacking: list[list[Any]], in_source: int, in_target: int, dst: _Side) -> str:
    """MigrationMismatch's advice where the target lacks source tombstones (`lacking`,
    TOMBSTONE_COLS): how many, the first named, and whether the target still holds that
    conversation (the source erased it during the run: the next run erases it there)."""
    key, ns, name = (str(v) for v in lacking[0][:3])
    with dst.read() as c:
        have = dst.record(c, key)
    held = (have is not None and _same_incarnation(lacking[0], str(have["conversation"][2]),
                                                   str(have["conversation"][1]), have["conversation"][5]))
    return (f"the target lacks {len(lacking)} of the source's {in_source} tombstone(s) (it holds {in_target}; e.g. "
            f"conversation {name!r} of namespace {ns!r}, key {key!r}"
            + (f", which the target still holds, {len(have['messages'])} message(s))" if held and have else ")")
            + ": the source erased them during the copy (its writers were not stopped); rerun, which erases them "
            "in the target too")


def _verify(src: _Side, dst: _Side, report: MigrationReport) -> None:
    """Every source conversation, key and tombstone, compared with the target's. Each
    conversation is read with a checkout of its own on each side, as the copy writes it:
    held across the whole loop, one connection outlived PostgreSQL's operation deadline on
    a large store (a few tens of thousands of conversations) and the finished copy was
    never marked verified, at every rerun."""
    digests: dict[str, str] = {}
    with src.maintenance(), src.read() as sc:
        conversations = src.conversations(sc)
    with dst.maintenance(), dst.read() as dc:
        erased_there = {str(s[0]): s for s in dst.tombstones(dc)}
    report.erased_in_target = 0
    for key, ns, name in conversations:
        with src.read() as sc:
            a = src.record(sc, key)
        with dst.read() as dc:
            b = dst.record(dc, key)
            recorded = dst.meta(dc, COPIED_DIGEST + key)
        if (a is not None and b is None and key in erased_there
                and _same_incarnation(erased_there[key], ns, name, a["conversation"][5])):
            _left_erased(dst, erased_there[key], len(a["messages"]), ns, name)
            report.erased_in_target += 1
            continue
        want, got = (record_digest(a) if a is not None else ""), (record_digest(b) if b is not None else "")
        if a is None or (want != got and not (b is not None and _as_copied(a, b, recorded))):
            raise MigrationMismatch(f"conversation {name!r} of namespace {ns!r} (key {key!r})", want, got,
                                    differing_side(a, b, recorded))
        digests[key] = want
        report.messages += len(a["messages"])
        report.vectors += len(a["vectors"])
    with src.maintenance(), src.read() as sc:
        keys, stones = src.keys(sc), src.tombstones(sc)
    with dst.maintenance(), dst.read() as dc:
        dkeys, dstones = dict(dst.keys(dc)), dst.tombstones(dc)
    missing = [k for k, _ in keys if k not in dkeys]
    if missing:
        raise MigrationMismatch("the issued keys", _digest(keys), _digest(sorted(dkeys.items())),
                                f"the target lacks {len(missing)} of the source's {len(keys)} (e.g. {missing[0]!r}; "
                                f"it holds {len(dkeys)}): the source issued them during the copy (its writers were "
                                "not stopped); rerun to copy them")
    have = {_stone_of(s) for s in dstones}
    lacking = [s for s in stones if _stone_of(s) not in have]
    if lacking:
        raise MigrationMismatch("the tombstones", _digest(stones), _digest(dstones),
                                stones_lacking(lacking, len(stones), len(dstones), dst))
    report.conversations = len(digests)
    report.keys = len(keys)
    report.tombstones = len(stones)
    report.digest = _store_digest(digests, keys, stones)

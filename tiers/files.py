"""Private files and directories, and storage that cannot be written.

Invariants:

- Every directory tiermem creates is mode 0700 and every file 0600, set exactly (the
  umask can only strip bits, so a chmod follows each creation). Only what this process
  created is chmodded: a directory or file that already existed keeps its mode, so that
  a refusing process (a database newer than the code, a read-only data dir) leaves what
  it found untouched.
- "Writable" is asked of the kernel (`access(2)` with W_OK), which knows about read-only
  mounts (EROFS) and immutable files (EPERM) even for root, for whom mode bits mean
  nothing. It is a cheap check (a few syscalls), used when opening the database and by
  `/healthz`.

- `storage_problem` classifies an exception as the storage refusing, failing (full,
  read-only, I/O error) or busy (another writer held it past the busy timeout, a lock
  or statement timeout), for the HTTP service (507/503) and the CLI's one-line errors.
  Given the database's path, an I/O error on a disk with (next to) nothing free is said as
  that disk being full, naming where: SQLite meets a full disk as SQLITE_IOERR where it
  grows its -shm (every open of a WAL database, reads included), not only as SQLITE_FULL.
  What it says of the write is true of the caller: a command or HTTP request that only
  reads is never told that its write was rolled back or that nothing was written.

This module imports only the standard library and `tiers.errors`, so every tier may use it.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import NamedTuple

from tiermem.tiers.errors import (
    OutputUnwritable,
    RedisStartError,
    SchemaTooNew,
    StorageReadOnly,
    StoreStalled,
    StoreUnavailable,
    StoreUnreachable,
)

SQLITE_HEADER = b"SQLite format 3\x00"
USER_VERSION_OFFSET = 60  # of the 4-byte big-endian user_version in a SQLite header
PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
WAL_SUFFIXES = ("-wal", "-shm")


def private_dir(path: Path) -> None:
    """Create `path` and every missing parent as 0700 directories; existing ones are left
    as they are (a data dir inside the user's own tree keeps the user's choice)."""
    path = Path(path)
    missing: list[Path] = []
    p = path
    while not p.exists():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    for d in reversed(missing):
        try:
            d.mkdir(mode=PRIVATE_DIR_MODE)
        except FileExistsError:
            continue  # another process made it first; its creator set its mode
        os.chmod(d, PRIVATE_DIR_MODE)


def create_private_file(path: Path) -> bool:
    """Create `path` as an empty 0600 file (its directory as by `private_dir`) unless it
    exists; True when this call created it. An existing file is not opened for writing
    and its mode is not changed."""
    path = Path(path)
    if path.exists():
        return False
    private_dir(path.parent)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, PRIVATE_FILE_MODE)
    except FileExistsError:
        return False
    try:
        os.fchmod(fd, PRIVATE_FILE_MODE)
    finally:
        os.close(fd)
    return True


def refuse_newer_header(path: Path, supported: int) -> None:
    """Raise SchemaTooNew when the database header at `path` says it is newer than
    `supported`, before SQLite opens it (opening a WAL database creates its sidecars) or
    anything chmods it. A newer version still only in the WAL is for the caller's check
    after opening."""
    try:
        with open(path, "rb") as f:
            header = f.read(USER_VERSION_OFFSET + 4)
    except FileNotFoundError:
        return
    if len(header) == USER_VERSION_OFFSET + 4 and header.startswith(SQLITE_HEADER):
        found = int.from_bytes(header[USER_VERSION_OFFSET:], "big")
        if found > supported:
            raise SchemaTooNew(str(path), found, supported)


def writable(path: Path) -> bool:
    """True when this process may write `path` (a file, or a directory's entries)."""
    return os.access(path, os.W_OK)


def database_writable(db_path: Path) -> bool:
    """True when a SQLite database in WAL mode can be written here: the file itself, its
    sidecars where they exist, and its directory (SQLite creates and deletes the sidecars)."""
    db_path = Path(db_path)
    if not writable(db_path.parent):
        return False
    if db_path.exists() and not writable(db_path):
        return False
    for suffix in WAL_SUFFIXES:
        side = db_path.with_name(db_path.name + suffix)
        if side.exists() and not writable(side):
            return False
    return True


SQLITE_PERM = 3
SQLITE_BUSY = 5  # another connection held the lock past the busy timeout
SQLITE_LOCKED = 6  # a table locked by another statement of the same connection
SQLITE_READONLY = 8
SQLITE_IOERR = 10
SQLITE_FULL = 13
SQLITE_CANTOPEN = 14
READ_ONLY_TEXT = ("readonly database", "read-only file system", "attempt to write a readonly")
IO_FAILURE_TEXT = ("disk i/o error", "unable to open database file")
BUSY_TEXT = ("database is locked", "database table is locked")
# PostgreSQL's SQLSTATEs (psycopg's `sqlstate`) of a transaction that lost to others
# and was rolled back: lock_not_available (lock_timeout), query_canceled
# (statement_timeout), serialization_failure, deadlock_detected
BUSY_SQLSTATES = frozenset({"55P03", "57014", "40001", "40P01"})
# connection exceptions, and the server shutting down or starting (operator intervention)
UNREACHABLE_SQLSTATES = ("08", "57P")
# read_only_sql_transaction: a hot standby, or a role or URL with default_transaction_read_only;
# the statement is refused before it writes anything and its transaction rolled back
READ_ONLY_SQLSTATES = frozenset({"25006"})
# storage_problem's (cause, claim) for a lost PostgreSQL connection, psycopg's own error
# or tiers.postgres's StoreUnavailable(connection_lost=True) from it: lost during COMMIT,
# the write may have committed, so the answer cannot say it was not
CONNECTION_FAILED = ("storage unreachable (the database connection failed)",
                     ": a write in flight may or may not have committed; retry later")
# disk_full: the server could not extend a data file; the statement failed and its
# transaction rolled back, as SQLite's SQLITE_FULL (507)
DISK_FULL_SQLSTATE = "53100"
# the rest of class 53, insufficient resources (the server out of memory, at
# max_connections, a configuration limit): the server's trouble, not the request's (503)
INSUFFICIENT_RESOURCES_SQLSTATE_CLASS = "53"


# A filesystem with less than this free (to this process: root may use the blocks
# reserved for it) is full for a write SQLite or the OS says failed for want of room
# (SQLITE_FULL, ENOSPC): the disk, not the database's size cap
FULL_DISK_FREE_BYTES = 1024 * 1024
# ... and an I/O error is said as the disk being full only below this: the -shm grows in
# 32 KiB pieces and a WAL frame is a page (4 KiB), so with two pieces' room left the I/O
# error is a failing disk (503, retry), not a full one (507)
IOERR_FULL_FREE_BYTES = 64 * 1024


def free_bytes(path: Path) -> int | None:
    """The bytes this process may still write on the filesystem holding `path` (its
    nearest existing ancestor); None when the kernel cannot be asked."""
    p = Path(path)
    while not p.exists() and p.parent != p:
        p = p.parent
    try:
        st = os.statvfs(p)
    except OSError:
        return None
    return (st.f_bfree if os.geteuid() == 0 else st.f_bavail) * st.f_frsize


def _full_disk_cause(where: Path, free: int, named: str | None = None) -> str:
    said = str(where) if named is None else named
    return f"storage full: the disk holding {said} is full ({free} bytes free)"


# what storage_problem says in place of a write's claim for a command that only reads
# (reads_only): nothing of a write, which it did not make
READ_RETRY_CLAIM = "; retry later"
READ_FULL_CLAIM = "; free space on that disk and run it again"
# ... and for an HTTP request that only reads (the service's reads)
READ_FULL_REQUEST_CLAIM = "; send it again once that disk has room"
# how the HTTP service names the disk (`disk_named`): its clients are not told the
# server's paths (the operator has the data dir from the service's start line)
DATABASE_DIR_WORDS = "the database's directory"


class StorageProblem(NamedTuple):
    """What `storage_problem` says: the HTTP status, the message, whether the storage
    was only busy (a retry soon may pass; nothing is wrong with it), and whether it is
    certain that the store refused before writing (`refused_unwritten`: a busy lock, a
    read-only database; not a lost connection, which may have come after the COMMIT
    reached the server, nor an I/O error)."""

    status: int
    detail: str
    busy: bool = False
    refused_unwritten: bool = False


# What a refusal says of the write in place of its own claim ("nothing was written",
# "this request's transaction was rolled back") when the operation that met it commits
# in several transactions (a rebuild, an import, a migration, an erasure in batches):
# only the failing transaction was rolled back, the ones before it stay committed, and a
# user told that nothing changed would not run it again (a rebuild's cleared supersession
# marks, say, stay cleared until one completes)
INCOMPLETE_TEXT = ("the command is incomplete: it commits in several transactions, and any before the failing "
                   "one stay written (not rolled back); run it again")
# ... and what the HTTP service says of such a request (an erasure in batches); sent
# again, it erases what is left
INCOMPLETE_REQUEST_TEXT = ("the request may be partly done: it commits in several transactions, and any before "
                           "the failing one stay written (not rolled back); it is safe to send it again")


def storage_problem(exc: BaseException, *, several_transactions: bool = False,
                    incomplete: str = INCOMPLETE_TEXT, db_path: Path | None = None,
                    reads_only: bool = False, disk_named: str | None = None,
                    read_full_claim: str = READ_FULL_CLAIM) -> StorageProblem | None:
    """(status, message, busy) when `exc` (or what it was raised from) is the storage
    refusing, failing or busy: 507 for a full disk (SQLite's, or PostgreSQL's disk_full)
    or the database's size cap; 503 for a PostgreSQL server out of resources (the rest
    of SQLSTATE class 53), for a read-only database (read-only mount, immutable or
    foreign file, a PostgreSQL standby or read-only role), for I/O errors, a lost
    PostgreSQL connection, one cut for not answering in time (StoreStalled), one that
    could not be had (StoreUnreachable: refused before writing) and any other StoreUnavailable
    (the store closed under the caller: before, a 500), and (busy) for a write that waited out the busy timeout behind
    another writer or a PostgreSQL lock or statement timeout; else None. The transaction was rolled back (a failed ROLLBACK after an I/O error, "cannot rollback -
    no transaction is active", means SQLite already had), except that a PostgreSQL
    connection lost during COMMIT leaves unknown whether it committed: only a busy or
    read-only refusal is `refused_unwritten`.

    `several_transactions`: the operation commits in several (the CLI's rebuild, import,
    migrate-store, index, prune, delete, delete-namespace): the message says it is
    incomplete and to run it again (`incomplete`: INCOMPLETE_TEXT for a command,
    INCOMPLETE_REQUEST_TEXT for an HTTP request) instead of what it says of one
    transaction, and nothing is `refused_unwritten`.

    `db_path`: the SQLite database the error came from, when known: a full disk is said
    as the disk holding its directory being full, and so is an I/O error where that disk
    has less than IOERR_FULL_FREE_BYTES free (module docstring); where its free space
    cannot be read, nothing is said of the disk. `reads_only`: the caller
    only reads (the CLI's history, search, export; the service's GETs and search): the message
    says nothing of a write (READ_RETRY_CLAIM, `read_full_claim`: READ_FULL_CLAIM for a
    command, READ_FULL_REQUEST_CLAIM for a request) and `refused_unwritten` stays what it
    is (a read that the store refused wrote nothing either: the service's `"written":
    false` is as true of it). `disk_named`: the words for the disk's directory in place
    of its path (DATABASE_DIR_WORDS in the service, whose clients are not told paths)."""
    where = None if db_path is None else Path(db_path).parent
    # None: no path, or the kernel could not be asked: nothing is said of the disk's room
    free = None if where is None else free_bytes(where)

    def problem(status: int, cause: str, claim: str, *, busy: bool = False,
                refused_unwritten: bool = False, read_claim: str = READ_RETRY_CLAIM) -> StorageProblem:
        if reads_only:
            return StorageProblem(status, f"{cause}{read_claim}", busy=busy, refused_unwritten=refused_unwritten)
        if several_transactions:
            return StorageProblem(status, f"{cause}; {incomplete}", busy=busy)
        return StorageProblem(status, f"{cause}{claim}", busy=busy, refused_unwritten=refused_unwritten)

    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OutputUnwritable | RedisStartError):  # a command's output, the hot tier: not the store's
            return None
        code = getattr(e, "sqlite_errorcode", None)
        primary = code & 0xFF if isinstance(code, int) else None
        text = str(e).lower()
        os_errno = e.errno if isinstance(e, OSError) else None
        sqlstate = getattr(e, "sqlstate", None)
        if primary in (SQLITE_BUSY, SQLITE_LOCKED) or any(t in text for t in BUSY_TEXT) or sqlstate in BUSY_SQLSTATES:
            return problem(503, "storage busy: another writer held the database past the wait allowed",
                           "; this request's transaction was rolled back, retry shortly", busy=True,
                           refused_unwritten=True)
        if isinstance(e, StoreUnreachable):  # no connection was had: nothing was sent
            # the settings that bounded the wait, named and valued ("cold_pool_wait_s=2,
            # cold_pool_size=1"), so that the answer says which to raise
            pool = "" if e.pool is None else f", {e.pool}"
            return problem(503, f"storage unreachable (no database connection could be had within "
                                f"{e.waited_s:g} s: {e.limit}{pool})",
                           ": nothing was written; retry later", refused_unwritten=True)
        if isinstance(e, StoreStalled) and e.cancelled:  # the server's own deadline: the connection kept
            return problem(503, f"storage unreachable (a statement ran past {e.waited_s:g} s: {e.limit}; "
                                "the server cancelled it)",
                           ": a write in flight may or may not have committed; retry later")
        if isinstance(e, StoreStalled):  # cut mid-operation: a COMMIT may have landed
            return problem(503, f"storage unreachable (the database server did not answer within {e.waited_s:g} s: "
                                f"{e.limit}; the connection was cut)",
                           ": a write in flight may or may not have committed; retry later")
        if isinstance(e, StoreUnavailable) and e.connection_lost:  # the store's edge wrapped the driver's error
            return problem(503, *CONNECTION_FAILED)
        if isinstance(e, StoreUnavailable):  # the store closed (a service shutting down), a pool that would not open
            # not "written": false: this class is also raised after a transaction began (a fork's later step)
            return problem(503, "storage unavailable (the cold store is closed or cannot be used now)",
                           ": retry later")
        if isinstance(sqlstate, str) and sqlstate.startswith(UNREACHABLE_SQLSTATES):
            # lost during COMMIT, the write may have committed: the answer cannot say it was not
            return problem(503, *CONNECTION_FAILED)
        full = (primary == SQLITE_FULL or "database or disk is full" in text
                or os_errno in (errno.ENOSPC, errno.EDQUOT) or sqlstate == DISK_FULL_SQLSTATE)
        failing = (primary in (SQLITE_IOERR, SQLITE_CANTOPEN) or any(t in text for t in IO_FAILURE_TEXT)
                   or os_errno == errno.EIO)
        if where is not None and free is not None and (
                (full and free < FULL_DISK_FREE_BYTES) or (failing and free < IOERR_FULL_FREE_BYTES)):
            return problem(507, _full_disk_cause(where, free, disk_named), "; nothing was written",
                           read_claim=read_full_claim)
        if full:  # with room on the disk: the database's size cap, or PostgreSQL's server
            return problem(507, "storage full: the database cannot grow (database or disk is full)",
                           "; nothing was written")
        if isinstance(sqlstate, str) and sqlstate.startswith(INSUFFICIENT_RESOURCES_SQLSTATE_CLASS):
            return problem(503, f"storage out of resources (the database server's SQLSTATE {sqlstate})",
                           ": this request's transaction was rolled back; retry later")
        if (
            isinstance(e, StorageReadOnly)
            or sqlstate in READ_ONLY_SQLSTATES
            or primary in (SQLITE_READONLY, SQLITE_PERM)
            or any(t in text for t in READ_ONLY_TEXT)
            or os_errno in (errno.EROFS, errno.EPERM, errno.EACCES)
        ):
            return problem(503, "storage is read-only: the database cannot be written", "; nothing was written",
                           refused_unwritten=True)
        if failing:
            return problem(503, "storage is failing (disk I/O error)", ": the write was rolled back; retry later")
        e = e.__cause__ or e.__context__
    return None

"""`storage_problem` tells the storage refusing or failing (507 / 503) from a bug (None).

Real errors where they can be had cheaply (SQLite's own, the kernel's); the chained
case is how SQLite reports a failed write on a read-only file system: the transaction's
"disk I/O error", then, from the ROLLBACK in the handler, "cannot rollback - no
transaction is active" with the first as its context (before the fix: a 500).
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from tiermem.tiers.errors import StorageReadOnly
from tiermem.tiers.files import storage_problem
from tiermem.tiers.schema import sqlite3


def chained(first: BaseException, then: BaseException) -> BaseException:
    try:
        try:
            raise first
        except BaseException:
            raise then  # noqa: B904 - the implicit context is the point
    except BaseException as exc:
        return exc


def readonly_error(tmp_path: Path) -> BaseException:
    db = tmp_path / "r.db"
    sqlite3.connect(str(db)).close()
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        conn.execute("CREATE TABLE t(x)")
    except sqlite3.Error as exc:
        return exc
    finally:
        conn.close()
    raise AssertionError("a read-only connection wrote")


def busy_error(tmp_path: Path) -> BaseException:
    """A real SQLITE_BUSY: another connection holds the write lock past the wait allowed."""
    db = tmp_path / "b.db"
    holder = sqlite3.connect(str(db), isolation_level=None)
    holder.execute("CREATE TABLE t(x)")
    holder.execute("BEGIN IMMEDIATE")
    conn = sqlite3.connect(str(db), isolation_level=None, timeout=0)
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.Error as exc:
        return exc
    finally:
        conn.close()
        holder.close()
    raise AssertionError("two writers at once")


def pg_error(name: str) -> BaseException:
    import psycopg

    return getattr(psycopg.errors, name)("from the server")  # its SQLSTATE is the class's


# (error, status, refused before writing) -- None: not the storage, a bug that stays a 500;
# only busy and read-only are certain to have written nothing (a connection lost during
# COMMIT may have committed: no "written": false, so no client retries that write)
CASES = [
    (busy_error, 503, True),  # by its error code (before: a 500)
    (lambda p: sqlite3.OperationalError("database is locked"), 503, True),
    (lambda p: pg_error("LockNotAvailable"), 503, True),  # lock_timeout
    (lambda p: pg_error("QueryCanceled"), 503, True),  # statement_timeout
    (lambda p: pg_error("DeadlockDetected"), 503, True),
    (lambda p: pg_error("ReadOnlySqlTransaction"), 503, True),  # 25006: a standby (before: a 500)
    (lambda p: pg_error("AdminShutdown"), 503, False),  # 57P01: the server shutting down
    (lambda p: pg_error("ConnectionFailure"), 503, False),  # 08006: the server went away
    (lambda p: pg_error("DiskFull"), 507, False),  # 53100: as SQLite's full disk (before: a 500)
    (lambda p: pg_error("OutOfMemory"), 503, False),  # 53200, class 53: the server's resources (before: a 500)
    (lambda p: pg_error("UndefinedTable"), None, False),  # a bug, not the storage
    (lambda p: chained(sqlite3.OperationalError("disk I/O error"),
                       sqlite3.OperationalError("cannot rollback - no transaction is active")), 503, False),
    (lambda p: sqlite3.OperationalError("disk I/O error"), 503, False),
    (readonly_error, 503, True),  # a real SQLITE_READONLY, by its error code
    (lambda p: OSError(errno.EROFS, "Read-only file system"), 503, True),
    (lambda p: PermissionError(errno.EPERM, "Operation not permitted"), 503, True),  # an immutable file
    (lambda p: StorageReadOnly("x.db", "it needs migration"), 503, True),
    (lambda p: sqlite3.OperationalError("database or disk is full"), 507, False),
    (lambda p: OSError(errno.ENOSPC, "No space left on device"), 507, False),
    (lambda p: sqlite3.OperationalError("no such table: nope"), None, False),  # a bug, not the disk
    (lambda p: KeyError("x"), None, False),
]


@pytest.mark.parametrize(("make", "status", "unwritten"), CASES)
def test_storage_problem(tmp_path: Path, make: object, status: int | None, unwritten: bool) -> None:
    exc = make(tmp_path)  # type: ignore[operator]
    got = storage_problem(exc)
    assert (got[0] if got else None) == status, (exc, got)
    if got is not None:
        assert "nothing was written" in got[1] or "rolled back" in got[1] or "may or may not have" in got[1]
        assert got.refused_unwritten == unwritten, (exc, got)
        # only a busy database is busy: /healthz says nothing of it
        assert got.busy == ("locked" in str(exc) or getattr(exc, "sqlstate", "") in ("55P03", "57014", "40P01"))

"""Opening a tiermem database that this process cannot write.

Invariants:

- Used only for an existing database on storage that refuses writes (a read-only mount,
  an immutable file, a foreign file): `tiermem history` and friends must still read it.
- It never writes: `mode=ro`, and `PRAGMA query_only = 1` on top (ColdStore reads it
  back as `read_only`). When the WAL sidecars are missing and cannot be created, it falls
  back to `immutable=1`: a missing -shm means no connection is open, and nobody can start
  writing in a directory that refuses writes.
- Never stale data in silence: `immutable=1` reads the main file only and skips the
  -wal. A -wal holding frames beyond its header (a writer killed before it merged
  them, then a copy without its -shm; or a -shm this process cannot read) holds commits
  the main file lacks, so the open is refused (`StorageReadOnly` naming the -wal) before
  anything is read; it is merged by opening the database once where it can be written.
  A missing or header-only -wal is a clean database, opened immutable as before.
- The schema must be exactly this code's: newer is `SchemaTooNew`, older needs a
  migration, which cannot run here (`StorageReadOnly`).
"""

from __future__ import annotations

import logging
import urllib.parse
from pathlib import Path
from typing import Any

from tiermem.tiers.errors import SchemaTooNew, StorageReadOnly

log = logging.getLogger("tiermem.cold")

URI_QUERIES = ("mode=ro", "mode=ro&immutable=1")  # in the order tried
IMMUTABLE_QUERY = URI_QUERIES[-1]
# a WAL file starts with a 32-byte header; frames (pages of commits) follow it, so a file
# no longer than this holds no commit (SQLite's file format, "WAL File Format")
WAL_HEADER_BYTES = 32


def unmerged_wal_bytes(path: Path) -> int:
    """The size of `path`'s -wal when it holds frames (commits that `immutable=1` would
    not read), else 0 (no -wal, or only its header)."""
    try:
        size = Path(f"{path}-wal").stat().st_size
    except FileNotFoundError:
        return 0
    return size if size > WAL_HEADER_BYTES else 0


def connect_read_only(path: Path, supported: int) -> Any:
    """A read-only connection (sqlite-vec loaded) to the database at `path`."""
    import sqlean as sqlite3
    import sqlite_vec

    base = "file:" + urllib.parse.quote(str(Path(path).absolute()))
    last: Exception | None = None
    for query in URI_QUERIES:
        if query == IMMUTABLE_QUERY and (wal_bytes := unmerged_wal_bytes(path)):
            # immutable would show the main file as it was before the -wal's commits,
            # with exit 0: stale data in silence. Refused, nothing read nor written
            raise StorageReadOnly(
                str(path), f"its write-ahead log {path}-wal ({wal_bytes} bytes) holds commits not yet merged "
                "into it, which a read-only open here would skip, showing older data (mode=ro failed: "
                f"{last}); any tiermem command run once where it can be written merges them")
        try:
            conn = sqlite3.connect(f"{base}?{query}", uri=True, isolation_level=None, check_same_thread=False)
            found = conn.execute("PRAGMA user_version").fetchone()[0]
        except sqlite3.Error as exc:  # the sidecars cannot be created: try immutable
            last = exc
            continue
        if found != supported:
            conn.close()
            if found > supported:
                raise SchemaTooNew(str(path), found, supported)
            raise StorageReadOnly(str(path), f"it needs migration from schema version {found} to {supported}")
        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
        conn.enable_load_extension(False)
        conn.execute("PRAGMA query_only = 1")
        log.warning("database %s is not writable here: opened read-only (%s)", path, query)
        return conn
    raise StorageReadOnly(str(path), f"it cannot be opened read-only either ({last})")

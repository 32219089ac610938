"""Opening a tiermem database that this process cannot write.

Invariants:

- Used only for an existing database on storage that refuses writes (a read-only mount,
  an immutable file, a foreign file): `tiermem history` and friends must still read it.
- It never writes: `mode=ro`, and `PRAGMA query_only = 1` on top (ColdStore reads it
  back as `read_only`). When the WAL sidecars are missing and cannot be created, it falls
  back to `immutable=1`: a missing -shm means no connection is open, and nobody can start
  writing in a directory that refuses writes.
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


def connect_read_only(path: Path, supported: int) -> Any:
    """A read-only connection (sqlite-vec loaded) to the database at `path`."""
    import sqlean as sqlite3
    import sqlite_vec

    base = "file:" + urllib.parse.quote(str(Path(path).absolute()))
    last: Exception | None = None
    for query in URI_QUERIES:
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

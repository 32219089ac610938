"""A read transaction held on a SQLite database by another process, for the erasure tests.

While it is open the WAL cannot be truncated, so an erasure's old pages stay in it
(`scrubbed` and `wal_truncated` false). It runs in a child process: reading the file from
the test's own process would share (and on close drop) that process's POSIX locks."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

READER_EXIT_TIMEOUT_S = 30  # how long the reader may take to commit and exit once released
# holds the transaction until a line arrives on stdin; prints its query's first column first
READER = r"""
import sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("BEGIN")
print(c.execute(sys.argv[2]).fetchone()[0], flush=True)
sys.stdin.readline()
c.execute("COMMIT")
"""


@contextlib.contextmanager
def read_transaction(db: Path, query: str = "SELECT COUNT(*) FROM sqlite_master") -> Iterator[str]:
    """Hold a read transaction on `db` in a child process; yields what `query` read in it
    (its first column, as printed), once the transaction holds its snapshot."""
    proc = subprocess.Popen([sys.executable, "-c", READER, str(db), query], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        assert proc.stdin is not None
        proc.stdin.write("\n")
        proc.stdin.flush()
        proc.wait(timeout=READER_EXIT_TIMEOUT_S)

"""Helpers for the cold-tier tests: a raw SQL connection that bypasses ColdStore (to
check what is really on disk, or to attack the schema), row counts per conversation,
a runner for child processes that import the project from this checkout, and another
process holding a database's write lock (`locked`, `hold_lock`/`release`), and every row
of a store to compare before and after (`every_row`)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import sqlean
import sqlite_vec

ROOT = Path(__file__).resolve().parent.parent
WORKERS = Path(__file__).resolve().parent / "cold_workers.py"
HOLDER_EXIT_TIMEOUT_S = 30  # how long a released lock holder may take to roll back and exit
# another process's long transaction on the database, until a line arrives on its stdin
HOLD_LOCK = """
import sys, sqlean
conn = sqlean.connect(sys.argv[1], isolation_level=None, timeout=10)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.readline()
conn.execute("ROLLBACK")
"""


@contextlib.contextmanager
def raw(path: Path) -> Iterator[Any]:
    """A plain sqlean connection (autocommit) with sqlite-vec loaded, so vec0 tables can
    be read and dropped; no tiermem code runs on it."""
    conn = sqlean.connect(str(path), isolation_level=None, timeout=10)
    conn.enable_load_extension(True)
    sqlite_vec.load(conn)
    conn.enable_load_extension(False)
    try:
        yield conn
    finally:
        conn.close()


def has_table(conn: Any, name: str) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone() is not None


def conversation_rows(conn: Any, conversation_id: str) -> dict[str, int]:
    """Every row a conversation owns, per table. FTS rows are counted through the turn
    ids, and also globally in `table_rows`, because an orphaned FTS row has no message."""
    one = lambda sql: conn.execute(sql, (conversation_id,)).fetchone()[0]  # noqa: E731
    out = {
        "conversations": one("SELECT COUNT(*) FROM conversations WHERE id = ?"),
        "messages": one("SELECT COUNT(*) FROM messages WHERE conversation_id = ?"),
        "turns": one("SELECT COUNT(*) FROM turns WHERE conversation_id = ?"),
        "fts": one("SELECT COUNT(*) FROM messages_fts WHERE rowid IN (SELECT id FROM turns WHERE conversation_id = ?)"),
        "checkpoints": one("SELECT COUNT(*) FROM checkpoints WHERE conversation_id = ?"),
        "pins": one("SELECT COUNT(*) FROM pins WHERE conversation_id = ?"),
        "vectors": 0,
    }
    if has_table(conn, "messages_vec"):
        out["vectors"] = one("SELECT COUNT(*) FROM messages_vec WHERE conversation_id = ?")
    return out


def table_rows(conn: Any) -> dict[str, int]:
    """Row counts of every table that holds messages or rows derived from them."""
    out = {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
           for t in ("conversations", "messages", "turns", "messages_fts", "checkpoints", "pins")}
    out["messages_vec"] = (conn.execute("SELECT COUNT(*) FROM messages_vec").fetchone()[0]
                           if has_table(conn, "messages_vec") else 0)
    return out


def every_row(db_path: Path) -> dict[str, list[str]]:
    """Every row of every ordinary table of the store (virtual ones are read through their
    shadow tables): nothing written means equal before and after."""
    with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True) as conn:
        names = [n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                            "AND sql NOT LIKE 'CREATE VIRTUAL TABLE%'")]
        return {n: sorted(map(repr, conn.execute(f'SELECT * FROM "{n}"'))) for n in names}


def file_sizes(db: Path) -> dict[str, int]:
    """Bytes of the database file and its sidecars (0 for one that does not exist)."""
    out = {}
    for suffix in ("", "-wal", "-shm"):
        p = Path(str(db) + suffix)
        out[suffix or "db"] = p.stat().st_size if p.exists() else 0
    return out


def write_lock_held(db: Path) -> bool:
    """Whether another connection holds the SQLite file's write lock, seen from outside it."""
    conn = sqlite3.connect(db, timeout=0, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")  # taken: nobody holds the write lock
        conn.execute("ROLLBACK")
        return False
    except sqlite3.OperationalError as exc:
        assert "locked" in str(exc) or "busy" in str(exc), exc
        return True
    finally:
        conn.close()


def hold_lock(db: Path) -> subprocess.Popen[str]:
    """Another process holding `db`'s write lock from when this returns until `release`:
    a real lock on the file, as a long erasure or fork in another process holds it."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(db)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    return proc


def release(proc: subprocess.Popen[str]) -> None:
    """End the holder's transaction; a no-op the second time (a timer and a test's
    cleanup may both release it)."""
    if proc.poll() is None and proc.stdin is not None and not proc.stdin.closed:
        proc.stdin.write("\n")
        proc.stdin.close()


@contextlib.contextmanager
def locked(db: Path) -> Iterator[subprocess.Popen[str]]:
    """`hold_lock(db)` for the block (which may `release` it early); the holder is gone after."""
    proc = hold_lock(db)
    try:
        yield proc
    finally:
        release(proc)
        proc.wait(timeout=HOLDER_EXIT_TIMEOUT_S)


def child_env(**extra: str) -> dict[str, str]:
    """The environment for a child process: this checkout first on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def worker(*args: str, **popen: Any) -> subprocess.Popen[str]:
    """Start `tests/cold_workers.py <args>` in a fresh interpreter."""
    popen.setdefault("env", child_env())
    return subprocess.Popen([sys.executable, str(WORKERS), *args], text=True, **popen)


def rewrite_stored(db: Path, key: str, changes: Sequence[tuple[int, str, str]]) -> None:
    """Rewrite stored message rows of conversation key `key` behind tiermem's back, as a
    bug, a torn write or an older version could have left them: (position, column, new
    value) each, in one transaction with the append-only trigger lifted and put back."""
    conn = sqlean.connect(str(db), isolation_level=None)
    try:
        (trigger,) = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'trigger' "
                                  "AND name = 'messages_no_update'").fetchone()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("DROP TRIGGER messages_no_update")
        for position, column, value in changes:
            conn.execute(f"UPDATE messages SET {column} = ? WHERE conversation_id = ? AND position = ?",
                         (value, key, position))
        conn.execute(trigger)
        conn.execute("COMMIT")
    finally:
        conn.close()


def store_as_an_older_version(db: Path, name: str, body_json: str, metadata_json: str) -> None:
    """Insert a message row at position 1 of the conversation named `name`, as a version
    without today's limits on what goes in (the nesting depth) wrote it."""
    conn = sqlean.connect(str(db), isolation_level=None)
    try:
        key = conn.execute("SELECT id FROM conversations WHERE name = ?", (name,)).fetchone()[0]
        next_id = conn.execute("SELECT MAX(id) + 1 FROM messages").fetchone()[0]
        conn.execute("INSERT INTO messages(conversation_id, position, id, role, body, metadata, created_at) "
                     "VALUES (?, 1, ?, 'assistant', ?, ?, 1.0)", (key, next_id, body_json, metadata_json))
    finally:
        conn.close()


def sql_behind(cfg: Any, sql: str, params: tuple[Any, ...]) -> None:
    """One statement (`?` placeholders) on the cold store `cfg` (a tiermem `Config`) names,
    SQLite or PostgreSQL, behind tiermem's back: how tests plant rows an older version or
    a hand edit left."""
    if cfg.cold_url is None:
        conn = sqlean.connect(str(cfg.db_path), isolation_level=None)
        try:
            conn.execute(sql, params)
        finally:
            conn.close()
        return
    import psycopg

    with psycopg.connect(cfg.cold_url, autocommit=True) as pg:
        pg.execute(f'SET search_path TO "{cfg.cold_schema}"')
        pg.execute(sql.replace("?", "%s"), params)

"""A database whose newer schema version is still only in its WAL: a newer tiermem
migrated it and was killed (SIGKILL, so nothing checkpointed), as in a rollback after a
failed deploy. The header still shows the older version. The open must refuse it as it
refuses a newer header: the file and its WAL byte for byte as they were, modes kept.

On the code before, the header check passed, the file was chmodded to 0600, and the
read-write connection that then found the newer version checkpointed the WAL into the
file and deleted both sidecars as it closed, while the error said "the database is left
untouched"."""

from __future__ import annotations

import hashlib
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from cold_helpers import child_env

from tiermem.tiers.cold import ColdStore
from tiermem.tiers.errors import SchemaTooNew
from tiermem.tiers.models import Message
from tiermem.tiers.schema import schema_version
from tiermem.tiers.tokens import BpeTokenCounter

NEWER_STEPS = 1  # versions the "newer tiermem" is ahead of this code
CHILD_TIMEOUT_S = 60

# A newer tiermem's migration: committed into the WAL (never checkpointed), then the
# process is killed by the test once it says so.
NEWER_MIGRATION = """
import sys, time, sqlean
conn = sqlean.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA wal_autocheckpoint = 0")
conn.execute("BEGIN IMMEDIATE")
conn.execute("CREATE TABLE from_the_future(x)")
conn.execute(f"PRAGMA user_version = {int(sys.argv[2])}")
conn.execute("COMMIT")
print("migrated", flush=True)
time.sleep(3600)
"""


def _files(db: Path) -> dict[str, tuple[str, int] | None]:
    """sha256 and mode of the database and its WAL (None: missing). The -shm is SQLite's
    shared-memory index of the WAL, rebuilt by any reader: only its presence is data."""
    out: dict[str, tuple[str, int] | None] = {}
    for suffix in ("", "-wal"):
        p = Path(str(db) + suffix)
        out[suffix or "db"] = ((hashlib.sha256(p.read_bytes()).hexdigest(), stat.S_IMODE(p.stat().st_mode))
                               if p.exists() else None)
    return out


def _newer_migration_killed(db: Path, version: int) -> None:
    proc = subprocess.Popen([sys.executable, "-c", NEWER_MIGRATION, str(db), str(version)],
                            stdout=subprocess.PIPE, text=True, env=child_env())
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "migrated"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=CHILD_TIMEOUT_S)


@pytest.mark.parametrize("file_mode", [
    0o600,  # tiermem's own mode
    0o640,  # a group-readable file another tool made: not ours to change
], ids=["0600", "0640"])
def test_a_newer_version_only_in_the_wal_is_refused_and_untouched(tmp_path: Path, counter: BpeTokenCounter,
                                                                  file_mode: int) -> None:
    db = tmp_path / "data" / "tiermem.db"
    store = ColdStore(db, tokens=counter)
    store.append("c", Message(role="user", content="kept as it is"))
    store.close()
    os.chmod(db, file_mode)
    newer = schema_version() + NEWER_STEPS
    _newer_migration_killed(db, newer)
    before = _files(db)
    assert before["-wal"] is not None  # the newer version is in the WAL only
    assert Path(str(db) + "-shm").exists()

    with pytest.raises(SchemaTooNew) as info:
        ColdStore(db, tokens=counter)
    assert f"schema version {newer}" in str(info.value)
    assert _files(db) == before
    assert Path(str(db) + "-shm").exists()


def test_an_older_version_in_the_wal_is_migrated(tmp_path: Path, counter: BpeTokenCounter) -> None:
    # the probe of a WAL refuses only what is newer: a store killed with its own
    # version's commits in the WAL (every crash) opens and keeps them
    db = tmp_path / "data" / "tiermem.db"
    store = ColdStore(db, tokens=counter)
    store.append("c", Message(role="user", content="in the WAL"))
    store.close()
    _newer_migration_killed(db, schema_version())
    store = ColdStore(db, tokens=counter)
    try:
        assert [m.text for m in store.history("c")] == ["in the WAL"]
        assert store.version == schema_version()
    finally:
        store.close()

"""Migrations: an ordered list recorded in PRAGMA user_version. A fresh or empty file is
brought to the current version, reopening changes nothing, concurrent first opens both
succeed, and a database written by a newer tiermem is refused without being touched."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest
import sqlean
from cold_helpers import file_sizes, raw, worker

from tiermem.tiers.cold import ColdStore
from tiermem.tiers.errors import SchemaTooNew
from tiermem.tiers.models import Message
from tiermem.tiers.schema import MIGRATIONS, schema_version
from tiermem.tiers.tokens import BpeTokenCounter


def _schema(db: Path) -> list[tuple[str, str]]:
    with raw(db) as conn:
        return conn.execute("SELECT name, sql FROM sqlite_master ORDER BY name").fetchall()


def _user_version(db: Path) -> int:
    with raw(db) as conn:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])


def _make_empty_sqlite(db: Path) -> None:
    # a valid SQLite database with no tables (a header, nothing else)
    conn = sqlean.connect(str(db))
    conn.execute("PRAGMA user_version = 0")
    conn.execute("VACUUM")
    conn.close()


@pytest.mark.parametrize(
    "prepare",
    [
        lambda db: None,  # no file at all (and no directory)
        lambda db: (db.parent.mkdir(parents=True), db.touch()),  # a zero-byte file
        lambda db: (db.parent.mkdir(parents=True), _make_empty_sqlite(db)),  # a database without tables
    ],
    ids=["missing", "zero-bytes", "empty-sqlite"],
)
def test_migrating_an_empty_database(tmp_path: Path, counter: BpeTokenCounter, prepare: object) -> None:
    db = tmp_path / "data" / "tiermem.db"
    prepare(db)  # type: ignore[operator]
    store = ColdStore(db, tokens=counter)
    try:
        assert store.version == len(MIGRATIONS) == schema_version()
        assert store.append("c", Message(role="user", content="works")) == 0
    finally:
        store.close()
    assert _user_version(db) == len(MIGRATIONS)
    with raw(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_reopening_is_idempotent(tmp_path: Path, counter: BpeTokenCounter) -> None:
    db = tmp_path / "data" / "tiermem.db"
    store = ColdStore(db, tokens=counter)
    store.append("c", Message(role="user", content="first"))
    uuid = store.db_uuid
    store.close()
    schema = _schema(db)
    for _ in range(3):
        store = ColdStore(db, tokens=counter)
        try:
            # no step ran twice: same version, same schema, same identity, same data
            assert store.version == len(MIGRATIONS)
            assert store.db_uuid == uuid
            assert [m.text for m in store.history("c")] == ["first"]
        finally:
            store.close()
        assert _schema(db) == schema


@pytest.mark.parametrize("wal", [False, True], ids=["rollback-journal", "wal"])
def test_newer_database_is_refused_and_untouched(tmp_path: Path, counter: BpeTokenCounter, wal: bool) -> None:
    db = tmp_path / "data" / "tiermem.db"
    ColdStore(db, tokens=counter).close()
    newer = schema_version() + 3
    with raw(db) as conn:
        if not wal:  # a newer tiermem might have chosen another journal mode
            conn.execute("PRAGMA journal_mode = DELETE")
        conn.execute(f"PRAGMA user_version = {newer}")
        conn.execute("CREATE TABLE from_the_future(x)")
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    sizes = file_sizes(db)

    with pytest.raises(SchemaTooNew) as info:
        ColdStore(db, tokens=counter)
    # the message says what was found, what is supported, and what to do
    assert f"schema version {newer}" in str(info.value)
    assert f"up to {schema_version()}" in str(info.value)
    assert "upgrade tiermem" in str(info.value)
    # not a byte changed: not the version, not the journal mode, not the schema
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest
    assert file_sizes(db) == sizes
    assert _user_version(db) == newer


def test_two_processes_open_a_fresh_database_at_once(tmp_path: Path) -> None:
    # a race: each process meets the other before every open, and it runs a few times
    fresh = [str(tmp_path / "data" / f"tiermem-{i}.db") for i in range(5)]
    sync = tmp_path / "sync"
    sync.mkdir()
    procs = [worker("open", str(sync), "2", *fresh, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(2)]
    versions = []
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        versions.append([int(v) for v in out.split()])
    # both saw every database fully migrated (to the steps a bare `tiers.cold` knows,
    # which may be fewer than this process has registered)
    assert versions[0] == versions[1] == [versions[0][0]] * len(fresh)
    for db in fresh:
        assert _user_version(Path(db)) == versions[0][0]

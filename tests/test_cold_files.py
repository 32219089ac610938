"""The database holds every message a user ever sent: the file and its WAL sidecars
are private (0600) whatever the umask, because the file is created 0600 before WAL
mode exists and SQLite gives the sidecars the database file's mode."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tiermem.tiers.cold import ColdStore
from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)  # the common default: files 0644, readable by everyone
    try:
        yield
    finally:
        os.umask(old)


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


@pytest.mark.usefixtures("umask_022")
def test_db_wal_and_shm_are_private(tmp_path: Path, counter: BpeTokenCounter) -> None:
    data = tmp_path / "nested" / "data"  # neither directory exists yet
    db = data / "tiermem.db"
    store = ColdStore(db, tokens=counter)
    try:
        store.append("c", Message(role="user", content="my passport number is 123"))
        # while open, all three files exist
        files = [db, Path(f"{db}-wal"), Path(f"{db}-shm")]
        assert all(p.exists() for p in files)
        assert {p.name: oct(_mode(p)) for p in files} == {p.name: oct(0o600) for p in files}
        # the data dir was created, and is not open to others either
        assert data.is_dir()
        assert _mode(data) & 0o077 == 0
    finally:
        store.close()


@pytest.mark.usefixtures("umask_022")
def test_reopening_keeps_and_restores_the_mode(tmp_path: Path, counter: BpeTokenCounter) -> None:
    db = tmp_path / "data" / "tiermem.db"
    ColdStore(db, tokens=counter).close()
    assert _mode(db) == 0o600
    os.chmod(db, 0o644)  # someone loosened it (a copy, a restore from backup)
    store = ColdStore(db, tokens=counter)
    try:
        store.append("c", Message(role="user", content="x"))
        for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
            assert _mode(p) == 0o600, p
    finally:
        store.close()


def test_existing_data_dir_is_used_as_is(tmp_path: Path, counter: BpeTokenCounter) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o750)
    (data / "unrelated.txt").write_text("keep me")
    store = ColdStore(data / "tiermem.db", tokens=counter)
    store.close()
    assert (data / "unrelated.txt").read_text() == "keep me"
    assert (data / "tiermem.db").exists()

"""The rewrite (VACUUM) an upgraded store written before `secure_delete` owes is not done
where it would hurt: a file larger than REWRITE_AT_OPEN_MAX_BYTES is left to an erasure
(at an open it blocked other processes' writes, 9.9 s for a reviewer's 1.49 GB store,
and took memory about its size); too little free space for its WAL, it is not tried; a
rewrite that failed (a full disk) has its WAL truncated at once, is recorded, and is not
tried again at every open. One warning says why and what does it. A reviewer found a
store larger than the free space failing it at every open, the disk left full while the
process ran.

The store is the old one of test_residue_before_secure_delete (built directly); the
thresholds are lowered by monkeypatching, and the full disk is a real tmpfs (root only)."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from cold_helpers import raw
from test_residue_before_secure_delete import RESIDUE_META, TURNS, _copies, _old_store

from tiermem.tiers import cold
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.schema import connect, migrate
from tiermem.tiers.tokens import BpeTokenCounter

FAILED_META = "residue_rewrite_failed"  # cold.RESIDUE_FAILED_KEY (by value: this file runs on the code before it)
TMPFS_BYTES = 20 * 2**20  # the small file system the full-disk case fills
SMALL_WAL_BYTES = 16 * 2**10  # a handful of 4 KiB frames: meta rows, no rewrite's pages


def _meta(db: Path, key: str) -> bool:
    with raw(db) as conn:
        return conn.execute("SELECT 1 FROM meta WHERE key = ?", (key,)).fetchone() is not None


def _wal_bytes(db: Path) -> int:
    wal = Path(f"{db}-wal")
    return wal.stat().st_size if wal.exists() else 0


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno >= logging.WARNING and "before schema 13" in r.getMessage()]


@pytest.mark.parametrize(("patch", "reason", "erasure_rewrites"), [
    # larger than an open rewrites (threshold lowered to 1 byte): left to the erasure, which does it
    ({"REWRITE_AT_OPEN_MAX_BYTES": 1}, "larger than", True),
    # too little free space (a margin larger than any disk): neither the open nor the erasure tries it
    ({"REWRITE_FREE_MARGIN_BYTES": 2**60}, "too little free space", False),
])
def test_an_open_leaves_the_rewrite_owed_where_it_would_hurt(
        tmp_path: Path, counter: BpeTokenCounter, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch,
        patch: dict[str, int], reason: str, erasure_rewrites: bool) -> None:
    db = tmp_path / "tiermem.db"
    _old_store(db)
    for name, value in patch.items():
        monkeypatch.setattr(cold, name, value, raising=False)
    caplog.set_level(logging.WARNING, logger="tiermem.cold")
    store = ColdStore(db, tokens=counter)
    try:
        assert _copies(db, "olderased") > 0  # not rewritten at the open (before: 0, rewritten)
        assert _meta(db, RESIDUE_META)       # still owed
        warned = _warnings(caplog)
        assert len(warned) == 1 and reason in warned[0] and "tiermem delete" in warned[0]
        assert not any("an erasure interrupted" in r.getMessage() for r in caplog.records)  # there was none
        report = store.delete_conversation("later")
        assert report.messages == TURNS
        assert report.scrubbed is erasure_rewrites
        assert (_copies(db, "olderased") == 0) is erasure_rewrites
        assert _meta(db, RESIDUE_META) is not erasure_rewrites
        assert len(_warnings(caplog)) == 1  # one warning, not one per scrub
        assert _wal_bytes(db) == 0
    finally:
        store.close()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "disk"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_BYTES}", "tmpfs", str(mnt)],
                          capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"a tmpfs cannot be mounted here (needs root): {done.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_rewrite_that_fills_the_disk_hands_it_back_and_is_not_retried_at_every_open(
        small_disk: Path, counter: BpeTokenCounter, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    db = small_disk / "tiermem.db"
    _old_store(db)
    with raw(db) as conn:  # the upgrade's migrations done while there is room (their WAL is small)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA secure_delete = ON")
    conn = connect(db)
    try:
        migrate(conn, str(db))
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    size = db.stat().st_size
    # the check before the rewrite passed (as where its estimate is short): the VACUUM itself fills the disk
    monkeypatch.setattr(cold, "REWRITE_FREE_MARGIN_BYTES", -(2**40), raising=False)
    filler = small_disk / "filler"
    with filler.open("wb") as f:  # leave a quarter of the file's size free: less than its rewrite needs
        f.write(b"\0" * (shutil.disk_usage(small_disk).free - size // 4))
    caplog.set_level(logging.WARNING, logger="tiermem.cold")
    store = ColdStore(db, tokens=counter)
    try:
        # the WAL is handed back at once, while the process runs (before: left grown until
        # the disk was full, until its last connection closed)
        # (a few frames of the open's own small writes after it: the tokenizer's record)
        assert _wal_bytes(db) < SMALL_WAL_BYTES
        (small_disk / "other_app.log").write_bytes(b"x" * (size // 8))  # another file's write has room
        os.remove(small_disk / "other_app.log")
    finally:
        store.close()
    assert _copies(db, "olderased") > 0 and _meta(db, RESIDUE_META) and _meta(db, FAILED_META)
    assert any("rewrite failed" in w for w in _warnings(caplog))
    caplog.clear()
    ColdStore(db, tokens=counter).close()  # the next open: not tried again (the disk is as full)
    assert any("failed" in w and "ago" in w for w in _warnings(caplog))
    filler.unlink()  # room again: the next open rewrites it
    ColdStore(db, tokens=counter).close()
    assert _copies(db, "olderased") == 0
    assert not _meta(db, RESIDUE_META) and not _meta(db, FAILED_META)

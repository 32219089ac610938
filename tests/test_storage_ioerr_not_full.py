"""An I/O error on a disk with room is a failing disk (503, retry), not a full one.

903d208 said any SQLite I/O error on a disk with under 1 MiB free was the disk being
full (507 "storage full ... is full (614400 bytes free)"), though the next write went
through: an operator freed space instead of checking a failing disk, and HTTP clients got
507, which they do not retry. The disk is a real tmpfs the test mounts (root only) and
fills, leaving the bytes each case names.

Invariants: an I/O error is said as a full disk only with less than two -shm pieces free
(IOERR_FULL_FREE_BYTES); SQLite's own "database or disk is full" is said as the disk
being full under FULL_DISK_FREE_BYTES; the message gives the bytes free as read, never a
made-up 0.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from tmpfs_helpers import fill, mounted_tmpfs

from tiermem.tiers.files import FULL_DISK_FREE_BYTES, IOERR_FULL_FREE_BYTES, storage_problem

TMPFS_SIZE = "2m"
KIB = 1024
IOERR_TEXT = "disk I/O error"
FULL_TEXT = "database or disk is full"

# (error text, bytes left free on the disk, status, words the message must hold)
CASES = [
    # an I/O error with 600 KiB free: a failing disk (before: "is full (614400 bytes free)", 507)
    (IOERR_TEXT, 600 * KIB, 503, "storage is failing"),
    # an I/O error with nothing free: the disk is full (SQLite growing its -shm)
    (IOERR_TEXT, 0, 507, "is full (0 bytes free)"),
    # an I/O error with just under two -shm pieces free: still the disk
    (IOERR_TEXT, IOERR_FULL_FREE_BYTES - 4 * KIB, 507, "is full ("),
    # SQLite's own "full" with 600 KiB free: the disk, as the size cap has no part here
    (FULL_TEXT, 600 * KIB, 507, "the disk holding"),
]


@pytest.mark.parametrize(("text", "leave", "status", "says"), CASES,
                         ids=["ioerr-room", "ioerr-none", "ioerr-under-two-pieces", "full-under-1mib"])
def test_an_io_error_with_room_is_a_failing_disk(tmp_path: Path, text: str, leave: int, status: int,
                                                 says: str) -> None:
    assert leave < FULL_DISK_FREE_BYTES
    with mounted_tmpfs(tmp_path / "mnt", TMPFS_SIZE) as mnt:
        data = mnt / "data"
        data.mkdir()
        fill(mnt, leave=leave)
        said = storage_problem(sqlite3.OperationalError(text), db_path=data / "tiermem.db")
        assert said is not None
        assert said.status == status, said
        assert says in said.detail, said.detail

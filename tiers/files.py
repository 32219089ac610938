"""Private files and directories, and storage that cannot be written.

Invariants:

- Every directory tiermem creates is mode 0700 and every file 0600, set exactly (the
  umask can only strip bits, so a chmod follows each creation). Only what this process
  created is chmodded: a directory or file that already existed keeps its mode, so that
  a refusing process (a database newer than the code, a read-only data dir) leaves what
  it found untouched.
- "Writable" is asked of the kernel (`access(2)` with W_OK), which knows about read-only
  mounts (EROFS) and immutable files (EPERM) even for root, for whom mode bits mean
  nothing. It is a cheap check (a few syscalls), used when opening the database and by
  `/healthz`.

This module imports only the standard library, so every tier may use it.
"""

from __future__ import annotations

import os
from pathlib import Path

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
WAL_SUFFIXES = ("-wal", "-shm")


def private_dir(path: Path) -> None:
    """Create `path` and every missing parent as 0700 directories; existing ones are left
    as they are (a data dir inside the user's own tree keeps the user's choice)."""
    path = Path(path)
    missing: list[Path] = []
    p = path
    while not p.exists():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    for d in reversed(missing):
        try:
            d.mkdir(mode=PRIVATE_DIR_MODE)
        except FileExistsError:
            continue  # another process made it first; its creator set its mode
        os.chmod(d, PRIVATE_DIR_MODE)


def create_private_file(path: Path) -> bool:
    """Create `path` as an empty 0600 file (its directory as by `private_dir`) unless it
    exists; True when this call created it. An existing file is not opened for writing
    and its mode is not changed."""
    path = Path(path)
    if path.exists():
        return False
    private_dir(path.parent)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, PRIVATE_FILE_MODE)
    except FileExistsError:
        return False
    try:
        os.fchmod(fd, PRIVATE_FILE_MODE)
    finally:
        os.close(fd)
    return True


def writable(path: Path) -> bool:
    """True when this process may write `path` (a file, or a directory's entries)."""
    return os.access(path, os.W_OK)


def database_writable(db_path: Path) -> bool:
    """True when a SQLite database in WAL mode can be written here: the file itself, its
    sidecars where they exist, and its directory (SQLite creates and deletes the sidecars)."""
    db_path = Path(db_path)
    if not writable(db_path.parent):
        return False
    if db_path.exists() and not writable(db_path):
        return False
    for suffix in WAL_SUFFIXES:
        side = db_path.with_name(db_path.name + suffix)
        if side.exists() and not writable(side):
            return False
    return True

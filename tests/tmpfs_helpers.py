"""A real small filesystem for full-disk tests: a tmpfs the test mounts (root only) and
fills. The tests that use it skip, with the reason, where it cannot be mounted."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

FILL_CHUNK_BYTES = 1 << 20  # the filler's writes; the last one comes back short, then ENOSPC
FILLER = "filler"


@contextlib.contextmanager
def mounted_tmpfs(mnt: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` (mount(8)'s spelling: "16m") at `mnt`, lazily unmounted after."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(mnt)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (no CAP_SYS_ADMIN in this container?): {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True, check=False)


def fill(mnt: Path, leave: int = 0) -> int:
    """Write a filler file until the tmpfs refuses a byte more, then give `leave` bytes
    back: what it holds, in bytes."""
    written = 0
    with open(mnt / FILLER, "wb", buffering=0) as f:
        with contextlib.suppress(OSError):
            while True:
                n = f.write(b"\0" * FILL_CHUNK_BYTES)
                written += n or 0
                if not n:
                    break
        assert os.statvfs(mnt).f_bavail == 0
        written -= leave
        f.truncate(written)
    return written

"""A redis-server start that fails on a full disk leaves no temporary pid file behind.

The watchdog writes its pid file as a temporary `<name>.<pid>.tmp` renamed over it; a
write that failed (ENOSPC) left the temporary file, so each failed start on a full disk
left one more `redis/watchdog.pid.<pid>.tmp` in the data dir, for good. Real
EmbeddedRedis starts (the watchdog daemon, a real redis-server binary) on a real tmpfs
the test mounts and fills (root only: skipped otherwise, with the reason).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tmpfs_helpers import fill, mounted_tmpfs

from tiermem.tiers.errors import RedisStartError
from tiermem.tiers.redis_server import EmbeddedRedis

TMPFS_SIZE = "1m"  # the size matters not: it is filled to the last byte
STARTS = 3  # failed starts in a row: before, as many temporary files


def test_failed_starts_on_a_full_disk_leave_no_temporary_files(tmp_path: Path) -> None:
    with mounted_tmpfs(tmp_path / "mnt", TMPFS_SIZE) as mnt:
        data = mnt / "data"
        data.mkdir()
        fill(mnt)
        for _ in range(STARTS):
            with pytest.raises(RedisStartError, match="No space left on device"):
                EmbeddedRedis(data).ensure()
        left = sorted(p.name for p in data.rglob("*.tmp"))
        assert left == [], left  # before: one watchdog.pid.<pid>.tmp per start

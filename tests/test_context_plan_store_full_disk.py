"""A context is answered on a full disk where only its plan cannot be stored.

With `store_plans = true`, `Memory.context` wrote the plan log after building the
context and let the store's refusal through: on a full disk every context failed (the
service answered 507) though nothing else of it needed the disk. The plan is a record of
how contexts were chosen; its loss is logged.

Invariants: a storage refusal of the plan's write leaves the context answered and logs a
warning naming the plan; with room, the plan is stored as before. The disk is a real
tmpfs the test mounts (root only: skipped otherwise) and fills to the last byte after
emptying the store's WAL.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from pathlib import Path

import pytest
from hash_embedder import HashEmbedder
from tmpfs_helpers import fill, mounted_tmpfs

from tiermem import Config, Memory

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

TMPFS_SIZE = "4m"  # room for a small store (~300 KiB) and its sidecars
CONV = "c"
BUDGET = 500


def test_a_full_disk_costs_the_plan_not_the_context(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with mounted_tmpfs(tmp_path / "mnt", TMPFS_SIZE) as mnt:
        config = Config(data_dir=mnt / "data", store_plans=True)
        with Memory(config, embedder=HashEmbedder(), hot=False, background_indexing=False) as mem:
            for i in range(4):
                mem.append(CONV, {"role": "user", "content": f"message number {i} about the trip"})
            mem.catch_up(CONV)
            assert mem.context(CONV, query="the trip", budget=BUDGET).messages  # with room: stored
            with contextlib.closing(sqlite3.connect(config.db_path)) as con:
                assert con.execute("SELECT COUNT(*) FROM plans").fetchone()[0] == 1
                assert con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0  # 0: not blocked
            fill(mnt)
            with caplog.at_level(logging.WARNING, logger="tiermem"):
                ctx = mem.context(CONV, query="the trip", budget=BUDGET)  # before: raised, the disk full
            assert ctx.messages
            assert any("could not store the context's plan" in r.getMessage() for r in caplog.records)

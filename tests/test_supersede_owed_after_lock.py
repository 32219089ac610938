"""A correction whose supersession could not be decided when it was embedded is decided
by the next catch-up, in this process or after a reopen. The vectors are committed
(`embedded = 1`) before the after-embedding hook decides supersession; a lock held past
busy_timeout_ms at that moment (PostgreSQL: an erasure's VACUUM FULL or an operator's
LOCK TABLE; SQLite: another writer) failed the hook, and since nothing embeds that turn
again the decision was lost for good: "My seat is 12A" stayed current after "now 14C",
reopened or not (tiers/owed.py). Real SQLite files, a real PostgreSQL server, a real
second connection holding the lock."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlean
from pg_server import fresh_schema

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder

BUSY_TIMEOUT_MS = 300  # the hook's wait for the lock, then it fails
CONV = "c"
ORDER = "My seat on the Lisbon flight is 12A."
CORRECTION = "Correction: my seat on the Lisbon flight is now 14C, not 12A."
DECIDED = [(0, "superseded"), (2, "current")]
OWED_PREFIX = "owed-decision:"  # tiers.owed's meta key prefix (spelt out: the test runs on the code before)


def config(engine: str, tmp_path: Path, pg_url: str, schema: str) -> Config:
    if engine == "sqlite":
        return Config(data_dir=tmp_path / "data", busy_timeout_ms=BUSY_TIMEOUT_MS)
    return Config(data_dir=tmp_path / "data", cold_url=pg_url, cold_schema=schema, busy_timeout_ms=BUSY_TIMEOUT_MS)


def locker(engine: str, tmp_path: Path, pg_url: str, schema: str) -> Callable[[], Any]:
    """A second connection taking the lock the hook meets; returns it (rolled back to release)."""
    def take() -> Any:
        if engine == "sqlite":
            # the store's own driver (another SQLite library's locks would not be seen in-process)
            conn = sqlean.connect(str(tmp_path / "data" / "tiermem.db"), isolation_level=None)
            conn.execute("BEGIN IMMEDIATE")  # the write lock: the hook's set_superseded waits
            return conn
        pconn = psycopg.connect(pg_url)
        pconn.execute(f'LOCK TABLE "{schema}".messages IN ACCESS EXCLUSIVE MODE')  # as sup2.py's operator
        return pconn
    return take


def correct_under_lock(mem: Memory, take: Callable[[], Any]) -> None:
    mem.append(CONV, {"role": "user", "content": ORDER})
    mem.append(CONV, {"role": "assistant", "content": "Noted."})
    mem.cold.index_pending()
    orig = mem.cold.on_embedded
    assert orig is not None
    held: list[Any] = []

    def hooked(stored: list[tuple[str, int, Any]]) -> None:
        # the lock arrives between the vectors' commit and the decision, once
        if not held:
            held.append(take())
            try:
                orig(stored)
            finally:
                held[0].rollback()
                held[0].close()
            return
        orig(stored)

    mem.cold.on_embedded = hooked
    mem.append(CONV, {"role": "user", "content": CORRECTION})
    assert held, "the correction was embedded behind the lock"
    assert [(f.position, f.status) for f in mem.facts(CONV)] != DECIDED  # the hook failed


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
# (where the owed decision is made: this process's next catch-up, or another process's
# after a close and reopen: the record in meta)
@pytest.mark.parametrize("reopen", [False, True])
def test_a_correction_whose_hook_hit_a_lock_is_decided_by_the_next_catch_up(
        tmp_path: Path, embedder: FastEmbedder, engine: str, reopen: bool, request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue("pg_url") if engine == "postgres" else ""
    schema = fresh_schema() if engine == "postgres" else ""
    cfg = config(engine, tmp_path, url, schema)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        correct_under_lock(mem, locker(engine, tmp_path, url, schema))
        if not reopen:
            mem.cold.index_pending()  # before: nothing pending, nothing decided
            assert [(f.position, f.status) for f in mem.facts(CONV)] == DECIDED
    if reopen:
        with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
            mem.cold.index_pending()  # before: nothing pending, nothing decided
            assert [(f.position, f.status) for f in mem.facts(CONV)] == DECIDED
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        # the record is gone once decided: the next open has nothing owed
        with mem.cold.reading() as conn:
            rows = conn.execute(f"SELECT key FROM meta WHERE key LIKE '{OWED_PREFIX}%'").fetchall()
        assert list(rows) == []
        assert [(f.position, f.status) for f in mem.facts(CONV)] == DECIDED

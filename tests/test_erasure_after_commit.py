"""An erasure that committed answers its report, whatever fails after the commit. Its
after-commit steps (crossing the Redis keys off `redis_purge`, the scrub, the size after
it) each take the store again: on PostgreSQL a pooled connection, which another request
may hold (no connection within the pool's wait: StoreUnreachable), on SQLite the write
lock, which another process may hold (busy). Before (a review of the PostgreSQL
operations changes, 2026-12-06), that failure escaped the erasure: HTTP answered 503
"nothing was written" for an erasure that happened (a retry: 404), and the erasure hooks
never ran. Now each step left undone stays owed, recorded with the commit, and is done
later: the keys by the next purge_deferred (the next Memory to open), the scrub by the
next open. A real embedded Redis, the embedded PostgreSQL, a real SQLite file locked by
another process."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

import pytest
from cold_helpers import locked
from conftest import full_memory
from pg_server import fresh_schema

import tiermem
from tiermem import Config, ErasureReport, Memory
from tiermem.tiers.cold import SCRUB_PENDING_KEY
from tiermem.tiers.embed import Embedder

POOL_WAIT_S = 0.5  # PostgreSQL: how long each step waits for the pool's one connection
BUSY_TIMEOUT_MS = 200  # SQLite: how long each step waits for the write lock
NS = "acme"


def take_the_store(mem: Memory, engine: str, held: contextlib.ExitStack) -> None:
    """What another request (PostgreSQL: the pool's one connection) or another process
    (SQLite: the write lock) takes right after the erasure's commit, held until `held`
    closes."""
    if engine == "postgres":
        held.enter_context(mem.cold.reading())
    else:
        held.enter_context(locked(mem.config.db_path))


def scrub_owed(mem: Memory, engine: str) -> bool:
    mark = "%s" if engine == "postgres" else "?"
    with mem.cold.reading() as c:
        return c.execute(f"SELECT 1 FROM meta WHERE key = {mark}", (SCRUB_PENDING_KEY,)).fetchone() is not None


# (engine, its config: a pool of one connection with a short wait, or a short busy timeout)
ENGINES: list[tuple[str, Callable[[Path, str | None], Config]]] = [
    # the reviewer's setup: another request takes the pool's one connection
    ("postgres", lambda d, url: Config(data_dir=d, cold_url=url, cold_schema=fresh_schema(), cold_pool_size=1,
                                       cold_pool_wait_s=POOL_WAIT_S)),
    # SQLite's twin: another process holds the write lock past busy_timeout_ms
    ("sqlite", lambda d, url: Config(data_dir=d, busy_timeout_ms=BUSY_TIMEOUT_MS)),
]


@pytest.mark.parametrize(("engine", "config_of"), ENGINES, ids=[e[0] for e in ENGINES])
def test_an_erasure_that_committed_returns_its_report_and_owes_the_rest(
        request: pytest.FixtureRequest, tmp_path: Path, embedder: Embedder, engine: str,
        config_of: Callable[[Path, str | None], Config]) -> None:
    url = request.getfixturevalue("pg_url") if engine == "postgres" else None
    cfg = config_of(tmp_path / "data", url)
    erased: list[list[str]] = []
    with full_memory(cfg, embedder) as mem:
        mem.append_many("secret", [{"role": "user", "content": f"line {i} of the secret thread"} for i in range(6)],
                        namespace=NS)
        mem.append("kept", {"role": "user", "content": "another thread"}, namespace=NS)
        key = mem.cold.key_of(NS, "secret") or ""
        assert mem.hot is not None and mem.hot.tier.read(key) is not None  # the premise: a hot set
        mem.erasure_hooks.append(lambda report: erased.append(report.conversation_ids))
        with contextlib.ExitStack() as held:
            def after_commit(step: str) -> None:
                if step == "erase:committed":
                    take_the_store(mem, engine, held)

            mem.cold._fault = after_commit  # type: ignore[attr-defined]
            # before: StoreUnreachable (PostgreSQL) or "database is locked" (SQLite) from
            # the crossing-off of the Redis keys: HTTP's 503 "nothing was written"
            report: ErasureReport = mem.delete_conversation("secret", namespace=NS)
            mem.cold._fault = None  # type: ignore[attr-defined]
        assert report.conversations == 1 and report.conversation_ids == ["secret"] and report.messages == 6
        assert report.scrubbed is False  # the scrub could not run: owed, not claimed
        assert erased == [["secret"]]  # the erasure hooks ran (the inspector's history goes with it)
        assert mem.hot.tier.read(key) is None  # its Redis keys went at the commit
        with pytest.raises(tiermem.ConversationNotFound):
            mem.history("secret", namespace=NS)
        # owed, recorded with the commit: the crossing-off of its Redis keys and the scrub
        assert mem.cold.deferred_purges() == [key]
        assert scrub_owed(mem, engine)
        assert [m.text for m in mem.history("kept", namespace=NS)] == ["another thread"]
    # and done later: the next Memory to open purges the owed keys and finishes the scrub
    with full_memory(cfg, embedder) as mem:
        assert mem.cold.deferred_purges() == []
        assert not scrub_owed(mem, engine)
        assert [t["id"] for t in mem.tombstones(namespace=NS)] == ["secret"]

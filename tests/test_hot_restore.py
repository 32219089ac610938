"""A restored backup and the Redis copies of the discarded timeline (tiermem.hotlink,
tiers.warm, tiers.keys.turn_fingerprint), on a real redis-server that outlives the
restore and real SQLite files.

README "Backups": back the file up, later copy it back. Redis still holds the hot sets
and cached views built from the newer log, under the same generation (db uuid and
conversation created_at survive a restore). On the code before (audit_hot, finding 1)
`_sync` trusted a set whose last position was at or past the log's, so context() showed
turns no longer in the log, and a set behind it was caught up on top of the discarded
turns; the warm cache served a view of the discarded timeline (and, its version being
higher, kept the log's own out of the cache). Now each copy records the fingerprint of
the last turn it covers and is used only while the log holds that very append.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from hot_fixtures import own_redis

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.redis_server import EmbeddedRedis

COMMON = 3  # turns in the backup
DISCARDED = 3  # turns appended after the backup, then lost to the restore
BIG_BUDGET = 20_000  # every turn fits in the hot set and the context


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    """A Redis server of the test's own: it keeps the sets across the restore."""
    with own_redis(tmp_path / "redis") as srv:
        yield srv


def say(mem: Memory, i: int, text: str) -> None:
    mem.append("c", {"role": "user" if i % 2 == 0 else "assistant", "content": text})


def backup(cfg: Config, to: Path) -> None:
    src, dst = sqlite3.connect(cfg.db_path), sqlite3.connect(to)
    try:
        src.backup(dst)
    finally:
        dst.close()
        src.close()


def restore(cfg: Config, frm: Path) -> None:
    """README: copy the backup back with the service stopped."""
    for suffix in ("", "-wal", "-shm"):
        Path(str(cfg.db_path) + suffix).unlink(missing_ok=True)
    shutil.copy(frm, cfg.db_path)


def shown(messages: list[dict], word: str) -> int:
    return sum(word in json.dumps(m) for m in messages)


# restored turns appended after the restore, against the DISCARDED turns the set holds
HOT_CASES = [
    pytest.param(1, id="set-ahead-of-the-log"),  # the set's last position is past the log's
    pytest.param(DISCARDED, id="same-last-position"),  # equal positions, other turns
    pytest.param(DISCARDED + 3, id="log-passed-the-set"),  # caught up on top of discarded turns
]


@pytest.mark.parametrize("restored", HOT_CASES)
def test_context_after_a_restore_shows_only_the_log(
        tmp_path: Path, server: EmbeddedRedis, embedder: FastEmbedder, restored: int) -> None:
    cfg = Config(data_dir=tmp_path / "data", redis_url=server.url, hot_budget_tokens=BIG_BUDGET)
    with Memory(cfg, embedder=embedder, background_indexing=False) as mem:
        for i in range(COMMON):
            say(mem, i, f"COMMON turn {i} about the trip")
        backup(cfg, tmp_path / "backup.db")
        for i in range(COMMON, COMMON + DISCARDED):
            say(mem, i, f"DISCARDED turn {i}: card 4111-{i}")
        mem.context("c", None, BIG_BUDGET)
    restore(cfg, tmp_path / "backup.db")
    with Memory(cfg, embedder=embedder, background_indexing=False) as mem:
        for i in range(COMMON, COMMON + restored):
            say(mem, i, f"RESTORED turn {i}: beaches")
        assert not any("DISCARDED" in json.dumps(m.body) for m in mem.history("c"))  # the premise
        ctx = mem.context("c", None, BIG_BUDGET)
        assert shown(ctx.messages, "DISCARDED") == 0
        assert shown(ctx.messages, "RESTORED") == restored and shown(ctx.messages, "COMMON") == COMMON
        assert mem.hot is not None and not ctx.plan.degraded
        hs = mem.hot.tier.read("c")
        assert hs is not None
        log = {m.position: m.body for m in mem.history("c")}
        assert [json.loads(t.payload) for t in hs.turns] == [log[t.position] for t in hs.turns]
        assert hs.last_position == max(log)


# (turns of the discarded timeline, turns appended after the restore): where the cached
# view's last position falls in the restored log
WARM_CASES = [
    pytest.param(24, 6, id="view-ahead-of-the-log"),  # the view ends past the log's last turn
    pytest.param(24, 30, id="view-end-is-another-turn"),  # the log holds its end position, not its turn
]


@pytest.mark.parametrize(("discarded", "restored"), WARM_CASES)
def test_warm_cache_after_a_restore_serves_only_views_of_the_log(
        tmp_path: Path, server: EmbeddedRedis, embedder: FastEmbedder,
        discarded: int, restored: int) -> None:
    cfg = Config(data_dir=tmp_path / "data", redis_url=server.url)
    with Memory(cfg, embedder=embedder, background_indexing=False) as mem:
        for i in range(6):
            say(mem, i, f"I like hiking in the Alps, day {i}.")
        backup(cfg, tmp_path / "backup.db")
        for i in range(6, 6 + discarded):
            say(mem, i, f"DISCARDED fact {i}: my passport number is X{i}00.")
        mem.consolidate("c")
        cached = mem.warm.latest("c", "rolling")
        assert cached is not None and "DISCARDED" in cached.text()  # the premise: a cached view of it
    restore(cfg, tmp_path / "backup.db")
    with Memory(cfg, embedder=embedder, background_indexing=False) as mem:
        for i in range(6, 6 + restored):
            say(mem, i, f"RESTORED fact {i}: I prefer the seaside.")
        view = mem.warm.latest("c", "rolling")
        assert view is None or "DISCARDED" not in view.text()
        mem.consolidate("c")
        view = mem.warm.latest("c", "rolling")
        last = mem.cold.last_position("c")
        assert view is not None and "DISCARDED" not in view.text() and view.end_position <= last
        # the log's own version is the one cached now, whatever its number
        own = mem.warm._latest_cold("c", "rolling", "")
        assert own is not None and (view.version, view.end_position) == (own.version, own.end_position)

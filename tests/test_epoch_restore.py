"""A restored backup and the epoch state of the discarded timeline (planner.epoch: the
state records the fingerprint of the log turn at its `read_position`, tiers.keys), on a
real redis-server that outlives the restore and real SQLite files.

README "Backups": copy the file back with the service stopped; Redis keeps running, and
db uuid, conversation key and first turn survive the restore, so the epoch key matches.
On the code before (9ec5001) the shared state of the newer, discarded timeline was
extended: the context showed its turns (card numbers the log no longer holds) and left
out the log's own turns at the positions they took. Now such a state is a missing one: a
new epoch whose reason says so.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hot_fixtures import own_redis
from test_hot_restore import backup, restore

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.redis_server import EmbeddedRedis

pytestmark = pytest.mark.usefixtures("shared_vectors")

COMMON = 6  # turns in the backup
DISCARDED = 3  # turns appended after the backup and planned, then lost to the restore
BUDGET = 3000  # every turn fits: nothing is left out for room


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    """A Redis server of the test's own: it keeps the epoch state across the restore."""
    with own_redis(tmp_path / "redis") as srv:
        yield srv


def say(mem: Memory, i: int, text: str) -> None:
    mem.append("c", {"role": "user" if i % 2 == 0 else "assistant", "content": text})


def shown(messages: list[dict], word: str) -> int:
    return sum(word in json.dumps(m) for m in messages)


# turns appended after the restore, against the DISCARDED turns the state read
CASES = [
    pytest.param(1, id="state-read-past-the-log"),  # its read_position is past the log's end
    pytest.param(DISCARDED, id="same-read-position"),  # the log holds that position: another turn
    pytest.param(DISCARDED + 3, id="log-passed-the-state"),  # the reviewer's case: 3 shown, 3 new appended
]


@pytest.mark.parametrize("restored", CASES)
def test_a_restored_backup_does_not_extend_the_discarded_timelines_epoch(
        tmp_path: Path, server: EmbeddedRedis, embedder: FastEmbedder, restored: int) -> None:
    cfg = Config(data_dir=tmp_path / "data", redis_url=server.url)
    with Memory(cfg, embedder=embedder, background_indexing=False) as mem:
        for i in range(COMMON):
            say(mem, i, f"COMMON turn {i} about the garden")
        mem.context("c", "the garden?", BUDGET)
        backup(cfg, tmp_path / "backup.db")
        for i in range(COMMON, COMMON + DISCARDED):
            say(mem, i, f"DISCARDED turn {i}: my card number is 4111-{i}")
        before = mem.context("c", "my card?", BUDGET)
        assert shown(before.messages, "DISCARDED") == DISCARDED and not before.plan.cache.new_epoch
    restore(cfg, tmp_path / "backup.db")
    with Memory(cfg, embedder=embedder, background_indexing=False) as mem:
        for i in range(COMMON, COMMON + restored):
            say(mem, i, f"RESTORED turn {i} about the beach")
        assert not any("DISCARDED" in json.dumps(m.body) for m in mem.history("c"))  # the premise
        ctx = mem.context("c", "what now?", BUDGET)
        assert shown(ctx.messages, "DISCARDED") == 0
        assert shown(ctx.messages, "RESTORED") == restored and shown(ctx.messages, "COMMON") == COMMON
        cache = ctx.plan.cache
        assert cache.new_epoch and "another timeline of the log" in cache.reason, cache
        # from then on the restored timeline has its own lineage
        say(mem, COMMON + restored, "RESTORED and one more")
        again = mem.context("c", "and then?", BUDGET)
        assert not again.plan.cache.new_epoch and again.messages[:len(ctx.messages)] == ctx.messages

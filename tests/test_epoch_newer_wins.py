"""Of a process's own epoch state and the shared one, the later written is extended
(planner.epoch.EpochState.written_at), on a real redis-server and two Memory objects.

On the code before (9ec5001) the two were ordered by (epoch, calls) when their keys
matched: a copy a process kept from long ago, of a lineage whose epoch numbers ran
higher, beat the newer shared state of a lineage begun afresh after Redis lost the key
(an eviction, a flush), so that process went back to its old context.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from hot_fixtures import own_redis
from test_epoch_shared import BUDGET, QUESTIONS, extends, seed

from tiermem import Config, Memory
from tiermem.planner.epoch import RedisEpochs
from tiermem.planner.plan import Context
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.redis_server import EmbeddedRedis

pytestmark = pytest.mark.usefixtures("shared_vectors")

# budgets of the first process's earlier calls: each change is a new epoch, so its own
# copy ends at epoch 3 (at BUDGET, the key every later call has)
EARLIER_BUDGETS = [BUDGET - 1000, BUDGET - 500, BUDGET]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    with own_redis(tmp_path / "redis") as srv:
        yield srv


def ask(mem: Memory, n: int, budget: int = BUDGET) -> Context:
    mem.append("c", {"role": "user", "content": QUESTIONS[n % len(QUESTIONS)]})
    ctx = mem.context("c", QUESTIONS[n % len(QUESTIONS)], budget)
    mem.append("c", {"role": "assistant", "content": f"Answer {n}: noted."})
    return ctx


def test_an_old_local_copy_does_not_beat_a_newer_shared_state(
        tmp_path: Path, server: EmbeddedRedis, embedder: FastEmbedder) -> None:
    cfg = Config(data_dir=tmp_path / "data", redis_url=server.url)
    with Memory(cfg, embedder=embedder, background_indexing=False) as a, \
            Memory(cfg, embedder=embedder, background_indexing=False) as b:
        seed(a)
        for n, budget in enumerate(EARLIER_BUDGETS):
            old = ask(a, n, budget)
        assert old.plan.cache.epoch == len(EARLIER_BUDGETS)
        store = a.planner._epochs
        key = a.cold.key_of("default", "c")
        assert isinstance(store, RedisEpochs) and key is not None
        redis.Redis.from_url(server.url).delete(store.key(key))  # Redis lost it
        newer = ask(b, 3)  # b begins a lineage afresh: epoch 1
        assert newer.plan.cache.new_epoch and newer.plan.cache.epoch == 1
        newer = ask(b, 4)
        ctx = ask(a, 5)
        assert extends(newer, ctx), ctx.plan.cache

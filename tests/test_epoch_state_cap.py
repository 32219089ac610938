"""The Redis memory an epoch state may take (planner.epoch.EPOCH_STATE_MAX_BYTES), on a
real redis-server and two Memory objects (two processes of one deployment).

A state costs ~7 bytes of JSON per context token; on the code before (9ec5001) nothing
capped it (a 64k-token context: 473 KB per conversation, for `hot_idle_ttl_s`). Now a
state over the cap stays in the process that built it: Redis holds a marker without its
text, that process goes on extending its own copy, and another process starts a new
epoch whose reason says why (rather than extending an older state).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from hot_fixtures import own_redis

from tiermem import Config, Memory
from tiermem.planner.epoch import EPOCH_STATE_MAX_BYTES, RedisEpochs
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.redis_server import EmbeddedRedis

pytestmark = pytest.mark.usefixtures("shared_vectors")

WORDS = ["the", "garden", "violin", "harbour", "pancake", "glacier", "lantern"]
TURNS = 24
WORDS_A_TURN = 3000  # ~3,000 tokens a turn: a ~42,000-token context, a ~300 KB state
BIG_BUDGET = 80_000
MARKER_MAX_BYTES = 200  # format, db uuid, "withheld", a size and a time


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    with own_redis(tmp_path / "redis") as srv:
        yield srv


def test_a_state_over_the_cap_stays_in_its_process(
        tmp_path: Path, server: EmbeddedRedis, embedder: FastEmbedder) -> None:
    cfg = Config(data_dir=tmp_path / "data", redis_url=server.url)
    probe = redis.Redis.from_url(server.url)
    with Memory(cfg, embedder=embedder, background_indexing=False) as a, \
            Memory(cfg, embedder=embedder, background_indexing=False) as b:
        a.append_many("c", [{"role": "user" if i % 2 == 0 else "assistant",
                             "content": " ".join(WORDS[(i + j) % len(WORDS)] for j in range(WORDS_A_TURN))}
                            for i in range(TURNS)])
        first = a.context("c", "the garden?", BIG_BUDGET)
        store = a.planner._epochs
        key = a.cold.key_of("default", "c")
        assert isinstance(store, RedisEpochs) and key is not None
        held = probe.get(store.key(key))
        assert held is not None and len(held) <= MARKER_MAX_BYTES and b"garden" not in held
        assert store.withheld == 1 and store.errors == 0
        # the process that built it extends its own copy
        a.append("c", {"role": "user", "content": "and the lantern?"})
        mine = a.context("c", "and the lantern?", BIG_BUDGET)
        assert not mine.plan.cache.new_epoch and mine.messages[:len(first.messages)] == first.messages
        # another process says why it cannot
        a.append("c", {"role": "assistant", "content": "the red one"})
        a.append("c", {"role": "user", "content": "and the violin?"})
        other = b.context("c", "and the violin?", BIG_BUDGET)
        assert other.plan.cache.new_epoch
        assert f"over the {EPOCH_STATE_MAX_BYTES} bytes kept in Redis" in other.plan.cache.reason, other.plan.cache

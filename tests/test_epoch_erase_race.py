"""Erasure racing a context call's write of its epoch state, on a real redis-server and
two Memory objects (two processes of one deployment), the interleaving forced.

Erasure commits in the log, then SCANs the conversation's hash tag, then DELs what it
found. The put script writes only beside the hot set's meta key, which still exists
between the SCAN and the DEL: on the code before (9ec5001) a first state written there
was never deleted (7 days of TTL, with the conversation's text). Now the writer checks
the log after writing and deletes the key when the conversation is gone.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from hot_fixtures import own_redis
from test_epoch_shared import _holding

from tiermem import Config, Memory
from tiermem.planner.epoch import RedisEpochs
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.redis_server import EmbeddedRedis

pytestmark = pytest.mark.usefixtures("shared_vectors")

CANARY = "zq7canary4417quince"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    with own_redis(tmp_path / "redis") as srv:
        yield srv


def test_a_state_written_between_erasures_scan_and_its_delete_is_deleted(
        tmp_path: Path, server: EmbeddedRedis, embedder: FastEmbedder, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = Config(data_dir=tmp_path / "data", redis_url=server.url)
    probe = redis.Redis.from_url(server.url)
    with Memory(cfg, embedder=embedder, background_indexing=False) as a, \
            Memory(cfg, embedder=embedder, background_indexing=False) as b:
        a.append_many("secret", [{"role": "user", "content": f"Line {i} about the router."} for i in range(6)])
        a.append("secret", {"role": "user", "content": f"Never share my recovery code {CANARY}."})
        b.context("secret", "what is my recovery code?", 2000)  # b's call, planned before the erasure
        key = b.cold.key_of("default", "secret")
        store = b.planner._epochs
        assert key is not None and isinstance(store, RedisEpochs)
        state = store.get(key)
        assert state is not None
        probe.delete(store.key(key))  # b's call has not written yet: its put is the first
        client = a.hot.tier.client if a.hot is not None else None
        assert client is not None
        scan = client.scan_iter
        raced = []

        def scan_then_b_writes(*args: Any, **kwargs: Any) -> Iterator[Any]:
            found = list(scan(*args, **kwargs))
            # the hot set's meta key is still there, so the put script writes
            raced.append(probe.exists(store.tier.keys(key)[0]))
            store.put(key, state)  # b's call ends here: after the scan, before the DEL
            return iter(found)

        monkeypatch.setattr(client, "scan_iter", scan_then_b_writes)
        a.delete_conversation("secret")
        assert raced == [1]  # the interleaving happened (the premise)
        assert probe.exists(store.key(key)) == 0 and _holding(probe, CANARY) == []
        assert store.errors == 0

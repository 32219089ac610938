"""One read of the epoch state per context call (planner.build.Planner._previous), on a
real redis-server: the steps of one call see one state. On the code before (9ec5001)
`system_messages="before_latest"` read it twice (where the kept turns begin, then the
epoch), two Redis round trips, and another process's write between them could give the
two steps two states.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hot_fixtures import own_redis

from tiermem import Config, Memory
from tiermem.planner.epoch import EPOCH_KEY_SUFFIX, RedisEpochs
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.redis_server import EmbeddedRedis

pytestmark = pytest.mark.usefixtures("shared_vectors")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    with own_redis(tmp_path / "redis") as srv:
        yield srv


MODES = [
    pytest.param("as_is", id="as-is"),  # one read before too
    pytest.param("before_latest", id="before-latest"),  # two before
    pytest.param("merge", id="merge"),  # one read before too
]


@pytest.mark.parametrize("mode", MODES)
def test_a_context_call_reads_the_state_once(tmp_path: Path, server: EmbeddedRedis, embedder: FastEmbedder,
                                             monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    cfg = Config(data_dir=tmp_path / "data", redis_url=server.url, system_messages=mode)
    with Memory(cfg, embedder=embedder, background_indexing=False) as mem:
        mem.append_many("c", [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"}
                              for i in range(6)])
        mem.context("c", "what was said?", 3000)
        store = mem.planner._epochs
        assert isinstance(store, RedisEpochs)
        client = store.tier.client
        real_get = client.get
        reads: list[str] = []

        def counted(name: Any) -> Any:
            if str(name).endswith(EPOCH_KEY_SUFFIX):
                reads.append(str(name))
            return real_get(name)

        monkeypatch.setattr(client, "get", counted)
        mem.append("c", {"role": "user", "content": "next"})
        mem.context("c", "and next?", 3000)
        assert len(reads) == 1, reads

"""Two databases on one Redis: a pin or unpin in one never writes into the other's hot set
(tiers.hot `pin`/`unpin` check the generation; tiermem.hotlink leaves a foreign set
alone), and stats count only the database's own sets. Real redis-server, real SQLite.

Hot sets carry a generation (db uuid and conversation created_at) so that a Redis
pointing at another database is never trusted; on the code before (audit_hot, finding
2) admit and read checked it but pin and unpin did not: B pinning its turn 5 re-admitted
B's message into A's set under the same conversation key, and A's context() showed it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hot_fixtures import own_redis

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.redis_server import EmbeddedRedis

CONV = "support-1"  # the same id, so the same Redis key, in both databases
SECRET = "B-SECRET"
SMALL = {"hot_budget_tokens": 100, "head_protect": 1, "tail_protect": 2}  # A's set evicts its middle


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    with own_redis(tmp_path / "redis") as srv:
        yield srv


@pytest.fixture
def pair(tmp_path: Path, server: EmbeddedRedis,
         embedder: FastEmbedder) -> Iterator[tuple[Memory, Memory]]:
    """A and B, each its own data dir, one Redis. B writes first, then A's appends take the
    key over (A's admit sees B's generation and rebuilds A's set)."""
    a = Memory(Config(data_dir=tmp_path / "A", redis_url=server.url, **SMALL), embedder=embedder,
               background_indexing=False)
    b = Memory(Config(data_dir=tmp_path / "B", redis_url=server.url, **SMALL), embedder=embedder,
               background_indexing=False)
    try:
        for i in range(10):
            b.append(CONV, {"role": "user", "content": f"B turn {i}: {SECRET} account 99-{i}"})
        b.pin(CONV, 3)
        for i in range(20):
            a.append(CONV, {"role": "user", "content": f"A turn {i}: talking about apples and pears"})
        a.pin(CONV, 3)
        yield a, b
    finally:
        a.close()
        b.close()


# what B does to its own conversation, while A's set holds the key
B_ACTIONS: list[tuple[str, Callable[[Memory], None]]] = [
    ("pin-a-turn-A-evicted", lambda b: b.pin(CONV, 5)),  # re-admitted B's text into A's set
    ("pin-a-turn-A-holds", lambda b: b.pin(CONV, 1)),  # pinned A's turn 1, A never asked
    ("unpin-a-turn-A-pinned", lambda b: b.unpin(CONV, 3)),  # unpinned A's turn 3
]


@pytest.mark.parametrize("action", [a[1] for a in B_ACTIONS], ids=[a[0] for a in B_ACTIONS])
def test_another_databases_pin_leaves_this_ones_set_alone(
        pair: tuple[Memory, Memory], action: Callable[[Memory], None]) -> None:
    a, b = pair
    assert a.hot is not None and b.hot is not None
    before = a.hot.tier.read(CONV)
    assert before is not None and before.generation == a.hot.generation(CONV)  # the premise: A's set
    assert 5 not in [t.position for t in before.turns] and 1 in [t.position for t in before.turns]
    action(b)
    assert a.hot.tier.read(CONV) == before
    ctx = a.context(CONV, None, 2000)
    assert not any(SECRET in json.dumps(m) for m in ctx.messages)


def test_stats_count_only_this_databases_sets(pair: tuple[Memory, Memory]) -> None:
    a, b = pair
    mine = a.stats()["hot"]
    assert mine["members"] > 0  # A's set holds the key
    theirs = b.stats()["hot"]
    assert (theirs["members"], theirs["tokens"], theirs["pins"]) == (0, 0, 0)

"""`Memory.unpin` removes the caller's pin; a turn the log still pins after it (the
classifier's pin of a load-bearing turn nothing superseded: tiermem.hotlink `pin_state`)
stays pinned in the hot set, at the classifier's priority, as a rebuild from the log
would leave it. On the code before, HotLink.unpin unpinned it in Redis whatever the log
said, so the set and the log disagreed until some rebuild. Real redis-server, real
SQLite, a real Memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tiermem import Config, Memory
from tiermem.hotlink import HotLink, pin_state
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.hot import simulate_replay
from tiermem.tiers.redis_server import EmbeddedRedis

CONV = "c"
TURNS = 12
CALLER_PRIORITY = 95  # the caller's pin: above any classifier priority, so the unpin must move it
SMALL = {"hot_budget_tokens": 300, "head_protect": 1, "tail_protect": 2}


@pytest.fixture
def mem(tmp_path: Path, embedder: FastEmbedder) -> Iterator[Memory]:
    config = Config(data_dir=tmp_path / "data", **SMALL)
    m = Memory(config, embedder=embedder, background_indexing=False)
    try:
        for i in range(TURNS):
            m.append(CONV, {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} about the weather"})
        yield m
    finally:
        m.close()
        EmbeddedRedis(config.data_dir).stop()


def canonical(link: HotLink, key: str) -> tuple[list[int], dict[int, int], list[int]]:
    """The set a rebuild from the log gives: members, pins (position -> priority), demoted."""
    rows = link.cold.turns(key)
    t = link.tier
    st = simulate_replay(((r.position, r.tokens, *pin_state(r)) for r in rows), budget=t.budget_tokens,
                         head=t.head_protect, tail=t.tail_protect, bias=t.eviction_bias)
    return st.members, dict(st.pins), sorted(st.demoted)


def stored(link: HotLink, key: str) -> tuple[list[int], dict[int, int], list[int]]:
    hs = link.tier.read(key)
    assert hs is not None
    return [t.position for t in hs.turns], {t.position: t.priority for t in hs.turns if t.pinned}, sorted(hs.demoted)


# (the turn appended, whether the log pins it once the caller's pin is gone)
CASES = [
    # load-bearing, nothing supersedes it: the classifier's pin stays, at its own priority
    ("remember: my name is Zed", True),
    # an ordinary turn: the caller's pin was its only one
    ("turn 12 about the weather again", False),
]


@pytest.mark.parametrize(("content", "pinned_after"), CASES, ids=["classifier_pin", "caller_pin_only"])
def test_unpin_leaves_the_logs_pin_state(mem: Memory, content: str, pinned_after: bool) -> None:
    assert mem.hot is not None
    p = mem.append(CONV, {"role": "user", "content": content})
    key = mem.cold.key_of("default", CONV)
    assert key is not None
    mem.pin(CONV, p, priority=CALLER_PRIORITY)
    assert stored(mem.hot, key)[1].get(p) == CALLER_PRIORITY
    mem.unpin(CONV, p)
    row = mem.cold.turns_at(key, [p])[0]
    assert pin_state(row)[0] is pinned_after  # the premise: the log's pin state after the unpin
    assert stored(mem.hot, key) == canonical(mem.hot, key)
    assert (p in stored(mem.hot, key)[1]) is pinned_after
    assert mem.hot.healthy and mem.hot.last_error is None

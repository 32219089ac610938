"""Two processes' Memory objects on one data dir and one real redis-server, for the tests
of a hot-set write of one process racing another's (test_hot_pin_ahead,
test_hot_pin_rebuild_race), and the two views of a hot set they compare.

- `open_pair(...)`: B is a Memory with the hot tier (it pins and unpins through its own
  hot link); A is a second Memory, with or without one (`a_hot`), whose hot link the test
  makes itself (a test-only HotLink subclass that lets B act at a chosen point). The
  conversation `conversation` holds `turns` turns, alternating user and assistant, each
  `content` formatted with its index, appended by `filled_by` ("a" or "b"). Closing stops both and the embedded Redis.
- `canonical(link, key)`: members, pinned members and demoted pins of a fresh rebuild from
  the log; `stored(link, key)`: the same read from the set in Redis. After any race the two
  must be equal.

Imported explicitly by the test modules (the lead owns conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tiermem import Config, Memory
from tiermem.hotlink import HotLink, pin_state
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.hot import simulate_replay
from tiermem.tiers.redis_server import EmbeddedRedis


@dataclass
class HotPair:
    a: Memory  # process A: the test's own HotLink subclass writes its hot set
    b: Memory  # process B: pins and unpins through its own hot link
    config: Config
    key: str


@contextmanager
def open_pair(tmp_path: Path, embedder: FastEmbedder, settings: Mapping[str, Any], conversation: str,
              turns: int, content: str, a_hot: bool = True, filled_by: str = "b") -> Iterator[HotPair]:
    config = Config(data_dir=tmp_path / "data", **settings)
    b = Memory(config, embedder=embedder, background_indexing=False)
    a = Memory(config, embedder=embedder, background_indexing=False, hot=a_hot)
    try:
        writer = a if filled_by == "a" else b
        for i in range(turns):
            writer.append(conversation, {"role": "user" if i % 2 == 0 else "assistant",
                                         "content": content.format(i=i)})
        key = writer.cold.key_of("default", conversation)
        assert key is not None
        yield HotPair(a, b, config, key)
    finally:
        a.close()
        b.close()
        EmbeddedRedis(config.data_dir).stop()


def canonical(link: HotLink, key: str) -> tuple[list[int], list[int], list[int]]:
    """Members, pinned members and demoted pins of a fresh rebuild from the log."""
    rows = link.cold.turns(key)
    t = link.tier
    st = simulate_replay(((r.position, r.tokens, *pin_state(r)) for r in rows), budget=t.budget_tokens,
                         head=t.head_protect, tail=t.tail_protect, bias=t.eviction_bias)
    return st.members, sorted(st.pins), sorted(st.demoted)


def stored(link: HotLink, key: str) -> tuple[list[int], list[int], list[int]]:
    hs = link.tier.read(key)
    assert hs is not None
    return [t.position for t in hs.turns], [t.position for t in hs.turns if t.pinned], hs.demoted

"""A correction costs the hot set no rebuild. The supersession's log write reports the
pin version it moved to and how many moves were its own (tiers.store `set_superseded`,
the relabel of a correction that takes a load-bearing target's place included), the set
admits the new turn before the supersession is recorded (the log's order), and the
unpins (Memory._release) apply those changes as theirs (tiers.hot LogPins). Before, the
unpins claimed none, so the set, missing the supersession's own changes, answered STALE
'pins' and was replayed from the log inside the correcting append (hundreds of ms at
20,000 turns). The set still ends as a rebuild leaves it.

Real Redis (the embedded server), a real SQLite log, the bundled embedder; rebuilds are
counted through HotLink.counters() (what /metrics reads). On the code before, every case
but the one without a supersession fails (one rebuild per correction).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tiermem import Config, Memory, Message
from tiermem.consolidation.supersede import INLINE_INDEX_ROWS
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.redis_server import EmbeddedRedis

BUDGET_TOKENS = 600  # room for every turn: no eviction to tell the two paths apart
CHATTER = 10  # turns between the statement and its correction


@pytest.fixture(scope="module")
def fast() -> FastEmbedder:
    emb = FastEmbedder(runtime="onnx")
    emb.load()
    return emb


@pytest.fixture
def mem(tmp_path: Path, fast: FastEmbedder) -> Iterator[Memory]:
    data = tmp_path / "data"
    m = Memory(Config(data_dir=data, hot_budget_tokens=BUDGET_TOKENS), embedder=fast, background_indexing=False)
    try:
        yield m
    finally:
        m.close()
        EmbeddedRedis(data).stop()


def _rebuilds(m: Memory) -> int:
    assert m.hot is not None
    return int(m.hot.counters()["rebuilds"])


def _pins(m: Memory, key: str) -> dict[int, int]:
    assert m.hot is not None
    hs = m.hot.tier.read(key)
    assert hs is not None
    return {t.position: t.priority for t in hs.turns if t.pinned}


def _chatter(m: Memory) -> None:
    for i in range(CHATTER):
        m.append("c", {"role": "assistant" if i % 2 == 0 else "user", "content": f"The weather is nice ({i})."})


def _check_as_rebuilt(m: Memory, key: str) -> None:
    """The set the correction left holds the pins a replay of the log gives."""
    assert m.hot is not None
    kept = _pins(m, key)
    m.hot.refresh(key)
    assert kept == _pins(m, key)


# (statement, correction, whether the statement is load-bearing, whether the correction is
# labelled load-bearing once recorded)
CASES = [
    # a load-bearing rule, corrected by a load-bearing turn: the old one's pin goes
    pytest.param("Always reply in French, please.", "Actually, reply in German instead of French.", True, True,
                 id="pinned-rule"),
    # a personal fact, pinned by the classifier, corrected
    pytest.param("I live in Paris.", "Actually, I live in Berlin now.", True, True, id="pinned-fact"),
    # neither pinned: the superseded_by change alone moves the version
    pytest.param("We will use requests as the HTTP client.",
                 "On second thought, the HTTP client should be aiohttp.", False, False, id="unpinned"),
    # the correction is load-bearing at its append, its target is not
    pytest.param("The meeting is on Monday.", "Correction: the meeting is on Tuesday.", False, True,
                 id="new-pinned"),
    # the correction inherits its load-bearing target's label (Superseder._inherit): pinned
    # in the set with the unpin, in the same claimed changes
    pytest.param("Always use requests as the HTTP client.",
                 "On second thought, the HTTP client should be aiohttp.", True, True, id="relabelled"),
]


@pytest.mark.parametrize(("old", "new", "old_bearing", "new_bearing"), CASES)
def test_a_live_correction_rebuilds_nothing(mem: Memory, old: str, new: str, old_bearing: bool,
                                            new_bearing: bool) -> None:
    p = mem.append("c", {"role": "user", "content": old})
    _chatter(mem)
    mem.context("c", "hello", budget=300)
    before = _rebuilds(mem)
    q = mem.append("c", {"role": "user", "content": new})
    assert _rebuilds(mem) == before  # the correcting append
    mem.context("c", "hello", budget=300)
    assert _rebuilds(mem) == before  # and the read after it
    key = mem.cold.key_of("default", "c")
    assert key is not None
    o, n = mem.cold.turns_at(key, [p, q])
    assert o.superseded_by == q  # the premise: a supersession was recorded
    assert (bool(o.load_bearing), bool(n.load_bearing)) == (old_bearing, new_bearing)
    pins = _pins(mem, key)
    assert p not in pins
    assert (q in pins) == new_bearing
    _check_as_rebuilt(mem, key)


def test_a_correction_of_a_caller_pin_rebuilds_nothing(mem: Memory) -> None:
    # the caller's pin stands (the set keeps it): the change is in the set as it is
    p = mem.append("c", {"role": "user", "content": "I live in Paris."})
    mem.pin("c", p, priority=100)
    _chatter(mem)
    before = _rebuilds(mem)
    q = mem.append("c", {"role": "user", "content": "Actually, I live in Berlin now."})
    mem.context("c", "hello", budget=300)
    assert _rebuilds(mem) == before
    key = mem.cold.key_of("default", "c")
    assert key is not None
    assert mem.cold.turns_at(key, [p])[0].superseded_by == q
    assert _pins(mem, key)[p] == 100
    _check_as_rebuilt(mem, key)


def test_an_imported_correction_rebuilds_nothing(mem: Memory) -> None:
    # a batch larger than a live append: the rules decide it (Memory._rules), unpinning too
    p = mem.append("c", {"role": "user", "content": "Always reply in French, please."})
    _chatter(mem)
    mem.context("c", "hello", budget=300)
    before = _rebuilds(mem)
    batch = [Message(role="assistant" if i % 2 == 0 else "user", content=f"Noted, the sky is clear ({i}).")
             for i in range(INLINE_INDEX_ROWS)]
    batch.append(Message(role="user", content="Actually, reply in German instead of French."))
    last = mem.append_many("c", batch)[-1]
    mem.context("c", "hello", budget=300)
    assert _rebuilds(mem) == before
    key = mem.cold.key_of("default", "c")
    assert key is not None
    assert mem.cold.turns_at(key, [p])[0].superseded_by == last
    assert p not in _pins(mem, key)
    _check_as_rebuilt(mem, key)


def test_a_plain_append_rebuilds_nothing(mem: Memory) -> None:
    # no supersession: nothing to claim (passes before and after)
    mem.append("c", {"role": "user", "content": "My favourite colour is blue."})
    _chatter(mem)
    before = _rebuilds(mem)
    mem.append("c", {"role": "user", "content": "Tell me about coral reefs."})
    mem.context("c", "hello", budget=300)
    assert _rebuilds(mem) == before

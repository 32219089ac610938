"""A pin or unpin of a turn another process has committed to the log but not yet
admitted to the hot set (between its cold commit and its admit) catches the set up with
the log and is made again (tiers.hot HotStale 'ahead', tiermem.hotlink `_caught_up`):
no ERROR, no drop and rebuild of the set, and the set's pin flag is the log's once the
writer's admit comes. Real redis-server, real SQLite, real Memory objects.

Process A is a Memory without the hot tier (`hot=False`: its appends commit to the log
alone) and its hot link `WriterLink`, a test-only subclass of tiermem's HotLink on the
same data dir and Redis whose `_hot_turns` (on_append's rendering of the rows it read)
lets process B act after A read the new turn's row and before A admits it. On the code
before, B's pin raised a bare ValueError ('the hot tier has only admitted up to N') that
HotLink.pin took for a broken set (logged at ERROR with a traceback, `last_error` set,
the set dropped and rebuilt); B's unpin was a no-op there, and A's admit then put the
turn in the set pinned while the log said it was not.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
from hot_pair import HotPair, canonical, open_pair, stored

from tiermem import Config, Memory
from tiermem.hotlink import HotLink, pin_state
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.hot import HotTurn
from tiermem.tiers.models import TurnRow

CONV = "c"
TURNS = 12
PRIORITY = 60
SMALL = {"hot_budget_tokens": 300, "head_protect": 1, "tail_protect": 2}


class WriterLink(HotLink):
    """Process A's hot link: B acts once A's on_append has read the new rows."""

    def __init__(self, config: Config, mem: Memory, act: Callable[[], None] | None = None) -> None:
        super().__init__(config, mem.cold)
        self.act = act

    def _hot_turns(self, conversation_id: str, rows: Sequence[TurnRow]) -> tuple[list[HotTurn], str]:
        out = super()._hot_turns(conversation_id, rows)
        if self.act is not None:
            act, self.act = self.act, None
            act()
        return out


@pytest.fixture
def writers(tmp_path: Path, embedder: FastEmbedder) -> Iterator[HotPair]:
    # A appends to the log only (no hot tier): its admit is the test's WriterLink
    with open_pair(tmp_path, embedder, SMALL, CONV, TURNS, "turn {i} about the weather", a_hot=False) as pair:
        yield pair


def test_pin_of_a_turn_committed_not_yet_admitted(writers: HotPair, caplog: pytest.LogCaptureFixture) -> None:
    w = writers
    assert w.b.hot is not None
    p = w.a.append(CONV, {"role": "user", "content": "remember: my name is Zed"})  # in the log, not hot
    rebuilds = w.b.hot.rebuilds
    with caplog.at_level(logging.WARNING, logger="tiermem"):
        w.b.pin(CONV, p, priority=PRIORITY)
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert w.b.hot.last_error is None and w.b.hot.healthy
    assert w.b.hot.rebuilds == rebuilds  # caught up, not dropped and rebuilt
    assert p in stored(w.b.hot, w.key)[1]
    link = WriterLink(w.config, w.a)
    try:
        link.on_append(w.key, [p])  # A's admit, late: the set has the turn already
        assert stored(link, w.key) == canonical(link, w.key)
    finally:
        link.close()


# (what B does between A's read of the new turn and A's admit, whether the log pins it after)
RACES = [
    # B pins the turn A read unpinned: A's admit would add it unpinned
    ("pin", True),
    # B unpins the turn A read pinned (explicitly, before): A's admit would add it pinned
    ("unpin", False),
]


@pytest.mark.parametrize(("action", "pinned_after"), RACES, ids=[r[0] for r in RACES])
def test_pin_or_unpin_racing_the_writers_admit(writers: HotPair, action: str, pinned_after: bool,
                                               caplog: pytest.LogCaptureFixture) -> None:
    w = writers
    assert w.b.hot is not None
    # a turn the classifier does not pin: its pin is the caller's alone
    p = w.a.append(CONV, {"role": "user", "content": "turn 12 about the weather again"})
    assert not pin_state(w.a.cold.turns_at(w.key, [p])[0])[0]
    if action == "unpin":
        w.a.pin(CONV, p, priority=PRIORITY)  # in the log only: A has no hot tier

    def act() -> None:
        if action == "pin":
            w.b.pin(CONV, p, priority=PRIORITY)
        else:
            w.b.unpin(CONV, p)

    link = WriterLink(w.config, w.a, act)
    try:
        with caplog.at_level(logging.WARNING, logger="tiermem"):
            link.on_append(w.key, [p])
        assert link.act is None  # the premise: B acted inside A's admit
        assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
        assert w.b.hot.last_error is None
        assert (p in stored(link, w.key)[1]) is pinned_after
        assert stored(link, w.key) == canonical(link, w.key)
    finally:
        link.close()

"""A pin or unpin of another process that lands while a hot set is being rebuilt is never
lost (tiers.hot, pin stamps; tiermem.hotlink `_rebuild`). Real redis-server, real SQLite,
real Memory objects.

A rebuild reads the log's rows, replays them, then loads the result over whatever Redis
holds. On the code before, a pin whose log write came after the rows were read and whose
hot script ran before the load (or found no set at all) was overwritten by the load, and
nothing repaired it: the log said pinned, the hot set did not (13 such turns in a run of 3
appending processes and a pinner, /tmp/rcD/race_procs2.py).

The rebuilding process is `RacingLink`, a test-only subclass of tiermem's own HotLink on
the same data dir and Redis: its `_turn_rows` or `_replay_rows` (the rebuild's reads of
the log and its load) run the real call, then let process B (a second Memory) act at
that point; no part of tiermem is replaced. After the rebuild the stored set must be the
one a fresh rebuild from the log gives (members, pins, demoted pins).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
from hot_pair import HotPair, canonical, open_pair, stored

from tiermem import Config, Memory
from tiermem.hotlink import PIN_RACE_REBUILDS, HotLink, pin_state
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.hot import HotSet
from tiermem.tiers.models import TurnRow

CONV = "c"
TURNS = 30
TARGET = 10  # an old middle turn: evicted from the set before anything is pinned
PRIORITY = 90
# a small budget, so the middle of the conversation is evicted and a pin changes members
SMALL = {"hot_budget_tokens": 300, "head_protect": 1, "tail_protect": 2}


class RacingLink(HotLink):
    """Process A's hot link, with a point in its rebuild where process B acts: after the
    rows are read ('rows'; before them: 'before') or after the set is loaded ('load').
    B acts in the first `rounds` rebuilds only."""

    def __init__(self, config: Config, mem: Memory, where: str, act: Callable[[], None], rounds: int = 1) -> None:
        super().__init__(config, mem.cold)
        self.where, self.act, self.rounds = where, act, rounds

    def _fire(self, where: str) -> None:
        if self.where == where and self.rounds > 0:
            self.rounds -= 1
            self.act()

    def _turn_rows(self, conversation_id: str) -> list[TurnRow]:
        self._fire("before")
        rows = super()._turn_rows(conversation_id)
        self._fire("rows")
        return rows

    def _replay_rows(self, conversation_id: str, rows: Sequence[TurnRow], generation: str,
                     pin_stamp: str, pin_version: int | None = None) -> HotSet:
        hs = super()._replay_rows(conversation_id, rows, generation, pin_stamp, pin_version)
        self._fire("load")
        return hs


@pytest.fixture
def pair(tmp_path: Path, embedder: FastEmbedder) -> Iterator[HotPair]:
    # A's hot link is a RacingLink of the test's
    with open_pair(tmp_path, embedder, SMALL, CONV, TURNS,
                   "turn number {i} talking about the weather and nothing much at all here", filled_by="a") as p:
        yield p


def pin_target(p: HotPair) -> None:
    p.b.pin(CONV, TARGET, priority=PRIORITY)


def unpin_target(p: HotPair) -> None:
    p.b.unpin(CONV, TARGET)


def drop_then_pin(p: HotPair) -> None:
    # no set while B pins: its script finds nothing to pin in
    assert p.b.hot is not None
    p.b.hot.tier.drop(p.key)
    p.b.pin(CONV, TARGET, priority=PRIORITY)


# (where in A's rebuild B acts, what B does, whether TARGET starts pinned)
CASES = [
    # the review's case: the pin's log write after A read the rows, its script before A's load
    ("rows", pin_target, False),
    # the same for an unpin: the loaded set kept the turn pinned
    ("rows", unpin_target, True),
    # a pin that finds no set (dropped meanwhile) while A rebuilds: nothing in Redis to keep it
    ("rows", drop_then_pin, False),
    # before A read the rows: they hold the pin (passes before and after)
    ("before", pin_target, False),
    # after A's load: the pin goes into the new set (passes before and after)
    ("load", pin_target, False),
]


@pytest.mark.parametrize(("where", "act", "pinned"), CASES,
                         ids=["pin-between", "unpin-between", "pin-no-set", "pin-before-rows", "pin-after-load"])
def test_a_pin_during_another_process_rebuild_is_kept(pair: HotPair, where: str, act: Callable[[HotPair], None],
                                                      pinned: bool) -> None:
    if pinned:
        pair.b.pin(CONV, TARGET, priority=PRIORITY)
    link = RacingLink(pair.config, pair.a, where, lambda: act(pair))
    try:
        link.refresh(pair.key)
        assert link.rounds == 0  # the premise: B acted inside A's rebuild
        assert stored(link, pair.key) == canonical(link, pair.key)
        log_pinned = TARGET in canonical(link, pair.key)[1]
        assert log_pinned is not pinned
    finally:
        link.close()


def test_a_pin_in_every_rebuild_is_caught_by_the_next_read(pair: HotPair) -> None:
    """Pins landing in each of PIN_RACE_REBUILDS rebuilds in a row: the set stays marked
    and the next read rebuilds it."""
    targets = iter(range(TARGET, TARGET + PIN_RACE_REBUILDS))
    link = RacingLink(pair.config, pair.a, "rows", lambda: pair.b.pin(CONV, next(targets), priority=PRIORITY),
                      rounds=PIN_RACE_REBUILDS)
    try:
        link.refresh(pair.key)
        assert link.rounds == 0
        hs = link.tier.read(pair.key)
        assert hs is not None and hs.pins_behind
        read = link.read(pair.key)
        assert read.rebuilt and read.hot is not None and not read.hot.pins_behind
        assert stored(link, pair.key) == canonical(link, pair.key)
        assert set(range(TARGET, TARGET + PIN_RACE_REBUILDS)) <= set(canonical(link, pair.key)[1])
    finally:
        link.close()


def test_a_superseded_auto_pin_released_during_a_rebuild_is_unpinned(pair: HotPair) -> None:
    """Supersession's release (Memory._release's unpin) from B inside A's rebuild."""
    p = pair.b.append(CONV, {"role": "user", "content": "My dog's name is Biscuit."})
    row = pair.b.cold.turns_at(pair.key, [p])[0]
    assert pin_state(row)[0] and row.pinned_priority is None  # the premise: pinned by the classifier

    def correct() -> None:
        pair.b.append(CONV, {"role": "user", "content": "Actually, my dog's name is Pepper now."})
        assert pair.b.cold.turns_at(pair.key, [p])[0].superseded_by is not None  # the correction took

    link = RacingLink(pair.config, pair.a, "rows", correct)
    try:
        link.refresh(pair.key)
        assert link.rounds == 0
        assert p not in stored(link, pair.key)[1]
        # the correction itself is caught up by the next read, as any append a rebuild missed
        read = link.read(pair.key)
        assert read.hot is not None
        assert stored(link, pair.key) == canonical(link, pair.key)
    finally:
        link.close()


def test_pin_stamps_are_kept_per_generation(pair: HotPair) -> None:
    """The stamp hash holds one random stamp per generation, nothing of the turns."""
    pair.b.pin(CONV, TARGET, priority=PRIORITY)
    assert pair.b.hot is not None
    stamps = pair.b.hot.client.hgetall(pair.b.hot.tier.stamp_key(pair.key))
    assert list(stamps) == [pair.b.hot.generation(pair.key)]
    assert "weather" not in json.dumps(stamps)

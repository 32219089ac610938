"""`Memory.stats()["hot"]` does not add up a hot set that missed a pin as if it held the
log's pins: it names it in `pins_behind` (by the id its owner knows) and leaves its counts
out of the totals, until the set's next read rebuilds it (tiers.hot, pin stamps).

A pin or unpin of another process that lands while a set is being rebuilt leaves the
loaded set `pins_behind`; HotLink._rebuild tries again PIN_RACE_REBUILDS times, and past
that the set stays marked until the conversation's next read. Stats reads the sets'
counts without reading them (no rebuild, no idle TTL renewed), so on the code before it
reported the marked set's pins as the pin count: pins the log holds were missing from it
(3 here), for as long as nobody read the conversation. /v1/stats shows the same field.

Real redis-server, real SQLite, two Memory objects; the rebuilding process is
test_hot_pin_rebuild_race's RacingLink (tiermem's HotLink, with process B pinning between
the rebuild's read of the rows and its load)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hot_pair import HotPair, canonical, open_pair
from test_hot_pin_rebuild_race import CONV, PRIORITY, SMALL, TARGET, TURNS, RacingLink

from tiermem.hotlink import PIN_RACE_REBUILDS
from tiermem.tiers.embed_onnx import FastEmbedder

OTHER = "other"  # a conversation whose set holds every pin: still added up


@pytest.fixture
def pair(tmp_path: Path, embedder: FastEmbedder) -> Iterator[HotPair]:
    with open_pair(tmp_path, embedder, SMALL, CONV, TURNS,
                   "turn number {i} talking about the weather and nothing much at all here", filled_by="a") as p:
        yield p


def test_a_set_behind_is_named_not_added_up(pair: HotPair) -> None:
    pair.b.append(OTHER, {"role": "user", "content": "a short other conversation"})
    pair.b.pin(OTHER, 0, priority=PRIORITY)
    other = pair.b.stats()["hot"]
    assert other["pins_behind"] == []
    targets = iter(range(TARGET, TARGET + PIN_RACE_REBUILDS))
    # process B pins in each of A's rebuilds: the set stays marked (the premise)
    link = RacingLink(pair.config, pair.a, "rows", lambda: pair.b.pin(CONV, next(targets), priority=PRIORITY),
                      rounds=PIN_RACE_REBUILDS)
    try:
        link.refresh(pair.key)
        assert link.rounds == 0
        marked = link.tier.read(pair.key)
        assert marked is not None and marked.pins_behind
        log_pins = len(canonical(link, pair.key)[1])
        stale = sum(1 for t in marked.turns if t.pinned)
        assert stale < log_pins  # what stats added up before: pins the log holds missing

        for mem in (pair.a, pair.b):  # either process's stats: the same Redis
            hot = mem.stats()["hot"]
            assert hot["pins_behind"] == [CONV]
            assert hot["pins"] == other["pins"] == 1  # OTHER's pin only, not the marked set's stale count
        assert pair.b.stats(namespace="default")["hot"]["pins_behind"] == [CONV]

        # the next read rebuilds it: counted again, with every pin of the log
        assert link.read(pair.key).rebuilt
        hot = pair.b.stats()["hot"]
        assert hot["pins_behind"] == []
        assert hot["pins"] == log_pins + 1
    finally:
        link.close()

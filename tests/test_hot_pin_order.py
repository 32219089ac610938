"""Two processes' pins whose hot-tier scripts reach Redis in the other order than their
log writes (tiers.hot, pin versions; PinChangeGap). The later pin's script finds the
set without the earlier change: it waits for that script (tiermem.hotlink
PIN_GAP_WAIT_S) rather than rebuilding the set from the log at once, and a pin whose
change the set already holds (a rebuild read it) changes nothing, so it cannot undo a
newer change of the same turn.

On the code before, the later pin rebuilt the set every time (in a benchmark with two
pinning processes, 65 rebuilds in 792 pins on SQLite, 65 in 263 on PostgreSQL), and an
older pin landing after such a rebuild pinned its turn again over the newer unpin the
rebuild had read, the set then disagreeing with the log until its next rebuild.

Two handles (`a`, `b`), as two processes: one store (a SQLite file, or a PostgreSQL
schema through the session's `pg_url`) and one real Redis. `a`'s pin is split into its
log write (`cold.set_pin`) and its script (`hot.pin`), as a process descheduled between
them runs it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hot_fixtures import own_redis
from pg_server import fresh_schema

from tiermem import Config, Memory
from tiermem.hotlink import pin_state
from tiermem.tiers.embed_onnx import FastEmbedder

CONV = "c"
TURNS = 12
PRIORITY = 80
# every turn fits: membership never moves, only pin flags do
ROOMY = {"hot_budget_tokens": 100_000}
WAIT_FOR_GAP_S = 10.0  # for b's pin to reach its wait (it does within milliseconds)
POLL_S = 0.0005
LONG_GAP_WAIT_S = 30.0  # b waits this long for a's script: a's script comes first, whatever the load
SHORT_GAP_WAIT_S = 0.01  # a script that never comes: b rebuilds after this


@pytest.fixture(params=["sqlite", "postgres"])
def pair(request: pytest.FixtureRequest, tmp_path: Path, embedder: FastEmbedder) -> Iterator[tuple[Memory, Memory]]:
    extra: dict[str, Any] = {}
    if request.param == "postgres":
        extra = {"cold_url": request.getfixturevalue("pg_url"), "cold_schema": fresh_schema()}
    with own_redis(tmp_path / "redis") as srv:
        cfg = Config(data_dir=tmp_path / "data", redis_url=srv.url, **ROOMY, **extra)
        with Memory(cfg, embedder=embedder, background_indexing=False) as a, \
                Memory(cfg, embedder=embedder, background_indexing=False) as b:
            a.append_many(CONV, [{"role": "user", "content": f"turn {i} about the weather in Porto"}
                                 for i in range(TURNS)])
            assert a.hot is not None and b.hot is not None
            a.hot.read(a._key(CONV, None)[2])  # built and caught up: the steady state
            yield a, b


def hot_pins(m: Memory, key: str) -> dict[int, int]:
    """The set's pinned members as stored: position -> priority."""
    assert m.hot is not None
    hs = m.hot.tier.read(key)
    assert hs is not None
    return {t.position: t.priority for t in hs.turns if t.pinned}


def log_pins(m: Memory, key: str) -> dict[int, int]:
    return {r.position: prio for r in m.cold.turns(key) for pinned, prio in [pin_state(r)] if pinned}


# (b's call while a's pin is between its log write and its script, the position b acts
# on, whether that position is pinned first)
ORDERS = [
    # b pins another turn: its change follows a's
    ("pin", 5, False),
    # b unpins a pinned turn: its change follows a's
    ("unpin", 6, True),
    # b unpins a turn nothing pinned: no change of its own, but checked against the log's
    # version, which a's write moved
    ("unpin", 7, False),
]


@pytest.mark.parametrize(("call", "position", "pinned_first"), ORDERS,
                         ids=["pin", "unpin-pinned", "unpin-not-pinned"])
def test_scripts_in_the_other_order_rebuild_nothing(pair: tuple[Memory, Memory], call: str, position: int,
                                                   pinned_first: bool) -> None:
    a, b = pair
    assert a.hot is not None and b.hot is not None
    key = a._key(CONV, None)[2]
    if pinned_first:
        a.pin(CONV, position, priority=PRIORITY)
    b.hot.pin_gap_wait_s = LONG_GAP_WAIT_S  # attribute absent before: set all the same
    rebuilds = a.hot.rebuilds + b.hot.rebuilds
    target = 2
    moved = a.cold.set_pin(key, target, PRIORITY)  # a's log write; its script comes later
    assert moved is not None

    def b_call() -> None:
        if call == "pin":
            b.pin(CONV, position, priority=PRIORITY)
        else:
            b.unpin(CONV, position)

    worker = threading.Thread(target=b_call)
    worker.start()
    deadline = time.monotonic() + WAIT_FOR_GAP_S
    # b's script has run and found the gap (before the fix: b's call is over, rebuilt)
    while getattr(b.hot, "pin_gap_waits", 0) == 0 and worker.is_alive() and time.monotonic() < deadline:
        time.sleep(POLL_S)
    a.hot.pin(key, target, PRIORITY, log_move=moved)  # a's script, after b's
    worker.join(WAIT_FOR_GAP_S)
    assert not worker.is_alive()
    assert a.hot.rebuilds + b.hot.rebuilds == rebuilds  # was one more: b's rebuild
    assert hot_pins(a, key) == log_pins(a, key)
    read = a.hot.read(key)  # and the set is current: no read rebuilds it
    assert not read.rebuilt and not read.degraded


def test_an_older_pin_does_not_undo_a_newer_unpin(pair: tuple[Memory, Memory]) -> None:
    """a's pin of turn 4 is in the log; b unpins it, and with a's script not there in
    time b's set is rebuilt from the log (turn 4 unpinned); a's script then lands, its
    change held already: it changes nothing."""
    a, b = pair
    assert a.hot is not None and b.hot is not None
    key = a._key(CONV, None)[2]
    b.hot.pin_gap_wait_s = SHORT_GAP_WAIT_S
    target = 4
    moved = a.cold.set_pin(key, target, PRIORITY)
    assert moved is not None
    b.unpin(CONV, target)  # the log's newest change: turn 4 unpinned
    assert target not in log_pins(a, key)
    a.hot.pin(key, target, PRIORITY, log_move=moved)  # the older change's script, late
    assert target not in hot_pins(a, key)  # was pinned again, against the log
    assert hot_pins(a, key) == log_pins(a, key)

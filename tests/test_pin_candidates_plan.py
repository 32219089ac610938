"""The pin reads (`pin_candidates`: the planner's pinned block, supersession's candidates;
`superseded_pins`: the plan's "superseded by" notes) walk their own partial indexes
(m023) and stop after `limit` rows. Before, both went through turns_load_bearing (by
position): the candidates' read took every unsuperseded load-bearing turn of the
conversation and sorted them by priority (USE TEMP B-TREE FOR ORDER BY: 29,700 turns of a
60k-turn conversation per read), and the superseded one tested `superseded_by` turn by
turn, reading them all when few were superseded. Checked on the plans SQLite chooses for
the statements really run, on the answers (both engines, against the contract computed
from every turn, and on SQLite against the read before), and on an upgraded store."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cold_helpers import raw
from pg_server import fresh_schema
from store_trace import traced

from tiermem.tiers.cold import ColdStore
from tiermem.tiers.models import Message, TurnRow
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.schema import MIGRATIONS
from tiermem.tiers.store import ColdLog
from tiermem.tiers.tokens import BpeTokenCounter

# spelled out, not imported: this file must load against the code before m023 (the plan
# tests fail there, which is the point)
PIN_CANDIDATES_INDEX = "turns_pin_candidates"
SUPERSEDED_PINS_INDEX = "turns_superseded_pins"
OLD_INDEX = "turns_load_bearing"  # what both reads walked before m023
TURNS = 240
PRIORITIES = (40, 55, 70, 70, 85, 99)  # cycled over the load-bearing turns: ties within a priority
BEARING_EVERY = 2  # every second turn is load-bearing, as in the benchmark stores
SUPERSEDED_EVERY = 7  # of the load-bearing turns (every 14th turn), superseded by the next turn
PINNED = {3: 10, 20: 99, 21: 60, 140: 70, 230: 5}  # position -> pin priority (some load-bearing, some not)


def _build(s: ColdLog) -> str:
    """TURNS user turns: every BEARING_EVERY-th load-bearing with a cycled priority,
    every SUPERSEDED_EVERY-th of those superseded, PINNED pinned; and another
    conversation with load-bearing turns of its own (never in the answers)."""
    labels: list[tuple[str, bool, int, str] | None] = []
    for i in range(TURNS):
        if i % BEARING_EVERY == 0:
            labels.append(("constraint", True, PRIORITIES[(i // BEARING_EVERY) % len(PRIORITIES)], "test"))
        else:
            labels.append(None)
    key = s.append_batch("c", [Message(role="user", content=f"turn {i}") for i in range(TURNS)],
                         labels=labels).key
    s.set_superseded(key, [(p, p + 1) for p in range(0, TURNS - 1, BEARING_EVERY * SUPERSEDED_EVERY)])
    for pos, priority in PINNED.items():
        s.set_pin(key, pos, priority)
    s.append_batch("other", [Message(role="user", content=f"other {i}") for i in range(20)],
                   labels=[("constraint", True, 99, "test")] * 20)
    return key


def _rows(s: ColdLog, key: str) -> list[TurnRow]:
    return s.turns_at(key, list(range(TURNS)))


def _contract_candidates(rows: list[TurnRow], min_priority: int, limit: int) -> list[tuple[int, int | None]]:
    """tiers.store.ColdLog.pin_candidates, from every turn: explicit pins, and unsuperseded
    load-bearing turns of at least `min_priority`; by priority (a pin's own), then newest."""
    got = [r for r in rows if r.pinned_priority is not None
           or (r.load_bearing and r.priority >= min_priority and r.superseded_by is None)]
    got.sort(key=lambda r: (-(r.pinned_priority if r.pinned_priority is not None else r.priority), -r.position))
    return [(r.position, r.pinned_priority) for r in got[:limit]]


def _contract_superseded(rows: list[TurnRow], min_priority: int, limit: int) -> list[int]:
    got = [r.position for r in rows if r.load_bearing and r.priority >= min_priority
           and r.superseded_by is not None and r.pinned_priority is None]
    return sorted(got, reverse=True)[:limit]


ASKS = [
    (70, 1),  # the planner's threshold, one row: the newest of the top priority
    (70, 21),  # the planner's threshold, a slice: ties of 70 ordered newest first, pins among them
    (0, 64),  # supersession's read (min_priority=0, MAX_PIN_CANDIDATES)
    (0, TURNS),  # more than there are: every candidate, the pinned ones once
    (86, 10),  # above every load-bearing priority but 99: only 99s and the pins
    (100, 10),  # above all: the pins alone (theirs is not filtered)
]


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path, counter: BpeTokenCounter) -> Iterator[ColdLog]:
    s: ColdLog
    if request.param == "sqlite":
        s = ColdStore(tmp_path / "tiermem.db", tokens=counter)
    else:
        s = PostgresStore(request.getfixturevalue("pg_url"), tokens=counter, schema=fresh_schema())
    try:
        yield s
    finally:
        s.close()


@pytest.mark.parametrize("min_priority,limit", ASKS, ids=[f"min{m}-limit{n}" for m, n in ASKS])
def test_the_answers_are_the_contract_s(store: ColdLog, min_priority: int, limit: int) -> None:
    key = _build(store)
    rows = _rows(store, key)
    assert [(t.position, t.pinned_priority) for t in store.pin_candidates(
        key, min_priority=min_priority, limit=limit)] == _contract_candidates(rows, min_priority, limit)
    assert [t.position for t in store.superseded_pins(
        key, min_priority=min_priority, limit=limit)] == _contract_superseded(rows, min_priority, limit)


@pytest.mark.parametrize("min_priority,limit", ASKS, ids=[f"min{m}-limit{n}" for m, n in ASKS])
def test_the_answers_are_the_read_before_s(tmp_path: Path, counter: BpeTokenCounter, monkeypatch: pytest.MonkeyPatch,
                                           min_priority: int, limit: int) -> None:
    s = ColdStore(tmp_path / "tiermem.db", tokens=counter)
    try:
        key = _build(s)

        def both() -> tuple[list[TurnRow], list[TurnRow]]:
            return (s.pin_candidates(key, min_priority=min_priority, limit=limit),
                    s.superseded_pins(key, min_priority=min_priority, limit=limit))

        new = both()
        # the statements before m023, through the index they walked then
        monkeypatch.setattr(ColdStore, "_PIN_CANDIDATES_INDEX", OLD_INDEX, raising=False)
        monkeypatch.setattr(ColdStore, "_SUPERSEDED_PINS_INDEX", OLD_INDEX, raising=False)
        assert both() == new
    finally:
        s.close()


def _pin_reads(store: ColdStore, action: Callable[[], object]) -> list[tuple[str, list[str]]]:
    """(statement, its plan) of every read of load-bearing turns that `action` ran."""
    return [(sql, [str(step[-1]) for step in store._read("EXPLAIN QUERY PLAN " + sql)])
            for sql in traced(store, action)
            if sql.split()[0].upper() == "SELECT" and "load_bearing = 1" in sql]


CALLS: list[tuple[str, str, Callable[[ColdStore, str], object]]] = [
    # the planner's pinned block (planner.candidates: pin_set)
    ("pin_candidates", PIN_CANDIDATES_INDEX, lambda s, k: s.pin_candidates(k, min_priority=70, limit=21)),
    # supersession's candidates (consolidation.supersede: decide)
    ("pin_candidates_all", PIN_CANDIDATES_INDEX, lambda s, k: s.pin_candidates(k, min_priority=0, limit=64)),
    # the plan's notes on superseded pins
    ("superseded_pins", SUPERSEDED_PINS_INDEX, lambda s, k: s.superseded_pins(k, min_priority=70, limit=50)),
]


def _assert_walks_its_index(reads: list[tuple[str, list[str]]], index: str) -> None:
    assert reads, "no read of load-bearing turns traced"
    for sql, plan in reads:
        # the conversation's rows of the index, in the ORDER BY's order: no sort of them all
        assert any(re.match(rf"SEARCH t USING INDEX {index} \(conversation_id=\?", step) for step in plan), (sql, plan)
        assert not any("TEMP B-TREE" in step for step in plan), (sql, plan)


@pytest.mark.parametrize("name,index,call", CALLS, ids=[c[0] for c in CALLS])
def test_a_pin_read_walks_its_index_in_order(tmp_path: Path, counter: BpeTokenCounter, name: str, index: str,
                                             call: Callable[[ColdStore, str], object]) -> None:
    s = ColdStore(tmp_path / "tiermem.db", tokens=counter)
    try:
        key = _build(s)
        _assert_walks_its_index(_pin_reads(s, lambda: call(s, key)), index)
    finally:
        s.close()


def test_a_store_from_before_gets_the_indexes(tmp_path: Path, counter: BpeTokenCounter) -> None:
    version_before = [m.__name__ for m in MIGRATIONS].index("m023_index_pin_candidates")
    db = tmp_path / "tiermem.db"
    s = ColdStore(db, tokens=counter)
    key = _build(s)
    expected = _contract_candidates(_rows(s, key), 70, 21), _contract_superseded(_rows(s, key), 70, 50)
    s.close()
    with raw(db) as conn:
        conn.execute(f"DROP INDEX {PIN_CANDIDATES_INDEX}")
        conn.execute(f"DROP INDEX {SUPERSEDED_PINS_INDEX}")
        conn.execute(f"PRAGMA user_version = {version_before}")
    s = ColdStore(db, tokens=counter)
    try:
        assert s.version == len(MIGRATIONS)
        # the turns labeled before the upgrade are in the new indexes
        got = ([(t.position, t.pinned_priority) for t in s.pin_candidates(key, min_priority=70, limit=21)],
               [t.position for t in s.superseded_pins(key, min_priority=70, limit=50)])
        assert got == expected
        for _name, index, call in CALLS:
            _assert_walks_its_index(_pin_reads(s, lambda c=call: c(s, key)), index)  # type: ignore[misc]
    finally:
        s.close()


PG_TURNS = 2000  # enough rows that a sort of every candidate costs the planner more than the walk


def test_postgres_walks_the_index_backward_with_an_anti_join(pg_url: str,
                                                             counter: BpeTokenCounter,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    s = PostgresStore(pg_url, tokens=counter, schema=fresh_schema())
    try:
        key = s.append_batch("c", [Message(role="user", content=f"turn {i}") for i in range(PG_TURNS)],
                             labels=[("constraint", True, PRIORITIES[i % len(PRIORITIES)], "test")
                                     if i % BEARING_EVERY == 0 else None for i in range(PG_TURNS)]).key
        s.set_superseded(key, [(p, p + 1) for p in range(0, PG_TURNS - 1, BEARING_EVERY * SUPERSEDED_EVERY)])
        s.set_pin(key, 4, 99)
        with s.reading() as conn:  # as autovacuum would have by then: the plan a live store gets
            conn.execute("ANALYZE turns")
            conn.execute("ANALYZE pins")
        sent: list[tuple[str, object]] = []
        read = s._read

        def spy(sql: str, params: object = ()) -> list[object]:
            sent.append((sql, params))
            return read(sql, params)  # type: ignore[arg-type]

        monkeypatch.setattr(s, "_read", spy)
        s.pin_candidates(key, min_priority=70, limit=21)
        s.superseded_pins(key, min_priority=70, limit=50)
        monkeypatch.setattr(s, "_read", read)
        plans = ["\n".join(str(r[0]) for r in read("EXPLAIN " + sql, params)) for sql, params in sent]  # type: ignore[arg-type]
        assert len(plans) == 2
        candidates, superseded = plans
        # (the UNION's second branch aliases turns t_1)
        assert re.search(rf"Index Scan Backward using {PIN_CANDIDATES_INDEX} on turns t\w* ", candidates), candidates
        # the candidates are not sorted (the explicit pins' read is, by p.priority: a handful of rows)
        assert not re.search(r"Sort Key: t\w*\.priority DESC", candidates), candidates
        # the superseded turns only (the planner may sort those few by position), never a
        # read of every load-bearing turn
        assert f"on {SUPERSEDED_PINS_INDEX}" in superseded or f"using {SUPERSEDED_PINS_INDEX}" in superseded, superseded
        assert "Seq Scan on turns" not in superseded and "turns_load_bearing" not in superseded, superseded
    finally:
        s.close()

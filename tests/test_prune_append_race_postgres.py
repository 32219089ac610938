"""A prune on PostgreSQL keeps a conversation appended to while it runs, and counts only
what it erased. Its erasure is one transaction that locks the listed rows (`SELECT ...
FOR UPDATE`) before it counts and deletes them; at READ COMMITTED a row it had to wait
for is checked against `PRUNE_IDLE_SQL` again once the writer commits. The SQLite
engine, erasing in batches, lost acknowledged appends here (review r_tenant, 2026-12-07;
tests/test_prune_append_race.py); this pins down that PostgreSQL does not. Real server,
real lock waits: another session holds the conversation's row so that the append and
the prune queue for it in a known order, each seen waiting in pg_stat_activity."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from pg_server import fresh_schema

from tiermem.tiers.models import Message
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.tokens import BpeTokenCounter

NS = "t"
TURNS = 20
DAY_S = 86_400.0
OLD = time.time() - DAY_S  # the conversations' messages: a day old
CUTOFF_AGE_S = 3_600.0  # the prune takes what has been idle for an hour
WAIT_S = 30.0  # a session is seen waiting for its lock by then, or the test fails
# backends of this server's database waiting for a lock (the asking session excluded)
LOCK_WAITERS_SQL = ("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()")


@pytest.fixture
def stores(pg_url: str, counter: BpeTokenCounter) -> Iterator[tuple[str, PostgresStore, PostgresStore]]:
    """(schema, the pruning store, the appending store: another process's handle)."""
    schema = fresh_schema()
    pruner = PostgresStore(pg_url, tokens=counter, schema=schema)
    writer = PostgresStore(pg_url, tokens=counter, schema=schema)
    try:
        yield schema, pruner, writer
    finally:
        writer.close()
        pruner.close()


def waiters_reach(pg_url: str, n: int) -> None:
    """Return once `n` sessions wait for a lock (polled; fails after WAIT_S)."""
    deadline = time.monotonic() + WAIT_S
    with psycopg.connect(pg_url, autocommit=True) as conn:
        while (got := conn.execute(LOCK_WAITERS_SQL).fetchone()) is not None and got[0] < n:
            assert time.monotonic() < deadline, f"{got[0]} of {n} sessions waiting for a lock"
            time.sleep(0.01)


# (which takes the conversation's row first once the holder lets go, what the prune
#  erases, whether the append went to a new incarnation, the messages the prune counts)
CASES = [
    # the append commits first: the prune, waiting for the row, finds it no longer idle
    # and keeps it, its 20 messages and the acknowledged one
    ("append-first", ["a", "b"], False, 2 * TURNS),
    # the prune commits first: the append, waiting for the row, finds it gone and starts
    # a new incarnation at position 0 (acknowledged after the erasure; nothing lost)
    ("prune-first", ["a", "b", "c"], True, 3 * TURNS),
]


@pytest.mark.parametrize(("first", "erased", "new_incarnation", "counted"), CASES, ids=[c[0] for c in CASES])
def test_a_prune_keeps_a_conversation_appended_to_while_it_waits(
        pg_url: str, stores: tuple[str, PostgresStore, PostgresStore], first: str, erased: list[str],
        new_incarnation: bool, counted: int) -> None:
    schema, pruner, writer = stores
    keys = {name: pruner.append_batch(name, [Message(role="user", content=f"{name} turn {t}", created_at=OLD)
                                             for t in range(TURNS)], namespace=NS).key
            for name in ("a", "b", "c")}
    got: dict[str, Any] = {}
    append = threading.Thread(target=lambda: got.update(append=writer.append_batch(
        "c", [Message(role="user", content="acknowledged")], namespace=NS)))
    prune = threading.Thread(target=lambda: got.update(report=pruner.prune(time.time() - CUTOFF_AGE_S,
                                                                          namespace=NS)))
    order = [append, prune] if first == "append-first" else [prune, append]
    with psycopg.connect(pg_url) as holder:  # a transaction holding "c"'s row
        holder.execute(f'SET search_path TO "{schema}", public')
        holder.execute("SELECT 1 FROM conversations WHERE id = %s FOR SHARE", (keys["c"],))
        for n, thread in enumerate(order, 1):
            thread.start()
            waiters_reach(pg_url, n)  # queued for the row in this order
        holder.rollback()
    for thread in order:
        thread.join(WAIT_S)
        assert not thread.is_alive()

    report, appended = got["report"], got["append"]
    assert report.conversation_ids == erased
    assert report.messages == counted == sum(t["messages"] for t in report.tombstones)
    assert sorted((t["id"], t["messages"]) for t in pruner.tombstones(NS)) == sorted(
        (t["id"], t["messages"]) for t in report.tombstones)
    key = pruner.key_of(NS, "c")
    assert key == appended.key and (key != keys["c"]) == new_incarnation
    texts = [m.text for m in pruner.history(key)]
    # the acknowledged message is where the append said, under the key it said
    assert texts[-1] == "acknowledged" and appended.positions == [len(texts) - 1]
    assert len(texts) == (1 if new_incarnation else TURNS + 1)

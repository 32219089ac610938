"""Appends to a conversation go through while another process rebuilds a PostgreSQL
store, and the rebuild keeps every message's rows.

The rebuild's rewrite of the turn rows was one transaction whose `DELETE FROM turns`
moved, and held to its commit, the pin-version row of every conversation with a
load-bearing turn (its trigger): a load-bearing append to one waited for the whole
rewrite (20k turns: 3.6 s) and failed busy past a short lock timeout (503). Now the
rewrite commits in short batches of one conversation's turns, each in the writers' lock
order (the conversation's row, its turns, its pin version), so an append waits one batch
at most.

A real child process (tests/pg_rebuild_worker.py) rebuilds; once its rewrite is under way
(an UPDATE-class lock on the turns table held by its session), this process appends to
the rebuilt conversation with a short lock timeout (Config.busy_timeout_ms, lowered).
A second test kills the child after its first batch: the store still reads, every turn
with its rows and either its old labels or its rebuilt ones.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import psycopg.sql
import pytest
from go_child import STAGE_TIMEOUT_S, answer, start, stop, wait_for
from pg_server import fresh_schema, turns_write_locked

from tiermem.tiers.models import Message
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.tokens import BpeTokenCounter

WORKER = Path(__file__).with_name("pg_rebuild_worker.py")
NAME = "long"  # the conversation's name (its first incarnation's key is the same)
TURNS = 20_000  # the rewrite of this many turns held the pin-version row 3.6 s in one transaction
OTHER_TURNS = 50  # a second conversation, rebuilt too
SEED_LABEL = ("fact", True, 60, "seed")  # load-bearing: the rewrite's DELETE moves the pin version
# the rebuild's own labels: the child has no labeler, so its turns are written unlabelled
REBUILT_LABEL = (None, False, 0, None)
BEARING_LABEL = ("fact", True, 70, "meanwhile")  # an append that moves the pin version too
APPENDS_DURING = 3
LOCK_WAIT_MS = 300  # the appender's lock timeout: a batch holds the row ~30 ms


@pytest.fixture
def where(pg_url: str) -> str:
    return f"{pg_url}#{fresh_schema()}"


@pytest.fixture
def store(where: str) -> Iterator[PostgresStore]:
    """This process's store, waiting for a lock at most LOCK_WAIT_MS."""
    url, schema = where.rsplit("#", 1)
    s = PostgresStore(url, tokens=BpeTokenCounter(), schema=schema, lock_timeout_ms=LOCK_WAIT_MS)
    try:
        yield s
    finally:
        s.close()


def seed(store: PostgresStore) -> str:
    key = store.append_batch(NAME, [Message(role="user", content=f"turn {i} says something.") for i in range(TURNS)],
                             labels=[SEED_LABEL] * TURNS).key
    store.append_batch("other", [Message(role="user", content=f"other {i}") for i in range(OTHER_TURNS)],
                       labels=[SEED_LABEL] * OTHER_TURNS)
    return key


def rewrite_under_way(where: str) -> bool:
    """Whether another session holds a write lock on the schema's turns table."""
    return turns_write_locked(*where.rsplit("#", 1))


def pin_version_held(where: str, key: str) -> bool:
    """Whether another session's transaction holds the conversation's pin-version row (a
    trigger of its turn rows moved it), the row a load-bearing append's trigger moves."""
    url, schema = where.rsplit("#", 1)
    with psycopg.connect(url) as conn:
        try:
            # FOR SHARE conflicts with the writers' row lock only; NOWAIT: answer now
            conn.execute(psycopg.sql.SQL("SELECT 1 FROM {}.pin_versions WHERE conversation_id = %s FOR SHARE NOWAIT")
                         .format(psycopg.sql.Identifier(schema)), (key,))
            return False
        except psycopg.errors.LockNotAvailable:
            return True
        finally:
            conn.rollback()


def rows_of(store: PostgresStore) -> tuple[int, int, int]:
    """(messages, turn rows, FTS rows), each counted whole."""
    got = store.integrity()
    return got["messages"], got["turns"], got["fts"]


def labels(store: PostgresStore, key: str) -> list[tuple[Any, ...]]:
    return [(t.intent, bool(t.load_bearing), t.priority, t.label_reason) for t in store.turns(key)]


# (the appends' label) both kinds go through and keep their rows
@pytest.mark.parametrize("label", [
    # load-bearing: its turn's trigger moves the pin version the rewrite's DELETE held
    pytest.param(BEARING_LABEL, id="load-bearing"),
    # plain: it never waited, but committed inside the rewrite's transaction
    pytest.param(None, id="plain"),
])
def test_appends_go_through_while_another_process_rebuilds(where: str, store: PostgresStore,
                                                           label: tuple[str, bool, int, str] | None) -> None:
    key = seed(store)
    child = start(WORKER, where)
    try:
        # load-bearing: once the rewrite holds the pin version; plain: once it writes turns
        wait_for(lambda: rewrite_under_way(where) if label is None else pin_version_held(where, key), child,
                 "the rewrite never started")
        waits: list[float] = []
        for i in range(APPENDS_DURING):
            began = time.perf_counter()
            positions = store.append_batch(NAME, [Message(role="user", content=f"meanwhile {i}")],
                                           labels=None if label is None else [label]).positions
            waits.append(time.perf_counter() - began)
            assert positions == [TURNS + i]
        appended_by = time.time()
        done = answer(child)
    finally:
        stop(child)
    assert "ended" in done, (done, waits)  # the rebuild itself finished
    assert appended_by < done["ended"], (waits, appended_by, done)  # none waited for its end
    total = TURNS + OTHER_TURNS + APPENDS_DURING
    assert rows_of(store) == (total, total, total)
    turns = store.turns(key)
    assert [t.position for t in turns] == list(range(TURNS + APPENDS_DURING))
    got = labels(store, key)
    assert got[:TURNS] == [REBUILT_LABEL] * TURNS
    # the appends' rows: written by the append (its label) or rebuilt with the rest
    assert set(got[TURNS:]) <= {REBUILT_LABEL, label or REBUILT_LABEL}, got[TURNS:]
    assert [h[1] for h in store.search_bm25("meanwhile", APPENDS_DURING, conversation_id=key)] != []


def test_a_rebuild_killed_mid_way_leaves_every_turn_old_or_rebuilt(where: str, store: PostgresStore) -> None:
    key = seed(store)
    version = store.pin_version(key)
    child = start(WORKER, where, "hang")
    try:
        assert answer(child) == "batch"  # its first batch committed; killed before the next
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(STAGE_TIMEOUT_S)
    total = TURNS + OTHER_TURNS
    assert rows_of(store) == (total, total, total)
    got = labels(store, key)
    assert set(got) <= {SEED_LABEL, REBUILT_LABEL}, set(got)
    assert REBUILT_LABEL in got and SEED_LABEL in got  # killed mid-way: some of each
    # every rebuilt turn (once load-bearing) moved the pin version: a cache keyed by it reads again
    assert store.pin_version(key) > version
    assert store.search_bm25("says", 1, conversation_id=key) != []

"""The writers of a conversation's labels and supersessions take their locks in one order
(tiers/postgres.py: the conversation's row, then its turns by position, then its
pin_versions row), so two of them at once never deadlock.

Two real processes, each with its own PostgresStore, are interleaved at the lock points:
the test holds the conversation's pin_versions row (FOR UPDATE) on a connection of its
own, lets the first writer go until it waits for that row, then the second until it
waits too, and only then commits. Before the fix set_labels took no conversation lock
and its turns in its caller's order, each with the pin version between them: by then
each writer held a turn row the other needed next, and the server broke the cycle by
rolling one back (DeadlockDetected, SQLSTATE 40P01: a 503 busy for a request, an owed
decision for the indexer, a failed rebuild). Now the second writer waits at the
conversation's row until the first commits, and both land.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_server import fresh_schema

from tiermem.tiers.models import Message
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.tokens import BpeTokenCounter

ROOT = Path(__file__).resolve().parent.parent
WORKER = Path(__file__).with_name("pg_lock_order_worker.py")
STAGE_TIMEOUT_S = 60.0  # a child opened its store, or a writer reached its lock, by then
POLL_S = 0.02
TURNS = 6
# every turn starts a plain statement; turn 0 load-bearing, so the pin_versions row exists
SEED_LABEL = ("statement", False, 0, "seed")
PINNED_LABEL = ("fact", True, 1, "seed")
# backends of this server's database waiting for a lock (the test's own excluded)
LOCK_WAITERS_SQL = ("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()")

Write = tuple[str, Any]  # (worker op, its JSON arguments)


def labels(*rows: tuple[int, int, str]) -> list[list[Any]]:
    """(position, priority, reason) -> a load-bearing label row, in the order given."""
    return [[pos, "fact", True, prio, reason] for pos, prio, reason in rows]


# (first writer, second writer, what the turns hold after both: position -> (load_bearing,
# priority, superseded_by), how many times the pin version moved). The second writer
# commits last, so where both label a turn its label is the one kept.
CASES: dict[str, tuple[Write, Write, dict[int, tuple[bool, int, int | None]], int]] = {
    # the reviewer's case: labels of turns 1 and 3, and a supersession of turn 3 (the
    # correction's pair: the conversation's row, then turn 3, then the pin version)
    "labels_then_supersession": (
        ("set_labels", labels((1, 5, "L"), (3, 5, "L"))),
        ("set_superseded", {"pairs": [[3, 4]], "labels": []}),
        {1: (True, 5, None), 3: (True, 5, 4)}, 3),
    # two relabelings of the same turns in opposite orders (a rebuild's and a caller's)
    "labels_then_labels_reversed": (
        ("set_labels", labels((1, 5, "L1"), (3, 5, "L1"))),
        ("set_labels", labels((3, 7, "L2"), (1, 7, "L2"))),
        {1: (True, 7, None), 3: (True, 7, None)}, 4),
    # a supersession that only labels (a correction inheriting its target's pin, no
    # pair): before, it took no conversation lock either
    "labels_then_inherited_label": (
        ("set_labels", labels((1, 5, "L"), (3, 5, "L"))),
        ("set_superseded", {"pairs": [], "labels": labels((3, 9, "inherits"))}),
        {1: (True, 5, None), 3: (True, 9, None)}, 3),
    # a correction with its pair and its label first (record()'s shape), then labels
    "supersession_then_labels": (
        ("set_superseded", {"pairs": [[3, 4]], "labels": labels((1, 9, "inherits"))}),
        ("set_labels", labels((1, 5, "L"), (3, 5, "L"))),
        {1: (True, 5, None), 3: (True, 5, 4)}, 4),
}


@pytest.fixture(scope="module")
def store(pg_url: str) -> Iterator[PostgresStore]:
    s = PostgresStore(pg_url, tokens=BpeTokenCounter(), schema=fresh_schema())
    try:
        yield s
    finally:
        s.close()


@pytest.fixture(scope="module")
def writers(pg_url: str, store: PostgresStore) -> Iterator[list[subprocess.Popen[str]]]:
    """Two child processes on the store's schema (pg_lock_order_worker.py), started once
    for every case: each case writes to a conversation of its own."""
    children = [subprocess.Popen([sys.executable, str(WORKER), pg_url, store.schema], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
                for _ in range(2)]
    try:
        for child in children:
            assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        yield children
    finally:
        for child in children:
            if child.stdin is not None:
                child.stdin.close()  # EOF: the child closes its store and ends
            try:
                child.wait(timeout=STAGE_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


def send(child: subprocess.Popen[str], key: str, write: Write) -> None:
    """The write starts at once in `child`."""
    assert child.stdin is not None
    op, args = write
    child.stdin.write(json.dumps({"key": key, "op": op, "args": args}) + "\n")
    child.stdin.flush()


def wait_for_waiters(watch: psycopg.Connection[Any], n: int, what: str) -> None:
    deadline = time.monotonic() + STAGE_TIMEOUT_S
    while (got := watch.execute(LOCK_WAITERS_SQL).fetchone()[0]) < n:  # type: ignore[index]
        assert time.monotonic() < deadline, f"{what}: {got} writers waiting for a lock, expected {n}"
        time.sleep(POLL_S)


def answer(child: subprocess.Popen[str]) -> dict[str, Any]:
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line, f"the child ended (exit status {child.wait()})"
    got: dict[str, Any] = json.loads(line)
    return got


@pytest.mark.parametrize("case", list(CASES))
def test_two_writers_interleaved_at_the_pin_version_both_land(pg_url: str, store: PostgresStore,
                                                              writers: list[subprocess.Popen[str]],
                                                              case: str) -> None:
    first, second, expect, moves = CASES[case]
    msgs = [Message(role="user", content=f"turn {i} says something.") for i in range(TURNS)]
    key = store.append_batch(case, msgs, labels=[PINNED_LABEL] + [SEED_LABEL] * (TURNS - 1)).key
    version = store.pin_version(key)
    assert version == 1  # turn 0's insert made the row the test holds below
    with psycopg.connect(pg_url, autocommit=True) as watch, psycopg.connect(pg_url) as holder:
        holder.execute(f'SELECT 1 FROM "{store.schema}".pin_versions WHERE conversation_id = %s FOR UPDATE', (key,))
        send(writers[0], key, first)
        wait_for_waiters(watch, 1, "the first writer")  # at the pin version the test holds
        send(writers[1], key, second)
        wait_for_waiters(watch, 2, "the second writer")  # behind it: its row (before: the pin version)
        holder.commit()
    assert [answer(w) for w in writers] == [{"ok": True}, {"ok": True}]
    rows = {t.position: t for t in store.turns(key)}
    for pos, (bearing, priority, superseded_by) in expect.items():
        assert (rows[pos].load_bearing, rows[pos].priority, rows[pos].superseded_by) == (
            bearing, priority, superseded_by), pos
    # the turns neither wrote are as seeded
    assert all(not rows[p].load_bearing and rows[p].superseded_by is None for p in range(1, TURNS) if p not in expect)
    # every change of both writes moved the version once: none rolled back
    assert store.pin_version(key) == version + moves

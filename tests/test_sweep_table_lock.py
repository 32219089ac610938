"""A sweep on PostgreSQL that meets a table locked whole (an erasure's VACUUM FULL) stops
after its one lock wait; the views it leaves wait for the next sweep.

Before (s27): each picked view waited the lock timeout in turn and failed (the run went
on to the next conversation, a1dfac1's rule for a locked row): N conversations cost N lock
waits (4 x 1 s here; 50 views at the default 5 s, minutes) and refreshed nothing. Now a
lock timeout without a row's context, while the store finds one of its tables locked by
another session (`PostgresStore.locked_table`), ends the sweep: one failure, the rest
skipped (SKIP_TABLE_LOCKED), for the scheduler's run and `Memory.consolidate()` alike.
A second waiter queued on a locked row times out without a row's context too: that stays
one conversation's (its views skipped, the others refreshed).

Real embedded PostgreSQL; the locks are another process's (tests/pg_lock_holder.py): a
LOCK TABLE in ACCESS EXCLUSIVE mode (the lock VACUUM FULL takes), and a real VACUUM FULL
queued behind a report query's read (every later locker queues behind it).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest
from pg_lock_holder import holding, queued
from pg_server import fresh_schema
from sweep_helpers import (
    ALL_VIEWS,
    CONVERSATIONS,
    FIRST,
    VIEW_KINDS,
    coverage,
    failed,
    fill,
    opened,
    skipped,
    sweep_config,
)

from tiermem import Memory
from tiermem.consolidation.scheduler import SKIP_ROW_LOCKED, SKIP_TABLE_LOCKED, RefreshFailure, SkippedView
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")

BUSY_TIMEOUT_MS = 1000  # the lock wait: long enough that one wait and four differ plainly
LOCK_WAIT_S = BUSY_TIMEOUT_MS / 1000
# a sweep that stopped at the first wait takes that wait and its own work; before, it took
# one wait per conversation (len(CONVERSATIONS) of them)
AT_MOST_S = 2 * LOCK_WAIT_S


@contextmanager
def _vacuum_behind_a_reader(url: str, schema: str, table: str) -> Iterator[None]:
    """A report query's open read of `table`, and a VACUUM FULL of it queued behind it."""
    with holding(url, f'SELECT count(*) FROM "{schema}".{table}'), \
            queued(url, f'VACUUM FULL "{schema}".{table}', "relation", autocommit=True):
        yield


Locker = Callable[[str, str], AbstractContextManager[None]]
TABLE_LOCKS: dict[str, Locker] = {
    # the lease table, which each refresh writes first, locked as VACUUM FULL locks it
    "view_claims_locked": lambda url, s: holding(url, f'LOCK TABLE "{s}".view_claims IN ACCESS EXCLUSIVE MODE'),
    # the pins table, which each refresh reads (another lock than the lease's first write)
    "pins_locked": lambda url, s: holding(url, f'LOCK TABLE "{s}".pins IN ACCESS EXCLUSIVE MODE'),
    # a real VACUUM FULL waiting for its lock: the refreshes queue behind it
    "vacuum_full_queued": lambda url, s: _vacuum_behind_a_reader(url, s, "view_claims"),
}


def _assert_one_wait(m: Memory, failures: tuple[RefreshFailure, ...], took: float) -> None:
    # one lock wait, one failure (before: one per conversation), nothing refreshed
    assert failed(m, failures) == [(FIRST, "LockNotAvailable")]
    assert took < AT_MOST_S, f"{took:.2f} s: more than one lock wait of {LOCK_WAIT_S} s"
    assert all(v == [False, False] for v in coverage(m).values())


def _assert_rest_skipped(m: Memory, skipped_views: tuple[SkippedView, ...]) -> None:
    # every other view left for the next sweep, saying why
    assert skipped(m, skipped_views) == {
        FIRST: [SKIP_TABLE_LOCKED] * (len(VIEW_KINDS) - 1),
        **{c: [SKIP_TABLE_LOCKED] * len(VIEW_KINDS) for c, _n in CONVERSATIONS[1:]}}


@pytest.mark.parametrize("lock", list(TABLE_LOCKS))
def test_the_scheduler_run_stops_at_a_locked_table(
        tmp_path: Path, embedder: FastEmbedder, pg_url: str, lock: str) -> None:
    schema = fresh_schema()
    with opened(sweep_config(tmp_path, BUSY_TIMEOUT_MS, pg_url, schema), embedder) as m:
        fill(m)
        sched = m.make_scheduler()
        with TABLE_LOCKS[lock](pg_url, schema):
            began = time.monotonic()
            assert sched.run_once(log_failures=False) == 0
            took = time.monotonic() - began
        _assert_one_wait(m, sched.last_failures, took)
        _assert_rest_skipped(m, sched.last_skipped)
        assert sched.stats.last_selected == ALL_VIEWS and sched.stats.last_failed == 1
        # the lock gone, the next run refreshes them all
        assert sched.run_once(log_failures=False) == ALL_VIEWS
        assert sched.last_failures == () and sched.last_skipped == ()


@pytest.mark.parametrize("lock", list(TABLE_LOCKS))
def test_consolidate_stops_at_a_locked_table(tmp_path: Path, embedder: FastEmbedder, pg_url: str, lock: str) -> None:
    schema = fresh_schema()
    with opened(sweep_config(tmp_path, BUSY_TIMEOUT_MS, pg_url, schema), embedder) as m:
        fill(m)
        with TABLE_LOCKS[lock](pg_url, schema):
            began = time.monotonic()
            done = m.consolidate()  # before: raised LockNotAvailable at the first view
            took = time.monotonic() - began
        assert done == 0 and done.picked == ALL_VIEWS
        _assert_one_wait(m, done.failures, took)
        _assert_rest_skipped(m, done.skipped)
        assert m.consolidate() == ALL_VIEWS


def test_a_second_waiter_on_a_locked_row_is_still_one_conversations(
        tmp_path: Path, embedder: FastEmbedder, pg_url: str) -> None:
    schema = fresh_schema()
    row = f"SELECT id FROM \"{schema}\".conversations WHERE name = '{FIRST}' FOR UPDATE"
    with opened(sweep_config(tmp_path, BUSY_TIMEOUT_MS, pg_url, schema), embedder) as m:
        fill(m)
        sched = m.make_scheduler()
        # an erasure holding the row and an append queued on it: the refresh queues on the
        # row's tuple lock, and its timeout carries no row context
        with holding(pg_url, row), queued(pg_url, row, "transactionid"):
            refreshed = sched.run_once(log_failures=False)
        assert failed(m, sched.last_failures) == [(FIRST, "LockNotAvailable")]
        assert refreshed == (len(CONVERSATIONS) - 1) * len(VIEW_KINDS)
        assert coverage(m) == {FIRST: [False, False], **{c: [True, True] for c, _n in CONVERSATIONS[1:]}}
        assert skipped(m, sched.last_skipped) == {FIRST: [SKIP_ROW_LOCKED] * (len(VIEW_KINDS) - 1)}

"""A scheduler run on PostgreSQL goes on past a conversation whose row another session
holds locked; on SQLite a busy store still ends the run.

Before (268f810; a review, 2026-12-06): a run ended at the first refresh the store
refused, whatever refused it. On PostgreSQL a lock is a row's: a second session holding
one conversation's row (a long import into it, its erasure) made that conversation's
refresh wait out the lock timeout, and the run ended there. That conversation, the most
behind, headed every run, so `tiermem serve` refreshed no view at all while the lock
lasted ("refreshed 0 of 6 picked" every run). Now such a refusal skips that
conversation's other views for the run and the others' views are refreshed in the same
run. SQLite's busy is its one file lock, which every view would meet: the run still ends
there (tests/test_cli_consolidate_busy.py has the CLI's side of it).

Real embedded PostgreSQL (a second psycopg session holds the lock), real SQLite (another
process holds the write lock).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from cold_helpers import locked
from pg_server import fresh_schema
from sweep_helpers import MAX_TURNS_BEHIND, ROW_LOCK_CLAUSES, VIEW_KINDS, covered, fill, key_of, opened

from tiermem import Config, Memory
from tiermem.consolidation.scheduler import ConsolidationScheduler
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.files import storage_problem

pytestmark = pytest.mark.usefixtures("clean_env")

BUSY_TIMEOUT_MS = 300  # each refusal waits this long: short, so the test is
LOCKED = "big"  # the most behind: first in every run
# (conversation, turns): the locked one first in the sweep's order, the others behind too
# (one fewer than sweep_helpers.CONVERSATIONS)
CONVERSATIONS = ((LOCKED, 12), ("small1", 5), ("small2", 5))


@contextmanager
def row_locked(url: str, schema: str, name: str, clause: str) -> Iterator[None]:
    """Another session holding the conversation's row with `clause` for the block (its
    transaction left open), rolled back and closed at the end."""
    holder = psycopg.connect(url, autocommit=False)
    try:
        row = holder.execute(f'SELECT id FROM "{schema}".conversations WHERE name = %s {clause}', (name,)).fetchone()
        assert row is not None, name
        yield
    finally:
        holder.rollback()
        holder.close()


def _sched(m: Memory) -> ConsolidationScheduler:
    sched = m.make_scheduler()
    assert sched.max_views_per_run >= len(CONVERSATIONS) * len(VIEW_KINDS)  # one run may do them all
    return sched


@pytest.mark.parametrize("clause", ROW_LOCK_CLAUSES)  # the cases, a comment each: sweep_helpers
def test_a_row_locked_conversation_leaves_the_others_refreshed(
        tmp_path: Path, embedder: FastEmbedder, pg_url: str, clause: str) -> None:
    schema = fresh_schema()
    cfg = Config(data_dir=tmp_path / "data", cold_url=pg_url, cold_schema=schema,
                 busy_timeout_ms=BUSY_TIMEOUT_MS, warm_max_turns_behind=MAX_TURNS_BEHIND)
    with opened(cfg, embedder) as m:
        fill(m, CONVERSATIONS)
        sched = _sched(m)
        with row_locked(pg_url, schema, LOCKED, clause):
            refreshed = sched.run_once(log_failures=False)
            failures = sched.last_failures
            # the locked conversation's first view was refused (a lock timeout) and its
            # other view not tried: one lock wait, not one per view
            assert [(f.conversation, type(f.error).__name__) for f in failures] == [
                (key_of(m, LOCKED), "LockNotAvailable")], failures
            problem = storage_problem(failures[0].error)
            assert problem is not None and problem.busy
            # the other conversations' views were refreshed in this run (before: none)
            assert {c: covered(m, c) for c, _n in CONVERSATIONS} == {
                LOCKED: [False, False], "small1": [True, True], "small2": [True, True]}
            others = (len(CONVERSATIONS) - 1) * len(VIEW_KINDS)
            assert refreshed == sched.stats.last_refreshed == others
            assert sched.stats.last_selected == len(CONVERSATIONS) * len(VIEW_KINDS)
            assert sched.stats.last_failed == 1
        # the lock gone, the next run refreshes the locked conversation's views
        assert sched.run_once(log_failures=False) == len(VIEW_KINDS)
        assert sched.last_failures == ()
        assert covered(m, LOCKED) == [True, True]


def test_a_busy_sqlite_store_still_ends_the_run(tmp_path: Path, embedder: FastEmbedder) -> None:
    cfg = Config(data_dir=tmp_path / "data", busy_timeout_ms=BUSY_TIMEOUT_MS, warm_max_turns_behind=MAX_TURNS_BEHIND)
    with opened(cfg, embedder) as m:
        fill(m, CONVERSATIONS)
        sched = _sched(m)
        with locked(tmp_path / "data" / "tiermem.db"):
            assert sched.run_once(log_failures=False) == 0
            failures = sched.last_failures
        # the file's one write lock: the first refusal ends the run, no other conversation
        # is tried (each would wait the busy timeout for nothing)
        assert [(f.conversation, type(f.error).__name__) for f in failures] == [
            (key_of(m, LOCKED), "OperationalError")], failures
        problem = storage_problem(failures[0].error)
        assert problem is not None and problem.busy
        assert all(covered(m, c) == [False, False] for c, _n in CONVERSATIONS)

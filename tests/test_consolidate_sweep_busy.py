"""`Memory.consolidate()` without a conversation finishes its sweep on a busy store and
says what it could not do, instead of raising the store's refusal mid-sweep.

Before (s27): the sweep raised the first busy refusal to the library caller (a
PostgreSQL lock timeout on a conversation another session held locked, SQLite's
'database is locked' while another process held the write lock, a lock timeout reading
the views over budget), the other conversations' views left unrefreshed and nothing to
say which, while the scheduler's run (`run_once`) went on and kept them. Now it answers
a `Consolidated` (an int, as before: the views refreshed) whose `failures`, `skipped`
(with why) and `refused` say what was refused and left for the next sweep; what is not
the store being busy is still raised.

Real embedded PostgreSQL with another process holding the lock (tests/pg_lock_holder.py),
real SQLite with another process holding BEGIN IMMEDIATE (cold_helpers.locked).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cold_helpers import locked
from pg_lock_holder import holding
from pg_server import fresh_schema, with_options
from sweep_helpers import (
    ALL_VIEWS,
    CONVERSATIONS,
    FIRST,
    ROW_LOCK_CLAUSES,
    VIEW_KINDS,
    coverage,
    failed,
    fill,
    opened,
    skipped,
    sweep_config,
)

from tiermem.consolidation.scheduler import SKIP_ROW_LOCKED, SKIP_STORE_REFUSED, Consolidated
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.files import storage_problem

pytestmark = pytest.mark.usefixtures("clean_env")

BUSY_TIMEOUT_MS = 300  # each refusal waits this long: short, so the test is
OTHERS = len(CONVERSATIONS) - 1


@pytest.mark.parametrize("clause", ROW_LOCK_CLAUSES)  # the cases, a comment each: sweep_helpers
def test_a_row_locked_conversation_is_skipped_and_the_others_refreshed(
        tmp_path: Path, embedder: FastEmbedder, pg_url: str, clause: str) -> None:
    schema = fresh_schema()
    with opened(sweep_config(tmp_path, BUSY_TIMEOUT_MS, pg_url, schema), embedder) as m:
        fill(m)
        with holding(pg_url, f"SELECT id FROM \"{schema}\".conversations WHERE name = '{FIRST}' {clause}"):
            done = m.consolidate()  # before: raised LockNotAvailable at the first view
        assert isinstance(done, Consolidated)
        # one lock wait for the locked conversation, its other view not tried
        assert failed(m, done.failures) == [(FIRST, "LockNotAvailable")]
        problem = storage_problem(done.failures[0].error)
        assert problem is not None and problem.busy
        assert skipped(m, done.skipped) == {FIRST: [SKIP_ROW_LOCKED] * (len(VIEW_KINDS) - 1)}
        assert done.skipped[0].cause  # the refusal that made it skipped, in one line
        # the other conversations' views refreshed in the same sweep
        assert done == OTHERS * len(VIEW_KINDS) and done.picked == ALL_VIEWS
        assert not done.complete and done.refused is None
        assert coverage(m) == {FIRST: [False, False], **{c: [True, True] for c, _n in CONVERSATIONS[1:]}}
        # the lock gone, the next sweep refreshes what was left
        again = m.consolidate()
        assert again.complete and again == len(VIEW_KINDS)
        assert coverage(m)[FIRST] == [True, True]


def test_a_busy_sqlite_store_ends_the_sweep_without_raising(tmp_path: Path, embedder: FastEmbedder) -> None:
    with opened(sweep_config(tmp_path, BUSY_TIMEOUT_MS), embedder) as m:
        fill(m)
        with locked(tmp_path / "data" / "tiermem.db"):
            done = m.consolidate()  # before: raised OperationalError('database is locked')
        # the file's one write lock: the first refusal ends the sweep (each later view would
        # wait the busy timeout for nothing), every other view skipped, nothing raised
        assert done == 0 and done.picked == ALL_VIEWS
        assert failed(m, done.failures) == [(FIRST, "OperationalError")]
        problem = storage_problem(done.failures[0].error)
        assert problem is not None and problem.busy
        assert skipped(m, done.skipped) == {
            FIRST: [SKIP_STORE_REFUSED] * (len(VIEW_KINDS) - 1),
            **{c: [SKIP_STORE_REFUSED] * len(VIEW_KINDS) for c, _n in CONVERSATIONS[1:]}}
        assert all(v == [False, False] for v in coverage(m).values())
        # the lock gone, the next sweep does them all
        assert m.consolidate() == ALL_VIEWS


def test_views_unreadable_behind_a_table_lock_are_refused_not_raised(
        tmp_path: Path, embedder: FastEmbedder, pg_url: str) -> None:
    schema = fresh_schema()
    with opened(sweep_config(tmp_path, BUSY_TIMEOUT_MS, pg_url, schema), embedder) as m:
        fill(m)
        # the conversations table locked whole (an erasure's VACUUM FULL of it): the sweep
        # cannot even read which views are over budget
        with holding(pg_url, f'LOCK TABLE "{schema}".conversations IN ACCESS EXCLUSIVE MODE'):
            done = m.consolidate()  # before: raised LockNotAvailable
        assert done == 0 and done.picked == 0 and not done.complete
        assert type(done.refused).__name__ == "LockNotAvailable"
        assert done.failures == () and done.skipped == ()
        assert m.consolidate() == ALL_VIEWS


def test_what_is_not_busy_is_still_raised(tmp_path: Path, embedder: FastEmbedder, pg_url: str) -> None:
    schema = fresh_schema()
    with opened(sweep_config(tmp_path, BUSY_TIMEOUT_MS, pg_url, schema), embedder) as m:
        fill(m)
    # the same store through a role that may only read (a hot standby, a read-only URL):
    # the store refuses every refresh, and not because it is busy
    read_only = with_options(pg_url, "-c default_transaction_read_only=on")
    with opened(sweep_config(tmp_path, BUSY_TIMEOUT_MS, read_only, schema), embedder) as m:
        with pytest.raises(Exception) as raised:
            m.consolidate()
        problem = storage_problem(raised.value)
        assert problem is not None and not problem.busy, raised.value

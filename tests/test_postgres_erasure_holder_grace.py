"""An erasure on PostgreSQL waits a short, bounded time for a snapshot holder that is
running a statement (an autovacuum worker's ANALYZE, a query in flight) before it answers
`scrubbed: false` for it.

Before, the scrub asked once (tiers.postgres SNAPSHOT_HOLDERS_SQL) and any holder made the
erasure answer `scrubbed: false`, the whole scrub owed to the next open: on a busy server an
autovacuum ANALYZE of another table, begun just before the erasure committed and gone
~100 ms later, did so now and then. Now a holder running a statement is asked for again
every HOLDER_POLL_MS for at most the store's `holder_grace_ms` (HOLDER_GRACE_MS): one that
ends within it leaves a clean rewrite, `scrubbed: true`, nothing owed; one that outlasts it
is answered as before (false, owed, named); one idle in its transaction is answered at once.

The test server runs without autovacuum (tests/pg_server.py), so the holder here looks the
same to the check as its worker does: another backend running a statement whose snapshot
is older than the erasure (backend_xmin), here blocked on an advisory lock this test holds
and lets go of when the case says. Real embedded PostgreSQL; the holder reads no table of
the store (one that did would hold a lock the rewrite waits for: the lock-timeout tests).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from pg_server import SNAPSHOT_HOLDERS, fresh_schema, scrub_owed
from test_postgres_erasure_open_snapshot import canary_word, files_hold, plant

from tiermem.tiers.errors import ValidationError
from tiermem.tiers.models import Message
from tiermem.tiers.postgres import HOLDER_GRACE_MAX_MS, HOLDER_GRACE_MS, SNAPSHOT_HELD_NOTE, PostgresStore
from tiermem.tiers.tokens import BpeTokenCounter

LOCK_TIMEOUT_MS = 1000  # the store's: no holder here locks its tables
# the holder's statement ends this long after the erasure committed: an ANALYZE worker's time
RELEASE_AFTER_MS = 100
# the store's holder_grace_ms where the holder ends within it: well past RELEASE_AFTER_MS even
# on a loaded machine (HOLDER_GRACE_MS, the default, leaves 400 ms)
LONG_GRACE_MS = 3000
# ... and where the holder outlasts it (released only after the erasure has answered)
SHORT_GRACE_MS = 300
SETTLE_S = 10.0  # the most a holder's statement takes to show as waiting on its lock
# fresh stores tried until a holder begins during the rewrite (a loaded machine now and then ends the rewrite first)
REWRITE_TRIES = 5


class Holder:
    """Another backend that, from `start()` on, runs a statement whose snapshot is taken
    then: blocked on an advisory lock this test holds, it ends once `release` is set."""

    def __init__(self, url: str) -> None:
        self.key = uuid.uuid4().int % (1 << 62)
        self.gate = psycopg.connect(url, autocommit=True)
        self.conn = psycopg.connect(url, autocommit=True)
        self.pid: int = self.conn.info.backend_pid
        self.release = threading.Event()
        self.gate.execute("SELECT pg_advisory_lock(%s)", (self.key,))
        # autocommit: the transaction-scoped lock and the statement's snapshot end together
        self.runner = threading.Thread(target=self.conn.execute,
                                       args=("SELECT pg_advisory_xact_lock(%s)", (self.key,)))
        self.letter = threading.Thread(target=self._let_go)

    def _let_go(self) -> None:
        self.release.wait()
        self.gate.execute("SELECT pg_advisory_unlock(%s)", (self.key,))

    def start(self) -> None:
        self.runner.start()
        self.letter.start()

    def settled(self, gate: psycopg.Connection[Any]) -> None:
        """Once its statement waits on the lock, its snapshot held (backend_xmin)."""
        until = time.monotonic() + SETTLE_S
        while gate.execute("SELECT backend_xmin IS NULL OR wait_event_type IS DISTINCT FROM 'Lock' "
                           "FROM pg_stat_activity WHERE pid = %s", (self.pid,)).fetchone()[0]:
            assert time.monotonic() < until, "the holder's statement never waited on its lock"
            time.sleep(0.01)

    def close(self) -> None:
        self.release.set()
        for thread in (self.letter, self.runner):
            if thread.is_alive():
                thread.join()
        self.conn.close()
        self.gate.close()


@contextmanager
def running_statement(url: str) -> Iterator[tuple[int, threading.Event]]:
    """A Holder started now: its snapshot older than what follows. Yields its backend pid
    and its release event (set on leaving at the latest)."""
    holder = Holder(url)
    try:
        holder.start()
        with psycopg.connect(url, autocommit=True) as watch:
            holder.settled(watch)
        yield holder.pid, holder.release
    finally:
        holder.close()


def release_after_commit(store: PostgresStore, release: threading.Event) -> None:
    """Lets the holder's statement end RELEASE_AFTER_MS after the erasure commits."""
    def fault(where: str) -> None:
        if where == "erase:committed":
            threading.Timer(RELEASE_AFTER_MS / 1000, release.set).start()
    store._fault = fault


@contextmanager
def planted(url: str, counter: BpeTokenCounter, grace_ms: int) -> Iterator[tuple[PostgresStore, str]]:
    """A store on a fresh schema waiting `grace_ms` for holders, with a conversation of
    namespace "ns" holding a canary (in pg_statistic too), and the canary."""
    store = PostgresStore(url, tokens=counter, schema=fresh_schema(), lock_timeout_ms=LOCK_TIMEOUT_MS,
                          holder_grace_ms=grace_ms)
    try:
        canary = canary_word()
        plant(store, canary)
        yield store, canary
    finally:
        store.close()


def test_a_holder_ending_within_the_grace_leaves_a_clean_scrub(pg_url: str, counter: BpeTokenCounter) -> None:
    with planted(pg_url, counter, LONG_GRACE_MS) as (store, canary), running_statement(pg_url) as (_pid, release):
        release_after_commit(store, release)
        began = time.monotonic()
        report = store.delete_namespace("ns")
        took_ms = (time.monotonic() - began) * 1000
        assert report.conversation_ids == ["secret"]
        # it waited for the holder to end, not the whole grace, and rewrote
        assert report.scrubbed, report.not_rewritten
        assert release.is_set()  # it answered only after the holder was let go
        assert report.not_rewritten == ""
        assert took_ms < LONG_GRACE_MS, took_ms
        assert not scrub_owed(pg_url, store.schema)
        assert not files_hold(pg_url, store.schema, canary)


def test_a_holder_outlasting_the_grace_is_answered_as_before(pg_url: str, counter: BpeTokenCounter) -> None:
    with planted(pg_url, counter, SHORT_GRACE_MS) as (store, canary):
        with running_statement(pg_url) as (pid, _):
            began = time.monotonic()
            report = store.delete_namespace("ns")
            took_ms = (time.monotonic() - began) * 1000
            assert report.conversation_ids == ["secret"]
            assert not report.scrubbed
            assert report.not_rewritten == SNAPSHOT_HELD_NOTE.format(holders=f"backend pid {pid}")
            assert took_ms >= SHORT_GRACE_MS, took_ms  # it did wait the grace first
            assert scrub_owed(pg_url, store.schema)
        # the holder has ended: the next open rewrites, nothing left
        PostgresStore(pg_url, tokens=counter, schema=store.schema, lock_timeout_ms=LOCK_TIMEOUT_MS).close()
        assert not scrub_owed(pg_url, store.schema)
        assert not files_hold(pg_url, store.schema, canary)


@pytest.mark.parametrize("holder", list(SNAPSHOT_HOLDERS))
def test_a_holder_idle_in_its_transaction_is_answered_at_once(
        pg_url: str, counter: BpeTokenCounter, holder: str) -> None:
    """Waiting on its client, it does not end by itself: the grace would only delay the
    same answer (and each open while the scrub is owed)."""
    other = PostgresStore(pg_url, tokens=counter, schema=fresh_schema())
    try:
        other.append("report", Message(role="user", content="not erased"), namespace="r")
    finally:
        other.close()
    with planted(pg_url, counter, LONG_GRACE_MS) as (store, _), SNAPSHOT_HOLDERS[holder](pg_url, other.schema) as held:
        began = time.monotonic()
        report = store.delete_namespace("ns")
        took_ms = (time.monotonic() - began) * 1000
        assert not report.scrubbed
        assert report.not_rewritten == SNAPSHOT_HELD_NOTE.format(holders=f"backend pid {held.info.backend_pid}")
        assert took_ms < LONG_GRACE_MS / 2, took_ms
        assert scrub_owed(pg_url, store.schema)


def test_the_default_grace_outlasts_an_analyze_worker() -> None:
    # an autovacuum ANALYZE of an ordinary table takes tens to a few hundred milliseconds;
    # the erasure's caller waits the whole grace only where a holder outlasts it
    assert RELEASE_AFTER_MS < HOLDER_GRACE_MS <= 1000


@pytest.mark.parametrize("grace", [
    -1,  # negative
    HOLDER_GRACE_MAX_MS + 1,  # past the most an erasure's caller is made to wait
    0.5,  # a fraction of a millisecond
    True,  # a bool is an int to Python, not a duration
    "500",  # text
])
def test_a_bad_holder_grace_is_refused_naming_it(pg_url: str, counter: BpeTokenCounter, grace: Any) -> None:
    schema = fresh_schema()
    with pytest.raises(ValidationError) as refused:
        PostgresStore(pg_url, tokens=counter, schema=schema, holder_grace_ms=grace)
    assert refused.value.field == "holder_grace_ms"
    assert str(HOLDER_GRACE_MAX_MS) in refused.value.problem
    with psycopg.connect(pg_url) as conn:  # nothing written: not even the schema
        assert conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone() is None


def start_during_the_rewrite(url: str, holder: Holder, began: threading.Event,
                             answered: threading.Event) -> threading.Thread:
    """A watcher that starts `holder` while the scrub's VACUUM (FULL, ANALYZE) is past its
    first table (its backend's xid changed once: each table's rewrite is a transaction of
    its own), so the holder's snapshot is newer than the scrub's first xid and older than
    the tables' last ANALYZE; `began` is set where the VACUUM was still running after it.
    It gives up once the erasure has `answered`: the rewrite over before it was seen."""
    def watch() -> None:
        seen: set[str] = set()
        until = time.monotonic() + SETTLE_S
        with psycopg.connect(url, autocommit=True) as conn:
            while time.monotonic() < until and len(seen) < 2 and not answered.is_set():
                row = conn.execute("SELECT backend_xid::text FROM pg_stat_activity WHERE state = 'active' "
                                   "AND query LIKE 'VACUUM (FULL, ANALYZE)%%' AND backend_xid IS NOT NULL").fetchone()
                if row is not None:
                    seen.add(row[0])
            if len(seen) < 2:
                return
            holder.start()
            holder.settled(conn)
            if conn.execute("SELECT 1 FROM pg_stat_activity WHERE state = 'active' "
                            "AND query LIKE 'VACUUM (FULL, ANALYZE)%%'").fetchone() is not None:
                began.set()
    return threading.Thread(target=watch)


def test_a_snapshot_begun_during_the_tables_rewrite_holds_pg_statistic(
        pg_url: str, counter: BpeTokenCounter) -> None:
    """Its snapshot (newer than the rewrite's start, so the check after it did not count it)
    may see pg_statistic's rows from before the tables' ANALYZE: its rewrite keeps them. It
    is asked for before pg_statistic's rewrite; still there after the grace, not scrubbed.
    Before, `scrubbed: true` while it was open (and so too had it ended just before the
    check after the rewrite).

    The holder has to begin inside a rewrite of a few milliseconds a table, seen by polling:
    on a loaded machine the rewrite now and then ends first, and nothing is asserted of that
    try; a fresh store is tried, up to REWRITE_TRIES times."""
    for _ in range(REWRITE_TRIES):
        with planted(pg_url, counter, SHORT_GRACE_MS) as (store, canary):
            holder = Holder(pg_url)
            try:
                began, answered = threading.Event(), threading.Event()
                watcher = start_during_the_rewrite(pg_url, holder, began, answered)
                store._fault = lambda where, w=watcher: w.start() if where == "erase:committed" else None
                try:
                    report = store.delete_namespace("ns")
                finally:
                    answered.set()
                watcher.join()
                if not began.is_set():
                    continue  # the rewrite ended before the holder began: the case not set up
                assert report.conversation_ids == ["secret"]
                assert not report.scrubbed
                assert report.not_rewritten == SNAPSHOT_HELD_NOTE.format(holders=f"backend pid {holder.pid}")
                assert scrub_owed(pg_url, store.schema)
            finally:
                holder.close()
            # it has ended: the next open rewrites, nothing left
            PostgresStore(pg_url, tokens=counter, schema=store.schema, lock_timeout_ms=LOCK_TIMEOUT_MS).close()
            assert not scrub_owed(pg_url, store.schema)
            assert not files_hold(pg_url, store.schema, canary)
            return
    pytest.fail(f"the holder did not begin during the tables' rewrite in {REWRITE_TRIES} tries")

"""An erasure's own scrub waits for a table's lock at most a few seconds, also where the
store sets no lock_timeout: then the erasure returns `scrubbed: false`, the scrub owed
(its marker kept), and the next erasure, open or reclaim() does it.

After its commit an erasure (delete_conversation, delete_namespace) rewrites the tables
(`VACUUM (FULL, ANALYZE)`, erase_scrub "full"). With `lock_timeout_ms=None` the server's
lock_timeout (0: no limit) was in force, so behind another session's read lock the
VACUUM waited until the maintenance deadline (an hour by default) and the caller with it.
The README's bound for the rewrite's wait on a table's readers is busy_timeout_ms, then
it gives up; 8843fed bounded the open's scrub (SCRUB_LOCK_TIMEOUT_MS), and the
erasure's own now waits as long at most. The session's own lock_timeout is in force
again after it (our pool's reset, a caller's set back).

The embedded PostgreSQL, a real second connection holding the read lock; the store's own
pool and a caller's pool of one connection; both erasures. On the code before, the erasure
waits out the maintenance deadline (MAINTENANCE_S here, not the hour) and every case
fails on its time.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator

import pytest
from pg_server import (
    OPENERS,
    Opener,
    fresh_schema,
    no_lock_timeout_openers,
    read_lock_held,
    scrub_owed,
    session_lock_timeout,
)

from tiermem.tiers.models import ErasureReport, Message
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.schema import DEFAULT_BUSY_TIMEOUT_MS
from tiermem.tiers.tokens import BpeTokenCounter

# the store's maintenance deadline: what the erasure's scrub waited before, far past the bound
MAINTENANCE_S = 20.0
# the erasure's own transaction and round trips (files_bytes before and after) past the
# lock wait, at most, on a loaded 2-core machine
SLACK_S = 4.0
# the bound (tiers.postgres.SCRUB_LOCK_TIMEOUT_MS): Config's default busy_timeout_ms
SCRUB_LOCK_WAIT_S = DEFAULT_BUSY_TIMEOUT_MS / 1000
CALLERS_LOCK_TIMEOUT = "0"  # the caller's session: no limit, as the server's default

# each erasure of the conversation "gone" in namespace "ns" ("kept" in "other" stays)
ERASURES: dict[str, Callable[[PostgresStore], ErasureReport]] = {
    "delete_conversation": lambda store: store.delete_conversation(store.key_of("ns", "gone") or ""),
    "delete_namespace": lambda store: store.delete_namespace("ns"),
}


@pytest.fixture(params=OPENERS)
def opener(request: pytest.FixtureRequest, pg_url: str, counter: BpeTokenCounter) -> Iterator[Opener]:
    """Opens a store on a schema with no lock_timeout of its own (None)."""
    with no_lock_timeout_openers(request.param, pg_url, counter, MAINTENANCE_S) as open_store:
        yield open_store


@pytest.mark.parametrize("erasure", list(ERASURES))
def test_the_erasure_waits_for_a_reader_at_most_the_bound(
        opener: Opener, erasure: str, pg_url: str,
        caplog: pytest.LogCaptureFixture) -> None:
    schema = fresh_schema()
    store = opener(schema)
    try:
        store.append("gone", Message(role="user", content="erase me"), namespace="ns")
        store.append("kept", Message(role="user", content="keep me"), namespace="other")
        with read_lock_held(pg_url, schema):  # another session: a report query's read lock
            began = time.monotonic()
            with caplog.at_level(logging.WARNING, logger="tiermem.postgres"):
                report = ERASURES[erasure](store)  # waited MAINTENANCE_S before
            took = time.monotonic() - began
            assert took < SCRUB_LOCK_WAIT_S + SLACK_S, took
            assert report.conversations == 1 and not report.scrubbed
            warned = [r.getMessage() for r in caplog.records if "not rewritten" in r.getMessage()]
            assert warned and "lock timeout" in warned[0], warned
            assert scrub_owed(pg_url, schema)  # not done: still owed
            # the session's lock_timeout is its own again, not the scrub's
            assert session_lock_timeout(store) == CALLERS_LOCK_TIMEOUT
            store.append("kept", Message(role="user", content="after"), namespace="other")
        # the lock gone, reclaim() (as the next erasure or open would) does the scrub
        assert store.reclaim()
        assert not scrub_owed(pg_url, schema)
    finally:
        store.close()

"""An open that finds an erasure's scrub owed waits for a table's lock at most a few
seconds, also where the store sets no lock_timeout: then the scrub stays owed (logged),
the store opens, and the next open does it.

The open finishes an interrupted erasure's rewrite (`VACUUM (FULL, ANALYZE)`,
`_finish_scrub`). With `lock_timeout_ms=None` the server's lock_timeout (0: no limit)
was in force, so behind another session's read lock the VACUUM waited until the
maintenance deadline (an hour by default) and the open with it: an application that did
not start. The README's bound for the rewrite's wait on a table's readers is
busy_timeout_ms; where the store sets none, the open's scrub now waits at most
SCRUB_LOCK_TIMEOUT_MS (Config's default busy_timeout_ms) and gives up with a lock
timeout. The session's own lock_timeout is in force again after it (our pool's reset,
a caller's set back).

The embedded PostgreSQL, a real second connection holding the read lock; the store's own
pool and a caller's pool of one connection. On the code before, the open waits out the
maintenance deadline (MAINTENANCE_S here, not the hour) and both cases fail on its time.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import psycopg
import pytest
from pg_server import (
    OPENERS,
    Opener,
    no_lock_timeout_openers,
    read_lock_held,
    scrub_left_owed,
    scrub_owed,
    session_lock_timeout,
)

from tiermem.tiers.models import Message
from tiermem.tiers.schema import DEFAULT_BUSY_TIMEOUT_MS
from tiermem.tiers.tokens import BpeTokenCounter

# the opening store's maintenance deadline: what the open waited before, far past the bound
MAINTENANCE_S = 40.0
# the open's own round trips (bootstrap, migrations check, the marker's read) past the
# lock wait, at most, on a loaded 2-core machine
SLACK_S = 4.0
# the bound (tiers.postgres.SCRUB_LOCK_TIMEOUT_MS): Config's default busy_timeout_ms
OPEN_SCRUB_LOCK_WAIT_S = DEFAULT_BUSY_TIMEOUT_MS / 1000
CALLERS_LOCK_TIMEOUT = "0"  # the caller's session: no limit, as the server's default


@pytest.fixture(params=OPENERS)
def opener(request: pytest.FixtureRequest, pg_url: str, counter: BpeTokenCounter) -> Iterator[Opener]:
    """Opens a store on a schema with no lock_timeout of its own (None)."""
    with no_lock_timeout_openers(request.param, pg_url, counter, MAINTENANCE_S) as open_store:
        yield open_store


def test_the_open_waits_for_a_reader_at_most_the_bound(
        opener: Opener, pg_url: str, counter: BpeTokenCounter,
        caplog: pytest.LogCaptureFixture) -> None:
    schema, _key = scrub_left_owed(pg_url, counter)

    with read_lock_held(pg_url, schema):  # another session: a report query's read lock
        began = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="tiermem.postgres"):
            store = opener(schema)  # waited MAINTENANCE_S before
        took = time.monotonic() - began
        try:
            assert took < OPEN_SCRUB_LOCK_WAIT_S + SLACK_S, took
            warned = [r for r in caplog.records if "the next open retries" in r.getMessage() and r.exc_info]
            assert warned and isinstance(warned[0].exc_info[1], psycopg.errors.LockNotAvailable)  # type: ignore[index]
            assert scrub_owed(pg_url, schema)  # not done: still owed
            # the session's lock_timeout is its own again, not the scrub's
            assert session_lock_timeout(store) == CALLERS_LOCK_TIMEOUT
            store.append("c", Message(role="user", content="after"), namespace="ns")
        finally:
            store.close()

    # the lock gone, the next open does the scrub
    again = opener(schema)
    again.close()
    assert not scrub_owed(pg_url, schema)

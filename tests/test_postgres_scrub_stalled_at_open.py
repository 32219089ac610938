"""An erasure's scrub left owed, whose VACUUM stalls when the next store opens, does not
fail the open: the store opens, the scrub stays owed (logged), and the next open does it.

A store that opens finishes an interrupted erasure's rewrite of the tables (`VACUUM
(FULL, ANALYZE)`, `_finish_scrub`). Stalled past the maintenance deadline (behind another
session's read lock, with no lock_timeout; or a rewrite that outlasts the deadline), the
VACUUM ends in StoreStalled: the watchdog's cut, or on a caller's pool the server's
cancel. `_finish_scrub` caught only psycopg.Error, so that StoreStalled failed the whole
open, and every later open as long as the lock (or the table's size) stayed, although its
comment said "the next open retries". Now the open succeeds, the marker stays, and the
next open scrubs.

The embedded PostgreSQL; the store's own pool and a caller's pool of one connection.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest
from pg_server import (
    OPENERS,
    Opener,
    no_lock_timeout_openers,
    read_lock_held,
    scrub_left_owed,
    scrub_owed,
)

from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter

MAINTENANCE_S = 2.0  # the opening store's maintenance deadline: the stalled VACUUM's bound
# the open's own round trips (bootstrap, migrations check, the marker's read) past it, at
# most, on a loaded 2-core machine
SLACK_S = 3.0


@pytest.fixture(params=OPENERS)
def opener(request: pytest.FixtureRequest, pg_url: str, counter: BpeTokenCounter) -> Iterator[Opener]:
    """Opens a store on a schema, with the short maintenance deadline and no lock_timeout
    (None: the session's, 0, is in force: the VACUUM waits for the reader's lock)."""
    with no_lock_timeout_openers(request.param, pg_url, counter, MAINTENANCE_S) as open_store:
        yield open_store


def test_a_scrub_stalled_at_open_is_left_owed_and_the_store_opens(
        opener: Opener, pg_url: str, counter: BpeTokenCounter,
        caplog: pytest.LogCaptureFixture) -> None:
    schema, _key = scrub_left_owed(pg_url, counter)

    with read_lock_held(pg_url, schema):  # a report query holding a read lock
        began = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="tiermem.postgres"):
            store = opener(schema)  # raised StoreStalled before
        took = time.monotonic() - began
        try:
            assert took < MAINTENANCE_S + SLACK_S
            assert any("the next open retries" in r.getMessage() and r.exc_info for r in caplog.records)
            assert scrub_owed(pg_url, schema)  # not done: still owed
            # the store serves while the scrub waits
            store.append("c", Message(role="user", content="after"), namespace="ns")
            assert [m.body["content"] for m in store.history(store.key_of("ns", "c") or "")] == ["hello", "after"]
        finally:
            store.close()

    # the lock gone, the next open does the scrub
    again = opener(schema)
    again.close()
    assert not scrub_owed(pg_url, schema)

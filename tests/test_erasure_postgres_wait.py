"""On PostgreSQL an erasure waits for another erasure instead of failing busy.

Erasures number their tombstones under one advisory lock (ERASURE_ORDER_LOCK,
transaction-scoped: `pg_advisory_xact_lock`), and one that overlaps another's
conversations waits for its row locks. Both waits were bounded by `lock_timeout`
(busy_timeout_ms): while a long namespace erasure ran, a concurrent erasure request (a
legal obligation) failed busy (503, nothing written) and had to be retried by hand. It
now waits for the other to commit, bounded by the maintenance deadline.

Two real erasures race on real PostgreSQL; the first is long by the server's own work (a
trigger of the test's schema sleeps in its deletion), the second starts once the first
is inside its transaction, under a lock_timeout of 100 ms.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from pg_server import fresh_schema
from test_erasure_postgres_deadline import NS, _deleting, _slow_deletes

from tiermem.tiers.errors import ConversationNotFound
from tiermem.tiers.models import Message
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.tokens import BpeTokenCounter

LOCK_TIMEOUT_MS = 100  # the second erasure's lock wait before: far shorter than the first erasure
FIRST_S = 2.0  # how long the first erasure's deletion takes
HUNG_S = 60.0


@pytest.fixture
def stores(pg_url: str) -> Iterator[tuple[PostgresStore, PostgresStore]]:
    """Two handles on one schema (two processes), the slow namespace and a small one."""
    schema = fresh_schema()
    a = PostgresStore(pg_url, tokens=BpeTokenCounter(), schema=schema, lock_timeout_ms=LOCK_TIMEOUT_MS)
    b = PostgresStore(pg_url, tokens=BpeTokenCounter(), schema=schema, lock_timeout_ms=LOCK_TIMEOUT_MS)
    try:
        a.append("c", Message(role="user", content="in the long erasure"), namespace=NS)
        a.append("d", Message(role="user", content="erased on its own"), namespace="small")
        _slow_deletes(pg_url, schema, FIRST_S)
        yield a, b
    finally:
        a.close()
        b.close()


def _first(a: PostgresStore) -> tuple[threading.Thread, dict[str, object]]:
    out: dict[str, object] = {}

    def run() -> None:
        try:
            out["result"] = a.delete_namespace(NS)
        except Exception as exc:
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def test_an_erasure_waits_for_another_instead_of_failing_busy(
        pg_url: str, stores: tuple[PostgresStore, PostgresStore]) -> None:
    a, b = stores
    thread, out = _first(a)
    _deleting(pg_url, a.schema)  # the first holds ERASURE_ORDER_LOCK until it commits
    report = b.delete_conversation(b.key_of("small", "d") or "")  # before: busy after 100 ms
    thread.join(HUNG_S)
    assert "error" not in out, out
    assert report.conversation_ids == ["d"]
    # tombstone ids in commit order: the first's, then the second's
    assert [t["id"] for t in b.tombstones()] == ["c", "d"]


def test_an_erasure_of_a_conversation_another_is_erasing_waits_and_finds_it_gone(
        pg_url: str, stores: tuple[PostgresStore, PostgresStore]) -> None:
    a, b = stores
    key = b.key_of(NS, "c")
    assert key is not None
    thread, out = _first(a)
    _deleting(pg_url, a.schema)  # the first holds the conversation's row
    with pytest.raises(ConversationNotFound):  # before: busy after 100 ms
        b.delete_conversation(key)
    thread.join(HUNG_S)
    assert "error" not in out, out
    assert [t["id"] for t in b.tombstones()] == ["c"]  # erased once


def test_the_order_lock_is_transaction_scoped(pg_url: str, stores: tuple[PostgresStore, PostgresStore]) -> None:
    """Held by the erasure's session while its transaction is open, not after it: a
    connection that goes back to the pool (or is cut) holds no erasure's lock."""
    import psycopg

    a, _b = stores
    thread, out = _first(a)
    pid = _deleting(pg_url, a.schema)
    held = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid = %s"
    with psycopg.connect(pg_url, autocommit=True) as probe:
        assert probe.execute(held, (pid,)).fetchone() == (1,)  # ERASURE_ORDER_LOCK
        thread.join(HUNG_S)
        assert "error" not in out, out
        # the session is still open (pooled), its transaction over
        assert probe.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone() == (1,)
        assert probe.execute(held, (pid,)).fetchone() == (0,)

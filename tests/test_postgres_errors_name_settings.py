"""A PostgreSQL wait or deadline that runs out names the setting that bounded it, with its value.

A review found: with cold_pool_size=1, cold_pool_wait_s=2 and an operator's LOCK TABLE
held, the 503 said "storage unreachable (no database connection could be had in time)"
and the log "no connection within 2 s"; with the server stopped (SIGSTOP), StoreStalled
said "the server did not answer within 6 s": nothing told the operator which setting
to raise.

Invariants (tiers.errors StoreUnreachable / StoreStalled, tiers.files storage_problem):
- StoreUnreachable names the wait's setting and the pool ("cold_pool_wait_s=1,
  cold_pool_size=1"; "connection_wait=0.5" under a probe's wait), in the exception and
  in the storage error's answer.
- StoreStalled names the deadline's settings ("cold_operation_timeout_s=1 +
  busy_timeout_ms=100"; "connection_wait=0.5"), in both too; the seconds stay said.
Real PostgreSQL: the session's server for the lock, a server of the test's own stopped
with SIGSTOP for the silence.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

import psycopg
import pytest
from frozen_server import frozen, in_thread
from pg_server import StoppableServer, fill_pool, fresh_schema, stoppable_pg  # noqa: F401  (pytest fixture)

from tiermem.tiers.errors import StoreStalled, StoreUnreachable
from tiermem.tiers.files import storage_problem
from tiermem.tiers.models import Message
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.tokens import BpeTokenCounter

POOL_WAIT_S = 1.0  # cold_pool_wait_s: short for the test (the review's 2 s)
LOCKED_MS = 10_000  # busy_timeout_ms while the table is locked: the first append holds the one connection
HELD_S = 0.3  # for the blocked append to take the pool's one connection first
PROBE_WAIT_S = 0.5  # a connection_wait (a health probe's)
OPERATION_TIMEOUT_S = 1.0  # cold_operation_timeout_s: short for the test
LOCK_TIMEOUT_MS = 100  # busy_timeout_ms, added to the operation's deadline
HUNG_S = 30.0  # the most the test waits for an answer


@contextlib.contextmanager
def table_locked(url: str, schema: str) -> Iterator[None]:
    """An operator's LOCK TABLE on the store's messages, held within."""
    with psycopg.connect(url) as conn:
        conn.execute(f"LOCK TABLE {schema}.messages IN ACCESS EXCLUSIVE MODE")
        try:
            yield
        finally:
            conn.rollback()


def _unreachable_while_locked(url: str, call: Callable[[PostgresStore], object]) -> StoreUnreachable:
    """`call`'s error on a store of one connection, that connection held by an append
    waiting on the lock."""
    schema = fresh_schema()
    store = PostgresStore(url, tokens=BpeTokenCounter(), schema=schema, pool_max=1, pool_wait_s=POOL_WAIT_S,
                          lock_timeout_ms=LOCKED_MS)
    try:
        store.append("c", Message(role="user", content="before"))
        with table_locked(url, schema):
            blocked = threading.Thread(target=store.append, args=("c", Message(role="user", content="held")))
            blocked.start()
            time.sleep(HELD_S)
            with pytest.raises(StoreUnreachable) as caught:
                call(store)
        blocked.join(HUNG_S)
        return caught.value
    finally:
        store.close()


def _probe(store: PostgresStore) -> object:
    """A read as /healthz makes it: under a connection_wait."""
    with store.connection_wait(PROBE_WAIT_S):
        return store.namespace_of("c")


# (the call that waits for the pool's one connection, the settings its error names)
UNREACHABLE = [
    # the pool's own wait (the review's: cold_pool_wait_s=2, cold_pool_size=1)
    (lambda s: s.get("c", [0]), ["cold_pool_wait_s=1", "cold_pool_size=1"]),
    # a health probe's shorter wait: that one, and the pool
    (_probe, [f"connection_wait={PROBE_WAIT_S:g}", "cold_pool_size=1"]),
]


@pytest.mark.parametrize(("call", "names"), UNREACHABLE, ids=["pool-wait", "probe"])
def test_no_connection_in_time_names_the_wait_and_the_pool(pg_url: str, call: Callable[[PostgresStore], object],
                                                          names: list[str]) -> None:
    error = _unreachable_while_locked(pg_url, call)
    problem = storage_problem(error)
    assert problem is not None and problem.status == 503 and problem.refused_unwritten
    # before: "no connection within 1 s" and "... could be had in time": no setting named
    assert [n for n in names if n not in str(error)] == [], str(error)
    assert [n for n in names if n not in problem.detail] == [], problem.detail


@pytest.fixture
def stalling_store(stoppable_pg: StoppableServer) -> Iterator[PostgresStore]:  # noqa: F811
    opened = PostgresStore(stoppable_pg.url, tokens=BpeTokenCounter(), schema=fresh_schema(), pool_max=2,
                           lock_timeout_ms=LOCK_TIMEOUT_MS, operation_timeout_s=OPERATION_TIMEOUT_S)
    try:
        opened.append("c", Message(role="user", content="before"))
        fill_pool(opened, 2)  # idle connections: the operation gets one at once, then the server is silent
        yield opened
    finally:
        opened.close()


# (the call on a silent server, the settings and seconds its error names)
STALLED = [
    # an operation: its timeout and the lock wait added to it (the review's "within 6 s")
    (lambda s: s.get("c", [0]), [f"cold_operation_timeout_s={OPERATION_TIMEOUT_S:g} + busy_timeout_ms="
                                 f"{LOCK_TIMEOUT_MS}", "within 1.1 s"]),
    # a health probe: its connection_wait
    (_probe, [f"connection_wait={PROBE_WAIT_S:g}", f"within {PROBE_WAIT_S:g} s"]),
]


@pytest.mark.parametrize(("call", "names"), STALLED, ids=["operation", "probe"])
def test_a_silent_server_names_the_deadline(stalling_store: PostgresStore, stoppable_pg: StoppableServer,  # noqa: F811
                                            call: Callable[[PostgresStore], object], names: list[str]) -> None:
    with frozen(stoppable_pg):
        thread, out = in_thread(lambda: call(stalling_store))
        thread.join(HUNG_S)
        assert not thread.is_alive(), f"no answer in {HUNG_S} s"
    error = out.get("error")
    assert isinstance(error, StoreStalled), out
    problem = storage_problem(error)
    assert problem is not None and problem.status == 503 and not problem.refused_unwritten
    # before: "the server did not answer within 1.1 s" and "... did not answer in time"
    assert [n for n in names if n not in str(error)] == [], str(error)
    assert [n for n in names if n not in problem.detail] == [], problem.detail

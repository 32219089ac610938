"""An erasure or prune on PostgreSQL runs under the maintenance deadline, not the
operations' one (tiers.postgres `_Watchdog`).

An erasure of a large namespace is one transaction, as long as its rows make it. Under
the operations' deadline (OPERATION_TIMEOUT_S, 60 s past the lock wait) one that
legitimately took longer was cut and rolled back, and every retry met the same limit:
the namespace could never be erased. It now runs under `maintenance_timeout_s`, as the
rewrite after it already did; a server that stops answering still cuts it there.

Real PostgreSQL. The erasure's length is the server's own work: a trigger of the test's
schema sleeps while the conversations' rows are deleted, as a namespace of many rows
takes that long (a real second session cannot stand in: its lock wait is added to the
deadline). The stalled server is a server of the test's own, stopped with SIGSTOP.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import psycopg
import pytest
from frozen_server import frozen
from pg_server import StoppableServer, fresh_schema, stoppable_pg  # noqa: F401  (pytest fixture)

from tiermem.tiers.errors import StoreStalled
from tiermem.tiers.models import Message
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.tokens import BpeTokenCounter

OPERATION_TIMEOUT_S = 0.5  # the operations' deadline, short for the test
LOCK_TIMEOUT_MS = 100  # added to it
ERASURE_S = 2.0  # how long the erasure's deletion takes: past the operations' deadline
MAINTENANCE_TIMEOUT_S = 20.0  # well past the erasure's length
STALL_MAINTENANCE_S = 2.0  # the maintenance deadline where the server stalls
SLACK_S = 5.0  # on top of a bound: a busy test machine
HUNG_S = 60.0  # how long the test waits for an answer
POLL_S = 0.05  # between looks at the server's sessions
NS = "big"
SLEEPER = "erasing-"  # the application_name of a session in the slow deletion, before its schema


def _slow_deletes(url: str, schema: str, seconds: float) -> None:
    """Each deleted conversation of NS takes `seconds` of the server's time."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE FUNCTION {schema}.slow_delete() RETURNS trigger LANGUAGE plpgsql AS $$ "
                     f"BEGIN IF OLD.namespace = '{NS}' THEN "
                     # named, so that a test finds this schema's erasure among the server's sessions
                     f"PERFORM set_config('application_name', '{SLEEPER}{schema}', true); "
                     f"PERFORM pg_sleep({seconds}); END IF; "
                     "RETURN OLD; END $$")
        conn.execute(f"CREATE TRIGGER slow_delete BEFORE DELETE ON {schema}.conversations "
                     f"FOR EACH ROW EXECUTE FUNCTION {schema}.slow_delete()")


def _store(url: str, schema: str, maintenance_s: float) -> PostgresStore:
    return PostgresStore(url, tokens=BpeTokenCounter(), schema=schema, lock_timeout_ms=LOCK_TIMEOUT_MS,
                         operation_timeout_s=OPERATION_TIMEOUT_S, maintenance_timeout_s=maintenance_s)


def _deleting(url: str, schema: str) -> int:
    """Once a session is in the erasure's deletion on `schema` (the trigger's sleep): its pid."""
    deadline = time.monotonic() + HUNG_S
    with psycopg.connect(url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute("SELECT pid FROM pg_stat_activity WHERE wait_event = 'PgSleep' "
                               "AND application_name = %s", (SLEEPER + schema,)).fetchone()
            if row is not None:
                return int(row[0])
            time.sleep(POLL_S)
    pytest.fail(f"no erasure reached its deletion in {HUNG_S} s")


@pytest.fixture
def store(pg_url: str) -> Iterator[PostgresStore]:
    schema = fresh_schema()
    opened = _store(pg_url, schema, MAINTENANCE_TIMEOUT_S)
    try:
        opened.append("c", Message(role="user", content="the thread to erase"), namespace=NS)
        opened.append("kept", Message(role="user", content="another user's thread"), namespace="other")
        _slow_deletes(pg_url, schema, ERASURE_S)
        yield opened
    finally:
        opened.close()


# each retention operation that takes the slow conversation
ERASURES: list[tuple[str, Callable[[PostgresStore], object]]] = [
    # erasure of one conversation on request
    ("delete_conversation", lambda s: s.delete_conversation(s.key_of(NS, "c") or "")),
    # erasure of a namespace
    ("delete_namespace", lambda s: s.delete_namespace(NS)),
    # retention by age
    ("prune", lambda s: s.prune(time.time() + 1, namespace=NS)),
]


@pytest.mark.parametrize(("how", "erase"), ERASURES, ids=[e[0] for e in ERASURES])
def test_an_erasure_longer_than_the_operations_deadline_completes(
        store: PostgresStore, how: str, erase: Callable[[PostgresStore], object]) -> None:
    started = time.monotonic()
    erase(store)  # before: StoreStalled at the operations' deadline, rolled back
    took = time.monotonic() - started
    assert took >= ERASURE_S > OPERATION_TIMEOUT_S + LOCK_TIMEOUT_MS / 1000  # the premise
    assert store.key_of(NS, "c") is None
    assert [t["id"] for t in store.tombstones(namespace=NS)] == ["c"]
    assert store.key_of("other", "kept") is not None
    # the store's operations keep their own deadline
    assert store.operation_timeout_s == OPERATION_TIMEOUT_S


def test_an_erasure_on_a_stalled_server_is_cut_at_the_maintenance_deadline(
        stoppable_pg: StoppableServer) -> None:  # noqa: F811
    schema = fresh_schema()
    store = _store(stoppable_pg.url, schema, STALL_MAINTENANCE_S)
    try:
        store.append("c", Message(role="user", content="the thread to erase"), namespace=NS)
        _slow_deletes(stoppable_pg.url, schema, HUNG_S)
        out: dict[str, object] = {}

        def run() -> None:
            started = time.monotonic()
            try:
                out["result"] = store.delete_namespace(NS)
            except Exception as exc:
                out["error"] = exc
            out["took"] = time.monotonic() - started

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        _deleting(stoppable_pg.url, schema)
        with frozen(stoppable_pg):  # within the erasure's transaction, the server answers no more
            thread.join(HUNG_S)
            assert not thread.is_alive(), f"no answer in {HUNG_S} s"
        assert isinstance(out.get("error"), StoreStalled), out
        # cut at the maintenance deadline, not the operations' (before: OPERATION_TIMEOUT_S)
        assert STALL_MAINTENANCE_S <= float(out["took"]) < STALL_MAINTENANCE_S + SLACK_S, out  # type: ignore[arg-type]
        # rolled back: nothing erased, and the store serves again
        assert store.key_of(NS, "c") is not None and store.tombstones(namespace=NS) == []
    finally:
        store.close()

"""A PostgreSQL connection lost in the middle of an operation (its backend ended by
`pg_terminate_backend`, as by an operator, a failover or a server shutdown) reaches a
library caller of `Memory` as tiermem's StoreUnavailable: chained to psycopg's error
(`__cause__`), naming the store without its password and the kind of failure, quoting no
SQL; the service's 503 for it is unchanged; and the next call runs on a new connection.

Before: the caller got psycopg's own AdminShutdown (or OperationalError "server closed
the connection unexpectedly"), whose text could carry a fragment of the statement
("LINE 1: ..."), from a review that terminated backends during appends (2026-12-07).

Real parts: the PostgreSQL of tests/pg_server.py, a second session that holds a table
lock so that the call waits on the server, and a third that terminates the waiting
backend (found by `pg_blocking_pids`, so no other test's session is touched).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hash_embedder import HashEmbedder
from pg_server import fresh_schema

from tiermem import Config, Memory
from tiermem.tiers.errors import StoreStalled, StoreUnavailable, StoreUnreachable
from tiermem.tiers.files import storage_problem

NS = "default"
CONV = "c"
BEFORE = ["one", "two"]  # stored before each case
BUSY_TIMEOUT_MS = 30_000  # the store's lock wait: far past the time the test takes to find the waiter
FIND_WAITER_S = 10.0  # for the call's backend to be seen waiting on the test's lock
CALL_END_S = 10.0  # for the call to end once its backend is terminated
# words of the statements the store sends: none may reach the error's text
SQL_WORDS = ("LINE", "SELECT", "INSERT", "UPDATE", "FROM", "WHERE", "messages", "turns")

Call = Callable[[Memory], Any]

# (id, a Memory call that waits on a lock of the messages table, what the next call finds)
CASES: list[tuple[str, Call, list[str]]] = [
    # a write: its transaction rolled back with the connection, nothing of it stored
    ("append", lambda m: m.append(CONV, {"role": "user", "content": "lost"}, namespace=NS), BEFORE),
    # a read: the lost connection, not an empty or partial answer
    ("history", lambda m: m.history(CONV, namespace=NS), BEFORE),
]


@pytest.fixture
def mem(tmp_path: Path, pg_url: str) -> Iterator[Memory]:
    config = Config(data_dir=tmp_path / "data", cold_url=pg_url, cold_schema=fresh_schema(),  # type: ignore[arg-type]
                    busy_timeout_ms=BUSY_TIMEOUT_MS)
    with Memory(config, embedder=HashEmbedder(), hot=False, background_indexing=False) as m:
        for text in BEFORE:
            m.append(CONV, {"role": "user", "content": text}, namespace=NS)
        yield m


def contents(mem: Memory) -> list[str]:
    return [m.body["content"] for m in mem.history(CONV, namespace=NS)]


def terminated_midway(mem: Memory, pg_url: str, call: Call) -> BaseException | None:
    """Run `call` while another session holds the messages table locked, terminate the
    call's backend once it waits on that lock, and return what the call raised."""
    schema = mem.config.cold_schema
    outcome: list[BaseException | None] = []
    with psycopg.connect(pg_url) as holder, psycopg.connect(pg_url, autocommit=True) as admin:
        holder.execute(f'LOCK TABLE "{schema}".messages IN ACCESS EXCLUSIVE MODE')

        def run() -> None:
            try:
                call(mem)
                outcome.append(None)
            except BaseException as exc:  # handed to the test thread
                outcome.append(exc)

        worker = threading.Thread(target=run)
        worker.start()
        deadline = time.monotonic() + FIND_WAITER_S
        while True:
            waiting = admin.execute("SELECT pid FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))",
                                    (holder.info.backend_pid,)).fetchall()
            if waiting:
                break
            assert time.monotonic() < deadline, "the call never waited on the test's lock"
            time.sleep(0.02)
        assert len(waiting) == 1, waiting
        killed = admin.execute("SELECT pg_terminate_backend(%s)", (waiting[0][0],)).fetchone()
        assert killed == (True,)
        worker.join(CALL_END_S)
        assert not worker.is_alive(), "the call did not end after its backend was terminated"
        holder.rollback()
    return outcome[0]


@pytest.mark.parametrize(("call", "after"), [pytest.param(c, a, id=i) for i, c, a in CASES])
def test_a_lost_connection_is_store_unavailable_and_the_next_call_runs(mem: Memory, pg_url: str, call: Call,
                                                                        after: list[str]) -> None:
    err = terminated_midway(mem, pg_url, call)
    assert isinstance(err, StoreUnavailable), repr(err)
    # neither "nothing was sent" (StoreUnreachable: a retry is safe) nor a deadline's cut
    assert not isinstance(err, (StoreUnreachable, StoreStalled)), repr(err)
    assert isinstance(err.__cause__, psycopg.OperationalError), repr(err.__cause__)
    text = str(err)
    assert mem.cold.path in text  # the store, as redacted
    assert "the connection to the server was lost" in text and "57P01" in text  # the kind of failure
    assert not [w for w in SQL_WORDS if w in text], text
    password = psycopg.conninfo.conninfo_to_dict(pg_url).get("password")
    assert not password or password not in text
    # the service's answer for it, as for psycopg's own error before: 503, written unknown
    problem = storage_problem(err)
    assert problem is not None and problem.status == 503 and not problem.refused_unwritten
    assert problem.detail.startswith("storage unreachable (the database connection failed)"), problem.detail
    # the pool recovers: the next calls run on a new connection
    assert contents(mem) == after
    mem.append(CONV, {"role": "user", "content": "after"}, namespace=NS)
    assert contents(mem) == [*after, "after"]

"""The PostgreSQL store's deadlines are finite numbers of seconds, and its watchdog (the one
thread that cuts every checkout past its deadline: tiers.postgres `_Watchdog`) outlives
an error of its own.

`PostgresStore(operation_timeout_s=inf)` (or `maintenance_timeout_s`) was accepted
(`inf > 0`); the watchdog then slept `Condition.wait(inf)`, which raises OverflowError
(as does any timeout past threading.TIMEOUT_MAX), its thread died, and no checkout of the
store was ever cut again: an operation on a silent server waited for ever, as before the
watchdog. Non-finite and non-positive deadlines are refused at the constructor, naming
the setting (`cold_operation_timeout_s`, as Config names it); a huge finite one is slept
in steps; and an error in a round of the watchdog is logged and the round retried.

Real PostgreSQL: a server of the test's own, stopped with SIGSTOP (tests/frozen_server.py).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterator

import psycopg
import pytest
from frozen_server import frozen, in_thread
from pg_server import StoppableServer, fill_pool, fresh_schema, stoppable_pg  # noqa: F401  (pytest fixture)

from tiermem.tiers.errors import StoreStalled, ValidationError
from tiermem.tiers.models import Message
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.tokens import BpeTokenCounter

PROBE_WAIT_S = 0.5  # a connection_wait: the probe's deadline
OPERATION_TIMEOUT_S = 1.0
HUGE_S = 1e12  # finite, past threading.TIMEOUT_MAX (~9.2e9 s): Condition.wait overflowed on it
SLACK_S = 5.0  # on top of a bound: a busy test machine
HUNG_S = 20.0  # how long the test waits for an answer the code before never gave
POOLED = 2  # idle connections when the server stops: the probe gets one at once


@pytest.mark.parametrize(("parameter", "value", "field"), [
    # infinite: no deadline at all, and the watchdog's sleep overflowed on it
    ("operation_timeout_s", math.inf, "cold_operation_timeout_s"),
    # negative infinity: every checkout cut at once
    ("operation_timeout_s", -math.inf, "cold_operation_timeout_s"),
    # NaN compares false to every time: never cut
    ("operation_timeout_s", math.nan, "cold_operation_timeout_s"),
    # zero and below: every checkout cut at once
    ("operation_timeout_s", 0.0, "cold_operation_timeout_s"),
    ("operation_timeout_s", -1, "cold_operation_timeout_s"),
    # a boolean is no number of seconds (True would be 1 s)
    ("operation_timeout_s", True, "cold_operation_timeout_s"),
    # the maintenance deadline, which no Config setting names: its own parameter
    ("maintenance_timeout_s", math.inf, "maintenance_timeout_s"),
    ("maintenance_timeout_s", math.nan, "maintenance_timeout_s"),
    ("maintenance_timeout_s", 0, "maintenance_timeout_s"),
], ids=["op-inf", "op-neg-inf", "op-nan", "op-zero", "op-negative", "op-bool",
        "maint-inf", "maint-nan", "maint-zero"])
def test_a_deadline_that_is_not_a_finite_positive_number_is_refused(
        pg_url: str, parameter: str, value: object, field: str) -> None:
    schema = fresh_schema()
    with pytest.raises(ValidationError) as refused:
        PostgresStore(pg_url, tokens=BpeTokenCounter(), schema=schema, **{parameter: value})  # type: ignore[arg-type]
    assert refused.value.field == field
    assert parameter in refused.value.problem and "finite" in refused.value.problem
    with psycopg.connect(pg_url, autocommit=True) as conn:  # nothing written: no schema made
        assert conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone() is None


def _probe(store: PostgresStore) -> object:
    """A read as /healthz makes it: cut at its connection_wait's end."""
    with store.connection_wait(PROBE_WAIT_S):
        return store.namespace_of("c")


def _cut_while_frozen(store: PostgresStore, server: StoppableServer) -> None:
    """A probe on the silent server is cut at its deadline (StoreStalled)."""
    with frozen(server):
        thread, out = in_thread(lambda: _probe(store))
        thread.join(HUNG_S)
        assert not thread.is_alive(), f"no answer in {HUNG_S} s: nothing cut the connection"
    assert isinstance(out.get("error"), StoreStalled), out
    assert PROBE_WAIT_S <= float(out["took"]) < PROBE_WAIT_S + SLACK_S, out  # type: ignore[arg-type]


@pytest.mark.parametrize("parameter", [
    # an operation's: the watchdog sleeps on it once it is the nearest deadline (below)
    "operation_timeout_s",
    # the maintenance one: the open's migration check is the store's first checkout
    "maintenance_timeout_s",
])
def test_a_huge_deadline_does_not_stop_the_watchdog(
        stoppable_pg: StoppableServer, parameter: str) -> None:  # noqa: F811
    store = PostgresStore(stoppable_pg.url, tokens=BpeTokenCounter(), schema=fresh_schema(), pool_max=POOLED,
                          **{parameter: HUGE_S})  # type: ignore[arg-type]
    try:
        store.append("c", Message(role="user", content="before"))
        fill_pool(store, POOLED)
        with store.reading():  # a checkout under the huge deadline, out meanwhile
            _probe(store)  # a nearer deadline wakes the watchdog, which wakes again at its end:
            time.sleep(PROBE_WAIT_S * 2)  # then the held checkout's deadline is the nearest
        _cut_while_frozen(store, stoppable_pg)  # before: the watchdog's thread had died
        store.append("c", Message(role="user", content="after"))  # serves again
    finally:
        store.close()


@pytest.fixture
def store(stoppable_pg: StoppableServer) -> Iterator[PostgresStore]:  # noqa: F811
    opened = PostgresStore(stoppable_pg.url, tokens=BpeTokenCounter(), schema=fresh_schema(), pool_max=POOLED,
                           operation_timeout_s=OPERATION_TIMEOUT_S)
    try:
        opened.append("c", Message(role="user", content="before"))
        fill_pool(opened, POOLED)
        yield opened
    finally:
        opened.close()


def test_an_error_in_the_watchdog_is_logged_and_the_cut_still_made(
        store: PostgresStore, stoppable_pg: StoppableServer, caplog: pytest.LogCaptureFixture) -> None:  # noqa: F811
    failures: list[str] = []

    def fail_once(step: str) -> None:
        if step == "watchdog:cut" and not failures:
            failures.append(step)
            raise RuntimeError("the watchdog's round failed")

    store._fault = fail_once
    with caplog.at_level(logging.ERROR, logger="tiermem.postgres"):
        _cut_while_frozen(store, stoppable_pg)  # the failed round's cut, made at the next round
    assert failures == ["watchdog:cut"]
    assert any("watchdog failed" in r.getMessage() and r.exc_info for r in caplog.records), caplog.records
    store._fault = None
    _cut_while_frozen(store, stoppable_pg)  # and later checkouts too: the thread goes on

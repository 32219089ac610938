"""The store's pool gives up a connection attempt to a server that accepts and never
answers after CONNECT_TIMEOUT_S (libpq's connect_timeout), unless the URL or
PGCONNECT_TIMEOUT sets one. Before: psycopg's default, 130 s, so a pool worker sat on a
silent server that long and the pool found no server back meanwhile: an operation waited
out the pool's wait (StoreUnreachable) although the server answered again. The real
embedded PostgreSQL, reached through a loopback forwarder the test makes go silent
(it accepts and holds connections: a stopped server's or a silent proxy's behaviour)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from frozen_server import in_thread
from loopback_forwarder import PostgresForwarder
from pg_server import fresh_schema
from psycopg.conninfo import make_conninfo

import tiermem.tiers.postgres as postgres
from tiermem.tiers.models import Message
from tiermem.tiers.postgres import CONNECT_TIMEOUT_ENV, CONNECT_TIMEOUT_S, PostgresStore
from tiermem.tiers.tokens import BpeTokenCounter

LEAST_CONNECT_TIMEOUT_S = 2  # libpq's least connect_timeout: the test's, to be short
POOL_WAIT_S = 20.0  # an operation's wait for a connection: far past the bound below
SLACK_S = 5.0  # on top of a bound: a busy test machine (and the pool's 1 s retry delay)
HELD_WAIT_S = 10.0  # for the pool's attempt to reach the silent forwarder


@pytest.fixture
def forwarder(pg_url: str) -> Iterator[PostgresForwarder]:
    fwd = PostgresForwarder(pg_url)
    try:
        yield fwd
    finally:
        fwd.close()


def connect_timeout(store: PostgresStore) -> str | None:
    """The connect_timeout a pooled connection was made with (None: libpq's default)."""
    with store.reading() as conn:
        return conn.info.get_parameters().get("connect_timeout")


# (what the URL adds, the environment's PGCONNECT_TIMEOUT, the connect_timeout the pool uses)
@pytest.mark.parametrize(("url_adds", "env", "want"), [
    ({}, None, str(CONNECT_TIMEOUT_S)),  # neither: the store's bound, not psycopg's 130 s
    ({"connect_timeout": "5"}, None, "5"),  # the URL's own is kept
    ({}, "7", "7"),  # so is the operator's environment's (libpq reads it)
])
def test_the_pool_bounds_a_connect_unless_the_url_does(pg_url: str, monkeypatch: pytest.MonkeyPatch,
                                                       url_adds: dict[str, str], env: str | None, want: str) -> None:
    if env is None:
        monkeypatch.delenv(CONNECT_TIMEOUT_ENV, raising=False)
    else:
        monkeypatch.setenv(CONNECT_TIMEOUT_ENV, env)
    store = PostgresStore(make_conninfo(pg_url, **url_adds), tokens=BpeTokenCounter(), schema=fresh_schema())
    try:
        assert connect_timeout(store) == want
    finally:
        store.close()


def test_a_server_silent_for_a_while_is_found_back_within_the_connect_timeout(
        forwarder: PostgresForwarder, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CONNECT_TIMEOUT_ENV, raising=False)
    monkeypatch.setattr(postgres, "CONNECT_TIMEOUT_S", LEAST_CONNECT_TIMEOUT_S)  # read when the pool is made
    store = PostgresStore(forwarder.url, tokens=BpeTokenCounter(), schema=fresh_schema(), pool_max=1,
                          pool_wait_s=POOL_WAIT_S)
    try:
        store.append("c", Message(role="user", content="before"))
        # the server goes silent and its connections end: the pool's next attempt is held
        forwarder.silent = True
        forwarder.drop_all()
        thread, out = in_thread(lambda: [m.text for m in store.get("c", [0])])
        assert forwarder.held.wait(HELD_WAIT_S), "the pool never tried to connect"
        held_at = time.monotonic()
        forwarder.silent = False  # it answers again: the attempt held meanwhile is not answered
        thread.join(POOL_WAIT_S + SLACK_S)
        assert out.get("result") == ["before"], out  # before: StoreUnreachable after the pool's wait
        assert time.monotonic() - held_at < LEAST_CONNECT_TIMEOUT_S + SLACK_S, out
    finally:
        store.close()

"""The connections tiermem opens outside a store's pool are bounded as the pool's are.

migrate-store looked at a PostgreSQL schema with `psycopg.connect` of its own (does the
source hold a log, does the target's schema exist, its removal when the run is refused):
psycopg's default connect timeout (130 s) and no watchdog, so a server that accepts and
never answers, or answers the connect and then no query, held the run that long or for
ever. A store's bootstrap connected with `connect_timeout=30`, overriding the URL's own,
and was not watched either. Each is now `tiers.postgres.owned_connection`: the pool's
connect timeout rule (CONNECT_TIMEOUT_S unless the URL or PGCONNECT_TIMEOUT sets one) and
a cut at the operations' deadline (the bootstrap's: the maintenance one).

The real embedded PostgreSQL, reached through a loopback forwarder
(tests/loopback_forwarder.py) that goes silent: at the connect (it accepts
and holds), or once the client has sent a given statement (it is swallowed, never
answered: a stopped server's or a silent proxy's behaviour).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from frozen_server import answer
from loopback_forwarder import CHUNK_BYTES, PostgresForwarder, shut
from pg_server import fresh_schema
from psycopg.conninfo import conninfo_to_dict, make_conninfo

import tiermem.tiers.postgres as postgres
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.errors import MigrationRefused, StoreStalled, StoreUnavailable
from tiermem.tiers.migrate_store import migrate_store
from tiermem.tiers.models import Message
from tiermem.tiers.postgres import CONNECT_TIMEOUT_ENV, PostgresStore
from tiermem.tiers.schema import sqlite3
from tiermem.tiers.tokens import BpeTokenCounter

LEAST_CONNECT_TIMEOUT_S = 2  # libpq's least connect_timeout: the test's, to be short
OPERATION_TIMEOUT_S = 1.0  # migrate-store's operations' deadline, short for the test
BUSY_TIMEOUT_MS = 100  # added to it
MAINTENANCE_TIMEOUT_S = 1.0  # the bootstrap's deadline, short for the test
SLACK_S = 5.0  # on top of a bound: a busy test machine
HUNG_S = 20.0  # how long the test waits for an answer (before: 130 s, 30 s or never)


class SilencingForwarder(PostgresForwarder):
    """A PostgresForwarder that also goes silent on a connection once its client has sent
    `swallow` (bytes of a statement): that and all the client sends after it is dropped,
    so the server never answers it."""

    def __init__(self, url: str) -> None:
        self.swallow: bytes | None = None
        self.swallowed = threading.Event()
        super().__init__(url)
        # a URL, as migrate-store takes one (a conninfo string is read as a SQLite path)
        params = conninfo_to_dict(self.url)
        password = f":{quote(params['password'], safe='')}" if params.get("password") else ""
        self.url = (f"postgresql://{quote(params['user'], safe='')}{password}@127.0.0.1:{self.port}/"
                    f"{quote(params['dbname'], safe='')}")

    def _upstream(self, client: socket.socket, server: socket.socket) -> None:
        silent = False
        try:
            while data := client.recv(CHUNK_BYTES):
                if self.swallow is not None and self.swallow in data:
                    silent = True
                    self.swallowed.set()
                if not silent:
                    server.sendall(data)
        except OSError:
            pass
        finally:
            shut(client, server)


@pytest.fixture
def forwarder(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[SilencingForwarder]:
    monkeypatch.delenv(CONNECT_TIMEOUT_ENV, raising=False)
    fwd = SilencingForwarder(pg_url)
    try:
        yield fwd
    finally:
        fwd.close()


def _source(tmp_path: Path, *, nul: bool = False) -> Path:
    """A SQLite log of one conversation; with a raw NUL in a body where `nul` (PostgreSQL
    text cannot hold it: the run is refused and removes the schema it made)."""
    path = tmp_path / "source.db"
    store = ColdStore(path, tokens=BpeTokenCounter())
    try:
        store.append("x", Message(role="user", content="to copy"))
    finally:
        store.close()
    if nul:
        conn = sqlite3.connect(str(path), isolation_level=None)
        try:
            key = conn.execute("SELECT id FROM conversations WHERE name = 'x'").fetchone()[0]
            conn.execute("INSERT INTO messages(conversation_id, position, id, role, body, created_at) "
                         "VALUES (?, 7, 99999, 'user', 'raw' || char(0) || 'nul', 0)", (key,))
        finally:
            conn.close()
    return path


def _migrate(source: str | Path, target: str | Path, **schemas: str) -> object:
    return migrate_store(source, target, tokens=BpeTokenCounter(), busy_timeout_ms=BUSY_TIMEOUT_MS,
                         operation_timeout_s=OPERATION_TIMEOUT_S, **schemas)


OPERATION_BOUND_S = OPERATION_TIMEOUT_S + BUSY_TIMEOUT_MS / 1000

# (which side is PostgreSQL, how the server goes silent, the SQLite source has a NUL row,
#  what the run raises, its bound)
MIGRATE_CASES = [
    # the source's check for a log: the connect unanswered (before: psycopg's 130 s)
    ("source", "connect", False, StoreUnavailable, LEAST_CONNECT_TIMEOUT_S),
    # ... its statement unanswered (before: for ever)
    ("source", b"pg_tables", False, StoreStalled, OPERATION_BOUND_S),
    # the target's check for its schema: the connect unanswered
    ("target", "connect", False, StoreUnavailable, LEAST_CONNECT_TIMEOUT_S),
    # ... its statement unanswered
    ("target", b"pg_namespace", False, StoreStalled, OPERATION_BOUND_S),
    # a refused run removing the schema it made: the DROP unanswered, cut at its deadline;
    # the refusal stays the error raised, the stalled cleanup noted on it (8df0e5d)
    ("target", b"DROP SCHEMA", True, MigrationRefused, OPERATION_BOUND_S),
]


@pytest.mark.parametrize(("side", "silent", "nul", "raised", "bound_s"), MIGRATE_CASES,
                         ids=["source-connect", "source-statement", "target-connect", "target-statement",
                              "target-discard"])
def test_migrate_stores_own_connections_give_up_on_a_silent_server(
        forwarder: SilencingForwarder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, side: str,
        silent: str | bytes, nul: bool, raised: type[Exception], bound_s: float) -> None:
    monkeypatch.setattr(postgres, "CONNECT_TIMEOUT_S", LEAST_CONNECT_TIMEOUT_S)  # read at each connect
    schema = fresh_schema()
    if silent == "connect":
        forwarder.silent = True
    else:
        assert isinstance(silent, bytes)
        forwarder.swallow = silent
    if side == "source":
        result, took = answer(lambda: _migrate(forwarder.url, tmp_path / "target", source_schema=schema), HUNG_S)
    else:
        source = _source(tmp_path, nul=nul)
        result, took = answer(lambda: _migrate(source, forwarder.url, target_schema=schema), HUNG_S)
    assert isinstance(result, raised), result
    assert took < bound_s + SLACK_S, took
    if silent != "connect":
        assert forwarder.swallowed.is_set()  # the statement the server never answered
    if raised is MigrationRefused:
        assert any("StoreStalled" in n for n in getattr(result, "__notes__", ())), result


# (how the server goes silent, what the URL adds, what opening the store raises, its bound)
BOOTSTRAP_CASES = [
    # the URL's own connect_timeout is the bootstrap's too (before: 30 s, the code's own)
    ("connect", {"connect_timeout": str(LEAST_CONNECT_TIMEOUT_S)}, StoreUnavailable, LEAST_CONNECT_TIMEOUT_S),
    # its first statement unanswered: cut at the maintenance deadline (before: for ever)
    (b"to_regclass", {}, StoreStalled, MAINTENANCE_TIMEOUT_S),
]


@pytest.mark.parametrize(("silent", "url_adds", "raised", "bound_s"), BOOTSTRAP_CASES,
                         ids=["connect-url-timeout", "statement"])
def test_a_stores_bootstrap_gives_up_on_a_silent_server(
        forwarder: SilencingForwarder, silent: str | bytes, url_adds: dict[str, str], raised: type[Exception],
        bound_s: float) -> None:
    if silent == "connect":
        forwarder.silent = True
    else:
        assert isinstance(silent, bytes)
        forwarder.swallow = silent
    url = make_conninfo(forwarder.url, **url_adds)
    result, took = answer(lambda: PostgresStore(url, tokens=BpeTokenCounter(), schema=fresh_schema(),
                                                maintenance_timeout_s=MAINTENANCE_TIMEOUT_S), HUNG_S)
    assert isinstance(result, raised), result
    assert took < bound_s + SLACK_S, took

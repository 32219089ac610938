"""The PostgreSQL store needs PostgreSQL 14 or later: the store's own pool sets
`client_connection_check_interval` on each session (PostgreSQL 14+), and tiermem's
maintenance transactions on a caller's pool set it for themselves. Before, a PostgreSQL 13
server failed the store's pool at each connection with "unrecognized configuration
parameter" (the pool retried until its open timed out, and the error named neither the
version nor the minimum); now the store refuses it at its first connection with
ServerTooOld, naming the server's version and the minimum, before anything is written.

No PostgreSQL 13 runs here: the decision is checked as a table over version numbers, and
end to end through a loopback forwarder that relays the real server's connection but
rewrites the version it reports at startup (the `server_version` parameter libpq reads
`server_version_num` from) to 13."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import psycopg
import pytest
from loopback_forwarder import CHUNK_BYTES, PostgresForwarder, shut
from pg_server import fresh_schema
from psycopg_pool import ConnectionPool

from tiermem.tiers.errors import ServerTooOld
from tiermem.tiers.postgres import PostgresStore, check_server_version
from tiermem.tiers.tokens import BpeTokenCounter

REPORTED_MAJOR = b"13"  # the release the forwarder makes the server claim to be

VERSIONS: list[tuple[int, str | None]] = [
    # the last PostgreSQL 13 release line: refused, named as PostgreSQL names it
    (130016, "13.16"),
    # 13's first release: refused
    (130000, "13.0"),
    # a three-part version from before PostgreSQL 10 (9.6.24): refused, named as such
    (90624, "9.6.24"),
    # PostgreSQL 14's first release: the minimum, accepted
    (140000, None),
    # a current release: accepted
    (170002, None),
]


@pytest.mark.parametrize(("version_num", "refused_as"), VERSIONS, ids=[str(v[0]) for v in VERSIONS])
def test_servers_before_14_are_refused_naming_both_versions(version_num: int, refused_as: str | None) -> None:
    if refused_as is None:
        check_server_version("postgresql://db", version_num)
        return
    with pytest.raises(ServerTooOld) as err:
        check_server_version("postgresql://db", version_num)
    message = str(err.value)
    assert f"version {refused_as} (server_version_num {version_num})" in message
    assert "PostgreSQL 14 or later" in message and "client_connection_check_interval" in message
    assert "postgresql://db" in message


class OldVersionForwarder(PostgresForwarder):
    """The real server, but its startup's `server_version` parameter says 13 (same length,
    so the message's length prefix stays right): what a PostgreSQL 13 tells libpq."""

    def _pipe(self, a: socket.socket, b: socket.socket) -> None:  # type: ignore[override]
        if a.family != socket.AF_UNIX:  # the client's side: relayed as is
            super()._pipe(a, b)
            return
        try:
            while data := a.recv(CHUNK_BYTES):
                head = b"server_version\x00"
                at = data.find(head)
                if at >= 0:
                    start = at + len(head)
                    data = data[:start] + REPORTED_MAJOR + data[start + len(REPORTED_MAJOR):]
                b.sendall(data)
        except OSError:
            pass
        finally:
            shut(a, b)


@pytest.fixture
def old_server(pg_url: str) -> Iterator[OldVersionForwarder]:
    forwarder = OldVersionForwarder(pg_url)
    try:
        with psycopg.connect(forwarder.url) as conn:  # the rewrite is what libpq reads
            assert conn.info.server_version // 10000 == int(REPORTED_MAJOR)
        yield forwarder
    finally:
        forwarder.close()


def schema_exists(url: str, schema: str) -> bool:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone() is not None


def test_the_stores_own_pool_refuses_postgresql_13_before_writing(old_server: OldVersionForwarder, pg_url: str,
                                                                  counter: BpeTokenCounter) -> None:
    schema = fresh_schema()
    with pytest.raises(ServerTooOld, match=r"version 13\.\d+ .*PostgreSQL 14 or later"):
        PostgresStore(old_server.url, tokens=counter, schema=schema)
    assert not schema_exists(pg_url, schema)  # nothing written: no schema, no extension step


def test_a_callers_pool_on_postgresql_13_is_refused_too(old_server: OldVersionForwarder, pg_url: str,
                                                        counter: BpeTokenCounter) -> None:
    schema = fresh_schema()
    with ConnectionPool(old_server.url, min_size=1, max_size=1, kwargs={"autocommit": True}) as pool:
        with pytest.raises(ServerTooOld, match=r"caller's pool.*version 13\."):
            PostgresStore(pool=pool, tokens=counter, schema=schema)
        with pool.connection() as conn:  # the caller's pool still serves its own work
            assert conn.execute("SELECT 1").fetchone() == (1,)
    assert not schema_exists(pg_url, schema)

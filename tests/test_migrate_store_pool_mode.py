"""`tiermem migrate-store` honours `cold_pool_mode` (b65cf8b): the PostgreSQL side's store
and its looks at the schema reach the server as the config says, so a copy into
PostgreSQL behind PgBouncer in pool_mode = transaction prepares nothing on the server and
sets everything SET LOCAL; what that mode cannot run (cold_erase_scrub "full", the
default) is refused naming cold_pool_mode before anything is opened or written.

Before, migrate-store ignored the setting: the target's store ran in session mode through
a transaction-mode pooler (its session SETs and server-side prepared statements landing on
server connections other clients get), and a config that a Memory refuses (transaction
mode with the "full" scrub) copied anyway.

Real SQLite source files, the session's real PostgreSQL (`pg_url`, tests/pg_server.py) and,
where `pgbouncer` is on PATH, a real PgBouncer in front of it (test_postgres_pgbouncer's
`bouncer` fixture: transaction and session mode).
"""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner
from pg_server import fresh_schema
from test_postgres_pgbouncer import PGBOUNCER, SERVER_CONNECTIONS, bouncer  # noqa: F401  # the `bouncer` fixture

from tiermem.cli import cli
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.errors import ValidationError
from tiermem.tiers.migrate_store import migrate_store
from tiermem.tiers.models import Message
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.tokens import BpeTokenCounter

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

NS = "ns"
CONVERSATIONS = 12  # each copy's statements run past psycopg's prepare_threshold (5) in session mode
MESSAGES = 3


def _source(tmp_path: Path, counter: BpeTokenCounter) -> Path:
    path = tmp_path / "src" / "tiermem.db"
    path.parent.mkdir()
    store = ColdStore(path, tokens=counter)
    try:
        for c in range(CONVERSATIONS):
            for m in range(MESSAGES):
                store.append(f"conv{c:02d}", Message(role="user", content=f"note {m} of conversation {c}"),
                             namespace=NS)
    finally:
        store.close()
    return path


def _schema_exists(url: str, schema: str) -> bool:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone() is not None


def _messages_in(url: str, schema: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(f'SELECT count(*) FROM "{schema}".messages').fetchone()
    assert row is not None
    return int(row[0])


def _cli(tmp_path: Path, env: dict[str, str], *args: str) -> tuple[int, str]:
    r = CliRunner().invoke(cli, ["--data-dir", str(tmp_path / "data"), "migrate-store", *args], env=env)
    return r.exit_code, r.output


# (the settings given, the exit code, what the output names; the copy made when 0)
CLI_CASES = [
    # transaction mode with the default scrub, "full": refused as every command's store refuses it
    ({"TIERMEM_COLD_POOL_MODE": "transaction"}, 1, ["cold_pool_mode", "cold_erase_scrub = 'vacuum'"]),
    # ... and with the scrub spelled out "full"
    ({"TIERMEM_COLD_POOL_MODE": "transaction", "TIERMEM_COLD_ERASE_SCRUB": "full"}, 1, ["cold_pool_mode"]),
    # transaction mode with plain VACUUM scrubs: copied (direct PostgreSQL takes it too)
    ({"TIERMEM_COLD_POOL_MODE": "transaction", "TIERMEM_COLD_ERASE_SCRUB": "vacuum"}, 0, ["verified"]),
    # the default, session mode: copied as before
    ({}, 0, ["verified"]),
]


@pytest.mark.parametrize(("env", "code", "named"), CLI_CASES)
def test_the_cli_reads_cold_pool_mode(tmp_path: Path, pg_url: str, counter: BpeTokenCounter, env: dict[str, str],
                                      code: int, named: list[str]) -> None:
    source = _source(tmp_path, counter)
    schema = fresh_schema()
    exit_code, output = _cli(tmp_path, env, "--from", str(source), "--to", pg_url, "--schema", schema)
    assert exit_code == code, output
    assert all(n in output for n in named), output
    if code:
        assert not _schema_exists(pg_url, schema)  # refused before the target was opened: nothing written
        assert not (tmp_path / "data").exists()
    else:
        assert _messages_in(pg_url, schema) == CONVERSATIONS * MESSAGES


def test_a_refused_copy_back_opens_nothing(tmp_path: Path, pg_url: str, counter: BpeTokenCounter) -> None:
    # PostgreSQL -> SQLite: the source's store is the one refused, before the target file is made
    schema = fresh_schema()
    store = PostgresStore(pg_url, tokens=counter, schema=schema)
    try:
        store.append("c", Message(role="user", content="hello"), namespace=NS)
    finally:
        store.close()
    target = tmp_path / "back" / "tiermem.db"
    with pytest.raises(ValidationError) as refused:
        migrate_store(pg_url, target, tokens=counter, source_schema=schema, pool_mode="transaction")
    assert refused.value.field == "cold_pool_mode" and "cold_erase_scrub" in str(refused.value)
    assert not target.parent.exists()


@pytest.mark.skipif(PGBOUNCER is None, reason="no pgbouncer on PATH (Debian: apt-get install pgbouncer)")
def test_a_copy_through_pgbouncer(tmp_path: Path, pg_url: str, bouncer: tuple[str, str],  # noqa: F811
                                  counter: BpeTokenCounter) -> None:
    """Into PostgreSQL through PgBouncer in its mode, the config saying that mode: copied
    and verified, every message in the target's schema; in transaction mode every server
    connection PgBouncer hands to the next client afterwards has the server's own settings
    and no prepared statement (session mode: PgBouncer's DISCARD ALL resets them). Before,
    the copy's store ran in session mode: its search path and lock_timeout stayed on the
    server connections, for whichever client got them next."""
    mode, url = bouncer
    source = _source(tmp_path, counter)
    schema = fresh_schema()
    exit_code, output = _cli(tmp_path, {"TIERMEM_COLD_POOL_MODE": mode, "TIERMEM_COLD_ERASE_SCRUB": "vacuum"},
                             "--from", str(source), "--to", url, "--schema", schema)
    assert exit_code == 0, output
    assert f"{CONVERSATIONS} conversation(s), {CONVERSATIONS * MESSAGES} message(s)" in output, output
    assert _messages_in(pg_url, schema) == CONVERSATIONS * MESSAGES  # read directly, not through the pooler
    if mode != "transaction":
        return
    # as many clients as server connections, each inside a transaction: each holds one of them
    conns = [psycopg.connect(url, prepare_threshold=None) for _ in range(SERVER_CONNECTIONS)]
    try:
        seen = [c.execute("SELECT current_setting('search_path'), current_setting('lock_timeout'), "
                          "(SELECT count(*) FROM pg_prepared_statements), pg_backend_pid()").fetchone()
                for c in conns]
    finally:
        for c in conns:
            c.close()
    assert len({row[3] for row in seen if row}) == SERVER_CONNECTIONS  # all of them seen
    for row in seen:
        assert row is not None and schema not in row[0] and (row[1], row[2]) == ("0", 0), row

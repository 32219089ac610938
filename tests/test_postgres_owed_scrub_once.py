"""Two servers finishing the same owed scrub at once: one rewrites, the other skips.

Every serving process's indexer thread finishes an erasure's scrub it has seen owed 60 s
(67d7c07: `finish_owed_scrub`, PostgresStore._finish_scrub). Servers of one store see the
same marker, and their timers fire within one indexer wake of each other. Before, both
read the marker, the second's VACUUM FULL waited behind the first's (or both behind a
reader), then rewrote every table again once the first had deleted the marker (a second
stall of the whole store, logged "finished" twice) or gave up at its lock timeout with a
false "could not finish" warning. Now an owed scrub is done under a schema's advisory
lock (OWED_SCRUB_LOCK), tried: busy, the other server skips it quietly.

Real processes on the embedded PostgreSQL. To make "at once" certain rather than likely,
a reader's lock on the messages table (taken after the erasure: not a snapshot the scrub
must wait out) holds the first VACUUM FULL until both servers have started their finish:
before, both VACUUMs are seen waiting on it; now one is, and the other server has
returned. The count of rewrites is the messages table's manual ANALYZE counter
(pg_stat_user_tables.analyze_count: each `VACUUM (FULL, ANALYZE)` adds one; a plain
VACUUM FULL is not counted by vacuum_count) and the servers' "finished" log lines.

On a database of its own (`own_database`), not the worker's shared one: the owed marker
here ('1') names no erasure's xid, so the scrub counts every snapshot of its database
older than its rewrite (SNAPSHOT_HOLDERS_SQL), whoever holds it. On the shared database a
session of no process of this test, in a transaction that outlived the whole rewrite (an
xid or a snapshot: another test's on that worker), made the scrub log "the tables were
rewritten all the same, not scrubbed ... Held by: backend pid N" and finish nothing, at
random (a CI run, 3 workers on 2 cores; 0/20 alone). Only the test's own sessions (the
servers', the reader's, its polls) are in this database: one of ours holding a snapshot
still fails it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from pg_server import fresh_schema
from psycopg import sql as pgsql

from tiermem.tiers.cold import SCRUB_PENDING_KEY
from tiermem.tiers.models import Message
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.tokens import BpeTokenCounter

ROOT = Path(__file__).resolve().parent.parent
SERVERS = 2
TURNS = 50
# the servers' lock wait (busy_timeout_ms): far past the test's hold of the reader's lock,
# so that neither gives up while it is held (before, the second would, after 5 s, here)
SERVER_LOCK_WAIT_MS = 60_000
READY_WITHIN_S = 60.0  # a server process's start (imports, the store's open) on a loaded 2-core machine
BOTH_STARTED_WITHIN_S = 30.0  # the servers' finishes under way, after the go file
DONE_WITHIN_S = 60.0  # the rewrite of a small store, once the reader lets go
STATS_SETTLE_S = 3.0  # a server's counters reach pg_stat at its backend's exit: read until then
POLL_S = 0.05

SERVER = """
import logging, sys, time
from pathlib import Path
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.tokens import BpeTokenCounter

url, schema, go, wait_ms = sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(message)s")
store = PostgresStore(url, tokens=BpeTokenCounter(), schema=schema, lock_timeout_ms=wait_ms)
print("READY", flush=True)
while not go.exists():
    time.sleep(0.01)
# the indexer thread's call, its 60 s already seen (0 here)
print("TRIED" if store.finish_owed_scrub(owed_for_s=0) else "NOT OWED", flush=True)
store.close()
"""


@pytest.fixture
def own_database(pg_url: str) -> Iterator[str]:
    """The URL of a new database on the worker's server, dropped (its sessions ended) at
    the end: no session of another test is in it, so none is counted as a snapshot holder."""
    name = "owed_" + uuid.uuid4().hex[:12]
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(pgsql.SQL("CREATE DATABASE {}").format(pgsql.Identifier(name)))
    try:
        yield urlunsplit(urlsplit(pg_url)._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(pgsql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(pgsql.Identifier(name)))


def analyze_count(url: str, schema: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT analyze_count FROM pg_stat_user_tables WHERE schemaname = %s "
                           "AND relname = 'messages'", (schema,)).fetchone()
    assert row is not None
    return int(row[0])


def vacuums_waiting(url: str) -> int:
    """Backends whose VACUUM waits on a lock (behind the reader, or another VACUUM)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                           "AND wait_event_type = 'Lock' AND query ILIKE 'VACUUM%%'").fetchone()
    return int(row[0]) if row else 0


def test_two_servers_finishing_one_owed_scrub_rewrite_once(own_database: str, counter: BpeTokenCounter,
                                                           tmp_path: Path) -> None:
    pg_url = own_database
    schema = fresh_schema()  # dropped with its database (the shared one's drop finds none)
    store = PostgresStore(pg_url, tokens=counter, schema=schema)
    try:
        for i in range(TURNS):
            store.append("c", Message(role="user", content=f"owed scrub turn {i}"), namespace="ns")
    finally:
        store.close()
    go = tmp_path / "go"
    servers = [subprocess.Popen([sys.executable, "-c", SERVER, pg_url, schema, str(go), str(SERVER_LOCK_WAIT_MS)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONPATH": str(ROOT)}) for _ in range(SERVERS)]
    try:
        for s in servers:  # opened before the scrub was owed: their opens did not finish it
            assert s.stdout is not None
            assert s.stdout.readline().strip() == "READY", s.stderr.read() if s.stderr else ""
        reader = psycopg.connect(pg_url, autocommit=False)
        try:
            # what an erasure whose process died after its commit leaves (pg_server.scrub_left_owed)
            reader.execute(f'INSERT INTO "{schema}".meta(key, value) VALUES (%s, %s)', (SCRUB_PENDING_KEY, "1"))
            reader.commit()
            before = analyze_count(pg_url, schema)
            reader.execute(f'SELECT count(*) FROM "{schema}".messages').fetchone()  # its lock kept
            go.touch()
            until = time.monotonic() + BOTH_STARTED_WITHIN_S
            while time.monotonic() < until:
                waiting = vacuums_waiting(pg_url)
                returned = sum(s.poll() is not None for s in servers)
                if waiting + returned >= SERVERS:
                    break
                time.sleep(POLL_S)
            started = (waiting, returned)  # asserted below, after what the servers then did
        finally:
            reader.rollback()
            reader.close()
        outs = [s.communicate(timeout=DONE_WITHIN_S) for s in servers]
    finally:
        for s in servers:
            if s.poll() is None:
                s.kill()
                s.wait()
    assert [s.returncode for s in servers] == [0] * SERVERS, [err[-2000:] for _, err in outs]
    logs = "".join(err for _, err in outs)
    assert logs.count("finished the scrub of") == 1, logs[-4000:]
    assert "could not finish" not in logs, logs[-4000:]
    with psycopg.connect(pg_url, autocommit=True) as conn:  # finished: the marker gone
        assert not conn.execute(f'SELECT 1 FROM "{schema}".meta WHERE key = %s', (SCRUB_PENDING_KEY,)).fetchone()
    until = time.monotonic() + STATS_SETTLE_S
    rewrites = analyze_count(pg_url, schema) - before
    while rewrites < SERVERS and time.monotonic() < until:  # a second rewrite would show by then
        time.sleep(POLL_S)
        rewrites = analyze_count(pg_url, schema) - before
    assert rewrites == 1
    # before: both VACUUMs waiting behind the reader; now one, the other server returned at once
    assert started == (1, 1)

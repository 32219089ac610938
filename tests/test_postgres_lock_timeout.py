"""A PostgreSQL statement waits for a lock at most `busy_timeout_ms` (the store sets
`lock_timeout` on each of its sessions), as SQLite's writers wait for the write lock:
an append behind an operator's `LOCK TABLE` is 503 busy with `"written": false` after
about that long, and an erasure's scrub (`VACUUM FULL`) behind a long reader gives up
(`scrubbed: false`, finished at the next open) instead of queueing every writer behind
it. Where waiting is the design (a migration behind another process's) the transaction
lifts the limit for itself. Before: tiermem set no `lock_timeout`, and both waited for
as long as the lock was held (the append's client saw no answer at all)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import psycopg
import pytest
from pg_server import fresh_schema
from psycopg_pool import ConnectionPool
from service_helpers import TOKEN_ACME, bearer, serve_in_thread

from tiermem import Config, Memory
from tiermem.service.handlers import STORAGE_BUSY_RETRY_AFTER_S
from tiermem.tiers.cold import SCRUB_PENDING_KEY
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.errors import WRITTEN_FIELD
from tiermem.tiers.models import Message
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.tokens import BpeTokenCounter

BUSY_TIMEOUT_MS = 400  # the config's wait for a lock
SLACK_S = 5.0  # on top of the wait: a busy test machine
HUNG_S = 20.0  # what the code before took "forever" to be: the client's timeout
CONV = "locked-1"


def test_an_append_behind_an_operators_lock_table_is_503_busy_after_busy_timeout(
        tmp_path: Path, pg_url: str, embedder: FastEmbedder) -> None:
    schema = fresh_schema()
    cfg = Config(data_dir=tmp_path / "data", cold_url=pg_url, cold_schema=schema, busy_timeout_ms=BUSY_TIMEOUT_MS,
                 auth_tokens={TOKEN_ACME: "acme"})
    path = f"/v1/conversations/{CONV}/messages"
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem, \
            serve_in_thread(cfg, mem) as url, httpx.Client(base_url=url, timeout=HUNG_S) as http:
        h = bearer(TOKEN_ACME)
        assert http.post(path, json={"role": "user", "content": "before"}, headers=h).status_code == 201
        with psycopg.connect(pg_url) as operator:  # its transaction holds the lock until it ends
            operator.execute(f'LOCK TABLE "{schema}".messages IN ACCESS EXCLUSIVE MODE')
            started = time.monotonic()
            # before: no answer (httpx.ReadTimeout after HUNG_S)
            r = http.post(path, json={"role": "user", "content": "behind the lock"}, headers=h)
            took = time.monotonic() - started
            assert r.status_code == 503, r.text
            assert r.json()[WRITTEN_FIELD] is False and "busy" in r.json()["detail"]
            assert r.headers["retry-after"] == str(STORAGE_BUSY_RETRY_AFTER_S)
            assert BUSY_TIMEOUT_MS / 1000 <= took < BUSY_TIMEOUT_MS / 1000 + SLACK_S
        assert http.post(path, json={"role": "user", "content": "after"}, headers=h).status_code == 201
        got = http.get(f"/v1/conversations/{CONV}/history", headers=h).json()
        assert [m["message"]["content"] for m in got["messages"]] == ["before", "after"]


def lock_timeout_of(store: PostgresStore) -> str:
    with store.reading() as conn:
        return str(conn.execute("SHOW lock_timeout").fetchone()[0])


# (lock_timeout_ms given to the store, what its sessions' lock_timeout reads)
@pytest.mark.parametrize(("given", "shown"), [
    (BUSY_TIMEOUT_MS, f"{BUSY_TIMEOUT_MS}ms"),
    (0, "1ms"),  # busy_timeout_ms = 0, "do not wait": PostgreSQL's 0 would wait forever
])
def test_the_store_sets_lock_timeout_on_its_own_and_a_callers_pool(pg_url: str, given: int,
                                                                     shown: str) -> None:
    own = PostgresStore(pg_url, tokens=BpeTokenCounter(), schema=fresh_schema(), lock_timeout_ms=given)
    try:
        assert lock_timeout_of(own) == shown  # before: 0 (the server's default: wait forever)
    finally:
        own.close()
    with ConnectionPool(pg_url, min_size=1, max_size=1, kwargs={"autocommit": True}) as pool:
        theirs = PostgresStore(pool=pool, tokens=BpeTokenCounter(), schema=fresh_schema(), lock_timeout_ms=given)
        assert lock_timeout_of(theirs) == shown  # set at each checkout, as the search_path
        untouched = PostgresStore(pool=pool, tokens=BpeTokenCounter(), schema=fresh_schema(), lock_timeout_ms=None)
        with pool.connection() as conn:
            conn.execute("SET lock_timeout = '7s'")  # the caller's own setting
        assert lock_timeout_of(untouched) == "7s"


def test_an_erasures_scrub_behind_a_long_reader_gives_up_after_the_wait(pg_url: str) -> None:
    schema = fresh_schema()
    store = PostgresStore(pg_url, tokens=BpeTokenCounter(), schema=schema, lock_timeout_ms=BUSY_TIMEOUT_MS)
    try:
        store.append("gone", Message(role="user", content="erase me"))
        store.append("kept", Message(role="user", content="keep me"))
        reports = []
        with psycopg.connect(pg_url) as reader:  # a long read: its transaction holds ACCESS SHARE
            reader.execute(f'SELECT count(*) FROM "{schema}".messages').fetchone()
            eraser = threading.Thread(target=lambda: reports.append(store.delete_conversation("gone")))
            started = time.monotonic()
            eraser.start()
            eraser.join(BUSY_TIMEOUT_MS / 1000 + SLACK_S)
            hung = eraser.is_alive()  # before: the VACUUM FULL waited for the reader's commit
        eraser.join()
        assert not hung, "the erasure's scrub waited for the reader"
        assert time.monotonic() - started >= BUSY_TIMEOUT_MS / 1000
        (report,) = reports
        assert report.conversations == 1 and not report.scrubbed  # deleted all the same; the scrub is owed
        assert store._read("SELECT 1 FROM meta WHERE key = %s", (SCRUB_PENDING_KEY,))
        assert [m.text for m in store.get("kept", [0])] == ["keep me"]
    finally:
        store.close()
    reopened = PostgresStore(pg_url, tokens=BpeTokenCounter(), schema=schema, lock_timeout_ms=BUSY_TIMEOUT_MS)
    try:  # the next open scrubs
        assert not reopened._read("SELECT 1 FROM meta WHERE key = %s", (SCRUB_PENDING_KEY,))
    finally:
        reopened.close()


def test_a_migration_waits_for_another_process_migrating_past_the_lock_timeout(pg_url: str) -> None:
    """Waiting is the design there: the second process opens once the first is done."""
    schema = fresh_schema()
    opened: list[PostgresStore] = []
    errors: list[BaseException] = []

    def open_store() -> None:
        try:
            opened.append(PostgresStore(pg_url, tokens=BpeTokenCounter(), schema=schema,
                                        lock_timeout_ms=BUSY_TIMEOUT_MS))
        except BaseException as exc:  # reported by the test below
            errors.append(exc)

    with psycopg.connect(pg_url, autocommit=True) as other:  # "another process migrating": its lock
        other.execute("SELECT pg_advisory_lock(hashtext(%s))", (f"tiermem-migrate-{schema}",))
        opener = threading.Thread(target=open_store)
        opener.start()
        opener.join(BUSY_TIMEOUT_MS / 1000 * 3)
        assert opener.is_alive() and not errors, errors  # still waiting, past the lock timeout
        other.execute("SELECT pg_advisory_unlock(hashtext(%s))", (f"tiermem-migrate-{schema}",))
    opener.join()
    assert not errors, errors
    (store,) = opened
    try:
        assert store.version == len(store.migrations())
        assert lock_timeout_of(store) == f"{BUSY_TIMEOUT_MS}ms"
    finally:
        store.close()

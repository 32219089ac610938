"""An erasure on PostgreSQL whose rewrite of the tables cannot run (DESIGN invariant 3).

The rows are deleted in one committed transaction; the `VACUUM FULL` that scrubs their
bytes runs after it and can fail (a `lock_timeout` on the role while another session
reads a table) or, on a caller's pool in transaction mode, could not run at all. Either
way the erasure has happened: the caller gets its report (`scrubbed` False when the
bytes are not yet scrubbed, never True when they are not), and Redis keys and in-process
copies of the erased incarnation are dropped. Before, the failed VACUUM raised a raw
psycopg error after the commit (a retry answered 404, the Redis keys stayed for good),
and the caller's pool skipped the scrub while the report looked like a clean one.
"""

from __future__ import annotations

import json
import urllib.parse
import uuid
from pathlib import Path

import psycopg
import pytest
from pg_server import fresh_schema
from psycopg_pool import ConnectionPool
from test_erasure import _redis_with
from test_erasure_postgres import checkpoint, data_dir, files_with

import tiermem
from tiermem import Config, Memory
from tiermem.tiers.cold import SCRUB_PENDING_KEY
from tiermem.tiers.embed import Embedder
from tiermem.tiers.models import Message
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.tokens import BpeTokenCounter

LOCK_TIMEOUT = "1s"  # what an operator sets on the role; the erasure's VACUUM meets it


def canary() -> str:
    return f"zq8canary{uuid.uuid4().hex}quince"


def owed(url: str, schema: str) -> bool:
    """Whether the store records an erasure's rewrite as still to do."""
    with psycopg.connect(url) as conn:
        return conn.execute(f'SELECT 1 FROM "{schema}".meta WHERE key = %s', (SCRUB_PENDING_KEY,)).fetchone() is not None


def test_a_failed_rewrite_still_reports_the_erasure_and_drops_the_redis_copies(
        tmp_path: Path, pg_url: str, embedder: Embedder) -> None:
    secret = canary()
    schema = fresh_schema()
    url = pg_url + ("&" if "?" in pg_url else "?") + "options=" + urllib.parse.quote(f"-c lock_timeout={LOCK_TIMEOUT}")
    cfg = Config(data_dir=tmp_path / "data", cold_url=url, cold_schema=schema)
    with Memory(cfg, embedder=embedder, hot=True, background_indexing=False) as mem:
        for i in range(6):
            mem.append("victim", {"role": "user", "content": f"my recovery code is {secret}, note {i}"})
        mem.append("other", {"role": "user", "content": "an unrelated thread"})
        mem.context("victim", "what is my recovery code?", 400)  # the hot set holds it now
        assert _redis_with(mem, secret.encode())

        reader = psycopg.connect(pg_url, autocommit=False)  # a report query holding a read lock
        try:
            reader.execute(f'SELECT count(*) FROM "{schema}".plans').fetchone()
            report = mem.delete_conversation("victim")
        finally:
            reader.rollback()
            reader.close()

        assert report.conversation_ids == ["victim"] and report.messages == 6
        assert report.scrubbed is False and report.to_json()["scrubbed"] is False
        assert report.wal_truncated is False  # PostgreSQL never truncates its WAL
        assert _redis_with(mem, secret.encode()) == []  # dropped although the rewrite failed
        with pytest.raises(tiermem.ConversationNotFound):
            mem.history("victim")
        assert [t["id"] for t in mem.tombstones()] == ["victim"]

        # the erasure recorded the rewrite as owed: the next store to open does it
        assert owed(pg_url, schema)
        with Memory(Config(data_dir=tmp_path / "data2", cold_url=pg_url, cold_schema=schema), embedder=embedder,
                    hot=False, background_indexing=False):
            assert not owed(pg_url, schema)
            checkpoint(pg_url)
            assert files_with(data_dir(pg_url), secret.encode()) == []
        # and an erasure after that scrubs as usual
        again = mem.delete_conversation("other")
        assert again.scrubbed is True


def test_a_callers_pool_in_transaction_mode_is_scrubbed_too(pg_url: str, counter: BpeTokenCounter) -> None:
    secret = canary()
    with ConnectionPool(pg_url, min_size=1, max_size=2, kwargs={"autocommit": False}) as pool:
        store = PostgresStore(pool=pool, tokens=counter, schema=fresh_schema())
        try:
            for i in range(20):
                store.append("c", Message(role="user", content=f"{secret} line {i} " + uuid.uuid4().hex * 20),
                             namespace="ns")
            checkpoint(pg_url)
            assert files_with(data_dir(pg_url), secret.encode())  # the probe finds it before
            report = store.delete_conversation(store.key_of("ns", "c") or "")
            assert report.scrubbed is True and report.messages == 20
            checkpoint(pg_url)
            assert files_with(data_dir(pg_url), secret.encode()) == []
            # the pool's connection went back in transaction mode: later writes still commit
            store.append("d", Message(role="user", content="after"), namespace="ns")
            with pool.connection() as conn:
                assert conn.autocommit is False
        finally:
            store.close()
        with psycopg.connect(pg_url) as conn:
            n = conn.execute(f'SELECT count(*) FROM "{store.schema}".messages').fetchone()
        assert n == (1,)


def test_the_fast_scrub_says_it_did_not_scrub(tmp_path: Path, pg_url: str, embedder: Embedder) -> None:
    cfg = Config(data_dir=tmp_path / "data", cold_url=pg_url, cold_schema=fresh_schema(),
                 cold_erase_scrub="vacuum")  # type: ignore[arg-type]
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append("c", {"role": "user", "content": "hello"})
        report = mem.delete_conversation("c")
    assert report.scrubbed is False and json.loads(json.dumps(report.to_json()))["scrubbed"] is False

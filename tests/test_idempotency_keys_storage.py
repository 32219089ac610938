"""Where idempotency keys are stored: a database from before them (SQLite schema 23)
upgrades to a table that takes them, and `migrate-store` carries them between engines,
its verification included, so a retry after the move is still answered from the key."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from hash_embedder import HashEmbedder
from pg_server import fresh_schema

from tiermem.config import Config
from tiermem.memory import Memory
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.errors import IdempotencyKeyReused, MigrationMismatch
from tiermem.tiers.migrate_store import migrate_store
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.schema import MIGRATIONS, sqlite3
from tiermem.tiers.tokens import BpeTokenCounter

TOKENS = BpeTokenCounter()
BATCH = [{"role": "user", "content": "book the 9:40 train"}, {"role": "assistant", "content": "Booked."}]


def test_a_schema_23_database_upgrades_and_takes_keys(tmp_path: Path) -> None:
    version_before = [m.__name__ for m in MIGRATIONS].index("m024_idempotency_keys")
    data = tmp_path / "data"
    with Memory(Config(data_dir=data), embedder=HashEmbedder(), hot=False, background_indexing=False) as mem:
        mem.append_many("c", BATCH)
        db = mem.config.db_path
    conn = sqlite3.connect(str(db), isolation_level=None)
    try:  # the file as tiermem with schema 23 left it: no table of keys
        conn.execute("DROP TABLE idempotency_keys")
        conn.execute(f"PRAGMA user_version = {version_before}")
    finally:
        conn.close()
    with Memory(Config(data_dir=data), embedder=HashEmbedder(), hot=False, background_indexing=False) as mem:
        assert mem.stats()["cold"]["schema_version"] == len(MIGRATIONS)
        assert mem.append_many("c", BATCH, idempotency_key="k") == [2, 3]  # the old rows stay, the key is new
        assert mem.append_outcome("c", BATCH, idempotency_key="k").replayed
        assert len(mem.history("c")) == 4


def _keyed_source(data: Path) -> Path:
    with Memory(Config(data_dir=data), embedder=HashEmbedder(), hot=False, background_indexing=False) as mem:
        mem.append_many("trip", BATCH, idempotency_key="req-1", namespace="acme")
        mem.append("trip", {"role": "user", "content": "and a taxi"}, idempotency_key="req-2", namespace="acme")
        mem.append_many("trip", BATCH, idempotency_key="req-1", namespace="globex")
        return mem.config.db_path


def _records(store: ColdStore | PostgresStore) -> dict[str, object]:
    out: dict[str, object] = {}
    for ns, name, k in (("acme", "trip", "req-1"), ("acme", "trip", "req-2"), ("globex", "trip", "req-1")):
        key = store.key_of(ns, name)
        assert key is not None
        out[f"{ns}/{k}"] = store.idempotency_record(key, k)
    return out


def test_migrate_store_carries_the_keys_both_ways(tmp_path: Path, pg_url: str) -> None:
    src = _keyed_source(tmp_path / "src")
    schema = fresh_schema()
    there = migrate_store(src, pg_url, tokens=TOKENS, target_schema=schema)
    back = migrate_store(pg_url, tmp_path / "back", tokens=TOKENS, source_schema=schema)
    assert back.digest == there.digest
    a = ColdStore(src, tokens=TOKENS)
    b = PostgresStore(pg_url, tokens=TOKENS, schema=schema)
    c = ColdStore(tmp_path / "back" / "tiermem.db", tokens=TOKENS)
    try:
        want = _records(a)
        assert all(r is not None for r in want.values())
        assert _records(b) == want and _records(c) == want
    finally:
        a.close()
        b.close()
        c.close()
    # a retry after the move is answered from the copied key, on PostgreSQL
    cfg = Config(data_dir=tmp_path / "m", cold_url=pg_url, cold_schema=schema)
    with Memory(cfg, embedder=HashEmbedder(), hot=False, background_indexing=False) as mem:
        out = mem.append_outcome("trip", BATCH, idempotency_key="req-1", namespace="acme")
        assert out.positions == [0, 1] and out.replayed
        with pytest.raises(IdempotencyKeyReused):
            mem.append("trip", {"role": "user", "content": "not the taxi"}, idempotency_key="req-2", namespace="acme")
        assert len(mem.history("trip", namespace="acme")) == 3


def test_migrate_store_verification_covers_the_keys(tmp_path: Path, pg_url: str) -> None:
    src = _keyed_source(tmp_path / "src")
    schema = fresh_schema()
    migrate_store(src, pg_url, tokens=TOKENS, target_schema=schema)
    with psycopg.connect(pg_url, autocommit=True) as conn:  # the copy's key drifts from the source's
        conn.execute(f'UPDATE "{schema}".idempotency_keys SET fingerprint = %s WHERE idem_key = %s',
                     (b"\x00" * 32, "req-2"))
    with pytest.raises(MigrationMismatch, match="'trip'"):
        migrate_store(src, pg_url, tokens=TOKENS, target_schema=schema)

"""The vector table's chunks are small (tiers/schema.py VEC_CHUNK_SLOTS): vec0 gives every
conversation chunks of its own, allocated whole, so at its default of 1,024 slots a
2-turn conversation cost 1.5 MiB of file. A store made before is converted by a migration
that copies its vectors (none lost, KNN unchanged) and keeps erasure's scrub."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cold_helpers import raw
from hash_embedder import DIM, HashEmbedder

from tiermem.tiers.cold import ColdStore
from tiermem.tiers.models import Message
from tiermem.tiers.schema import MIGRATIONS, VEC_CHUNK_SLOTS, VEC_TABLE, m016_vec_small_chunks
from tiermem.tiers.tokens import BpeTokenCounter

MIB = 2**20
# 100 conversations x 2 turns: the old layout made 100 chunks of 1,024 x 384 x 4 B
# (150 MiB); the small one needs 100 x 64 slots (9.6 MiB) plus the text and indexes
SMALL_STORE_BOUND_BYTES = 20 * MIB
# the schema version a store made before the small chunks had
VERSION_BEFORE = MIGRATIONS.index(m016_vec_small_chunks)


def _store(db: Path, counter: BpeTokenCounter) -> ColdStore:
    return ColdStore(db, tokens=counter, embedder=HashEmbedder())  # type: ignore[arg-type]


def _fill(store: ColdStore, convs: int, turns: int) -> None:
    for c in range(convs):
        store.append_many(f"c{c}", [Message(role="user", content=f"turn {t} of conversation {c} about routers")
                                    for t in range(turns)], namespace=f"t{c}")
    store.index_pending()


def test_a_store_of_many_short_conversations_is_small(tmp_path: Path, counter: BpeTokenCounter) -> None:
    db = tmp_path / "tiermem.db"
    store = _store(db, counter)
    try:
        _fill(store, 100, 2)
        store.truncate_wal()
        assert store.integrity()["vectors"] == 200
        size = store.files_bytes()
    finally:
        store.close()
    assert size < SMALL_STORE_BOUND_BYTES, f"{size / MIB:.1f} MiB for 200 turns"


def _back_to_before(conn: Any) -> None:
    """Undo what the steps after VERSION_BEFORE made, and record that version."""
    conn.execute("DROP INDEX IF EXISTS conversations_views_behind")  # m019
    for column in ("views_seq", "views_checked_seq", "views_through"):
        conn.execute(f"ALTER TABLE conversations DROP COLUMN {column}")
    conn.execute("DROP INDEX IF EXISTS turns_pending_by_conv")  # m018
    conn.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('secure-delete', 0)")  # m017
    conn.execute(f"PRAGMA user_version = {VERSION_BEFORE}")


def _old_layout(db: Path) -> None:
    """Turn a current store back into one made before the small chunks: its vector table
    with vec0's default chunk, schema version VERSION_BEFORE."""
    with raw(db) as conn:
        rows = conn.execute(f"SELECT rowid, conversation_id, embedding FROM {VEC_TABLE}").fetchall()
        conn.execute("BEGIN")
        conn.execute(f"DROP TABLE {VEC_TABLE}")
        conn.execute(f"CREATE VIRTUAL TABLE {VEC_TABLE} USING vec0(conversation_id TEXT PARTITION KEY, "
                     f"embedding float[{DIM}])")
        conn.executemany(f"INSERT INTO {VEC_TABLE}(rowid, conversation_id, embedding) VALUES (?, ?, ?)", rows)
        _back_to_before(conn)
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def _vectors(db: Path) -> tuple[str, dict[int, tuple[str, bytes]], list[list[tuple[int, float]]]]:
    """(the table's DDL, rowid -> (partition, vector bytes), KNN answers: per partition and
    over several partitions at once)."""
    query = HashEmbedder().embed(["which router did I buy"])[0].tobytes()
    with raw(db) as conn:
        ddl = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (VEC_TABLE,)).fetchone()[0]
        rows = {int(r[0]): (r[1], bytes(r[2])) for r in
                conn.execute(f"SELECT rowid, conversation_id, embedding FROM {VEC_TABLE}").fetchall()}
        knn = [conn.execute(f"SELECT rowid, distance FROM {VEC_TABLE} WHERE embedding MATCH ? AND k = 5 "
                            "AND conversation_id = ?", (query, conv)).fetchall() for conv in ("c0", "c3", "c5")]
        knn.append(conn.execute(f"SELECT rowid, distance FROM {VEC_TABLE} WHERE embedding MATCH ? AND k = 8 "
                                "AND conversation_id IN ('c1', 'c2', 'c3')", (query,)).fetchall())
    return ddl, rows, knn


def _files_with(db: Path, needle: bytes) -> list[str]:
    return [p.name for p in (db, Path(str(db) + "-wal")) if p.exists() and needle in p.read_bytes()]


def test_the_migration_keeps_every_vector_and_the_scrub(tmp_path: Path, counter: BpeTokenCounter) -> None:
    db = tmp_path / "tiermem.db"
    store = _store(db, counter)
    try:
        _fill(store, 6, 3)
        # a conversation longer than one small chunk: its vectors span several
        store.append_many("c3", [Message(role="assistant", content=f"more {t}") for t in range(VEC_CHUNK_SLOTS * 2)],
                          namespace="t3")
        store.index_pending()
    finally:
        store.close()
    _old_layout(db)
    ddl, before, knn_before = _vectors(db)
    assert "chunk_size" not in ddl  # the old layout, as a store made before has it
    size_before = db.stat().st_size

    store = _store(db, counter)  # the migration runs here
    try:
        assert store.version == len(MIGRATIONS)
        ddl, after, knn_after = _vectors(db)
        assert f"chunk_size={VEC_CHUNK_SLOTS}" in ddl
        assert after == before  # every vector, under its rowid and partition, byte for byte
        assert knn_after == knn_before and all(knn_before)  # the same neighbours, same distances
        assert [r[0] for r in store._read("SELECT name FROM sqlite_master WHERE name LIKE '%rechunk%'")] == []
        store.truncate_wal()
        assert db.stat().st_size < size_before / 2  # the old chunks' pages went back
        # erasure still leaves none of the conversation's vectors in the files
        gone = [v for conv, v in after.values() if conv == "c3"]
        store.delete_conversation("c3")
        ddl, left, _knn = _vectors(db)
        assert len(left) == len(after) - len(gone)
    finally:
        store.close()
    for v in gone:
        assert _files_with(db, v) == []


@pytest.mark.parametrize("vectors", [
    False,  # a store whose embedder never ran: no vector table to convert, made small later
    True,   # a store whose vector table was lost (dropped by hand): nothing to copy either
])
def test_the_migration_without_a_vector_table(tmp_path: Path, counter: BpeTokenCounter, vectors: bool) -> None:
    db = tmp_path / "tiermem.db"
    store = ColdStore(db, tokens=counter)
    store.append("c0", Message(role="user", content="hello"))
    store.close()
    with raw(db) as conn:
        if vectors:
            conn.execute("INSERT INTO meta(key, value) VALUES ('vec_dim', ?)", (str(DIM),))
        _back_to_before(conn)
    store = _store(db, counter)
    try:
        assert store.version == len(MIGRATIONS)
        assert store.index_pending() == 1
        ddl, rows, _knn = _vectors(db)
        assert f"chunk_size={VEC_CHUNK_SLOTS}" in ddl and len(rows) == 1
    finally:
        store.close()

"""`migrate-store` and the identity of the model the vectors come from (meta `vec_model`,
recorded by both engines when an embedder with a `model_identity()` writes vectors).

The vectors are copied, not recomputed, so the target must know whose they are: a store
whose vectors carry no identity adopts the first embedder that opens it (tiers.cold,
`_ensure_vec_table`). On the code before the identity was not copied: after the move, a
service opened with another model of the same width kept the old model's vectors,
scored queries of the new model against them, and embedded new turns beside them, where
the source store would have re-embedded every turn."""

from __future__ import annotations

from pathlib import Path

import pytest
from pg_server import fresh_schema

from tiermem.tiers.cold import ColdStore
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.errors import MigrationRefused
from tiermem.tiers.migrate_store import migrate_store
from tiermem.tiers.models import Message
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.schema import VEC_MODEL_KEY
from tiermem.tiers.tokens import BpeTokenCounter

TOKENS = BpeTokenCounter()
TEXTS = ("I live in Porto.", "My sister is a nurse.", "Book the 9 am train.")


class OtherModel(FastEmbedder):
    """The same width as the test embedder, recorded as another model (as a swap from one
    384-wide model to another is)."""

    def model_identity(self) -> str:
        return "sha256:another-model-of-the-same-width"


def _rows(store: ColdStore | PostgresStore, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    with store.reading() as c:
        return [tuple(r) for r in c.execute(store.dialect.sql(sql), params).fetchall()]


def _sqlite_source(db: Path, embedder: FastEmbedder) -> str:
    store = ColdStore(db, tokens=TOKENS, embedder=embedder)
    try:
        for text in TEXTS:
            store.append("c", Message(role="user", content=text))
        store.index_pending()
        ((recorded,),) = _rows(store, "SELECT value FROM meta WHERE key = ?", (VEC_MODEL_KEY,))
        return str(recorded)
    finally:
        store.close()


@pytest.mark.parametrize("back", [
    False,  # SQLite -> PostgreSQL
    True,  # and back again: PostgreSQL -> SQLite
], ids=["to-postgres", "and-back"])
@pytest.mark.parametrize("same_model", [
    True,  # the copy's own model opens it: the copied vectors are kept, nothing embedded
    False,  # another model of the same width: every turn embedded again, as on the source
], ids=["same-model", "other-model"])
def test_the_vectors_model_identity_is_carried(tmp_path: Path, pg_url: str, embedder: FastEmbedder,
                                               back: bool, same_model: bool) -> None:
    src = tmp_path / "src" / "tiermem.db"
    identity = _sqlite_source(src, embedder)
    schema = fresh_schema()
    migrate_store(src, pg_url, tokens=TOKENS, target_schema=schema)
    target: ColdStore | PostgresStore
    if back:
        migrate_store(pg_url, tmp_path / "back", tokens=TOKENS, source_schema=schema)
        target = ColdStore(tmp_path / "back" / "tiermem.db", tokens=TOKENS)
    else:
        target = PostgresStore(pg_url, tokens=TOKENS, schema=schema)
    try:
        assert _rows(target, "SELECT value FROM meta WHERE key = ?", (VEC_MODEL_KEY,)) == [(identity,)]
        target.embedder = embedder if same_model else OtherModel()
        assert target.index_pending() == (0 if same_model else len(TEXTS))
        assert _rows(target, "SELECT COUNT(*) FROM turns WHERE embedded = 0") == [(0,)]
    finally:
        target.close()


def test_merging_vectors_of_another_model_is_refused(tmp_path: Path, pg_url: str,
                                                     embedder: FastEmbedder) -> None:
    # into a target whose vectors come from another model of the same width: merged, one
    # model's vectors would be scored against the other's queries (or, adopted, the
    # target's own dropped), so it is refused before anything is written
    src = tmp_path / "src" / "tiermem.db"
    _sqlite_source(src, embedder)
    schema = fresh_schema()
    target = PostgresStore(pg_url, tokens=TOKENS, schema=schema, embedder=OtherModel())
    try:
        target.append("theirs", Message(role="user", content="already here"))
        target.index_pending()
    finally:
        target.close()
    with pytest.raises(MigrationRefused, match="another-model-of-the-same-width"):
        migrate_store(src, pg_url, tokens=TOKENS, target_schema=schema, into_non_empty=True)
    target = PostgresStore(pg_url, tokens=TOKENS, schema=schema)
    try:
        assert _rows(target, "SELECT COUNT(*) FROM conversations") == [(1,)]
        assert _rows(target, "SELECT COUNT(*) FROM turns WHERE embedded = 1") == [(1,)]
    finally:
        target.close()

"""migrate-store copies a SQLite store that an older tiermem left with NUL in derived
and diagnostic text (a warm fold's text, a view's refresh error) to PostgreSQL, with a
space in each NUL's place (tiers.dialect.without_nul, the rule both engines now write by).
It refused the fold ("PostgreSQL text cannot hold these rows") and did not check the
refresh error at all, so psycopg failed mid-copy, after the keys were written. A message
body holding a NUL (the user's data) is still refused, with nothing created."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from cold_helpers import sql_behind
from pg_server import fresh_schema

from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder
from tiermem.tiers.errors import MigrationRefused
from tiermem.tiers.migrate_store import migrate_store
from tiermem.tiers.tokens import BpeTokenCounter

SPEAKER = "an\x00a"  # a message's `name`: the turn's speaker is derived from it
OLD_FOLD = "the locker code is a\x00b"  # what an older tiermem wrote into a warm fold
OLD_ERROR = "summarizer failed on a\x00b"  # and into a view's refresh error
WARM_FOLD = "json_extract(metadata, '$.source') = 'warm'"


def _open(config: Config, embedder: Embedder) -> Memory:
    return Memory(config, embedder=embedder, hot=False, background_indexing=False)


def _old_store(tmp_path: Path, embedder: Embedder) -> Config:
    """A store built by this code, then given NUL where an older version wrote one."""
    cfg = Config(data_dir=tmp_path / "data")
    with _open(cfg, embedder) as mem:
        mem.append("c", {"role": "user", "name": SPEAKER, "content": "my locker code is ab"})
        mem.append("c", {"role": "user", "content": "and the garden gate is green"})
        assert mem.consolidate("c") >= 1
        key = mem.cold.key_of("default", "c")
        assert key is not None
        mem.warm.record_error(key, "rolling", "", "summarizer failed")
    sql_behind(cfg, f"UPDATE checkpoints SET summary = ? WHERE {WARM_FOLD}", (OLD_FOLD,))
    sql_behind(cfg, "UPDATE summary_errors SET error = ?", (OLD_ERROR,))
    return cfg


def _schema_exists(url: str, schema: str) -> bool:
    with psycopg.connect(url, autocommit=True) as c:
        return c.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone() is not None


def test_nul_in_derived_text_migrates_as_a_space_and_back(tmp_path: Path, embedder: Embedder,
                                                          pg_url: str, counter: BpeTokenCounter
                                                          ) -> None:
    cfg = _old_store(tmp_path, embedder)
    schema = fresh_schema()
    report = migrate_store(cfg.data_dir, pg_url, tokens=counter, target_schema=schema)
    assert (report.conversations, report.copied) == (1, 1)
    moved = Config(data_dir=tmp_path / "moved", cold_url=pg_url, cold_schema=schema)
    with _open(moved, embedder) as mem:
        key = mem.cold.key_of("default", "c")
        assert key is not None
        cp = mem.active("c").checkpoint
        assert cp is not None and cp.summary == "the locker code is a b"
        assert [e for e, _at in mem.warm.errors(key, "rolling")] == ["summarizer failed on a b"]
        assert [f[6] for f in mem.cold.turn_facts(key)] == ["an a", None]
        assert mem.history("c")[0].body["name"] == SPEAKER  # the message itself keeps its NUL
    # a rerun verifies the copy (digests over the same rule on both sides) and writes nothing
    again = migrate_store(cfg.data_dir, pg_url, tokens=counter, target_schema=schema)
    assert (again.copied, again.already_present, again.digest) == (0, 1, report.digest)
    # and back: PostgreSQL holds no NUL, so the copy is the PostgreSQL store's text as it is
    back = migrate_store(pg_url, tmp_path / "back", tokens=counter, source_schema=schema)
    assert (back.conversations, back.copied, back.digest) == (1, 1, report.digest)
    with _open(Config(data_dir=tmp_path / "back"), embedder) as mem:
        cp = mem.active("c").checkpoint
        assert cp is not None and cp.summary == "the locker code is a b"


def test_a_message_body_holding_nul_is_still_refused(tmp_path: Path, embedder: Embedder,
                                                     pg_url: str, counter: BpeTokenCounter
                                                     ) -> None:
    cfg = _old_store(tmp_path, embedder)
    # a body holding a raw NUL (not JSON's escaped \u0000): the user's data, which
    # PostgreSQL text cannot hold byte for byte
    # (messages are append-only, so it is a row appended behind tiermem's back)
    sql_behind(cfg, "INSERT INTO messages(conversation_id, position, id, role, body, created_at) "
               "SELECT id, 2, 99999, 'user', 'raw' || char(0) || 'nul', 0 FROM conversations", ())
    schema = fresh_schema()
    with pytest.raises(MigrationRefused, match="cannot hold") as refused:
        migrate_store(cfg.data_dir, pg_url, tokens=counter, target_schema=schema)
    # only the body is named: the derived text with NUL would be copied
    assert "messages.body" in str(refused.value)
    assert "checkpoints" not in str(refused.value) and "summary_errors" not in str(refused.value)
    assert not _schema_exists(pg_url, schema)

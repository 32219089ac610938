"""A message holding a NUL, folded by consolidation: the warm fold (a checkpoint the
warm tier writes) reads the same on both engines, and a SQLite store holding one is
copied to PostgreSQL by migrate-store. SQLite kept the NUL in the fold, PostgreSQL (whose
text holds none) a space: `active()` differed between the engines, and migrate-store
refused the SQLite store ("PostgreSQL text cannot hold these rows"), so a user who had
once sent a NUL could not move. Found by tests/test_engines_differential.py."""

from __future__ import annotations

from pathlib import Path

from pg_server import fresh_schema

from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder
from tiermem.tiers.migrate_store import migrate_store
from tiermem.tiers.tokens import BpeTokenCounter

NUL_TEXT = "my locker code is a\x00b, remember it"
FOLDED = NUL_TEXT.replace("\x00", " ")  # derived text keeps a space where the message has a NUL


def folded(mem: Memory) -> str:
    mem.append("c", {"role": "user", "content": NUL_TEXT})
    mem.append("c", {"role": "user", "content": "and the garden gate is green"})
    assert mem.consolidate("c") >= 1
    view = mem.active("c")
    assert view.checkpoint is not None
    return view.checkpoint.summary


def test_a_warm_fold_reads_the_same_on_both_engines(engine_config: Config, embedder: Embedder) -> None:
    with Memory(engine_config, embedder=embedder, hot=False, background_indexing=False) as mem:
        summary = folded(mem)
        assert "\x00" not in summary and FOLDED in summary
        assert mem.history("c")[0].text == NUL_TEXT  # the message itself keeps its NUL


def test_a_sqlite_store_with_a_folded_nul_migrates_to_postgres(tmp_path: Path, embedder: Embedder,
                                                               pg_url: str, counter: BpeTokenCounter
                                                               ) -> None:
    data = tmp_path / "data"
    with Memory(Config(data_dir=data), embedder=embedder, hot=False, background_indexing=False) as mem:
        summary = folded(mem)
    schema = fresh_schema()
    report = migrate_store(data, pg_url, tokens=counter, target_schema=schema)
    assert report.conversations == 1
    moved = Config(data_dir=tmp_path / "moved", cold_url=pg_url, cold_schema=schema)
    with Memory(moved, embedder=embedder, hot=False, background_indexing=False) as mem:
        cp = mem.active("c").checkpoint
        assert cp is not None and cp.summary == summary

"""What PostgreSQL's text types cannot hold never turns a valid request into a raw
psycopg error (an HTTP 500) or a half-done migration; both engines answer alike.

- A message within `max_content_bytes` whose words make a tsvector over PostgreSQL's
  1 MiB limit (a long tool output of distinct numbers or ids) was refused by the
  generated `tsv` column (ProgramLimitExceeded), and `migrate-store` died on it after
  copying the conversations before. The keyword index text is cut
  (`tiers.postgres.MAX_FTS_TEXT_BYTES`); the message itself is stored whole.
- A checkpoint summary holding NUL was a raw DataError on PostgreSQL and stored on SQLite.
  It is refused on both, naming `summary`, writing nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pg_server import fresh_schema

from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder
from tiermem.tiers.errors import ValidationError
from tiermem.tiers.migrate_store import migrate_store
from tiermem.tiers.tokens import BpeTokenCounter

# ~900 KB of distinct numbers: its full tsvector is ~2 MB, twice PostgreSQL's limit
HUGE = " ".join(str(1_000_000 + i) for i in range(112_000))


def pg_config(tmp_path: Path, url: str) -> Config:
    return Config(data_dir=tmp_path / "pg", cold_url=url, cold_schema=fresh_schema())


def test_a_message_past_the_tsvector_limit_is_stored_whole(tmp_path: Path, pg_url: str,
                                                           embedder: Embedder) -> None:
    assert len(HUGE.encode()) < Config().max_content_bytes
    with Memory(pg_config(tmp_path, pg_url), embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append("c", {"role": "user", "content": "here is the export"})
        pos = mem.append("c", {"role": "user", "content": HUGE})
        assert mem.history("c")[pos].text == HUGE
        # a word early in the text is found by keyword; the message was indexed
        assert any(h.position == pos for h in mem.search("c", "1000007", 3))


def test_migrate_store_copies_it(tmp_path: Path, pg_url: str, embedder: Embedder) -> None:
    src = tmp_path / "src"
    with Memory(Config(data_dir=src), embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append("a-first", {"role": "user", "content": "a small conversation"})
        mem.append("b-huge", {"role": "user", "content": HUGE})
        db = Config(data_dir=src).db_path
    schema = fresh_schema()
    report = migrate_store(str(db), pg_url, tokens=BpeTokenCounter(), target_schema=schema)
    assert report.conversations == 2 and report.messages == 2


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_a_nul_in_a_checkpoint_summary_is_refused_alike(tmp_path: Path, pg_url: str,
                                                        embedder: Embedder, engine: str) -> None:
    cfg = pg_config(tmp_path, pg_url) if engine == "postgresql" else Config(data_dir=tmp_path / "lite")
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append("c", {"role": "user", "content": "hello"})
        with pytest.raises(ValidationError) as err:
            mem.checkpoint("c", "sum\x00mary", 0)
        assert err.value.field == "summary"
        assert mem.active("c").checkpoint is None  # nothing written

"""The facade on PostgreSQL: `Config.cold_url` selects the PostgreSQL cold tier, and
Memory's own operations (append, context, search, consolidate, fork, erasure) work on it
end to end. Two Memory instances on one database stand for two service processes: each
sees the other's writes, through its own turn cache and pinned-block cache."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pydantic
import pytest
from pg_server import fresh_schema

import tiermem
from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder
from tiermem.tiers.postgres import PostgresStore


@pytest.fixture
def pg_config(tmp_path: Path, pg_url: str) -> Config:
    return Config(data_dir=tmp_path / "data", cold_url=pg_url, cold_schema=fresh_schema())


@pytest.fixture
def pg_memory(pg_config: Config, embedder: Embedder) -> Iterator[Memory]:
    with Memory(pg_config, embedder=embedder, hot=False, background_indexing=False) as mem:
        yield mem


def test_cold_url_selects_postgres_and_memory_works_on_it(pg_memory: Memory) -> None:
    assert isinstance(pg_memory.cold, PostgresStore)
    assert not (pg_memory.config.data_dir / pg_memory.config.db_filename).exists()  # no SQLite file made
    pg_memory.append_many("trip", [
        {"role": "user", "content": "I am allergic to peanuts, never suggest them."},
        {"role": "assistant", "content": "Noted: no peanuts."},
        *[{"role": "user", "content": f"filler line {i} about the weather in Porto"} for i in range(30)],
        {"role": "user", "content": "Which snacks should I pack for the flight?"},
    ], namespace="u")
    pg_memory.catch_up()
    ctx = pg_memory.context("trip", "Which snacks should I pack for the flight?", 400, namespace="u")
    text = "\n".join(str(m.get("content")) for m in ctx.messages)
    assert "peanuts" in text and ctx.plan.tokens <= 400
    assert pg_memory.search("trip", "peanut allergy", 3, namespace="u")[0].position == 0
    assert pg_memory.consolidate("trip", namespace="u") >= 1
    assert pg_memory.fork("trip", 1, new_id="trip-2", namespace="u") == "trip-2"
    report = pg_memory.delete_conversation("trip", namespace="u")
    assert report.messages == 33 and [t["id"] for t in pg_memory.tombstones(namespace="u")] == ["trip"]
    with pytest.raises(tiermem.ConversationNotFound):
        pg_memory.history("trip", namespace="u")
    assert pg_memory.history("trip-2", namespace="u")[0].text.startswith("I am allergic")


def test_two_memories_on_one_database_see_each_others_writes(pg_config: Config, embedder: Embedder,
                                                              tmp_path: Path) -> None:
    other = pg_config.model_copy(update={"data_dir": tmp_path / "other"})
    with Memory(pg_config, embedder=embedder, hot=False, background_indexing=False) as a, \
            Memory(other, embedder=embedder, hot=False, background_indexing=False) as b:
        a.append_many("c", [{"role": "user", "content": f"line {i} about invoices"} for i in range(60)])
        first = b.context("c", "what about invoices?", 800)  # b caches the conversation now
        a.append("c", {"role": "user", "content": "From now on always answer in French."})
        a.pin("c", 3)
        again = b.context("c", "what about invoices?", 800)
        text = "\n".join(str(m.get("content")) for m in again.messages)
        assert "always answer in French" in text and "always answer in French" not in "\n".join(
            str(m.get("content")) for m in first.messages)
        # b sees a's pin (the pinned turn may already be shown in b's epoch, as retrieved)
        assert 3 in [r.position for r in b.cold.pinned_turns("c")]
        assert any(3 in it.positions for it in again.plan.items)
        assert [m.position for m in b.history("c")] == list(range(61))


BAD_URLS = [
    "sqlite:///x.db",  # another engine's URL: the field says what it accepts
    "http://db:5432/x",  # not a database URL at all
]


@pytest.mark.parametrize("url", BAD_URLS)
def test_a_cold_url_that_is_not_postgres_is_refused_naming_the_field(url: str, tmp_path: Path) -> None:
    with pytest.raises(pydantic.ValidationError, match="cold_url"):
        Config(data_dir=tmp_path, cold_url=url)

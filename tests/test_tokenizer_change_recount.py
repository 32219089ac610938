"""A store reopened under another `tokenizer` counts its turns with it (tiers.recount).

Before, `turns.tokens` kept the counts of the tokenizer the turns were appended under:
written under o200k_base and reopened under cl100k_base, a turn of 188 cl100k tokens kept
its 104, and the hot set, rebuilt or kept from those counts, reported itself within its
budget while its members held far more real tokens. Now the store records the tokenizer
(meta `tokenizer`), recounts the turns on open when another one opens it, and Memory
drops the hot sets and epoch states that hold the old counts."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from conftest import full_memory
from pg_server import fresh_schema, with_options

from tiermem.config import Config
from tiermem.memory import Memory
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.models import Message
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.schema import TOKENIZER_KEY, UNRECORDED
from tiermem.tiers.tokens import BpeTokenCounter, message_tokens, messages_tokens

O200K = BpeTokenCounter("o200k_base")
CL100K = BpeTokenCounter("cl100k_base")
# Cyrillic and CJK: cl100k_base needs nearly twice o200k_base's tokens for it (188 to 101)
TEXT = ("Привет, как дела? Сегодня мы обсуждаем погоду в Москве и в Санкт-Петербурге. " * 3
        + " 这是一个测试句子，用来比较分词器。" * 3)
TURNS = 60
HOT_BUDGET_TOKENS = 3000
CONTEXT_BUDGET_TOKENS = 1000


def _say(i: int) -> dict[str, str]:
    return {"role": "user" if i % 2 == 0 else "assistant", "content": f"{i} {TEXT}"}


def _config(tmp_path: Path, engine: str, request: pytest.FixtureRequest, **extra: Any) -> Config:
    if engine == "postgres":
        extra |= {"cold_url": request.getfixturevalue("pg_url"), "cold_schema": fresh_schema()}
    return Config(data_dir=tmp_path / "data", **extra)


def _meta(store: ColdStore | PostgresStore) -> str | None:
    with store.reading() as c:
        row = c.execute(store.dialect.sql("SELECT value FROM meta WHERE key = ?"), (TOKENIZER_KEY,)).fetchone()
    return None if row is None else str(row[0])


def _stored_and_fresh(mem: Memory, conv: str) -> tuple[list[int], list[int]]:
    """Each turn's stored count, and the count the memory's tokenizer gives its message."""
    stored = [r.tokens for r in mem.cold.turns(conv)]
    fresh = [message_tokens(mem.tokens, m.body) for m in mem.cold.history(conv)]
    return stored, fresh


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
@pytest.mark.parametrize("budget", [
    HOT_BUDGET_TOKENS,  # the same hot budget: before, the set was not even rebuilt
    HOT_BUDGET_TOKENS - 10,  # another: the set was rebuilt, from the old counts
], ids=["same-budget", "other-budget"])
def test_reopened_under_another_tokenizer(tmp_path: Path, engine: str, budget: int, embedder: FastEmbedder,
                                          request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture) -> None:
    first = _config(tmp_path, engine, request, tokenizer="o200k_base", hot_budget_tokens=HOT_BUDGET_TOKENS)
    with full_memory(first, embedder) as mem:
        for i in range(TURNS):
            mem.append("c1", _say(i))
        mem.context("c1", "hi", CONTEXT_BUDGET_TOKENS)  # an epoch state in Redis, of o200k counts
        stored, fresh = _stored_and_fresh(mem, "c1")
        assert stored == fresh
    again = first.model_copy(update={"tokenizer": "cl100k_base", "hot_budget_tokens": budget})
    with caplog.at_level(logging.INFO, logger="tiermem.recount"), full_memory(again, embedder) as mem:
        assert mem.tokenizer_recount is not None
        assert (mem.tokenizer_recount.old, mem.tokenizer_recount.new) == ("o200k_base", "cl100k_base")
        assert mem.tokenizer_recount.turns == TURNS
        lines = [r.getMessage() for r in caplog.records if r.name == "tiermem.recount"]
        assert len(lines) == 1 and f"recounted the tokens of {TURNS} turn(s)" in lines[0]
        hot = mem.hot
        assert hot is not None
        # dropped on open: the epoch state (and the set) counted with o200k_base
        assert not hot.client.exists(hot.tier.tag("c1") + ":epoch")
        stored, fresh = _stored_and_fresh(mem, "c1")
        assert stored == fresh  # every turn counted as cl100k_base counts it
        assert stored[0] > 1.5 * message_tokens(O200K, _say(0))  # and that is another count
        assert _meta(mem.cold) == "cl100k_base"  # type: ignore[arg-type]
        ctx = mem.context("c1", "hi", CONTEXT_BUDGET_TOKENS)
        assert messages_tokens(CL100K, ctx.messages) <= CONTEXT_BUDGET_TOKENS
        hs = hot.tier.read("c1")
        assert hs is not None and hs.budget == budget
        bodies = {m.position: m.body for m in mem.cold.history("c1")}
        real = sum(message_tokens(CL100K, bodies[t.position]) for t in hs.turns)
        assert hs.total_tokens == real  # the set's count is the members' real one
        assert real <= budget


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
@pytest.mark.parametrize(("recorded", "recounted"), [
    ("o200k_base", False),  # the tokenizer it records: nothing recounted
    (UNRECORDED, False),  # a store made before the record (m028): taken as counted by this one
    (None, False),  # no row at all (deleted by hand): as unrecorded
    ("cl100k_base", True),  # another: every turn recounted
])
def test_open_records_or_recounts(tmp_path: Path, engine: str, recorded: str | None, recounted: bool,
                                  request: pytest.FixtureRequest) -> None:
    def open_store() -> ColdStore | PostgresStore:
        if engine == "sqlite":
            return ColdStore(tmp_path / "tiermem.db", tokens=O200K)
        return PostgresStore(url, tokens=O200K, schema=schema)

    url = request.getfixturevalue("pg_url") if engine == "postgres" else ""
    schema = fresh_schema()
    store = open_store()
    try:
        assert store.tokenizer_recount is None and _meta(store) == "o200k_base"  # a new store records its own
        store.append_many("c", [Message(role="user", content=f"{i} {TEXT}") for i in range(5)])
        with store.transaction() as c:  # as the store would be after another tokenizer counted it
            c.execute(store.dialect.sql("UPDATE turns SET tokens = tokens + 7"))
            c.execute(store.dialect.sql("DELETE FROM meta WHERE key = ?"), (TOKENIZER_KEY,))
            if recorded is not None:
                c.execute(store.dialect.sql("INSERT INTO meta(key, value) VALUES (?, ?)"), (TOKENIZER_KEY, recorded))
        planted = [r.tokens for r in store.turns("c")]
    finally:
        store.close()
    store = open_store()
    try:
        assert _meta(store) == "o200k_base"
        assert (store.tokenizer_recount is not None) == recounted
        fresh = [message_tokens(O200K, m.body) for m in store.history("c")]
        assert [r.tokens for r in store.turns("c")] == (fresh if recounted else planted)
    finally:
        store.close()


def test_a_read_only_database_opens_with_its_counts(pg_url: str, caplog: pytest.LogCaptureFixture) -> None:
    # a standby (every session read-only) opened under another tokenizer: it opens for
    # reads, says why its counts stay, and nothing is written
    schema = fresh_schema()
    store = PostgresStore(pg_url, tokens=O200K, schema=schema)
    try:
        store.append_many("c", [Message(role="user", content=f"{i} {TEXT}") for i in range(3)])
        counts = [r.tokens for r in store.turns("c")]
    finally:
        store.close()
    standby = with_options(pg_url, "-c default_transaction_read_only=on")
    with caplog.at_level(logging.WARNING, logger="tiermem.recount"):
        store = PostgresStore(standby, tokens=CL100K, schema=schema)
    try:
        assert store.tokenizer_recount is None
        assert [r.tokens for r in store.turns("c")] == counts
        assert _meta(store) == "o200k_base"
        assert any("read-only" in r.getMessage() and "cl100k_base" in r.getMessage() for r in caplog.records)
    finally:
        store.close()

"""A conversation erased while its warm refresh works through a backlog of several chunks
(an LLM call each) stops the refresh at the next chunk: the lease's renewal
(`ColdLog.renew_view`) finds the conversation gone, in its own transaction, writes no
lease row, and the refresh raises ConversationNotFound (as `put_summary`'s refusal does,
and `Memory.consolidate(conv)` documents). Before, each remaining chunk renewed the lease
(a `view_claims` row of the erased conversation: released by the refresh's `finally`, left
by a process killed meanwhile) and went to the summarizer: a paid request while the
conversation's rows were still readable (SQLite deletes one larger than an erasure batch
in batches after detaching it), for a summary `put_summary` then refused.

Real stores (a SQLite file; PostgreSQL), the real local endpoint holding the first
chunk's request while the erasure runs."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from llm_endpoint import HOLD_S, FirstHeld, LLMEndpoint, serving
from pg_server import fresh_schema

from tiermem import Config, Memory
from tiermem.consolidation.summarize import SourceTurn, Summarizer
from tiermem.tiers.cold import CONVERSATION_TABLES, ERASE_BATCH_MESSAGES
from tiermem.tiers.embed import Embedder
from tiermem.tiers.errors import ConversationNotFound
from tiermem.tiers.warm import Sentence

CONV = "erased-mid-backlog"
TURNS = 12
CHUNK_TOKENS = 20  # a turn or two per chunk (17 tokens a turn): a backlog of several chunks
LONG_TURNS = 450  # more than an erasure batch (SQLite detaches it), more than one chunk
assert LONG_TURNS > 2 * ERASE_BATCH_MESSAGES
LONG_CHUNK_TOKENS = 3000  # about 175 turns a chunk: three chunks
TIMEOUT_S = 20.0  # the summarizer's; longer than the erasure takes


class Observed:
    """The Memory's own summarizer (the LLM's), called as it is; records the
    conversation's rows in the store at each call after the first (a renewed lease
    shows there)."""

    def __init__(self, inner: Summarizer, mem: Memory, key: str) -> None:
        self.inner, self.mem, self.key = inner, mem, key
        self.name = inner.name
        self.call_bound_s = getattr(inner, "call_bound_s", 0.0)
        self.calls = 0
        self.later: list[dict[str, int]] = []

    def summarize(self, turns: Sequence[SourceTurn], *, target_tokens: int) -> list[Sentence]:
        self.calls += 1
        if self.calls > 1:
            self.later.append(rows_of(self.mem, self.key))
        return self.inner.summarize(turns, target_tokens=target_tokens)


@pytest.fixture
def held() -> FirstHeld:
    return FirstHeld("We booked the hotel in Lisbon for three nights. [#0]")


@pytest.fixture
def endpoint(held: FirstHeld) -> Iterator[LLMEndpoint]:
    yield from serving(held)


def config(tmp_path: Path, endpoint: LLMEndpoint, **extra: object) -> Config:
    return Config(data_dir=tmp_path / "data", summarizer="llm", llm_base_url=endpoint.url, llm_model="m",
                  llm_api_key_env="", llm_timeout_s=TIMEOUT_S, **extra)  # type: ignore[arg-type]


@pytest.fixture(params=["sqlite", "postgres"])
def memory(request: pytest.FixtureRequest, tmp_path: Path, embedder: Embedder,
           endpoint: LLMEndpoint) -> Iterator[Memory]:
    extra: dict[str, object] = {}
    if request.param == "postgres":
        extra = {"cold_url": request.getfixturevalue("pg_url"), "cold_schema": fresh_schema()}
    with Memory(config(tmp_path, endpoint, **extra), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        yield mem


def rows_of(mem: Memory, key: str) -> dict[str, int]:
    """The conversation's rows left in each of its tables (view_claims among them)."""
    mark = "%s" if mem.config.cold_url else "?"
    out = {}
    for table in CONVERSATION_TABLES:
        rows = mem.cold._read(f"SELECT COUNT(*) FROM {table} WHERE conversation_id = {mark}",  # type: ignore[attr-defined]
                              (key,))
        out[table] = int(rows[0][0])
    return {t: n for t, n in out.items() if n}


def fill(mem: Memory, turns: int) -> str:
    mem.append_many(CONV, [{"role": "user" if i % 2 == 0 else "assistant",
                            "content": f"Line {i}: we booked the hotel in Lisbon for three nights."}
                           for i in range(turns)])
    return mem._key(CONV, None)[2]


def refreshing(mem: Memory, raised: list[Exception]) -> threading.Thread:
    """`Memory.consolidate(CONV)` in a thread, what it raises kept in `raised`."""
    def consolidate() -> None:
        try:
            mem.consolidate(CONV)
        except Exception as exc:
            raised.append(exc)

    thread = threading.Thread(target=consolidate)
    thread.start()
    return thread


def test_a_backlog_erased_after_its_first_chunk_goes_no_further(
        memory: Memory, held: FirstHeld, endpoint: LLMEndpoint) -> None:
    mem = memory
    key = fill(mem, TURNS)
    mem.views.chunk_tokens = CHUNK_TOKENS
    observed = Observed(mem.views.summarizer, mem, key)
    mem.views.summarizer = observed
    raised: list[Exception] = []
    refresh = refreshing(mem, raised)
    try:
        assert held.asked.wait(TIMEOUT_S)  # the rolling view's first chunk is in flight
        mem.delete_conversation(CONV)
    finally:
        held.gate.set()
        refresh.join(HOLD_S)
    assert not refresh.is_alive()
    # one call; before, one per remaining chunk, each under a lease row of the erased
    # conversation (its rows were gone: no request, but the row)
    assert (observed.calls, observed.later, len(endpoint.requests)) == (1, [], 1)
    assert [type(e) for e in raised] == [ConversationNotFound]
    assert rows_of(mem, key) == {}
    assert mem.stats()["warm"]["refresh_failures"] == 0  # an erasure is no failure of the refresh


def test_a_detached_conversations_remaining_chunks_are_not_paid_for(
        tmp_path: Path, embedder: Embedder, held: FirstHeld, endpoint: LLMEndpoint) -> None:
    with Memory(config(tmp_path, endpoint), embedder=embedder, hot=False, background_indexing=False) as mem:
        key = fill(mem, LONG_TURNS)
        mem.views.chunk_tokens = LONG_CHUNK_TOKENS

        def step(name: str) -> None:
            # detached, its rows still there: the refresh goes on while the batches wait
            if name == "erase:detached":
                held.gate.set()
                refresh.join(HOLD_S)

        raised: list[Exception] = []
        refresh = refreshing(mem, raised)
        try:
            assert held.asked.wait(TIMEOUT_S)  # the rolling view's first chunk is in flight
            mem.cold._fault = step  # type: ignore[attr-defined]
            mem.delete_conversation(CONV)
            mem.cold._fault = None  # type: ignore[attr-defined]
        finally:
            held.gate.set()
            refresh.join(HOLD_S)
        assert not refresh.is_alive()
        # before: the second chunk's request went out, quoting the erased turns
        assert (len(endpoint.requests), held.again.is_set()) == (1, False)
        assert [type(e) for e in raised] == [ConversationNotFound]
        assert rows_of(mem, key) == {}

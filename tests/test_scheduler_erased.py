"""A scheduled refresh whose conversation is erased while it runs (an LLM summarizer can
wait minutes) ends there: the scheduler logs one debug line (the key and kind, no
traceback, none of the conversation's text), counts no error, and goes on with the next
view. The refresh raises ConversationNotFound (at the write: `put_summary` refuses; or at
the next chunk of a backlog: the lease's renewal), as `Memory.consolidate(conv)` called by
hand on an erased conversation still does. Before, the scheduler logged it with
`log.exception`: an ERROR with a full traceback for a normal end.

A real SQLite store, the real local endpoint holding the first request while the erasure
runs."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from llm_endpoint import HOLD_S, FirstHeld, LLMEndpoint, serving

from tiermem import Config, Memory
from tiermem.consolidation.scheduler import ConsolidationScheduler
from tiermem.consolidation.views import DEFAULT_CHUNK_TOKENS
from tiermem.tiers.embed import Embedder

ERASED_TURNS = 8  # more than the kept one: the most behind, refreshed first
KEPT_TURNS = 4
MAX_TURNS_BEHIND = 1  # every view of both conversations is over budget
MAX_VIEWS_PER_RUN = 10  # all of them in one run
INTERVAL_S = 3600.0  # never fires: the test runs the one run itself
TIMEOUT_S = 20.0  # the summarizer's; longer than the erasure takes


@pytest.fixture
def canary() -> str:
    return f"zq7canary{uuid.uuid4().hex}medlar"


@pytest.fixture
def held() -> FirstHeld:
    return FirstHeld("The user gave some details. [#0]")


@pytest.fixture
def endpoint(held: FirstHeld) -> Iterator[LLMEndpoint]:
    yield from serving(held)


@pytest.fixture
def memory(tmp_path: Path, embedder: Embedder, endpoint: LLMEndpoint) -> Iterator[Memory]:
    cfg = Config(data_dir=tmp_path / "data", summarizer="llm", llm_base_url=endpoint.url, llm_model="m",
                 llm_api_key_env="", llm_timeout_s=TIMEOUT_S, warm_max_turns_behind=MAX_TURNS_BEHIND)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        yield mem


def turns(n: int, text: str) -> list[dict[str, str]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"Line {i}: {text}"} for i in range(n)]


@pytest.mark.parametrize("chunk_tokens", [
    DEFAULT_CHUNK_TOKENS,  # one chunk: the write finds the conversation gone
    20,  # a chunk a turn or so: the renewal before the second chunk does
])
def test_an_erased_conversation_ends_its_scheduled_refresh_quietly(
        memory: Memory, held: FirstHeld, endpoint: LLMEndpoint, canary: str,
        caplog: pytest.LogCaptureFixture, chunk_tokens: int) -> None:
    mem = memory
    mem.views.chunk_tokens = chunk_tokens
    mem.append_many("gone", turns(ERASED_TURNS, f"my passport number is {canary}."))
    mem.append_many("kept", turns(KEPT_TURNS, "we booked the hotel in Lisbon for three nights."))
    kept = mem._key("kept", None)[2]
    sched = ConsolidationScheduler(mem.views, interval_s=INTERVAL_S, max_views_per_run=MAX_VIEWS_PER_RUN)
    refreshed: list[int] = []
    run = threading.Thread(target=lambda: refreshed.append(sched.run_once()))
    with caplog.at_level(logging.DEBUG, logger="tiermem"):
        run.start()
        try:
            assert held.asked.wait(TIMEOUT_S)  # the erased conversation's rolling view is in flight
            assert canary in endpoint.requests[0].prompt  # the premise: the erased one's request
            mem.delete_conversation("gone")
        finally:
            held.gate.set()
            run.join(HOLD_S)
    assert not run.is_alive()
    # the run went on: the kept conversation's views were refreshed, no error counted
    assert mem.warm.latest(kept, "rolling") is not None and refreshed and refreshed[0] >= 1
    assert sched.stats.errors == 0
    # the debug line is the shared sweep's (ViewMaintainer.sweep_refresh), under tiermem.views
    ours = [r for r in caplog.records if r.name in ("tiermem.scheduler", "tiermem.views")]
    assert [(r.levelno, r.exc_info) for r in ours] == [(logging.DEBUG, None)]
    assert "erased" in ours[0].getMessage()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert canary not in caplog.text

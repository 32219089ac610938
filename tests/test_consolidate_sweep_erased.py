"""`Memory.consolidate()` without a conversation sweeps the views over budget as a
scheduler run does: a view whose conversation is erased while the sweep refreshes it (an
LLM summarizer can wait minutes) ends there, quietly and not counted, and the sweep goes
on with the next view (`ViewMaintainer.sweep_refresh`, shared with the scheduler). Before,
the sweep raised ConversationNotFound for a conversation its caller never named and left
the remaining views unrefreshed. `Memory.consolidate(conv)` asked by name still raises it.

A real SQLite store, the real local endpoint holding the first request while the erasure
runs (as tests/test_scheduler_erased.py)."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from llm_endpoint import HOLD_S, FirstHeld, LLMEndpoint, serving

from tiermem import Config, Memory
from tiermem.consolidation.views import DEFAULT_CHUNK_TOKENS
from tiermem.tiers.embed import Embedder
from tiermem.tiers.errors import ConversationNotFound

ERASED_TURNS = 8  # more than the kept one: the most behind, swept first
KEPT_TURNS = 4
MAX_TURNS_BEHIND = 1  # every view of both conversations is over budget
MAX_VIEWS_PER_RUN = 10  # all of them in one sweep
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
                 llm_api_key_env="", llm_timeout_s=TIMEOUT_S, warm_max_turns_behind=MAX_TURNS_BEHIND,
                 scheduler_max_views_per_run=MAX_VIEWS_PER_RUN)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        yield mem


def turns(n: int, text: str) -> list[dict[str, str]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"Line {i}: {text}"} for i in range(n)]


@pytest.mark.parametrize("chunk_tokens", [
    DEFAULT_CHUNK_TOKENS,  # one chunk: the write finds the conversation gone
    20,  # a chunk a turn or so: the renewal before the second chunk does
])
def test_an_erased_conversation_ends_its_view_and_the_sweep_goes_on(
        memory: Memory, held: FirstHeld, endpoint: LLMEndpoint, canary: str,
        caplog: pytest.LogCaptureFixture, chunk_tokens: int) -> None:
    mem = memory
    mem.views.chunk_tokens = chunk_tokens
    mem.append_many("gone", turns(ERASED_TURNS, f"my passport number is {canary}."))
    mem.append_many("kept", turns(KEPT_TURNS, "we booked the hotel in Lisbon for three nights."))
    gone, kept = mem._key("gone", None)[2], mem._key("kept", None)[2]
    swept = mem.views.stale_views(MAX_VIEWS_PER_RUN)
    # the premise: the erased one's views first, then the kept one's
    assert swept[0][0] == gone and (gone, "rolling", "") in swept and any(v[0] == kept for v in swept)
    done: list[int] = []
    raised: list[BaseException] = []

    def sweep() -> None:
        try:
            done.append(mem.consolidate())
        except BaseException as exc:  # what the sweep raised is the finding
            raised.append(exc)

    run = threading.Thread(target=sweep)
    with caplog.at_level(logging.DEBUG, logger="tiermem"):
        run.start()
        try:
            assert held.asked.wait(TIMEOUT_S)  # the erased conversation's rolling view is in flight
            assert canary in endpoint.requests[0].prompt
            mem.delete_conversation("gone")
        finally:
            held.gate.set()
            run.join(HOLD_S)
    assert not run.is_alive()
    assert raised == []
    # the sweep went on: every other view was refreshed and counted, the erased
    # conversation's rolling view (held while the erasure ran) was not
    assert mem.warm.latest(kept, "rolling") is not None
    assert done == [len(swept) - 1]
    assert mem.views.stale_views(MAX_VIEWS_PER_RUN) == []
    erased = [r for r in caplog.records if "erased" in r.getMessage()]
    assert [(r.levelno, r.exc_info) for r in erased] == [(logging.DEBUG, None)]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert canary not in caplog.text


def test_a_conversation_asked_for_by_name_still_raises_when_erased(memory: Memory) -> None:
    memory.append_many("c", turns(KEPT_TURNS, "we booked the hotel."))
    memory.delete_conversation("c")
    with pytest.raises(ConversationNotFound):
        memory.consolidate("c")

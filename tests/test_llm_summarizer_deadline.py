"""The LLM summarizer's `timeout_s` bounds a whole request, not each read: an endpoint
that keeps the connection alive by sending its answer a few bytes at a time (a stuck
proxy, a model streaming despite being asked not to) once held a refresh, its view's
lease and the scheduler's one worker for as long as it kept sending."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest
from llm_endpoint import LLMEndpoint, Reply, completion, serving

from tiermem.consolidation.summarize import LLMSummarizer, SourceTurn
from tiermem.tiers.errors import SummarizerError
from tiermem.tiers.tokens import BpeTokenCounter

TIMEOUT_S = 0.5
SLACK_S = 0.5  # thread start, connect, the error's bookkeeping
TURNS = [SourceTurn(0, "user", "Book the hotel in Lisbon for three nights.")]


@pytest.fixture
def endpoint() -> Iterator[LLMEndpoint]:
    yield from serving()


@pytest.mark.parametrize("retries", [
    0,  # one attempt: over after timeout_s
    1,  # each attempt is bounded, so the whole call is (retries + 1) * timeout_s
])
def test_a_trickled_answer_times_out_after_timeout_s(endpoint: LLMEndpoint, counter: BpeTokenCounter,
                                                     retries: int) -> None:
    # the whole answer would take about 10 s: one byte every 0.1 s
    endpoint.reply = lambda _r: Reply(body=completion("Lisbon, three nights [#0]").body, trickle_bytes=1,
                                      trickle_s=0.1)
    s = LLMSummarizer(endpoint.url, "m", timeout_s=TIMEOUT_S, retries=retries, tokens=counter,
                      sleep=lambda _s: None)
    t0 = time.perf_counter()
    with pytest.raises(SummarizerError, match=re.escape(f"timeout after {TIMEOUT_S} s")):
        s.summarize(TURNS, target_tokens=50)
    assert time.perf_counter() - t0 < (retries + 1) * TIMEOUT_S + SLACK_S
    assert len(endpoint.requests) == retries + 1


def test_an_answer_in_pieces_within_the_timeout_is_read_whole(endpoint: LLMEndpoint,
                                                              counter: BpeTokenCounter) -> None:
    endpoint.reply = lambda _r: Reply(body=completion("Lisbon, three nights [#0]").body, trickle_bytes=16,
                                      trickle_s=0.01)
    s = LLMSummarizer(endpoint.url, "m", timeout_s=5.0, retries=0, tokens=counter)
    assert [x.text for x in s.summarize(TURNS, target_tokens=50)] == ["Lisbon, three nights"]

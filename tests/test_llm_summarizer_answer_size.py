"""An answer far larger than the summary asked for (an endpoint that ignores
`max_tokens`, a proxy that returns a whole log) is refused once it passes the bytes the
requested tokens can take, before it is all held in memory: it was read, decoded and
parsed whole, whatever its size, in the process that serves appends and contexts."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from llm_endpoint import LLMEndpoint, Reply, completion, serving

from tiermem.consolidation import summarize
from tiermem.consolidation.summarize import LLMSummarizer, SourceTurn
from tiermem.tiers.errors import SummarizerError
from tiermem.tiers.tokens import BpeTokenCounter
from tiermem.tiers.warm import render

TARGET_TOKENS = 50
HUGE_BYTES = 8 * 1024 * 1024  # past the limit of any target a test asks for
TURNS = [SourceTurn(0, "user", "Book the hotel in Lisbon for three nights.")]
LINE = "Lisbon hotel for three nights [#0]\n"


@pytest.fixture
def endpoint() -> Iterator[LLMEndpoint]:
    yield from serving()


# an error body as large is read up to its own cap and is its status
# (tests/test_llm_summarizer_error_body.py)
def test_an_answer_past_the_limit_is_refused(endpoint: LLMEndpoint, counter: BpeTokenCounter) -> None:
    s = LLMSummarizer(endpoint.url, "m", timeout_s=10.0, retries=0, tokens=counter)
    huge = completion(LINE * (HUGE_BYTES // len(LINE))).body
    endpoint.reply = lambda _r: Reply(200, huge)
    with pytest.raises(SummarizerError, match=r"answer over [0-9]+ bytes"):
        s.summarize(TURNS, target_tokens=TARGET_TOKENS)
    assert len(endpoint.requests) == 1  # not retried: the endpoint would answer the same


def test_an_answer_of_the_requested_size_is_read(endpoint: LLMEndpoint, counter: BpeTokenCounter) -> None:
    s = LLMSummarizer(endpoint.url, "m", timeout_s=10.0, retries=0, tokens=counter)
    max_tokens = s.max_tokens(TARGET_TOKENS)
    limit = summarize.answer_bytes_limit(max_tokens)
    # as many characters as the request allows tokens, each escaped non-ASCII (6 bytes of JSON)
    content = "\n".join(["\u00e9" * max_tokens + " [#0]"])
    body = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}],
                       "usage": {"prompt_tokens": 20, "completion_tokens": max_tokens}}).encode()
    assert len(body) <= limit < HUGE_BYTES
    endpoint.reply = lambda _r: Reply(body=body)
    with pytest.raises(SummarizerError, match="no line fits the token target"):
        s.summarize(TURNS, target_tokens=TARGET_TOKENS)  # read and parsed; the one line is too long
    endpoint.reply = lambda _r: completion(LINE * 3)
    out = s.summarize(TURNS, target_tokens=TARGET_TOKENS)
    assert out and counter.count(render(out)) <= TARGET_TOKENS

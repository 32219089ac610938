"""An error answer's body is read up to ERROR_BODY_READ_BYTES, whatever its size: its
status, not its size, decides what follows. Before, it counted against the answer's
cap, so a proxy's 5xx page larger than an answer may be (a 'bad gateway' page with a
stack trace) was "answer over N bytes: the endpoint ignored max_tokens", not retried,
and a 400 lost its excerpt. An API key that the cut goes through leaves no head of
itself in the excerpt."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from llm_endpoint import LLMEndpoint, Reply, completion, serving

from tiermem.consolidation.summarize import ERROR_BODY_CHARS, ERROR_BODY_READ_BYTES, LLMSummarizer, SourceTurn
from tiermem.tiers.errors import SummarizerError
from tiermem.tiers.redis_url import REDACTED
from tiermem.tiers.tokens import BpeTokenCounter

TARGET_TOKENS = 50
PAGE_BYTES = 8 * 1024 * 1024  # past the answer's limit for any target a test asks for
PAGE = (b"<html>Bad gateway: upstream said " + b"x" * PAGE_BYTES + b"</html>")
TURNS = [SourceTurn(0, "user", "Book the hotel in Lisbon for three nights.")]
KEY_ENV = "TM_TEST_LLM_KEY"
# a long key, so that the keys before the cut, each replaced, leave its cut head within
# the excerpt's ERROR_BODY_CHARS
KEY = "sk-" + "k" * 500


@pytest.fixture
def endpoint() -> Iterator[LLMEndpoint]:
    yield from serving()


@pytest.mark.parametrize(("status", "attempts", "message"), [
    (502, 2, r"HTTP 502 \(2 attempts\)"),  # a proxy's page: retried as any 5xx (was 'answer over')
    (503, 2, r"HTTP 503 \(2 attempts\)"),  # likewise
    (400, 1, r"failed: HTTP 400$"),  # refused: not retried, its head kept as the excerpt
])
def test_a_large_error_page_is_its_status(
        endpoint: LLMEndpoint, counter: BpeTokenCounter, status: int, attempts: int, message: str) -> None:
    s = LLMSummarizer(endpoint.url, "m", api_key_env="", timeout_s=10.0, retries=1, backoff_s=0.0, tokens=counter)
    endpoint.reply = lambda _r: Reply(status, PAGE)
    with pytest.raises(SummarizerError, match=message) as raised:
        s.summarize(TURNS, target_tokens=TARGET_TOKENS)
    assert len(endpoint.requests) == attempts
    if status < 500:
        assert raised.value.excerpt == PAGE[:ERROR_BODY_CHARS].decode()


def test_a_retried_5xx_page_then_an_answer(endpoint: LLMEndpoint, counter: BpeTokenCounter) -> None:
    s = LLMSummarizer(endpoint.url, "m", api_key_env="", timeout_s=10.0, retries=1, backoff_s=0.0, tokens=counter)
    replies = iter([Reply(502, PAGE), completion("Lisbon hotel for three nights [#0]")])
    endpoint.reply = lambda _r: next(replies)
    assert [x.text for x in s.summarize(TURNS, target_tokens=TARGET_TOKENS)] == ["Lisbon hotel for three nights"]


def test_a_key_the_cut_goes_through_leaves_no_head(
        endpoint: LLMEndpoint, counter: BpeTokenCounter, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    s = LLMSummarizer(endpoint.url, "m", api_key_env=KEY_ENV, timeout_s=10.0, retries=0, tokens=counter)
    echoed = (KEY + " ").encode() * (2 * ERROR_BODY_READ_BYTES // len(KEY))  # the key, echoed over and over
    assert ERROR_BODY_READ_BYTES % (len(KEY) + 1) > len("sk-")  # the cut is inside a key, past its prefix
    endpoint.reply = lambda _r: Reply(401, echoed)
    with pytest.raises(SummarizerError, match="HTTP 401") as raised:
        s.summarize(TURNS, target_tokens=TARGET_TOKENS)
    excerpt = raised.value.excerpt
    assert REDACTED in excerpt and "sk-kk" not in excerpt and len(excerpt) < ERROR_BODY_CHARS

"""Invariant 5 rests on this: token counts are exact (the real BPE, offline), with the
chat-format overhead documented in tiers/tokens.py, and chunking long text never
changes a count."""

from __future__ import annotations

import random
import string

import pytest

from tiermem.tiers import tokens
from tiermem.tiers.tokens import (
    CHUNK_CHARS,
    MESSAGE_OVERHEAD_TOKENS,
    NAME_OVERHEAD_TOKENS,
    REPLY_PRIMING_TOKENS,
    BpeTokenCounter,
    message_tokens,
    messages_tokens,
)


@pytest.fixture(scope="module")
def cl100k() -> BpeTokenCounter:
    return BpeTokenCounter("cl100k_base")


@pytest.mark.parametrize(
    ("encoding", "text", "ids"),
    [
        # o200k_base, the default (GPT-4o family)
        ("o200k_base", "hello world", [24912, 2375]),
        # cl100k_base, tiktoken's README example
        ("cl100k_base", "tiktoken is great!", [83, 1609, 5963, 374, 2294, 0]),
        # nothing is nothing
        ("o200k_base", "", []),
    ],
)
def test_known_encodings(encoding: str, text: str, ids: list[int]) -> None:
    tok = BpeTokenCounter(encoding)
    assert tok.name == encoding
    assert tok.encode(text) == ids
    assert tok.count(text) == len(ids)
    assert tok.decode(ids) == text


def test_default_is_o200k(counter: BpeTokenCounter) -> None:
    assert counter.name == "o200k_base"
    assert counter.count("hello world") == 2


def test_unknown_encoding_is_refused() -> None:
    with pytest.raises(ValueError, match="p50k_base"):
        BpeTokenCounter("p50k_base")


def test_documented_overhead_values() -> None:
    # the numbers the module docstring states (OpenAI's accounting for chat models)
    assert (MESSAGE_OVERHEAD_TOKENS, NAME_OVERHEAD_TOKENS, REPLY_PRIMING_TOKENS) == (3, 1, 3)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        # 3 per message + "hello world" (2)
        ({"role": "user", "content": "hello world"}, 3 + 2),
        # an empty message still costs its framing
        ({"role": "user", "content": ""}, 3),
        # +1 for the name field, plus the name's own tokens ("alice" is one token)
        ({"role": "user", "content": "hello world", "name": "alice"}, 3 + 2 + 1 + 1),
        # list content counts its text parts, joined by a newline: "hello", "\n", "world"
        ({"role": "user", "content": [{"type": "text", "text": "hello"}, {"type": "text", "text": "world"}]},
         3 + 3),
    ],
    ids=["plain", "empty", "named", "parts"],
)
def test_message_overhead(counter: BpeTokenCounter, body: dict[str, object], expected: int) -> None:
    assert message_tokens(counter, body) == expected


def test_tool_calls_count_their_name_and_arguments(counter: BpeTokenCounter) -> None:
    body = {"role": "assistant", "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "search", "arguments": '{"q":"x"}'}}]}
    assert message_tokens(counter, body) == 3 + counter.count('search({"q":"x"})')


def test_reply_priming_once_per_context(counter: BpeTokenCounter) -> None:
    bodies = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello world"}]
    assert messages_tokens(counter, bodies) == 3 + sum(message_tokens(counter, b) for b in bodies)
    assert messages_tokens(counter, []) == 0  # no messages, no reply to prime


def _prose(n: int) -> str:
    rng = random.Random(3)
    words = ["the", "flight", "Lisbon", "naïve", "日本語", "42", "—", "can't", "\n", "  ", "\t", "émigré", "🙂"]
    return " ".join(rng.choice(words) for _ in range(n))


def _blob(n: int, seed: int) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(string.ascii_letters + string.digits + "+/=._-") for _ in range(n))


LONG_TEXTS = [
    # prose with mixed scripts and whitespace runs: cut before a space
    pytest.param(_prose(40_000), id="prose"),
    # a repeated word with no space at all: any cut would split a pretoken
    pytest.param("Hello" * 20_000, id="no-space-repeat"),
    # a long base64-like blob (tool output, a data URL) with no space
    pytest.param(_blob(3 * CHUNK_CHARS, 2), id="no-space-blob"),
    # a spaceless run, then prose: the chunk must run on to the first space
    pytest.param(_blob(CHUNK_CHARS + 1000, 5) + " " + _prose(5000), id="blob-then-prose"),
    # spaces only in the first half of every window
    pytest.param(("word " * 100 + "x" * 40_000) * 4, id="late-spaces"),
    # every space sits in a run of two: a cut inside a run would split its pretoken
    pytest.param("ab  " * 30_000, id="double-spaces"),
    # one whitespace run longer than a chunk
    pytest.param("x" + " " * (CHUNK_CHARS + 10) + "y z", id="long-space-run"),
]


@pytest.mark.parametrize("text", LONG_TEXTS)
def test_chunking_long_text_keeps_the_exact_count(counter: BpeTokenCounter, text: str) -> None:
    assert len(text) > CHUNK_CHARS
    whole = counter._tok.encode(text)  # the BPE on the text in one piece
    assert counter.count(text) == len(whole)
    assert counter.encode(text) == list(whole)
    assert len(counter.encode(text)) == counter.count(text)


@pytest.mark.parametrize("seed", range(8))
def test_chunking_blobs_keeps_the_exact_count(counter: BpeTokenCounter, seed: int) -> None:
    # random spaceless text, where a split in the middle of a pretoken shows
    text = _blob(CHUNK_CHARS + 5000, seed)
    assert counter.count(text) == len(counter._tok.encode(text))


def test_every_cut_is_safe_on_adversarial_text(counter: BpeTokenCounter, monkeypatch: pytest.MonkeyPatch) -> None:
    # tiny chunks cut everywhere they can: whitespace runs, newlines, NBSP, contractions
    monkeypatch.setattr(tokens, "CHUNK_CHARS", 24)
    alphabet = ["a", "Z", "1", " ", "  ", "\n", "\r", "\t", "\u00a0", "\u3000", "'s", "!", ".", "é", "日", "🙂"]
    for cl in (counter, BpeTokenCounter("cl100k_base")):
        for seed in range(150):
            rng = random.Random(seed)
            text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(30, 200)))
            assert cl.encode(text) == list(cl._tok.encode(text)), (cl.name, text)
            assert cl.count(text) == len(cl._tok.encode(text)), (cl.name, text)

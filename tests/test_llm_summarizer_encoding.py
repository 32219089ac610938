"""The LLM summarizer asks for its answer uncompressed (`Accept-Encoding: identity`)
and refuses one that comes with any Content-Encoding, unread, so the answer's size cap
counts the bytes that came. Before, httpx decoded each network read whole before the
cap counted it: a 32 KB zstd answer holding 1 GiB of zeros took 2 GiB of memory in the
serving process before it was refused.

The answering side is the real local endpoint, sending the compressed bomb whatever the
request asked; the summarizer runs in a subprocess whose peak resident memory is read
(`resource.getrusage`) before and after the call."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import zlib
from collections.abc import Callable, Iterator

import pytest
from llm_endpoint import LLMEndpoint, Reply, completion, serving

from tiermem.consolidation.summarize import IDENTITY, LLMSummarizer, SourceTurn
from tiermem.tiers.errors import SummarizerError
from tiermem.tiers.tokens import BpeTokenCounter

MIB = 1024 * 1024
ZEROS_MIB = 256  # what a bomb holds: past any cap, and far past the bound below
PEAK_GROWTH_BOUND_MIB = 32  # the most a refused answer may add to the process's peak
TARGET_TOKENS = 50
TURNS = [SourceTurn(0, "user", "Book the hotel in Lisbon for three nights.")]
LINE = "Lisbon hotel for three nights [#0]"


def gzip_bomb() -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)  # the gzip container
    zeros = bytes(MIB)
    return b"".join([*(packer.compress(zeros) for _ in range(ZEROS_MIB)), packer.flush()])


def zstd_bomb() -> bytes:
    zstandard = pytest.importorskip("zstandard")  # httpx decodes zstd only where it is installed
    packer = zstandard.ZstdCompressor().compressobj()
    zeros = bytes(MIB)
    return b"".join([*(packer.compress(zeros) for _ in range(ZEROS_MIB)), packer.flush()])


# in a fresh interpreter: (peak resident growth over the call in KiB, the error's message)
MEASURE = """
import json, resource, sys
import httpx  # loaded before the baseline, as in a serving process
from tiermem.consolidation.summarize import LLMSummarizer, SourceTurn
from tiermem.tiers.errors import SummarizerError
from tiermem.tiers.tokens import BpeTokenCounter
s = LLMSummarizer(sys.argv[1], "m", api_key_env="", timeout_s=60.0, retries=0, tokens=BpeTokenCounter())
turns = [SourceTurn(0, "user", "Book the hotel in Lisbon for three nights.")]
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    s.summarize(turns, target_tokens=50)
    error = None
except SummarizerError as exc:
    error = str(exc)
grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
print(json.dumps([grew, error]))
"""


@pytest.fixture
def endpoint() -> Iterator[LLMEndpoint]:
    yield from serving()


@pytest.mark.parametrize(("encoding", "bomb"), [
    ("gzip", gzip_bomb),  # 256 MiB of zeros in ~256 KB
    ("zstd", zstd_bomb),  # the same in ~8 KB: httpx decoded it in one piece
])
def test_a_compressed_bomb_is_refused_unread(
        endpoint: LLMEndpoint, encoding: str, bomb: Callable[[], bytes]) -> None:
    body = bomb()
    endpoint.reply = lambda _r: Reply(200, body, headers=(("Content-Encoding", encoding),))
    run = subprocess.run([sys.executable, "-c", MEASURE, endpoint.url], capture_output=True, text=True,
                         timeout=120, check=True)
    grew_kib, error = json.loads(run.stdout)
    assert error is not None and f"Content-Encoding '{encoding}'" in error
    assert grew_kib < PEAK_GROWTH_BOUND_MIB * 1024, f"peak grew {grew_kib // 1024} MiB"
    assert [r.headers.get("Accept-Encoding") for r in endpoint.requests] == [IDENTITY]


@pytest.mark.parametrize(("encoding", "refused"), [
    ("gzip", True),  # even a small honest one: what is not identity is not decoded
    ("GZip ", True),  # spelled as it may be
    ("identity", False),  # named, but none: read
    ("", False),  # an empty header: none either
])
def test_an_answer_with_a_content_encoding_is_refused(
        endpoint: LLMEndpoint, counter: BpeTokenCounter, encoding: str, refused: bool) -> None:
    s = LLMSummarizer(endpoint.url, "m", api_key_env="", timeout_s=10.0, retries=1, backoff_s=0.0, tokens=counter)
    body = completion(LINE).body
    sent = gzip.compress(body) if encoding.strip().lower() == "gzip" else body
    endpoint.reply = lambda _r: Reply(200, sent, headers=(("Content-Encoding", encoding),))
    if refused:
        with pytest.raises(SummarizerError, match=r"Content-Encoding .* refused unread"):
            s.summarize(TURNS, target_tokens=TARGET_TOKENS)
        assert len(endpoint.requests) == 1  # not retried: it would come the same way
    else:
        assert [x.text for x in s.summarize(TURNS, target_tokens=TARGET_TOKENS)] == ["Lisbon hotel for three nights"]

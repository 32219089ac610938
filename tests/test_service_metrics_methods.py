"""The request-latency series are labelled with a method from a fixed set: any other
method a client invents is counted as "other".

HTTP/1.1 lets a method be any token, and the metrics middleware labelled every request
with it, before auth: an unauthenticated client that sent 2,000 made-up methods added
2,000 label sets (17 series each) to /metrics and to the process's memory. Invariant:
the number of label sets of `tiermem_http_request_duration_seconds` does not grow with
the methods clients send. Real uvicorn, raw sockets (httpx sends only real methods).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from edge_server import edge_server, raw_exchange

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder

TOKEN = "tok-acme-0123456789abcdef"
METRICS_TOKEN = "tok-metrics-0123456789abcdef"
INVENTED = 40  # made-up methods sent; each was a new label set before the fix


@pytest.fixture
def served(tmp_path: Path, embedder: FastEmbedder) -> Iterator[tuple[str, int]]:
    cfg = Config(data_dir=tmp_path / "data", auth_tokens={TOKEN: "acme"}, metrics_tokens=[METRICS_TOKEN])
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem, \
            edge_server(cfg, mem) as served:
        yield served


def _methods(url: str) -> set[str]:
    text = httpx.get(url + "/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}).text
    return set(re.findall(r'tiermem_http_request_duration_seconds_count\{method="([^"]*)"', text))


def test_invented_methods_do_not_add_label_sets(served: tuple[str, int]) -> None:
    url, port = served
    for i in range(INVENTED):
        answer = raw_exchange(port, f"M{i:06d} /v1/stats HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
                              .encode())
        assert answer.startswith(b"HTTP/1.1 4"), answer[:80]  # refused, no token
    httpx.get(url + "/v1/stats", headers={"Authorization": f"Bearer {TOKEN}"})
    methods = _methods(url)
    assert "GET" in methods and "other" in methods
    assert not any(m.startswith("M0") for m in methods), sorted(methods)[:5]
    assert len(methods) <= 3  # GET, other, and nothing per invented method

"""A client that hangs up before its body has arrived is not a server error in /metrics.

The metrics middleware starts from status 500 and the guard returns without answering
when the client disconnects mid-body, so each such request was recorded as status="500":
anyone could make the 5xx series (the one "never a 5xx" is checked by) climb. Invariant:
a request the client abandoned before any answer is recorded as status="499" (nginx's
"client closed request"), never 5xx, and is not an unhandled error. Real uvicorn, a raw
socket that promises 1,000 bytes and sends 5.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import httpx
from edge_server import edge_server, raw_exchange

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder

METRICS_TOKEN = "tok-metrics-0123456789abcdef"
ABANDONED = 5
SETTLE_S = 10.0  # how long the server may take to see the hang-ups


def _count(text: str, status: str) -> float:
    return sum(float(v) for v in re.findall(
        r'tiermem_http_request_duration_seconds_count\{method="POST",route="[^"]*",status="' + status + r'"\} (\S+)',
        text))


def test_a_body_cut_short_is_499_not_500(tmp_path: Path, embedder: FastEmbedder) -> None:
    cfg = Config(data_dir=tmp_path / "data", auth_tokens={"tok-acme-0123456789abcdef": "acme"},
                 metrics_tokens=[METRICS_TOKEN])
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem, \
            edge_server(cfg, mem) as (url, port):
        for _ in range(ABANDONED):  # /ui/login needs no token: anyone can do this
            raw_exchange(port, b"POST /ui/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                               b"HX-Request: true\r\nContent-Length: 1000\r\n\r\n{\"tok", read=False)
        deadline = time.monotonic() + SETTLE_S
        while True:
            text = httpx.get(url + "/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}).text
            if _count(text, "499") + _count(text, "500") >= ABANDONED or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert _count(text, "500") == 0, [line for line in text.splitlines() if 'status="5' in line]
        assert _count(text, "499") == ABANDONED
        assert "tiermem_http_unhandled_errors_total 0.0" in text

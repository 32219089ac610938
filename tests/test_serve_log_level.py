"""`tiermem serve --log-level` reaches tiermem's own messages, not only uvicorn's.

The service logs an erasure's bytes reclaimed for the operator (the HTTP answer leaves
them out: tests/test_erasure_answer_tenancy.py), at INFO on `tiermem.service`; the CLI
set tiermem's loggers to WARNING and `--log-level` reached uvicorn's only, so the line
was never written (a docs audit, 2026-12-05). A real `tiermem serve` subprocess, a real
erasure, its log read back.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import httpx
import pytest
from edge_server import edge_port
from service_helpers import serve_process

ERASURE_LINE = "bytes reclaimed"


@pytest.mark.parametrize(("args", "written"), [
    ([], True),  # the default level (info) shows what the service logs for the operator
    (["--log-level", "warning"], False),  # a quieter level leaves it out: the option is honoured
])
def test_the_erasure_figure_reaches_the_serve_log(tmp_path: Path, args: list[str], written: bool) -> None:
    port = edge_port()
    env = {**os.environ, "TIERMEM_REDIS_URL": "redis://127.0.0.1:1/0", "TIERMEM_SCHEDULER_ENABLED": "false"}
    log = tmp_path / "serve.log"
    with serve_process(tmp_path / "data", port, log, "--no-auth", *args, env=env) as url:
        r = httpx.post(url + "/v1/conversations/c1/messages", json={"role": "user", "content": "hello"}, timeout=60)
        assert r.status_code == 201, r.text
        r = httpx.delete(url + "/v1/conversations/c1", timeout=60)
        assert r.status_code == 200, r.text
        time.sleep(0.5)
    text = log.read_text()
    assert '"DELETE /v1/conversations/c1 HTTP/1.1" 200' in text or not written, text[-2000:]
    assert (ERASURE_LINE in text) == written, text[-2000:]

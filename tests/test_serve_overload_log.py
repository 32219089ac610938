"""The 503s of the connection bound are logged at most once per interval, with a count.

Every request refused over `http_max_connections` logged its own warning, so a flood of
refused requests (the very case the bound is for) filled the log. Now the first 503 of a
burst is logged at once, then one line per `overload_log_interval_s` says how many were
answered since (tiermem.service.server.OverloadLog).

Real uvicorn with the server's protocol (bound 1, a short interval) on loopback in this
process, a plain app behind it; one idle connection holds the bound, so each request on
a new connection is refused.
"""

from __future__ import annotations

import logging
import re
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from ports import free_port

from tiermem.service.server import GuardedH11Protocol

INTERVAL_S = 0.5  # the protocol's log interval here: short, so that the test waits little
REFUSED = 40  # requests answered 503, sent back to back (well within one interval)
START_TIMEOUT_S = 30.0
READ_TIMEOUT_S = 10.0
LIMIT_TEXT = "connection limit reached"


async def plain_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


@pytest.fixture
def port() -> Iterator[int]:
    protocol = type("BoundOne", (GuardedH11Protocol,), {
        "max_connections": 1, "overload_log_interval_s": INTERVAL_S, "header_timeout_s": 30.0})
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(plain_app, host="127.0.0.1", port=port, http=protocol, lifespan="off",
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT_S
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def _status(port: int) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=READ_TIMEOUT_S) as s:
        s.sendall(b"GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return int(data.split(b" ", 2)[1])


def _counted(records: list[logging.LogRecord]) -> int:
    """The 503s the lines account for: one each, or the count a line states."""
    total = 0
    for r in records:
        more = re.search(r"answered 503 to (\d+) more", r.getMessage())
        total += int(more.group(1)) if more else 1
    return total


def test_a_flood_of_503s_logs_a_line_per_interval_with_the_count(port: int, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="tiermem.service")
    assert _status(port) == 200  # within the bound: served
    with socket.create_connection(("127.0.0.1", port)):  # idle, no head yet: holds the bound
        time.sleep(0.2)  # accepted by the server
        t0 = time.monotonic()
        statuses = [_status(port) for _ in range(REFUSED)]
        sent_s = time.monotonic() - t0
        assert statuses == [503] * REFUSED, statuses
        time.sleep(2 * INTERVAL_S + 0.5)  # the interval's line, and one more interval with nothing to say
    lines = [r for r in caplog.records if LIMIT_TEXT in r.getMessage()]
    # one line at once and one per interval the flood lasted, then its count: before, 40
    assert len(lines) <= 2 + int(sent_s / INTERVAL_S), [r.getMessage() for r in lines]
    assert _counted(lines) == REFUSED, [r.getMessage() for r in lines]  # none left uncounted
    # a new burst after a quiet interval is logged at once
    caplog.clear()
    with socket.create_connection(("127.0.0.1", port)):
        time.sleep(0.2)
        assert _status(port) == 503
        time.sleep(0.1)
    assert [r.getMessage() for r in caplog.records if LIMIT_TEXT in r.getMessage()] == [
        "connection limit reached (http_max_connections = 1): answered 503"]

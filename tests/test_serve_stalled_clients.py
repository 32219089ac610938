"""`tiermem serve` against clients that stall: deadlines on a request's head and body, a
bound on connections (tiermem.service.server, guard.GuardMiddleware).

A review (2026-12-06) held 200 connections open against a real server: half sent part of
their headers and no more, half a valid token and 7 of 1,000 body bytes. uvicorn (h11) has
no deadline on a head and the guard waited for the rest of a body for ever, so they stayed
open until they left; with 160 descriptors allowed, accept failed (EMFILE) and /healthz
and /v1/stats went unanswered. Here a real `tiermem serve` child with short deadlines and
a lowered connection bound, spoken to on raw sockets.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from ports import free_port
from pydantic import ValidationError
from service_helpers import TOKEN_ACME, bearer, serve_process

from tiermem import Config
from tiermem.service.guard import body_timeout_detail
from tiermem.service.server import OVERLOAD_DETAIL, OVERLOAD_RETRY_AFTER_S

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

HEADER_TIMEOUT_S = 2.0  # short, so that the test waits little; long enough for a loaded runner
BODY_TIMEOUT_S = 2.0
MAX_CONNECTIONS = 8
# stalled bodies within the bound (each is served, then cut by its deadline), stalled heads
# enough to take the connections past it: 20 in all
STALLED_BODIES = MAX_CONNECTIONS - 2
STALLED_HEADS = 20 - STALLED_BODIES
SLACK_S = 3.0  # past a deadline, how late a cut may come on a busy 2-core runner
BODY_BYTES = 1000  # declared; STALLED_BODY_SENT of them sent
STALLED_BODY_SENT = b'{"role":'  # 8 bytes: the body stops here
SLOW_ID = "slow"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    root = tmp_path_factory.mktemp("stalled")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERMEM_")}
    env.update({
        "TIERMEM_AUTH_TOKENS": json.dumps({TOKEN_ACME: "acme"}),
        "TIERMEM_REDIS_URL": "redis://127.0.0.1:1/0",  # no hot tier: not what is tested
        "TIERMEM_SCHEDULER_ENABLED": "false",
        "TIERMEM_HTTP_HEADER_TIMEOUT_S": str(HEADER_TIMEOUT_S),
        "TIERMEM_SERVICE__BODY_TIMEOUT_S": str(BODY_TIMEOUT_S),  # the sectioned spelling works too
        "TIERMEM_HTTP_MAX_CONNECTIONS": str(MAX_CONNECTIONS),
    })
    with serve_process(root / "data", port, root / "serve.log", env=env) as url:
        yield url, port


def _connect(port: int, data: bytes) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=BODY_TIMEOUT_S + HEADER_TIMEOUT_S + SLACK_S)
    s.sendall(data)
    return s


def _read_to_close(s: socket.socket) -> tuple[bytes, bool]:
    """All the server sends until it closes the connection; (data, closed): closed is
    False when the socket's timeout passed with the connection still open."""
    data = b""
    try:
        while chunk := s.recv(65536):
            data += chunk
    except TimeoutError:
        return data, False
    except ConnectionResetError:
        pass
    finally:
        s.close()
    return data, True


def _stalled_body(port: int) -> socket.socket:
    head = (f"POST /v1/conversations/{SLOW_ID}/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {TOKEN_ACME}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {BODY_BYTES}\r\n\r\n").encode()
    return _connect(port, head + STALLED_BODY_SENT)


def _stalled_head(port: int) -> socket.socket:
    # no token, the head never finished: nothing of the app has seen it
    return _connect(port, b"GET /v1/stats HTTP/1.1\r\nHost: 127.0.0.1\r\n")


def test_stalled_clients_past_the_bound_are_cut_and_others_are_answered_meanwhile(server: tuple[str, int]) -> None:
    url, port = server
    opened = time.monotonic()
    bodies = [_stalled_body(port) for _ in range(STALLED_BODIES)]
    time.sleep(0.3)  # the server reads their heads while within the bound: each one is served
    heads = [_stalled_head(port) for _ in range(STALLED_HEADS)]
    time.sleep(0.3)  # ... and accepts these, past it

    # while they hang: a probe is answered; a tenant's request is refused at once, with
    # when to retry (before: served, as the stalled ones were never counted or cut)
    t0 = time.monotonic()
    health = httpx.get(url + "/healthz", timeout=HEADER_TIMEOUT_S)
    stats = httpx.get(url + "/v1/stats", headers=bearer(TOKEN_ACME), timeout=HEADER_TIMEOUT_S)
    answered_s = time.monotonic() - t0
    assert health.status_code == 200, health.text
    assert stats.status_code == 503, stats.text
    assert stats.headers["retry-after"] == str(OVERLOAD_RETRY_AFTER_S)
    assert stats.json() == {"detail": OVERLOAD_DETAIL}
    assert answered_s < HEADER_TIMEOUT_S, answered_s

    # each stalled body is answered 408 and its connection closed after its deadline,
    # not before (before: no answer, open until the socket's own timeout)
    for s in bodies:
        data, closed = _read_to_close(s)
        assert closed and data.startswith(b"HTTP/1.1 408 "), data[:200]
        assert json.loads(data.partition(b"\r\n\r\n")[2]) == {"detail": body_timeout_detail(BODY_TIMEOUT_S)}
    # each stalled head is closed without an answer: there is no request yet to answer
    for s in heads:
        assert _read_to_close(s) == (b"", True)
    cut_s = time.monotonic() - opened
    assert min(BODY_TIMEOUT_S, HEADER_TIMEOUT_S) <= cut_s < max(BODY_TIMEOUT_S, HEADER_TIMEOUT_S) + SLACK_S, cut_s

    # nothing of a stalled body was stored; the server serves as before
    h = bearer(TOKEN_ACME)
    assert httpx.get(f"{url}/v1/conversations/{SLOW_ID}/history", headers=h, timeout=30).status_code == 404
    r = httpx.post(f"{url}/v1/conversations/ok/messages", headers=h, json={"role": "user", "content": "hi"}, timeout=30)
    assert r.status_code == 201, r.text
    assert httpx.get(url + "/v1/stats", headers=h, timeout=30).status_code == 200


def test_a_slow_body_within_its_deadline_is_stored(server: tuple[str, int]) -> None:
    """The deadline is on the whole body, not between its bytes: one sent in pieces is
    stored when its last byte comes in time."""
    url, port = server
    body = json.dumps({"role": "user", "content": "slow but in time"}).encode()
    head = (f"POST /v1/conversations/pieces/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
            f"Authorization: Bearer {TOKEN_ACME}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    s = _connect(port, head + body[:5])
    for i in range(5, len(body), 10):
        time.sleep(BODY_TIMEOUT_S / 10)  # about half the deadline in all
        s.sendall(body[i:i + 10])
    data, closed = _read_to_close(s)
    assert closed and data.startswith(b"HTTP/1.1 201 "), data[:300]
    r = httpx.get(f"{url}/v1/conversations/pieces/history", headers=bearer(TOKEN_ACME), timeout=30)
    assert [m["message"]["content"] for m in r.json()["messages"]] == ["slow but in time"], r.text


def test_a_kept_alive_connection_s_next_head_has_its_deadline_too(server: tuple[str, int]) -> None:
    """uvicorn cancels its keep-alive timer at the first byte of the next request: a client
    that then stops mid-head held the connection for ever (before: still open here)."""
    _, port = server
    s = _connect(port, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    first = b""
    while b"\r\n\r\n" not in first:  # the first answer (a small JSON body with it)
        first += s.recv(65536)
    assert first.startswith(b"HTTP/1.1 200 "), first[:200]
    t0 = time.monotonic()
    s.sendall(b"GET /healthz HTTP/1.1\r\n")  # the next head, never finished
    data, closed = _read_to_close(s)
    assert closed and b"HTTP/1.1" not in data, data[:200]
    assert time.monotonic() - t0 < HEADER_TIMEOUT_S + SLACK_S


@pytest.mark.parametrize(("setting", "named", "message"), [
    # no deadline of nothing: every body would be 408
    ({"http_body_timeout_s": 0}, "http_body_timeout_s", "greater than 0"),
    ({"service": {"body_timeout_s": 3_600.5}}, "service.body_timeout_s", "less than or equal to 3600"),  # past the bound
    ({"http_header_timeout_s": -1}, "http_header_timeout_s", "greater than 0"),
    ({"service": {"header_timeout_s": 601}}, "service.header_timeout_s", "less than or equal to 600"),
    # nothing could be served
    ({"http_max_connections": 0}, "http_max_connections", "greater than or equal to 1"),
    ({"service": {"max_connections": True}}, "service.max_connections", "boolean"),  # True is no count
])
def test_out_of_range_settings_are_refused_naming_them(setting: dict[str, Any], named: str, message: str) -> None:
    with pytest.raises(ValidationError) as info:
        Config(**setting)
    assert named in str(info.value) and message in str(info.value), str(info.value)


def test_defaults_bound_stalled_clients() -> None:
    cfg = Config()
    assert (cfg.http_header_timeout_s, cfg.http_body_timeout_s, cfg.http_max_connections) == (10.0, 60.0, 256)

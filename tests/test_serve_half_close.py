"""A client that half-closes its connection (`shutdown(SHUT_WR)`: its FIN) after a whole
request gets the answer, and the server closes the connection after it; one that
half-closes before its request is whole gets no answer and nothing is written. A real
`tiermem serve` process (`serve_open`: uvicorn with `GuardedH11Protocol`), raw sockets.

Fails on the code before: uvicorn's H11Protocol returns None from `eof_received`, so
asyncio closed the transport at the FIN: the append's app ran on and committed, and its
answer was dropped (the client read 0 bytes: it could not tell a stored append from a
lost one; r_fuzz's halfclose.py)."""

from __future__ import annotations

import json
import socket
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from service_helpers import serve_open

from tiermem import Config
from tiermem.service.server import KEEP_ALIVE_TIMEOUT_S

NS = "acme"
READ_TIMEOUT_S = 60.0  # the longest an answer may take (an append on a busy 2-core runner)
CLOSE_WITHIN_S = KEEP_ALIVE_TIMEOUT_S  # a connection with no request to answer closes at once, before this


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    root = tmp_path_factory.mktemp("half-close")
    with serve_open(root) as url:
        yield int(url.rsplit(":", 1)[1]), Config(data_dir=root / "data").db_path


def _request(method: str, path: str, body: bytes = b"", *, length: int | None = None) -> bytes:
    head = (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Tiermem-Namespace: {NS}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body) if length is None else length}\r\n\r\n")
    return head.encode() + body


def _half_closed(port: int, data: bytes) -> tuple[bytes, float]:
    """Send `data`, half-close, read until the server closes: (all it answered, seconds from
    the FIN, or from the answer's last byte where there is one, to the server's close)."""
    with socket.create_connection(("127.0.0.1", port), timeout=READ_TIMEOUT_S) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        last = time.monotonic()
        got = b""
        while chunk := s.recv(65536):  # b"": the server closed (a timeout raises: it never did)
            got += chunk
            last = time.monotonic()
    return got, time.monotonic() - last


def _stored(db_path: Path, content: str) -> int:
    """How many stored messages hold `content` (the server's SQLite file, read-only)."""
    with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT body FROM messages").fetchall()
    return sum(content in str(row[0]) for row in rows)


def _status_and_json(answer: bytes) -> tuple[int, object]:
    head, _, payload = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(payload)


def test_an_append_half_closed_after_the_request_is_answered(served: tuple[int, Path]) -> None:
    port, db_path = served
    body = json.dumps({"role": "user", "content": "half-closed append"}).encode()
    answer, closed_after = _half_closed(port, _request("POST", "/v1/conversations/hc/messages", body))
    assert answer, "no answer: the FIN closed the connection"
    status, doc = _status_and_json(answer)
    assert status in (200, 201) and doc["position"] == 0, answer  # type: ignore[index]
    assert closed_after < KEEP_ALIVE_TIMEOUT_S  # closed after the answer, not kept alive for more
    assert _stored(db_path, "half-closed append") == 1


def test_a_read_half_closed_after_the_request_is_answered(served: tuple[int, Path]) -> None:
    port, _ = served
    answer, closed_after = _half_closed(port, _request("GET", "/healthz"))
    status, _doc = _status_and_json(answer)
    assert status == 200, answer
    assert closed_after < KEEP_ALIVE_TIMEOUT_S


# (what the client sends before its FIN, why no answer can come): the connection is closed at
# once, nothing written (before the fix as after: kept so)
UNANSWERED: list[tuple[bytes, str]] = [
    (b"", "no request at all"),
    (b"POST /v1/conversations/hc2/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n", "a head cut short"),
    (_request("POST", "/v1/conversations/hc2/messages", b'{"role": "user", "content": "cut', length=200),
     "a body cut short: it can no longer arrive"),
]


@pytest.mark.parametrize(("data", "why"), UNANSWERED, ids=[u[1] for u in UNANSWERED])
def test_a_request_half_closed_before_it_is_whole_is_not_answered(served: tuple[int, Path], data: bytes,
                                                                   why: str) -> None:
    port, db_path = served
    answer, took = _half_closed(port, data)
    # nothing, or a 4xx refusal of the incomplete request: never a 2xx of a write
    assert not answer or _status_and_json(answer)[0] >= 400, answer
    assert took < CLOSE_WITHIN_S, took  # not held open until a deadline
    assert _stored(db_path, "cut") == 0

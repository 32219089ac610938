"""Requests pipelined on one connection and then half-closed (`shutdown(SHUT_WR)`: the
client's FIN) are each answered, in order, and the server closes the connection after the
last answer. A real `tiermem serve` process (`serve_open`: uvicorn with
`GuardedH11Protocol`), raw sockets; the appends read back from its SQLite file.

Fails on the code before (db687f8): at the FIN the request in flight was marked the last
(`keep_alive` off), so the connection closed after its answer and the requests h11 still
held, whole, were dropped: three GETs pipelined got one answer, two appends one answer and
one stored message (reviewer's pipeline.py)."""

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
READ_TIMEOUT_S = 60.0  # the longest the answers may take (appends on a busy 2-core runner)
KEPT_OPEN_S = 1.0  # without a FIN the connection is still open this long after the answers
STATUS_LINE = b"HTTP/1.1 "


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    root = tmp_path_factory.mktemp("pipelined-half-close")
    with serve_open(root) as url:
        yield int(url.rsplit(":", 1)[1]), Config(data_dir=root / "data").db_path


def _request(method: str, path: str, body: bytes = b"", *, length: int | None = None) -> bytes:
    head = (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Tiermem-Namespace: {NS}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body) if length is None else length}\r\n\r\n")
    return head.encode() + body


def _append(conv: str, content: str) -> bytes:
    return _request("POST", f"/v1/conversations/{conv}/messages", json.dumps({"role": "user", "content": content}).encode())


def _half_closed(port: int, data: bytes) -> tuple[bytes, float]:
    """Send `data` in one write, half-close, read until the server closes: (all it answered,
    seconds from the last byte of the answers to the server's close)."""
    with socket.create_connection(("127.0.0.1", port), timeout=READ_TIMEOUT_S) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        last = time.monotonic()
        got = b""
        while chunk := s.recv(65536):  # b"": the server closed (a timeout raises: it never did)
            got += chunk
            last = time.monotonic()
    return got, time.monotonic() - last


def _answers(got: bytes) -> list[tuple[int, object]]:
    """Each answer's status and JSON body, in order (every body here has a Content-Length)."""
    out: list[tuple[int, object]] = []
    while got:
        head, _, rest = got.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        assert lines[0].startswith(STATUS_LINE), got
        length = next(int(v) for k, _, v in (ln.partition(b":") for ln in lines[1:]) if k.lower() == b"content-length")
        out.append((int(lines[0].split()[1]), json.loads(rest[:length])))
        got = rest[length:]
    return out


def _stored(db_path: Path, conv: str) -> list[str]:
    """The contents stored in `conv`, by position (the server's SQLite file, read-only)."""
    with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT body FROM messages WHERE conversation_id LIKE ? ORDER BY position",
                            (f"%{conv}",)).fetchall()
    return [json.loads(r[0])["content"] for r in rows]


# (what is pipelined before the FIN, the statuses answered in order, the conversation
# written and what it holds after). Before: one answer each (the first), one stored
PIPELINED: list[tuple[str, bytes, list[int], str, list[str]]] = [
    # three reads
    ("three reads", _request("GET", "/v1/limits") + _request("GET", "/v1/stats") + _request("GET", "/healthz"),
     [200, 200, 200], "", []),
    # two appends: both answered and stored, in order
    ("two appends", _append("pa", "first") + _append("pa", "second"), [201, 201], "pa", ["first", "second"]),
    # a read between two appends
    ("append read append", _append("pb", "one") + _request("GET", "/healthz") + _append("pb", "two"),
     [201, 200, 201], "pb", ["one", "two"]),
    # two whole appends and a third cut short: the two answered and stored, the third cannot
    # arrive (no answer, nothing written), the connection closed
    ("a last one cut short", _append("pc", "a") + _append("pc", "b")
     + _request("POST", "/v1/conversations/pc/messages", b'{"role": "user", "content": "cut', length=200),
     [201, 201], "pc", ["a", "b"]),
]


@pytest.mark.parametrize(("data", "statuses", "conv", "stored"), [p[1:] for p in PIPELINED],
                         ids=[p[0] for p in PIPELINED])
def test_pipelined_requests_half_closed_are_each_answered(served: tuple[int, Path], data: bytes,
                                                         statuses: list[int], conv: str, stored: list[str]) -> None:
    port, db_path = served
    got, closed_after = _half_closed(port, data)
    answers = _answers(got)
    assert [status for status, _doc in answers] == statuses, got
    assert closed_after < KEEP_ALIVE_TIMEOUT_S  # closed after the last answer, not kept alive for more
    if conv:
        assert [doc["position"] for status, doc in answers if status == 201] == list(range(len(stored)))  # type: ignore[index]
        assert _stored(db_path, conv) == stored


def test_pipelined_without_a_fin_stay_open(served: tuple[int, Path]) -> None:
    # no FIN: both answered and the connection kept for more (before the fix as after)
    port, _ = served
    with socket.create_connection(("127.0.0.1", port), timeout=READ_TIMEOUT_S) as s:
        s.sendall(_request("GET", "/v1/limits") + _request("GET", "/healthz"))
        got = b""
        while got.count(STATUS_LINE) < 2 or len(_safe_answers(got)) < 2:
            chunk = s.recv(65536)
            assert chunk, got  # the server closed before both answers
            got += chunk
        s.settimeout(KEPT_OPEN_S)
        with pytest.raises(TimeoutError):
            s.recv(1)  # still open: nothing more, no close
    assert [status for status, _doc in _answers(got)] == [200, 200]


def _safe_answers(got: bytes) -> list[tuple[int, object]]:
    """`_answers` of what has arrived so far (an answer cut short is not counted)."""
    try:
        return _answers(got)
    except (ValueError, StopIteration, AssertionError):
        return []

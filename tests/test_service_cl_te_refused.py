"""A request carrying both Content-Length and Transfer-Encoding is refused 400 naming both
headers, its connection closed, and nothing is written.

RFC 9112 6.3: such a message "ought to be handled as an error" (request smuggling: a
proxy in front may frame it by Content-Length while the server frames it by the chunks);
6.1: the server closes the connection after answering it. Before, the guard refused only
a repeated Content-Length, and the server framed the request by its chunks and stored the
message (201).

Real HTTP on a raw socket (httpx never sends both) to the real app served in this process,
its store read back after each request.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from service_helpers import TOKEN_ACME, served_store, stored_rows

from tiermem import Config
from tiermem.memory import NamespacedMemory

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

BODY = b'{"role":"user","content":"smuggled?"}'
CHUNKED = f"{len(BODY):x}\r\n".encode() + BODY + b"\r\n0\r\n\r\n"  # BODY as one chunk, then the last
READ_TIMEOUT_S = 10.0  # a bound on a hung server only: the answer comes at once


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, NamespacedMemory]]:
    root: Path = tmp_path_factory.mktemp("clte")
    config = Config(data_dir=root / "data", auth_tokens={TOKEN_ACME: "acme"})
    with served_store(config) as s:
        yield s.url, s.memory.namespaced("acme")  # the token's namespace


def _exchange(url: str, conv: str, framing: list[str], body: bytes) -> tuple[str, list[str], bytes, bool]:
    """Send one POST of a message with the `framing` headers; (status line, head lines
    lower-cased, body, whether the server closed the connection)."""
    host, port = url.removeprefix("http://").split(":")
    head = (f"POST /v1/conversations/{conv}/messages HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Authorization: Bearer {TOKEN_ACME}\r\nContent-Type: application/json\r\n"
            + "".join(f"{h}\r\n" for h in framing) + "\r\n").encode()
    with socket.create_connection((host, int(port)), timeout=READ_TIMEOUT_S) as s:
        s.sendall(head + body)
        data, closed = b"", False
        try:
            while chunk := s.recv(65536):
                data += chunk
                if b"\r\n\r\n" in data and not closed and _complete(data):
                    break
            else:
                closed = True
        except TimeoutError:
            pass
        if not closed:
            try:  # the answer is whole: is the connection ended after it?
                closed = s.recv(1) == b""
            except TimeoutError:
                closed = False
            except ConnectionResetError:
                closed = True
    raw_head, _, rest = data.partition(b"\r\n\r\n")
    lines = raw_head.decode("latin-1").split("\r\n")
    return lines[0], [h.lower() for h in lines[1:]], rest, closed


def _complete(data: bytes) -> bool:
    """Whether `data` holds a whole answer framed by its Content-Length."""
    raw_head, _, rest = data.partition(b"\r\n\r\n")
    for line in raw_head.decode("latin-1").lower().split("\r\n")[1:]:
        if line.startswith("content-length:"):
            return len(rest) >= int(line.split(":", 1)[1])
    return False


# (headers framing the request, the bytes after its head): both framings, every way round
REFUSED = [
    # the reviewer's repro: a Content-Length shorter than the chunked body
    (["Content-Length: 5", "Transfer-Encoding: chunked"], CHUNKED),
    # Transfer-Encoding first: the order does not matter
    (["Transfer-Encoding: chunked", "Content-Length: 5"], CHUNKED),
    # a Content-Length that matches the chunked bytes exactly: still two framings
    ([f"Content-Length: {len(CHUNKED)}", "Transfer-Encoding: chunked"], CHUNKED),
    # a Content-Length of the JSON itself, as a proxy reading it by the length would see it
    ([f"Content-Length: {len(BODY)}", "Transfer-Encoding: chunked"], CHUNKED),
]


@pytest.mark.parametrize(("framing", "sent"), REFUSED, ids=["short-cl", "te-first", "cl-of-chunks", "cl-of-json"])
def test_both_framings_refused_and_nothing_written(served: tuple[str, NamespacedMemory], framing: list[str],
                                                   sent: bytes, request: pytest.FixtureRequest) -> None:
    url, mem = served
    conv = f"clte-{request.node.callspec.id}"
    status, head, body, closed = _exchange(url, conv, framing, sent)
    assert status.startswith("HTTP/1.1 400"), (status, body)  # before: 201, the message stored
    assert b"Content-Length" in body and b"Transfer-Encoding" in body, body  # names both headers
    assert "connection: close" in head, head  # RFC 9112 6.1: the server closes after answering
    assert closed, "the connection stayed open after the 400"
    assert stored_rows(mem, conv) == 0  # nothing written


def test_chunked_alone_still_stored(served: tuple[str, NamespacedMemory]) -> None:
    # the control: chunked framing alone is a valid request, and stored
    url, mem = served
    status, _, body, _ = _exchange(url, "clte-chunked", ["Transfer-Encoding: chunked"], CHUNKED)
    assert status.startswith("HTTP/1.1 201"), (status, body)
    assert stored_rows(mem, "clte-chunked") == 1

"""A body refused 413 ends its connection: the answer says `Connection: close` and the
server closes it, without waiting for the rest of the body.

The guard refuses a body past `max_body_bytes` from its Content-Length, or by counting
the stream (chunked) once it passes the limit. Either way the rest of the body is never
read by the app, yet the answer kept the connection alive: the server went on reading
(and discarding) the rest of the client's upload, up to the whole body, on a connection
the client was told nothing about, and a client that had stopped sending waited on it
until the keep-alive timer. The 408 (a body past its deadline) closed it already.

Real HTTP on a raw socket to the real app served in this process; the client sends
past the limit and then stops, so only the server can end the connection.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ports import free_port
from service_helpers import TOKEN_ACME, serve_in_thread

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

MAX_BODY_BYTES = 4096  # a small limit: the test sends a few chunks past it
MAX_CONTENT_BYTES = 2048  # at most max_body_bytes, as the service requires
CHUNK = b"x" * 1024  # each chunk of the streamed body
# well under the keep-alive timer (uvicorn's 5 s) the connection stayed open for before
CLOSE_WITHIN_S = 2.0
PATH = "/v1/conversations/c1/messages"


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[str]:
    root: Path = tmp_path_factory.mktemp("limit413")
    config = Config(data_dir=root / "data", auth_tokens={TOKEN_ACME: "acme"}, max_body_bytes=MAX_BODY_BYTES,
                    max_content_bytes=MAX_CONTENT_BYTES, redis_url=f"redis://127.0.0.1:{free_port()}/0")
    with Memory(config, embedder=embedder, hot=False, background_indexing=False) as mem, \
            serve_in_thread(config, mem) as served:
        yield served


def _head(url: str, framing: str) -> bytes:
    host, port = url.removeprefix("http://").split(":")
    return (f"POST {PATH} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {TOKEN_ACME}\r\n"
            f"Content-Type: application/json\r\n{framing}\r\n\r\n").encode()


def _chunked_past_the_limit() -> bytes:
    chunk = f"{len(CHUNK):x}\r\n".encode() + CHUNK + b"\r\n"
    return chunk * (MAX_BODY_BYTES // len(CHUNK) + 2)  # no last chunk: the body goes on


# (how the body is framed, what is sent after the head): the two ways the guard refuses
CASES = [
    ("Transfer-Encoding: chunked", _chunked_past_the_limit()),  # counted: refused mid-stream
    (f"Content-Length: {MAX_BODY_BYTES * 4}", CHUNK),  # declared: refused before the body is read
]


@pytest.mark.parametrize(("framing", "sent"), CASES, ids=["mid-stream", "declared"])
def test_a_413_closes_its_connection(url: str, framing: str, sent: bytes) -> None:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=CLOSE_WITHIN_S) as s:
        s.sendall(_head(url, framing) + sent)
        t0 = time.monotonic()
        data = b""
        closed = False
        try:
            while chunk := s.recv(65536):
                data += chunk
            closed = True
        except TimeoutError:
            pass  # still open after CLOSE_WITHIN_S
        except ConnectionResetError:
            closed = True  # closed with the client's unread bytes in its buffer
        waited_s = time.monotonic() - t0
    head = data.partition(b"\r\n\r\n")[0].decode("latin-1").lower().split("\r\n")
    assert head[0].startswith("http/1.1 413"), data
    assert "connection: close" in head, head  # before: no such header, the connection kept alive
    assert closed, f"the connection was still open {waited_s:.1f} s after the 413"

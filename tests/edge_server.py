"""A real uvicorn serving the real app on a loopback port (service_helpers.serve_in_thread,
ports.free_port), for the tests of the service's web edges that need what only a real
server has: a client address (`request.client`), raw sockets (made-up methods, a body cut
short), its own Host header.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from ports import free_port
from service_helpers import serve_in_thread

from tiermem import Config, Memory

edge_port = free_port  # a free loopback port of this worker's block


@contextmanager
def edge_server(config: Config, memory: Memory, **create_kw: Any) -> Iterator[tuple[str, int]]:
    """Serve `memory` with `create_app(config, memory, **create_kw)` on 127.0.0.1; yields
    (base URL, port)."""
    with serve_in_thread(config, memory, **create_kw) as url:
        port = urlsplit(url).port
        assert port is not None
        yield url, port


def raw_exchange(port: int, data: bytes, *, read: bool = True, timeout_s: float = 10.0) -> bytes:
    """Write `data` on a fresh connection to the port; return all the server answers
    until it closes (nothing when `read` is False: the client hangs up at once)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as s:
        s.sendall(data)
        if not read:
            return b""
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)

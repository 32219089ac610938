"""A real uvicorn serving the real app on a loopback port of 7500-7599, for the tests of
the service's web edges that need what only a real server has: a client address
(`request.client`), raw sockets (made-up methods, a body cut short), its own Host header.

Invariants: a port is handed out only after a bind of it succeeded; the workers of one
pytest-xdist run start at different offsets of the block, so two rarely try the same port.
"""

from __future__ import annotations

import itertools
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from ports import worker_index

from tiermem import Config, Memory
from tiermem.service import create_app

FIRST_PORT = 7500
PORTS = 100  # 7500-7599
PORTS_PER_WORKER_OFFSET = 10  # where each xdist worker starts in the block
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0

_lock = threading.Lock()
_next = itertools.count()


def edge_port() -> int:
    """A free loopback port in 7500-7599."""
    start = worker_index() * PORTS_PER_WORKER_OFFSET
    with _lock:
        for _ in range(PORTS):
            port = FIRST_PORT + (start + next(_next)) % PORTS
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
            return port
    raise RuntimeError(f"no free loopback port in {FIRST_PORT}-{FIRST_PORT + PORTS - 1}")


@contextmanager
def edge_server(config: Config, memory: Memory, **create_kw: Any) -> Iterator[tuple[str, int]]:
    """Serve `memory` with `create_app(config, memory, **create_kw)` on 127.0.0.1; yields
    (base URL, port)."""
    port = edge_port()
    app = create_app(config, memory, start_scheduler=False, **create_kw)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.02)
        yield f"http://127.0.0.1:{port}", port
    finally:
        server.should_exit = True
        thread.join(timeout=STOP_TIMEOUT_S)


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

"""Loopback TCP ports for the test servers, free of races with other workers.

A port found by binding port 0 and releasing it can be taken before the server binds it:
by another pytest worker's server, or by any outgoing connection, since the kernel hands
out that same ephemeral range (32768-60999 on Linux) to both. A test whose port was taken
either fails to start its server or, worse, polls /healthz of another test's server and
talks to it. So each worker draws from its own block below the ephemeral range, which no
outgoing connection uses and no other worker draws from, and skips ports already bound.

Invariants:
- Two workers of one run never draw the same port (disjoint blocks by xdist worker index).
- A port is returned only after a bind of it succeeded (a listener left by anything else
  is skipped); within a worker, ports are handed out round-robin over its block, so a
  port just released by a stopped test server is the last one reused.
"""

from __future__ import annotations

import itertools
import os
import re
import socket
import threading

FIRST_PORT = 20_000  # below Linux's default ephemeral range (32768-60999)
PORTS_PER_WORKER = 600  # 20 workers fit below 32768
MAX_WORKERS = 20

_lock = threading.Lock()
_next = itertools.count()


def worker_index() -> int:
    """This pytest-xdist worker's index (gw3 -> 3); 0 outside xdist."""
    m = re.fullmatch(r"gw(\d+)", os.environ.get("PYTEST_XDIST_WORKER", ""))
    return int(m.group(1)) % MAX_WORKERS if m else 0


def free_port() -> int:
    """A loopback port no other worker of this run hands out, free when returned."""
    base = FIRST_PORT + worker_index() * PORTS_PER_WORKER
    with _lock:
        for _ in range(PORTS_PER_WORKER):
            port = base + next(_next) % PORTS_PER_WORKER
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
            return port
    raise RuntimeError(f"no free loopback port in {base}-{base + PORTS_PER_WORKER - 1}")

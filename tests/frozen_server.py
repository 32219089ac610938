"""A PostgreSQL server of the test's own that takes queries and never answers: every
process of it stopped with SIGSTOP (the kernel still ACKs, so neither TCP nor the
server's own timeouts end a wait), continued with SIGCONT after, and a way to run a call
that may never return without the test hanging with it.

- `frozen(server)`: every process of the server stopped within and continued after,
  even when the block raises; a process that ended between the listing and its signal
  (the backend of a connection cut just before) is passed over.
- `in_thread(call)`: the call on a daemon thread of its own; its dict gets "result" or
  "error" (the exception) and "took" (seconds) once it returns.
- `answer(call, within_s)`: `in_thread`, waited on; fails the test when no answer came
  within `within_s`, else gives the result or the exception and the seconds taken.

Imported explicitly by the test modules (the lead owns conftest.py)."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from pg_server import StoppableServer

PROC = Path("/proc")


def server_pids(server: StoppableServer) -> list[int]:
    """The postmaster and every process it started (backends, checkpointer, ...)."""
    postmaster = int((Path(server.server.pgdata) / "postmaster.pid").read_text().split()[0])
    pids = [postmaster]
    for entry in os.listdir(PROC):
        if not entry.isdigit():
            continue
        try:
            stat = (PROC / entry / "stat").read_text()
        except OSError:  # ended meanwhile
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == postmaster:  # the field after the name: state, ppid
            pids.append(int(entry))
    return pids


def _signal(pids: list[int], signum: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):  # ended since the listing
            os.kill(pid, signum)


@contextlib.contextmanager
def frozen(server: StoppableServer) -> Iterator[None]:
    """Every process of `server` stopped (SIGSTOP) within, continued (SIGCONT) after."""
    pids = server_pids(server)
    _signal(pids, signal.SIGSTOP)
    try:
        yield
    finally:
        _signal(pids, signal.SIGCONT)


def in_thread(call: Callable[[], object]) -> tuple[threading.Thread, dict[str, object]]:
    """`call` on a thread of its own, its result or exception in the dict: the code before
    may never return, and the test must fail rather than hang with it."""
    out: dict[str, object] = {}

    def run() -> None:
        started = time.monotonic()
        try:
            out["result"] = call()
        except Exception as exc:
            out["error"] = exc
        out["took"] = time.monotonic() - started

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def answer(call: Callable[[], object], within_s: float) -> tuple[object, float]:
    """`call`'s result or exception and how long it took; fails the test past `within_s`."""
    thread, out = in_thread(call)
    thread.join(within_s)
    assert not thread.is_alive(), f"no answer in {within_s} s"
    return out["error"] if "error" in out else out["result"], float(out["took"])  # type: ignore[arg-type]

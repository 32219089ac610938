"""A write waiting for another process's SQLite write lock does not hold up this
process's reads.

Under load from two `tiermem serve` processes on one data dir (evals/bench_service_load),
an append that found the other process in its write transaction waited in SQLite's busy
handler while holding the store's lock (one connection per process, every read and
write under it), so every read of every tenant in its process waited as long: a
history or a context took as long as the other process's transaction, up to
busy_timeout_ms (5 s). Reads need no write lock in WAL mode. Invariants:
- while an append of this process waits for the write lock another process holds, a
  read of another conversation answers at once;
- the append still waits up to busy_timeout_ms and commits once the lock is free, or
  past it fails busy (503 over HTTP) having written nothing.
A real lock, held by another process on the same file.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.files import storage_problem

WAITING_S = 0.3  # the append is in its wait for the lock by then
SHORT_BUSY_TIMEOUT_MS = 500
# the short-timeout append fails within this: the lock is held until after it (a hang guard)
FAIL_WITHIN_S = 2.0
EXIT_TIMEOUT_S = 30  # the holder, or the appending thread, done once the lock is released
NS = "acme"

# another process: the write lock of argv[1], held until its stdin is closed
HOLDER = """
import sys, sqlean
con = sqlean.connect(sys.argv[1], isolation_level=None, timeout=10)
con.execute("BEGIN IMMEDIATE")
print("held", flush=True)
sys.stdin.read()
con.execute("COMMIT")
"""


@contextmanager
def other_process_writing(db: Path) -> Iterator[Callable[[], None]]:
    """Another process holds the write lock of `db` from entry until the `release()` it
    yields is called (or the block ends)."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdin is not None and proc.stdout is not None

    def release() -> None:
        assert proc.stdin is not None
        if not proc.stdin.closed:
            proc.stdin.close()

    try:
        assert proc.stdout.readline().strip() == "held"
        yield release
    finally:
        release()
        proc.wait(timeout=EXIT_TIMEOUT_S)


# (read, what it does) while the append waits: each reads only what is committed
READS: list[tuple[str, Callable[[Memory], Any]]] = [
    ("history", lambda m: m.history("other", namespace=NS)),  # a page of another conversation
    ("conversations", lambda m: m.conversations(NS)),  # the namespace's listing
    ("context", lambda m: m.context("other", "the printer", 2000, namespace=NS)),  # a turn's context
    ("search", lambda m: m.search(None, "printer", namespace=NS)),  # the namespace's search
]


@pytest.mark.parametrize(("name", "read"), READS, ids=[r[0] for r in READS])
def test_reads_do_not_wait_for_another_process_writer(tmp_path: Path, embedder: FastEmbedder, name: str,
                                                       read: Callable[[Memory], Any]) -> None:
    cfg = Config(data_dir=tmp_path / "data")
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append("busy", {"role": "user", "content": "first"}, namespace=NS)
        mem.append("other", {"role": "user", "content": "my printer is broken"}, namespace=NS)
        read(mem)  # warm: what a first call builds (planner, caches) is not the wait measured
        appended: list[int] = []
        with other_process_writing(cfg.db_path) as release:
            writer = threading.Thread(
                target=lambda: appended.append(mem.append("busy", {"role": "user", "content": "second"}, namespace=NS)))
            writer.start()
            time.sleep(WAITING_S)
            read(mem)
            # the read answered while the append still waits for the lock, held until
            # released below (before: it waited for the append, which failed busy after
            # busy_timeout_ms, the lock never released meanwhile)
            waiting = writer.is_alive() and appended == []
            release()
            writer.join(timeout=EXIT_TIMEOUT_S)
        assert waiting, f"{name} answered only once the append waiting for another process had ended"
        assert appended == [1]  # the append waited for the lock, then committed
        assert [m.text for m in mem.history("busy", namespace=NS)] == ["first", "second"]


def test_the_busy_timeout_still_bounds_the_wait(tmp_path: Path, embedder: FastEmbedder) -> None:
    cfg = Config(data_dir=tmp_path / "data", busy_timeout_ms=SHORT_BUSY_TIMEOUT_MS)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append("busy", {"role": "user", "content": "first"}, namespace=NS)
        with other_process_writing(cfg.db_path):
            t0 = time.monotonic()
            with pytest.raises(Exception) as caught:
                mem.append("busy", {"role": "user", "content": "second"}, namespace=NS)
            took = time.monotonic() - t0
        problem = storage_problem(caught.value)
        assert problem is not None and problem.busy and problem.refused_unwritten, repr(caught.value)
        # waited the timeout, then failed while the lock was still held (not waiting for ever)
        assert SHORT_BUSY_TIMEOUT_MS / 1000 <= took < FAIL_WITHIN_S, took
        assert [m.text for m in mem.history("busy", namespace=NS)] == ["first"]  # nothing written

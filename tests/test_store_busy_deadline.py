"""A write's busy_timeout_ms counts from the first busy answer of another process's write
lock, not from when the write began waiting for this process's own store lock.

Since writes wait for another process's lock with the store's lock free (60b134c), the
deadline was set before the store's lock was taken: a write queued behind a long hold of
that lock in its own process (a long read, an import's batch, a reclaim) had spent its
busy_timeout_ms before it tried at all, so a brief transaction of another process then
made it fail busy at once (503, written: false) where SQLite's own handler, which counts
from the first busy answer, waited for it (reviewer's run: 503 at once against a commit
after 1.53 s). Invariants:
- a write queued behind this process's store lock for longer than busy_timeout_ms still
  waits up to busy_timeout_ms for another process's transaction, and commits;
- the bound itself is tests/test_store_busy_wait_reads.py's.
A real lock, held by another process on the same file.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder

BUSY_TIMEOUT_MS = 1000
QUEUED_S = 1.5  # the append waits this long for the own process's store lock: past busy_timeout_ms
OTHER_HOLD_S = 0.3  # then meets another process's transaction this long: well within busy_timeout_ms
NS = "acme"

# another process: takes the write lock when a line arrives on stdin, says so, holds it
WRITER = """
import sys, time, sqlean
con = sqlean.connect(sys.argv[1], isolation_level=None, timeout=10)
sys.stdin.readline()
con.execute("BEGIN IMMEDIATE")
print("held", flush=True)
time.sleep(float(sys.argv[2]))
con.execute("COMMIT")
"""


def test_a_write_queued_behind_the_store_lock_still_waits_for_another_process(
        tmp_path: Path, embedder: FastEmbedder) -> None:
    cfg = Config(data_dir=tmp_path / "data", busy_timeout_ms=BUSY_TIMEOUT_MS)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append("c", {"role": "user", "content": "first"}, namespace=NS)
        other = subprocess.Popen([sys.executable, "-c", WRITER, str(cfg.db_path), str(OTHER_HOLD_S)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert other.stdin is not None and other.stdout is not None
        outcome: list[object] = []

        def append() -> None:
            try:
                outcome.append(mem.append("c", {"role": "user", "content": "second"}, namespace=NS))
            except Exception as exc:  # the failure is the finding: reported by the assert below
                outcome.append(exc)

        try:
            with mem.cold.reading():  # a long hold of this process's store lock
                writer = threading.Thread(target=append)
                writer.start()
                time.sleep(QUEUED_S)
                other.stdin.write("\n")
                other.stdin.flush()
                assert other.stdout.readline().strip() == "held"
            writer.join(timeout=30)
        finally:
            other.wait(timeout=30)
        # before: the busy error at once (the deadline spent while queued for the store lock)
        assert outcome == [1], f"the queued append failed: {outcome!r}"
        assert [m.text for m in mem.history("c", namespace=NS)] == ["first", "second"]

"""An erasure's scrub does not wait for another process while holding the store's lock.

After its transactions an erasure scrubs (`ColdStore.reclaim`): an FTS merge when needed,
`PRAGMA incremental_vacuum`, its marker deleted, then the WAL checkpointed and truncated.
These ran under the store's lock (one connection per process, every read under it) with
SQLite's busy handler on: the writes waited for another process's write transaction, the
checkpoint for another process's read transaction, each up to busy_timeout_ms, and every
read of every tenant in the process waited as long (the reviewer's run: a history of
another conversation 1.75 s behind a 2 s hold). A truncation that gave up left a scrub
pending that every later write retried the same way: an append after it returned after
busy_timeout_ms while another process kept reading. Invariants (cold.py's docstring):
- while an erasure or a reclaim waits for another process's read or write transaction, a
  read of another conversation answers at once;
- the scrub's writes wait at most busy_timeout_ms from the first busy answer, the
  checkpoint too, with the store's lock free between tries;
- a pending scrub is retried after a write with one try that does not wait: the write
  returns at once, and the WAL is truncated at the first write after the reader is gone.
Real locks and snapshots, held by another process on the same file.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder

WAITING_S = 0.3  # the erasure is in its wait by then
SHORT_BUSY_TIMEOUT_MS = 1000  # the erasure gives up truncating before the reader ends
APPEND_BOUND_S = 0.5  # an append that waits for nothing
EXIT_TIMEOUT_S = 30  # the other process, or the erasing thread, done once released
NS = "acme"
CANARY = "zq7canary9182quince"

# another process: a read transaction (a snapshot of the WAL), held until a line arrives on stdin
READER = """
import sys, sqlean
con = sqlean.connect(sys.argv[1], isolation_level=None, timeout=10)
con.execute("BEGIN")
con.execute("SELECT COUNT(*) FROM messages").fetchone()
print("held", flush=True)
sys.stdin.readline()
con.execute("COMMIT")
"""
# another process: the write lock, held until a line arrives on stdin
WRITER = """
import sys, sqlean
con = sqlean.connect(sys.argv[1], isolation_level=None, timeout=10)
con.execute("BEGIN IMMEDIATE")
print("held", flush=True)
sys.stdin.readline()
con.execute("COMMIT")
"""
# scanning the files from this process would close a descriptor of the open database and
# drop this process's POSIX locks on it, so another process reads them
SCAN = r"""
import sys
from pathlib import Path
d, needle = Path(sys.argv[1]), sys.argv[2].encode()
print(",".join(sorted(p.name for p in d.iterdir() if p.is_file() and needle in p.read_bytes())))
"""


def _files_with(data_dir: Path, needle: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", SCAN, str(data_dir), needle], capture_output=True, text=True,
                         check=True).stdout.strip()
    return out.split(",") if out else []


def _erase(mem: Memory) -> bool:
    return mem.delete_conversation("gone", namespace=NS).wal_truncated


def _reclaim(mem: Memory) -> bool:
    # the scrub alone (also run at open for an interrupted erasure's): its writes meet the writer
    return mem.cold.reclaim()


# (case, the operation, the other process): a read of another conversation meanwhile;
# each operation says whether the WAL was truncated
CASES: list[tuple[str, Callable[[Memory], bool], str]] = [
    ("erasure-reader", _erase, READER),  # the checkpoint waited for the reader under the lock
    ("reclaim-reader", _reclaim, READER),  # the same checkpoint, the scrub run alone
    ("reclaim-writer", _reclaim, WRITER),  # optimize / incremental_vacuum / the marker waited for the writer
    ("erasure-writer", _erase, WRITER),  # passes before too: its transaction's BEGIN was polled already
]


@pytest.mark.parametrize(("name", "operation", "other"), CASES, ids=[c[0] for c in CASES])
def test_reads_do_not_wait_for_an_erasure_waiting_for_another_process(
        tmp_path: Path, embedder: FastEmbedder, name: str, operation: Callable[[Memory], bool], other: str) -> None:
    cfg = Config(data_dir=tmp_path / "data")
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append_many("gone", [{"role": "user", "content": f"x{i} {CANARY}"} for i in range(10)], namespace=NS)
        mem.append("other", {"role": "user", "content": "my printer is broken"}, namespace=NS)
        mem.history("other", namespace=NS)  # warm
        done: list[bool] = []
        proc = subprocess.Popen([sys.executable, "-c", other, str(cfg.db_path)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdin is not None and proc.stdout is not None
        try:
            assert proc.stdout.readline().strip() == "held"
            worker = threading.Thread(target=lambda: done.append(operation(mem)))
            worker.start()
            time.sleep(WAITING_S)
            mem.history("other", namespace=NS)
            # the read answered while the operation still waits for the other process,
            # held until released below (before: it waited for the operation, which gave
            # up after busy_timeout_ms, the other process never released meanwhile)
            waiting = worker.is_alive() and done == []
            proc.stdin.write("\n")
            proc.stdin.flush()
            worker.join(timeout=EXIT_TIMEOUT_S)
        finally:
            proc.stdin.close()
            proc.wait(timeout=EXIT_TIMEOUT_S)
        assert waiting, f"{name}: a read answered only once the scrub waiting for another process had ended"
        # the default busy_timeout_ms outlasts the hold: the scrub waited and finished
        assert done == [True] and not mem.cold._wal_scrub_pending
        assert [m.text for m in mem.history("other", namespace=NS)] == ["my printer is broken"]
        if operation is _erase:
            assert mem.conversations(NS) == ["other"]
    if operation is _erase:
        assert _files_with(cfg.data_dir, CANARY) == []


def test_a_write_after_a_truncation_that_met_a_reader_does_not_wait(tmp_path: Path, embedder: FastEmbedder) -> None:
    cfg = Config(data_dir=tmp_path / "data", busy_timeout_ms=SHORT_BUSY_TIMEOUT_MS)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append_many("gone", [{"role": "user", "content": f"x{i} {CANARY}"} for i in range(10)], namespace=NS)
        mem.append("other", {"role": "user", "content": "first"}, namespace=NS)
        reader = subprocess.Popen([sys.executable, "-c", READER, str(cfg.db_path)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert reader.stdin is not None and reader.stdout is not None
        try:
            assert reader.stdout.readline().strip() == "held"
            t0 = time.monotonic()
            report = mem.delete_conversation("gone", namespace=NS)
            erase_s = time.monotonic() - t0
            assert report.wal_truncated is False and report.scrubbed is False  # the reader holds the frames
            assert erase_s >= SHORT_BUSY_TIMEOUT_MS / 1000 - 0.05  # it waited for the reader that long
            t0 = time.monotonic()
            mem.append("other", {"role": "user", "content": "while the reader reads"}, namespace=NS)
            append_s = time.monotonic() - t0
            # before: each write retried the truncation in SQLite's busy handler (~1.0 s here)
            assert append_s < APPEND_BOUND_S, f"an append took {append_s:.2f} s retrying the scrub"
            assert mem.cold._wal_scrub_pending  # still owed: the reader still reads
        finally:
            reader.stdin.write("\n")
            reader.stdin.flush()
            reader.wait(timeout=30)
        mem.append("other", {"role": "user", "content": "after the reader"}, namespace=NS)
        assert not mem.cold._wal_scrub_pending
        assert _files_with(cfg.data_dir, CANARY) == []
        assert [m.text for m in mem.history("other", namespace=NS)] == ["first", "while the reader reads",
                                                                         "after the reader"]

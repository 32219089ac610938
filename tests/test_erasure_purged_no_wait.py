"""An erasure with a hot tier waits for another process's reader once, not once per batch.

After each batch of an erasure `Memory._forget` deletes the batch's Redis keys and crosses
them off the owed list (`ColdStore.purged`), whose WAL frames hold the erased keys; it
then truncated the WAL waiting up to busy_timeout_ms for any reader in another process,
before the erasure's own scrub (`reclaim`) waited as long again. Invariant: `purged`
truncates once without waiting and leaves what a reader holds to the next write or close
(the scrub then pending), so the erasure waits for the reader only in its scrub.
A real reader process, a real embedded Redis hot tier."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder

BUSY_TIMEOUT_MS = 1000  # each waiting truncation gives up after this while the reader holds
NS = "acme"

# another process: a read transaction (a snapshot of the WAL) held until told on stdin
READER = """
import sys, sqlean
con = sqlean.connect(sys.argv[1], isolation_level=None, timeout=10)
con.execute("BEGIN")
con.execute("SELECT COUNT(*) FROM messages").fetchone()
print("held", flush=True)
sys.stdin.readline()
con.execute("COMMIT")
"""


def test_an_erasure_waits_for_a_reader_once(tmp_path: Path, embedder: FastEmbedder) -> None:
    cfg = Config(data_dir=tmp_path / "data", busy_timeout_ms=BUSY_TIMEOUT_MS)
    with Memory(cfg, embedder=embedder, background_indexing=False) as mem:
        assert mem.hot is not None  # _forget crosses the erased keys off only with a hot tier
        mem.append_many("gone", [{"role": "user", "content": f"turn {i}"} for i in range(6)], namespace=NS)
        mem.append("other", {"role": "user", "content": "kept"}, namespace=NS)
        waits: list[bool] = []
        real = mem.cold.truncate_wal

        def counted(*, wait: bool = True) -> bool:
            waits.append(wait)
            return real(wait=wait)

        mem.cold.truncate_wal = counted  # type: ignore[method-assign]
        proc = subprocess.Popen([sys.executable, "-c", READER, str(cfg.db_path)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
            report: Any = mem.delete_conversation("gone", namespace=NS)
        finally:
            assert proc.stdin is not None
            proc.stdin.write("\n")
            proc.stdin.close()
            proc.wait(timeout=30)
        # before: purged's truncation waited too (two waits of busy_timeout_ms)
        assert waits.count(True) == 1, waits
        assert report.wal_truncated is False and mem.cold._wal_scrub_pending
        mem.append("other", {"role": "assistant", "content": "still here"}, namespace=NS)  # the reader is gone
        assert not mem.cold._wal_scrub_pending
        assert mem.conversations(NS) == ["other"]

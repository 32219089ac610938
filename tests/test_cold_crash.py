"""kill -9 in the middle of an ingest: every acknowledged message survives intact, the
positions stay contiguous, and the derived indexes catch up from the gap the crash
left between a commit and its embedding (invariants 1 and 2)."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from pathlib import Path

from cold_helpers import raw, worker

from tiermem.tiers.cold import ColdStore
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.tokens import BpeTokenCounter

ACKED_BEFORE_KILL = 150  # let the child commit this many messages, then kill it mid-stride


def _read_line(proc: subprocess.Popen[str], deadline: float) -> str:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
    if not ready:
        raise AssertionError("the ingest child went silent")
    line = proc.stdout.readline()
    if not line:
        raise AssertionError(f"the ingest child died on its own: {proc.stderr.read() if proc.stderr else ''}")
    return line.strip()


def test_sigkill_mid_ingest_loses_nothing_acknowledged(
    tmp_path: Path, counter: BpeTokenCounter, embedder: FastEmbedder
) -> None:
    db = tmp_path / "data" / "tiermem.db"
    proc = worker("ingest", str(db), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    acked: list[int] = []
    embed_batches = 0
    try:
        embedder.embed(["warm up"])  # load our model while the child loads its own
        deadline = time.monotonic() + 120  # the child loads the embedding model first
        assert _read_line(proc, deadline) == "ready"
        deadline = time.monotonic() + 60
        # kill as soon as enough is acknowledged *and* the child has embedded at least
        # once, so some turns have vectors and the later ones are committed without
        while len(acked) < ACKED_BEFORE_KILL or embed_batches == 0:
            kind, value = _read_line(proc, deadline).split()
            if kind == "A":
                acked.append(int(value))
            else:
                embed_batches += 1
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        # the child kept going until the signal landed: what it printed meanwhile is
        # still in the pipe, and was acknowledged all the same
        assert proc.stdout is not None
        for line in proc.stdout.read().splitlines():
            kind, value = line.split()
            if kind == "A":
                acked.append(int(value))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert acked == list(range(len(acked)))  # the child saw contiguous positions

    # a raw look first: recovery of the WAL happens on this open, nothing tiermem does
    with raw(db) as conn:
        stored = dict(conn.execute(
            "SELECT position, body FROM messages WHERE conversation_id = 'ingest'"
        ).fetchall())
    # contiguous: the child may have committed one more message than it acknowledged
    assert sorted(stored) == list(range(len(stored)))
    assert len(acked) <= len(stored) <= len(acked) + 1
    for pos in acked:
        assert json.loads(stored[pos]) == {"role": "user", "content": f"message {pos}: the quick brown fox {pos * 7}"}

    store = ColdStore(db, tokens=counter, embedder=embedder)
    try:
        # the crash left committed turns without vectors: the gap is visible in stats
        assert store.stats()["pending_embeddings"] > 0
        before = store.integrity()
        assert before["turns"] == before["fts"] == before["messages"] == len(stored)
        assert before["vectors"] < before["messages"]
        assert [m.position for m in store.history("ingest")] == sorted(stored)

        store.index_pending()
        assert store.stats()["pending_embeddings"] == 0
        after = store.integrity()
        assert after == {"messages": len(stored), "turns": len(stored), "fts": len(stored), "vectors": len(stored)}
        # and the caught-up vectors serve search
        hit = store.search("message 42: the quick brown fox 294", k=3, conversation_id="ingest")[0]
        assert hit.position == 42 and {"dense", "bm25"} <= set(hit.ranks)
    finally:
        store.close()

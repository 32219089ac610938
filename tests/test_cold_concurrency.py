"""Invariant 1 across processes: the store assigns positions in one statement under the
write lock, so writers in separate processes get exactly 0..N-1, each once, and each
writer's messages keep that writer's order."""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from cold_helpers import raw, worker

from tiermem.tiers.cold import ColdStore
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter

WRITERS = 4
PER_WRITER = 500


def test_four_processes_get_contiguous_unique_positions(tmp_path: Path) -> None:
    # the children create the database themselves: a process that has imported more of
    # tiermem (this one) may have registered more migration steps than they know
    db = tmp_path / "data" / "tiermem.db"
    go = tmp_path / "go"
    procs = [worker("append", str(db), str(w), str(PER_WRITER), str(go),
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE) for w in range(WRITERS)]
    try:
        for p in procs:  # all children are connected (and migrated) before any of them writes
            assert p.stdout is not None
            assert p.stdout.readline().strip() == "ready", p.stderr.read() if p.stderr else ""
        go.touch()
        returned = []
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
            returned.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()

    with raw(db) as conn:
        rows = conn.execute(
            "SELECT position, json_extract(body, '$.content') FROM messages WHERE conversation_id = 'shared' "
            "ORDER BY position"
        ).fetchall()
        turns = conn.execute("SELECT COUNT(*) FROM turns WHERE conversation_id = 'shared'").fetchone()[0]
    total = WRITERS * PER_WRITER
    # the log holds exactly 0..1999, no gap, no duplicate
    assert [r[0] for r in rows] == list(range(total))
    assert turns == total
    # what each writer was told matches the log, and no two writers were told the same position
    all_returned = [p for ps in returned for p in ps]
    assert sorted(all_returned) == list(range(total))
    content_at = dict(rows)
    for w, positions in enumerate(returned):
        assert [content_at[p] for p in positions] == [f"w{w}-{i}" for i in range(PER_WRITER)]
        # a writer's own messages appear in the order it wrote them
        assert positions == sorted(positions)


def test_two_stores_catching_up_at_once_store_each_vector_once(
    tmp_path: Path, counter: BpeTokenCounter, embedder: FastEmbedder
) -> None:
    # two connections (as two processes would have) embed the same backlog at once;
    # the store step re-checks `embedded = 0` under the write lock
    db = tmp_path / "data" / "tiermem.db"
    a = ColdStore(db, tokens=counter, embedder=embedder)
    b = ColdStore(db, tokens=counter, embedder=embedder)
    try:
        a.append_many("backlog", [Message(role="user", content=f"turn number {i}") for i in range(60)])
        a.index_pending(max_rows=1)  # make the vector table first, as a running service would have
        with ThreadPoolExecutor(2) as pool:
            done = list(pool.map(lambda s: s.index_pending(batch=8), (a, b)))
        assert sum(done) >= 59  # each did real work or skipped what the other stored
        assert a.integrity() == {"messages": 60, "turns": 60, "fts": 60, "vectors": 60}
        assert b.stats()["pending_embeddings"] == 0
    finally:
        a.close()
        b.close()

"""A rebuild killed while it re-embeds (minutes, on a large log) leaves the turns labelled
as appends label them, with a real child and a real SIGKILL.

`rebuild` re-inserts the turn index in one transaction, then embeds everything, then
relabels. The rows went in without labels, so a kill during the embedding left every turn
unlabelled: load-bearing turns were no longer pinned and nothing put the labels back.
The append-time labels (rules, no model) are now written with the rows
(`ColdLog.labeler`). Supersession, which needs the vectors, is still replayed at the end:
an interrupted rebuild is rerun for that (README, Operations).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder

CHILD = """
import sys, time
from pathlib import Path
from tiermem import Config, Memory
from tiermem.tiers.cold import ColdStore

def stall(self, *args, **kwargs):
    print("EMBEDDING", flush=True)
    time.sleep(600)

ColdStore.index_pending = stall
Memory(Config(data_dir=Path(sys.argv[1])), hot=False, background_indexing=False).rebuild()
print("NOT KILLED", flush=True)
"""


def labels(mem: Memory, conv: str) -> list[tuple[int, str | None, bool, int]]:
    key = mem.cold.key_of("default", conv) or ""
    return [(t.position, t.intent, t.load_bearing, t.priority) for t in mem.cold.turns(key)]


def test_a_rebuild_killed_while_it_embeds_leaves_the_labels(tmp_path: Path,
                                                            embedder: FastEmbedder) -> None:
    cfg = Config(data_dir=tmp_path / "data")
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append_many("trip", [
            {"role": "user", "content": "Planning a trip to Lisbon in May."},
            {"role": "assistant", "content": "Great, what do you need?"},
            {"role": "user", "content": "Always book aisle seats for me, never the middle."},
            {"role": "user", "content": "I am allergic to peanuts."},
            {"role": "assistant", "content": "Noted."},
        ])
        before = labels(mem, "trip")
        assert any(lb for _p, _i, lb, _pr in before)  # the premise: something is load-bearing

    child = subprocess.Popen([sys.executable, "-c", CHILD, str(cfg.data_dir)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "EMBEDDING"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL

    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        assert labels(mem, "trip") == before

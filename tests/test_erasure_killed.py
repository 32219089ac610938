"""An erasure whose process is killed between its commit and the end of its scrub is
finished by the next process (DESIGN invariant 3), with a real child and a real SIGKILL.

The deleting transaction commits first; then come the scrub (FTS merge, freed pages,
WAL truncation: most of an erasure's time on a large file) and the deletion of the
incarnation's Redis keys. Before, a process killed in that window (an OOM kill, a
deploy) left the erased text in the FTS segments until some later erasure, and in Redis
for good (hot keys have no TTL), with nothing recorded to finish it, and a retry
answered 404. Now the erasure's own transaction records what it owes (the Redis keys,
and a scrub marker): the next open scrubs, and the next Memory with a hot tier purges.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from cold_helpers import raw
from test_erasure import CANARY, _files_with, _plant, _redis_with

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.redis_server import EmbeddedRedis
from tiermem.tiers.schema import SCRUB_PENDING_KEY

# the child erases; its scrub stalls after the commit (the kill's timing, nothing else)
CHILD = """
import sys, time
from pathlib import Path
from tiermem import Config, Memory
from tiermem.tiers.cold import ColdStore

def stall(*args, **kwargs):
    print("COMMITTED", flush=True)
    time.sleep(600)

ColdStore.reclaim = stall
mem = Memory(Config(data_dir=Path(sys.argv[1])), background_indexing=False)
how = sys.argv[2]
if how == "delete_conversation":
    mem.delete_conversation("secret", namespace="acme/alice")
elif how == "delete_namespace":
    mem.delete_namespace("acme/alice")
else:
    mem.prune(0, namespace="acme/alice")
print("NOT KILLED", flush=True)
"""

HOWS = ["delete_conversation", "delete_namespace", "prune"]  # the three ways to erase


def kill_after_commit(data: Path, how: str) -> None:
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(data), how], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "COMMITTED"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL


@pytest.mark.parametrize("how", HOWS)
def test_the_next_process_finishes_a_killed_erasure(tmp_path: Path, embedder: FastEmbedder,
                                                     how: str) -> None:
    data = tmp_path / "data"
    cfg = Config(data_dir=data)
    with Memory(cfg, embedder=embedder, background_indexing=False) as mem:
        _plant(mem, "acme/alice", "secret")
        mem.append("kept", {"role": "user", "content": "another user's thread"}, namespace="acme/bob")
        assert _redis_with(mem, CANARY.encode())  # the premise: Redis holds it
    try:
        kill_after_commit(data, how)
        # killed before the scrub: its marker set. (Not "the text still in the file":
        # every erasure's Redis purge bookkeeping commits right after its batch, which
        # may checkpoint the text out of the WAL before the kill.)
        with raw(cfg.db_path) as conn:
            assert conn.execute("SELECT 1 FROM meta WHERE key = ?", (SCRUB_PENDING_KEY,)).fetchone()

        with Memory(cfg, embedder=embedder, background_indexing=False) as mem:
            assert [t["id"] for t in mem.tombstones(namespace="acme/alice")] == ["secret"]
            assert _redis_with(mem, CANARY.encode()) == []
            assert mem.cold.deferred_purges() == []
            assert _files_with(cfg.db_path, CANARY.encode()) == []  # scrubbed at open
            assert mem.history("kept", namespace="acme/bob")[0].text == "another user's thread"
    finally:
        EmbeddedRedis(data).stop()


def test_an_erasure_without_a_hot_tier_leaves_the_redis_keys_owed(tmp_path: Path,
                                                                  embedder: FastEmbedder) -> None:
    """A Memory without Redis (hot=False: a script, a CLI) erases; the keys the service's
    hot tier made are purged by the next Memory that has one."""
    data = tmp_path / "data"
    cfg = Config(data_dir=data)
    open_hot: Callable[[], Memory] = lambda: Memory(cfg, embedder=embedder, background_indexing=False)  # noqa: E731
    try:
        with open_hot() as mem:
            _plant(mem, "acme/alice", "secret")
        with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
            mem.delete_conversation("secret", namespace="acme/alice")
            assert mem.cold.deferred_purges() != []
        with open_hot() as mem:
            assert _redis_with(mem, CANARY.encode()) == []
            assert mem.cold.deferred_purges() == []
    finally:
        EmbeddedRedis(data).stop()

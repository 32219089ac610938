"""`close()`, or an exit without it, ends the background indexer's catch-up of a backlog
at the next pool (it reads no further one and stores what it embedded): the rest stays
pending, the next catch-up embeds it, and nothing is lost; the wait is about a pool, not
the backlog.

On the code before, the indexer went on through the whole backlog: `close()` waited for
it (up to 30 s, then closed the store under it), and an exit whose backlog took longer
than that aborted the process ("terminate called without an active exception", rc 134:
the daemon thread was inside onnxruntime as the interpreter finalized; 4,000 appended
turns: 39 s and rc 134, now 10 s and rc 0). Here pools are
small (`embedding_batch_size` 4: 64 turns) so the backlog is many pools (12) yet quick to
embed; on the code before, no turn was left pending.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from cold_helpers import child_env

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.store import INDEX_POOL_BATCHES

BATCH = 4
BACKLOG = 768  # turns: 12 pools of BATCH * INDEX_POOL_BATCHES (the catch-up after embeds ~700)

# argv: data dir, "close" or "exit", batch size, backlog, pending turns at which to stop
CHILD = """
import sys, time
from tiermem import Config, Memory
data, how, batch, backlog, stop_at = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:])
m = Memory(Config(data_dir=data, embedding_batch_size=batch), hot=False)
m.append("c1", {"role": "user", "content": "hello"})
m.warm_up()  # the model is loaded: the indexer embeds what is appended from now on
m.append_many("c1", [{"role": "user", "content": f"note {i}: the garden, the dog and the trip to Lisbon"}
                     for i in range(backlog)])
while m.cold.pending_embeddings() > stop_at:  # until the indexer has stored a pool of them
    time.sleep(0.01)
if how == "close":
    m.close()
print("done")
"""


@pytest.mark.parametrize("how", [
    "close",  # close() while the indexer works through the backlog
    "exit",  # the script ends without close(): the exit handler stops the indexer
])
def test_a_stop_leaves_the_backlog_pending_and_a_catch_up_embeds_it(how: str, tmp_path: Path,
                                                                   shared_vectors: FastEmbedder) -> None:
    env = child_env()
    env.pop("OMP_NUM_THREADS", None)
    args = [str(tmp_path / "data"), how, str(BATCH), str(BACKLOG), str(BACKLOG - BATCH * INDEX_POOL_BATCHES)]
    out = subprocess.run([sys.executable, "-c", CHILD, *args], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "done", out.stderr[-2000:]
    assert "terminate called" not in out.stderr
    # the catch-up after runs here on the session's loaded model (the child had its own),
    # each distinct text's vector computed once for the session (conftest.shared_vectors):
    # both cases leave the same BACKLOG texts pending, ~700 at ~6 ms each on one thread,
    # and what is checked is which turns the catch-up stores, not how their vectors come
    with Memory(Config(data_dir=tmp_path / "data", embedding_batch_size=BATCH), embedder=shared_vectors, hot=False,
                background_indexing=False) as m:
        pending = m.cold.pending_embeddings()
        # stopped within a pool or two (the one embedding as the stop came, and one the
        # pipeline may have read just before); half the backlog leaves room for timing
        assert pending > 0, "the indexer went on through the whole backlog"
        assert pending >= BACKLOG // 2
        assert m.catch_up() == pending
        assert m.cold.pending_embeddings() == 0
        assert len(m.history("c1", limit=BACKLOG + 1)) == BACKLOG + 1

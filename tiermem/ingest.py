"""Bulk ingest with embeddings in one step: an import whose embedding catch-up runs beside
its writes (`tiermem import --index`).

A plain import writes every turn and leaves the embedding to later (`tiermem index`):
done one after the other, the writes run on one core while the model, which needs every
core, waits for them. Here one catch-up call (`ColdLog.index_pending`) runs in a thread
beside the writes and reads each pool as soon as a whole pool of finished conversations
is committed, so the cores are busy from the first pool on (the writes are Python and
hold the GIL; onnxruntime's runs release it).

Invariants:

- **Same data as the two steps.** The writes are `import_dataset`'s (same appends, same
  report, the same idempotence); the catch-up is one `index_pending` call whose pools
  are cut where a catch-up after the import cuts them: each read waits
  (`ColdStore.read_gate`) until a whole pool of rows of finished conversations (and of
  turns pending before) is committed, or the writes ended. So the same rows are
  embedded together and hooked in the same batches, and a conversation is hooked only
  once it is all written, as after the import (tested: same calls, vectors, supersession).
  (A chunk of at most 64 turns holding a correction is embedded at append when the model
  is loaded, in both paths alike: consolidation.supersede.INLINE_INDEX_ROWS.)
- **The writes never wait for the embedding.** The import runs in the caller's thread,
  exactly as without `--index`; the catch-up only reads what is committed.
- **Done means embedded.** It returns after the catch-up read past the last write, so
  every turn the import appended (and any left pending before) has its vector, or
  raises. A finished conversation counts toward a pool with the turns it still has
  pending: a chunk that holds a correction may have embedded its conversation's turns
  at append already, and counting those let the catch-up read ahead of the writes,
  find nothing and stop with turns pending. Whatever a race still leaves is embedded
  after the writes, in the caller's thread, before it returns. An import error is
  raised after the catch-up stopped (it reads no further pool and ends after the one
  it was storing: the turns not stored stay pending, as after a plain import); a
  catch-up error is raised after the import finished (the writes are kept, the turns
  pending).
- A store without `read_gate` (PostgreSQL) runs the two steps one after the other.
- The writes follow the file (`import_dataset` reads it again, in order): conversations
  whose lines interleave in a file are appended chunk by chunk in turn, so the catch-up,
  which reads pending rows in log order, may read an unfinished one's rows in a pool
  before it is all written. A file with each conversation's lines together (what
  `tiermem export` writes, a LoCoMo file, a conversation object a line) keeps every
  invariant above.
"""

from __future__ import annotations

import threading
from typing import Any

from tiermem.evals.conversations import ImportReport, Source, import_dataset
from tiermem.tiers.errors import CatchUpStopped
from tiermem.tiers.store import INDEX_POOL_BATCHES


def import_and_index(memory: Any, data: Source, *, namespace: str, batch: int = 1000,
                     progress: Any = None, embedded: Any = None,
                     restore_erased: bool = False) -> tuple[ImportReport, int]:
    """`import_dataset(memory, data, ...)` with the embedding catch-up beside it; returns
    the import's report and how many turns the catch-up embedded. `progress(n)` is the
    import's (messages written), `embedded(n)` the catch-up's (turns stored with vectors),
    called from the catch-up's thread."""
    cold = memory.cold
    if getattr(cold, "embedder", None) is None or not hasattr(cold, "read_gate"):
        # nothing to embed with, or a store whose reads cannot be held: the two steps
        report = import_dataset(memory, data, namespace=namespace, batch=batch, progress=progress,
                                restore_erased=restore_erased)
        return report, memory.catch_up() if getattr(cold, "embedder", None) is not None else 0
    pool = memory.config.embedding_batch_size * INDEX_POOL_BATCHES  # what index_pending reads at once
    cond = threading.Condition()
    # rows the catch-up may read: those pending before, then each finished conversation's
    ready = [cold.pending_embeddings()]
    writes_done = [False]
    stop = threading.Event()
    done = [0]
    failed: list[BaseException] = []

    def finished(n: int, name: str) -> None:
        # the turns of this conversation the catch-up will find pending, not all `n` it
        # appended: an append's own catch-up may have embedded some (see the docstring)
        key = cold.key_of(namespace, name)
        left = cold.pending_embeddings(key) if key is not None else n
        with cond:
            ready[0] += left
            cond.notify_all()

    def gate(read: int) -> None:
        # a whole pool of finished conversations, or whatever is left once the writes ended
        with cond:
            cond.wait_for(lambda: writes_done[0] or ready[0] - read >= pool)
        if stop.is_set():  # the import failed: read nothing more
            raise CatchUpStopped("the import failed")

    def stored(n: int) -> None:
        done[0] += n
        if embedded is not None:
            embedded(n)
        if stop.is_set():
            raise CatchUpStopped("the import failed")

    def catch_up() -> None:
        try:
            cold.index_pending(batch=memory.config.embedding_batch_size, progress=stored)
        except CatchUpStopped:
            return
        except BaseException as exc:  # re-raised in the caller's thread, after the writes
            failed.append(exc)

    cold.read_gate = gate
    # not a daemon: its first embed may build the onnxruntime session, and an exit in the
    # middle of that aborts the process (see tiermem.memory.load_in_background)
    indexer = threading.Thread(target=catch_up, name="tiermem-ingest-index", daemon=False)
    indexer.start()
    try:
        report = import_dataset(memory, data, namespace=namespace, batch=batch, progress=progress,
                                finished=finished, restore_erased=restore_erased)
    except BaseException:
        stop.set()
        raise
    finally:
        with cond:
            writes_done[0] = True
            cond.notify_all()
        indexer.join()
        cold.read_gate = None
    if failed:
        raise failed[0]
    if cold.pending_embeddings():  # a read that overtook the writes ended the catch-up early
        cold.index_pending(batch=memory.config.embedding_batch_size, progress=stored)
    return report, done[0]

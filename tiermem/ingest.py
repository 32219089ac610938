"""Bulk ingest with embeddings in one step: an import whose embedding catch-up runs beside
its writes (`tiermem import --index`).

A plain import writes every turn and leaves the embedding to later (`tiermem index`):
written one after the other, the writes run on one core while the model, which needs
every core, waits for them. Here a catch-up thread starts as soon as the first chunk is
committed and embeds what is committed while the import writes the rest, so the cores
are busy from the start (the writes are Python and hold the GIL; onnxruntime's runs
release it).

Invariants:

- **Same data as the two steps.** The writes are `import_dataset`'s (same appends, same
  report, the same idempotence); the catch-up is `ColdLog.index_pending` (same vectors,
  hooks in log order). Its pools are cut at other places than a catch-up after the
  import would cut them; what the hooks record does not depend on that
  (tests/test_ingest_index.py, tests/test_ingest_overlapped.py).
- **The writes never wait for the embedding.** The import runs in the caller's thread,
  exactly as without `--index`; the catch-up only reads what is committed.
- **Done means embedded.** It returns after a last catch-up that began after the last
  write, so every turn the import appended (and any left pending before) has its vector,
  or raises. An import error is raised after the catch-up stopped (at the end of the pool
  it was storing: the turns not stored stay pending, as after a plain import); a catch-up
  error is raised after the import finished (the writes are kept, the turns pending).
- Without an embedder (none configured) it is the plain import.
"""

from __future__ import annotations

import threading
from typing import Any

from tiermem.evals.conversations import Dataset, ImportReport, import_dataset


class _Stopped(Exception):
    """Raised from the catch-up's progress hook to end it after the pool it stored."""


def import_and_index(memory: Any, data: Dataset, *, namespace: str, batch: int = 1000,
                     progress: Any = None, embedded: Any = None) -> tuple[ImportReport, int]:
    """`import_dataset(memory, data, ...)` with the embedding catch-up beside it; returns
    the import's report and how many turns the catch-up embedded. `progress(n)` is the
    import's (messages written), `embedded(n)` the catch-up's (turns stored with vectors),
    called from the catch-up's thread."""
    cold = memory.cold
    if getattr(cold, "embedder", None) is None:  # nothing to embed with: the plain import
        return import_dataset(memory, data, namespace=namespace, batch=batch, progress=progress), 0
    wake = threading.Event()  # a chunk was committed, or the writes ended
    writes_done = threading.Event()
    stop = threading.Event()
    done = [0]
    failed: list[BaseException] = []

    def stored(n: int) -> None:
        done[0] += n
        if embedded is not None:
            embedded(n)
        if stop.is_set():
            raise _Stopped

    def catch_up() -> None:
        while True:
            wake.wait()
            wake.clear()
            last = writes_done.is_set()  # read before the call: one more call follows a late write
            if stop.is_set():
                return
            try:
                cold.index_pending(batch=memory.config.embedding_batch_size, progress=stored)
            except _Stopped:
                return
            except BaseException as exc:  # re-raised in the caller's thread, after the writes
                failed.append(exc)
                return
            if last:
                return

    def written(n: int) -> None:
        if n:
            wake.set()
        if progress is not None:
            progress(n)

    # the catch-up's first read is one chunk, short of a pool: its reader goes on with the
    # chunks committed meanwhile, pipelined (SQLite's store; others end the call and loop)
    short_reads = getattr(cold, "pipeline_short_reads", None)
    if short_reads is not None:
        cold.pipeline_short_reads = True
    # not a daemon: its first embed may build the onnxruntime session, and an exit in the
    # middle of that aborts the process (see tiermem.memory.load_in_background)
    indexer = threading.Thread(target=catch_up, name="tiermem-ingest-index", daemon=False)
    indexer.start()
    try:
        report = import_dataset(memory, data, namespace=namespace, batch=batch, progress=written)
    except BaseException:
        stop.set()
        raise
    finally:
        writes_done.set()
        wake.set()
        indexer.join()
        if short_reads is not None:
            cold.pipeline_short_reads = short_reads
    if failed:
        raise failed[0]
    return report, done[0]

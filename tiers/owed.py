"""Decisions owed after embedding: the turns whose `on_embedded` hook failed.

A turn's vector is committed with `embedded = 1` before the hook (supersession) runs,
and nothing embeds it again, so a hook that fails (a lock held past busy_timeout_ms by
an erasure's VACUUM FULL or an operator's LOCK TABLE, a busy SQLite file) would lose its
decision for good: an old value stays current after its correction.

Invariants (both engines, through `OwedDecisions`):
- A failed hook's turns are recorded in meta, one row per turn id (`OWED_PREFIX` + id:
  an id, never a conversation's name or text), and kept in this process's memory as well
  (where the meta write fails too, this process still retries them).
- Each `index_pending` call first retries what is owed: the hook again for those turns, in
  log order, and the row goes once it ran; a turn erased meanwhile just drops its row.
- Rows another process records reach this one: every writer of owed rows (`owe` here,
  migrate-store's copy into a live target) sets `OWED_MARK_KEY` to a fresh token in the
  same transaction, and each call reads that one row by its key (a primary-key lookup:
  one statement) and reads the owed rows again only where the token differs from the one
  it read them under (at the first call: no token yet). The rows are read with the
  prefix's `substr`, which no index serves (meta holds a row per migrated conversation
  too), so only then. Before 2026-12-06 they were read once per store object: a decision
  another process owed, or migrate-store carried into a target a process held open, was
  never decided there until the store was opened again (tests/test_owed_reload_live.py).
  Rows another process deleted (decided) may be retried here once more: harmless.
- A retry that fails again keeps the row for the next call; the hook deciding a turn
  twice changes nothing (supersession is decided once: tests/test_supersede_decided_once).
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Callable, Sequence

import numpy as np

log = logging.getLogger(__name__)

OWED_PREFIX = "owed-decision:"  # meta key prefix, + a turn's id (no LIKE wildcard in it)
# meta key whose value changes with each recording of owed rows (not under OWED_PREFIX)
OWED_MARK_KEY = "owed-decisions-mark"
MARK_TOKEN_BYTES = 8  # a fresh random token per recording (16 hex characters)


def new_mark() -> str:
    """A fresh value for OWED_MARK_KEY: a process that read the rows under another re-reads them."""
    return secrets.token_hex(MARK_TOKEN_BYTES)

Hook = Callable[[list[tuple[str, int, np.ndarray]]], None]


class OwedDecisions:
    """One store's owed decisions; the engine supplies its SQL as the callables."""

    def __init__(self, *, read_keys: Callable[[], list[str]], read_mark: Callable[[], str | None],
                 record: Callable[[list[str], str], None], forget: Callable[[list[str]], None],
                 turns: Callable[[list[int]], list[tuple[int, str, int]]],
                 vectors: Callable[[str, Sequence[int]], dict[int, np.ndarray]]) -> None:
        self._read_keys = read_keys  # the keys under OWED_PREFIX
        self._read_mark = read_mark  # OWED_MARK_KEY's value (None: never set)
        self._record = record  # the keys (value '1', kept where there) and OWED_MARK_KEY = the token: one transaction
        self._forget = forget
        self._turns = turns  # (id, conversation, position) of those ids still embedded
        self._vectors = vectors
        self._ids: set[int] = set()
        self._loaded = False
        self._mark: str | None = None  # OWED_MARK_KEY's value when the rows were last read
        self._lock = threading.Lock()  # guards _ids, _loaded and _mark
        self._retrying = threading.Lock()  # one retry at a time: each turn decided once per retry

    def owe(self, ids: Sequence[int]) -> None:
        """Record that the hook failed for these turns; never raises."""
        with self._lock:
            self._ids.update(ids)
        try:
            self._record([OWED_PREFIX + str(i) for i in ids], new_mark())
        except Exception:  # the same lock may hold meta: this process still retries them
            log.warning("could not record the decisions owed for %d turns; this process retries them",
                        len(ids), exc_info=True)

    def retry(self, hook: Hook | None) -> None:
        """Run the hook again for what is owed; never raises (the next call retries)."""
        if hook is None or not self._retrying.acquire(blocking=False):
            return
        try:
            self._retry(hook)
        except Exception:
            log.warning("could not decide the turns owed a decision after embedding; will retry", exc_info=True)
        finally:
            self._retrying.release()

    def _retry(self, hook: Hook) -> None:
        mark = self._read_mark()  # read before the rows: a recording between the two is read next call
        with self._lock:
            stale = not self._loaded or mark != self._mark
        if stale:
            found = []
            for key in self._read_keys():
                try:
                    found.append(int(key[len(OWED_PREFIX):]))
                except ValueError:
                    continue  # not one of ours: left alone
            with self._lock:
                self._ids.update(found)  # kept: those this process's own meta write missed
                self._loaded, self._mark = True, mark
        with self._lock:
            ids = sorted(self._ids)
        if not ids:
            return
        by_conv: dict[str, list[tuple[int, int]]] = {}
        for tid, conv, pos in self._turns(ids):
            by_conv.setdefault(conv, []).append((pos, tid))
        done = set(ids) - {tid for pairs in by_conv.values() for _pos, tid in pairs}  # erased since
        for conv, pairs in by_conv.items():
            pairs.sort()
            vecs = self._vectors(conv, [p for p, _tid in pairs])
            try:
                hook([(conv, p, vecs.get(p, np.zeros(0, dtype=np.float32))) for p, _tid in pairs])
            except Exception:
                log.warning("after-embedding hook failed again for %d turns; will retry", len(pairs), exc_info=True)
                continue
            done.update(tid for _pos, tid in pairs)
        if done:
            self._forget([OWED_PREFIX + str(i) for i in sorted(done)])
            with self._lock:
                self._ids.difference_update(done)

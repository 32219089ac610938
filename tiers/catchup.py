"""The embedding catch-up's pipeline: the next pool is read and embedded while the
caller's thread stores the current one and runs its after-embedding hooks.

A catch-up (`ColdLog.index_pending`) repeats three steps per pool of pending turns:
read (and decode) the rows, embed their texts (several threads, tiers/embed_onnx.py),
store the vectors in one transaction and run the `on_embedded` hook (supersession, one
thread). Done one after another, the cores idle while the single-threaded steps run;
here a producer thread reads and embeds pool N+1 while the caller stores pool N.

Invariants:

- **Same order, same work.** Pools are read in the same order and cut the same way as
  the one-at-a-time loop (the reader resumes after the last row it read, not after the
  last one stored), and they are stored and hooked in that order by the caller's thread
  alone, so the hooks see exactly what they saw before.
- **Bounded.** At most `PIPELINE_DEPTH` embedded pools wait to be stored, besides the one
  being embedded and the one being stored: memory stays a few pools' worth.
- **Errors reach the caller; nothing is lost.** A failure to read or embed is re-raised
  in the caller's thread after the pools before it are stored; a failure to store stops
  the producer and is re-raised. A pool that was read or embedded but not stored leaves
  its turns pending (`embedded = 0`) for the next catch-up: nothing is marked that has
  no vector.
- **Texts ahead.** `ColdLog.texts_ahead`, when set, names texts the hook will embed
  for a pool's turns; the producer embeds them with the pool (they land in the
  embedder's memo of recent texts, tiers/embed.py), so the hook's own call finds them
  there. Only speed depends on it: a text evicted from the memo is embedded again.
- A call whose first read is not a full pool (one conversation's few new turns, a live
  append) runs in the caller's thread: no thread is started for one pool.
- The producer is a daemon thread that ends with the call (joined before it returns).
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, NamedTuple, TypeVar, cast

P = TypeVar("P")  # a pool: the rows read
V = TypeVar("V")  # what embedding a pool gave

# Embedded pools that may wait for the caller's store step: one is enough to keep the
# embedder busy while a store runs (on LoCoMo a pool's store and hooks take ~0.13 CPU-s,
# its embedding ~3 s on two cores)
# and bounds memory at about three pools (one embedding, one waiting, one storing).
PIPELINE_DEPTH = 1
# How often a blocked producer looks whether the caller has given up (seconds).
_POLL_S = 0.05


class PendingTurn(NamedTuple):
    """A turn a catch-up is about to embed, as `ColdLog.texts_ahead` sees it."""

    conversation_id: str
    position: int
    role: str
    intent: str | None
    load_bearing: bool
    body: dict[str, Any]


# Texts the after-embedding hook will embed for the turns of a pool (supersession's
# meaning search embeds each correction's assertive part): embedded in the producer with
# the pool, in the same call, so the hook finds them in the embedder's memo instead of
# running the model on one thread while the other cores wait. Each text comes with the
# conversation it is for: the memo finds a vector again only in that conversation's scope.
TextsAhead = Callable[[list[PendingTurn]], list[tuple[str, str]]]


class Claims:
    """The turns (by id) that a catch-up of this store object is embedding now, so that
    another catch-up of the same process leaves them to it: in `tiermem serve` a context's
    inline catch-up and the background indexer read the same backlog (an import's first
    pool, in log order, is both the indexer's next pool and the conversation's), and each
    embedded it: the model ran twice per turn, one vector was kept. A catch-up reads and
    claims under `lock` (`take`), and releases a turn once its vector is committed or the
    call ends without it (`release`), under `lock` too: a reader then either finds the
    claim or reads the turn's `embedded = 1` (its read comes after the commit), never
    neither. Only this process's catch-ups are told; another process's are kept from
    storing a vector twice by the store step's `embedded = 0` recheck, as before. A
    context (a search) whose catch-up left turns of its conversation (its scope) to
    another one then waits for them (`Deciding.wait`, at most Memory's CLAIMED_WAIT_S):
    else its plan (its hits) depended on which thread claimed the turn just appended. Another process's claims are not seen:
    its turns are embedded here too, as before.

    One reader does not leave them: supersession's catch-up of the turns before a live
    correction (`index_pending(read_claimed=True)`, consolidation.supersede) needs their
    vectors before its meaning search, in the hook of the catch-up that stored the
    correction. Left to their claimant, the search found no vector for the statement
    being corrected, nothing was superseded, and nothing repaired it later (a turn's own
    check looks back only). It reads and embeds them again (at most INLINE_INDEX_ROWS
    turns), takes the claims of the free ones only, and whichever commits first keeps
    its vector and runs their hook (the `embedded = 0` recheck): once, as between two
    processes. It waits for no claimant: hooks never wait (tiers.catchup.Deciding)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._ids: set[int] = set()
        self.skipped = 0  # turns a read found claimed by another catch-up (stats, tests)

    def take(self, ids: list[int], mine: set[int]) -> set[int]:
        """Under `lock`: those of `ids` no catch-up holds, now held by the caller (and added
        to its `mine`)."""
        free = {i for i in ids if i not in self._ids}
        self.skipped += len(ids) - len(free)
        self._ids |= free
        mine |= free
        return free

    def held(self) -> list[int]:
        """Under `lock`: every id held now (a read that excludes them in its query)."""
        return sorted(self._ids)

    def release(self, ids: set[int] | list[int], mine: set[int]) -> None:
        """The caller's claims on `ids` end (their vectors are committed, or it gave up).
        Only those in its `mine`: a catch-up that read turns another one holds
        (`index_pending(read_claimed=True)`) leaves that one's claims as they are."""
        with self.lock:
            own = mine.intersection(ids)
            self._ids.difference_update(own)
            mine.difference_update(own)


class _Failed:
    """The producer's failure, passed to the caller's thread to re-raise."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


_DONE = object()


class _Producer(Generic[P, V], threading.Thread):
    def __init__(self, pools: Iterator[P], embed: Callable[[P], V], depth: int) -> None:
        super().__init__(name="tiermem-catchup", daemon=True)
        self.pools = pools
        self.embed = embed
        self.out: queue.Queue[object] = queue.Queue(maxsize=max(1, depth))
        self.stop = threading.Event()

    def _put(self, item: object) -> bool:
        while not self.stop.is_set():
            try:
                self.out.put(item, timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def run(self) -> None:
        try:
            for pool in self.pools:
                if self.stop.is_set():
                    return
                vecs = self.embed(pool)
                if not self._put((pool, vecs)):
                    return
        except BaseException as exc:  # re-raised in the caller's thread
            self._put(_Failed(exc))
            return
        self._put(_DONE)


def pipelined(pools: Iterator[P], embed: Callable[[P], V], store: Callable[[P, V], None], *,
              depth: int = PIPELINE_DEPTH, last: Callable[[P], bool] | None = None) -> None:
    """For each pool of `pools` (read in a producer thread, in order): `embed` it there,
    then `store(pool, vectors)` in the caller's thread, in the same order, while the
    producer reads and embeds the next. `depth` 0, or a first pool that `last` says is
    the last one (a short read): all in the caller's thread, one pool after another (the
    loop before the pipeline). Errors: see the module docstring."""
    if depth <= 0 or last is not None:
        first = next(pools, None)
        if first is None:
            return
        pools = itertools.chain([first], pools)
        if depth <= 0 or (last is not None and last(first)):
            for pool in pools:
                store(pool, embed(pool))
            return
    producer: _Producer[P, V] = _Producer(pools, embed, depth)
    producer.start()
    try:
        while True:
            item = producer.out.get()
            if item is _DONE:
                return
            if isinstance(item, _Failed):
                raise item.exc
            got = cast("tuple[P, V]", item)
            store(got[0], got[1])
    finally:
        producer.stop.set()
        producer.join()


class Deciding:
    """The turns (conversation key, position) that a catch-up of this store object has
    read and whose after-embedding hook has not yet run to its end, so that an append
    can keep its promise that a correction's supersession is recorded before it returns
    (`Memory.append`): its own catch-up finds nothing to do for a turn that the
    background indexer (or a context's, a search's catch-up) read first, and that
    catch-up records the supersession only in its hook, after its commit. The append
    waits for it here (`wait`).

    A catch-up holds a turn from its read (under the same lock as its `Claims` step, so a
    reader that finds a turn claimed or embedded finds it held, or its hook over) to the
    end of the hook for its batch, or to the end of the call for a turn read and not
    stored. A count per turn: two catch-ups of one process may read the same turn where
    nothing claims it, and each releases its own read. Only this process's catch-ups are
    told; another process that embeds the turn first decides it on its own time."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._held: Counter[tuple[str, int]] = Counter()

    def hold(self, turns: Iterable[tuple[str, int]], mine: Counter[tuple[str, int]]) -> None:
        """The caller's catch-up read `turns` (added to its `mine`)."""
        with self._changed:
            for t in turns:
                self._held[t] += 1
                mine[t] += 1

    def release(self, turns: Iterable[tuple[str, int]], mine: Counter[tuple[str, int]]) -> None:
        """The caller's hook for `turns` ran (or it gave them up): those of them it held
        are no longer its to decide."""
        with self._changed:
            for t in turns:
                if mine[t] <= 0:
                    continue
                mine[t] -= 1
                if mine[t] == 0:
                    del mine[t]
                self._held[t] -= 1
                if self._held[t] <= 0:
                    del self._held[t]
            self._changed.notify_all()

    def release_all(self, mine: Counter[tuple[str, int]]) -> None:
        """The end of the caller's catch-up: whatever it still holds (read, not stored)."""
        self.release(list(mine.elements()), mine)

    def wait(self, conversation_id: str, positions: Iterable[int] | None, timeout_s: float) -> bool:
        """Until no catch-up of this store holds any of `positions` of `conversation_id`
        (None: any of its turns, as a search that knows no positions asks), at most
        `timeout_s` seconds: whether that came (False: one still held them). Woken by each
        release, never polled."""
        if positions is None:
            with self._changed:
                return self._changed.wait_for(lambda: not any(c == conversation_id for c, _ in self._held),
                                              timeout=timeout_s)
        turns = [(conversation_id, p) for p in positions]
        with self._changed:
            return self._changed.wait_for(lambda: not any(t in self._held for t in turns), timeout=timeout_s)

    def conversations(self) -> set[str]:
        """The conversations (keys) some of whose turns a catch-up of this store holds now."""
        with self._changed:
            return {c for c, _ in self._held}

"""The catch-up's pipeline (tiers/catchup.py, issue 17): the next pool is read and embedded
while the caller stores the current one and runs its hooks, in the same order as one
pool after another; an error reaches the caller and a pool not stored stays pending for
the next catch-up; the hook's own texts (supersession's corrections) are embedded with
the pool, so the hook never runs the model."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from tiermem import Config, Memory
from tiermem.tiers.catchup import pipelined
from tiermem.tiers.embed_onnx import FastEmbedder

POOL = 16  # rows per pool in these tests: batch 8 x 2 batches
TURNS = 50  # four pools: 16, 16, 16, 2


class _Recording(FastEmbedder):
    """The real fast embedder, counting its calls; `fail_on` makes that call (1-based) raise."""

    def __init__(self, fail_on: int | None = None) -> None:
        super().__init__(runtime="onnx")
        self.fail_on = fail_on
        self.calls: list[int] = []
        self.second_call = threading.Event()
        self.computed: list[str] = []  # texts the model ran on (the memo answers the rest)

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls.append(len(texts))
        if len(self.calls) == 2:
            self.second_call.set()
        if self.fail_on is not None and len(self.calls) == self.fail_on:
            raise RuntimeError(f"embedding call {self.fail_on} failed")
        return super().embed(texts)

    def _compute(self, texts: list[str]) -> np.ndarray:
        self.computed.extend(texts)
        return super()._compute(texts)


def _memory(tmp_path: Path, embedder: FastEmbedder) -> Memory:
    mem = Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False, background_indexing=False)
    mem.append_many("c", [{"role": "user", "content": f"note {i} about volcanoes and lakes"} for i in range(TURNS)])
    return mem


def _vector_count(mem: Memory) -> int:
    return len(mem.cold.embeddings("c", list(range(TURNS))))


# -- the pipeline itself -----------------------------------------------------------------


# (depth, last says the first pool is the last): where the work runs
@pytest.mark.parametrize(("depth", "short"), [
    (1, False),  # pipelined: pools embedded in a producer thread
    (3, False),  # a deeper queue: the same order
    (0, False),  # depth 0: everything in the caller's thread, one pool after another
    (1, True),  # a first pool that is the last: no thread is started for it
])
def test_pools_are_stored_in_order_each_once(depth: int, short: bool) -> None:
    stored: list[tuple[int, int]] = []
    threads: set[str] = set()

    def embed(pool: int) -> int:
        threads.add(threading.current_thread().name)
        return pool * 10

    pipelined(iter(range(6)), embed, lambda p, v: stored.append((p, v)), depth=depth,
              last=(lambda p: short) if short else None)
    assert stored == [(p, p * 10) for p in range(6)]
    assert threads == ({"tiermem-catchup"} if depth and not short else {threading.current_thread().name})


def test_an_embedding_failure_is_raised_after_the_pools_before_it_are_stored() -> None:
    stored: list[int] = []

    def embed(pool: int) -> int:
        if pool == 3:
            raise ValueError("pool 3 cannot be embedded")
        return pool

    with pytest.raises(ValueError, match="pool 3"):
        pipelined(iter(range(6)), embed, lambda p, v: stored.append(p), depth=1)
    assert stored == [0, 1, 2]
    assert not any(t.name == "tiermem-catchup" for t in threading.enumerate())


def test_a_store_failure_stops_the_producer() -> None:
    embedded: list[int] = []

    def store(pool: int, _v: int) -> None:
        if pool == 1:
            raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        pipelined(iter(range(100)), lambda p: embedded.append(p) or p, store, depth=1)
    # bounded: besides the two stored, at most the queue's one and the one in hand
    assert len(embedded) <= 4
    assert not any(t.name == "tiermem-catchup" for t in threading.enumerate())


# -- the cold store's catch-up ------------------------------------------------------------


def test_the_next_pool_is_embedded_while_the_hook_runs(tmp_path: Path) -> None:
    # fails on the loop before the pipeline: there pool 2 is read only after pool 1's
    # hooks returned, so the first hook would wait in vain
    emb = _Recording()
    with _memory(tmp_path, emb) as mem:
        overlapped: list[bool] = []

        def hook(stored: list[tuple[str, int, np.ndarray]]) -> None:
            if not overlapped:
                overlapped.append(emb.second_call.wait(timeout=30))

        mem.cold.on_embedded = hook
        assert mem.cold.index_pending(batch=8, pool_batches=2) == TURNS
        assert overlapped == [True]
        assert mem.cold.pending_embeddings() == 0 and _vector_count(mem) == TURNS


def test_a_failed_pool_stays_pending_for_the_next_catch_up(tmp_path: Path) -> None:
    with _memory(tmp_path, _Recording(fail_on=2)) as mem:
        with pytest.raises(RuntimeError, match="embedding call 2 failed"):
            mem.cold.index_pending(batch=8, pool_batches=2)
        # the first pool is stored; the failed one, and those after it, are not marked
        assert mem.cold.pending_embeddings() == TURNS - POOL
        assert _vector_count(mem) == POOL
        mem.cold.embedder = FastEmbedder(runtime="onnx")
        assert mem.cold.index_pending(batch=8, pool_batches=2) == TURNS - POOL
        assert mem.cold.pending_embeddings() == 0 and _vector_count(mem) == TURNS


def test_a_failed_store_stays_pending_for_the_next_catch_up(tmp_path: Path) -> None:
    with _memory(tmp_path, FastEmbedder(runtime="onnx")) as mem:
        stores: list[str] = []

        def fault(step: str) -> None:
            if step == "index_pending.store":
                stores.append(step)
                if len(stores) == 2:
                    raise OSError("database is full")

        mem.cold._fault = fault  # type: ignore[attr-defined]  # the SQLite store's test hook
        with pytest.raises(OSError, match="database is full"):
            mem.cold.index_pending(batch=8, pool_batches=2)
        assert mem.cold.pending_embeddings() == TURNS - POOL and _vector_count(mem) == POOL
        assert not any(t.name == "tiermem-catchup" for t in threading.enumerate())
        mem.cold._fault = None  # type: ignore[attr-defined]
        assert mem.cold.index_pending(batch=8, pool_batches=2) == TURNS - POOL
        assert mem.cold.pending_embeddings() == 0 and _vector_count(mem) == TURNS


def test_the_hook_finds_its_corrections_embedded_with_the_pool(tmp_path: Path) -> None:
    # fails before texts_ahead: supersession's meaning search embedded each correction's
    # assertive part itself, on the hook's one thread (with a speaker's name, as in
    # LoCoMo, that text is not the stored one, "Ana: ...", so the memo did not have it)
    emb = _Recording()
    with Memory(Config(data_dir=tmp_path / "data"), embedder=emb, hot=False, background_indexing=False) as mem:
        turns = [{"role": "user", "name": "Ana", "content": "Seat preference: aisle seat, every time."}]
        turns += [{"role": r, "name": "Ana" if r == "user" else "Bot", "content": f"small talk {i} about volcanoes"}
                  for i in range(30) for r in ("user", "assistant")]
        turns += [{"role": "user", "name": "Ana", "content": "Switch my seat preference to window seat."}]
        mem.append_many("c", turns)
        in_hook: list[str] = []
        hook = mem.cold.on_embedded
        assert hook is not None

        def watched(stored: list[tuple[str, int, np.ndarray]]) -> None:
            before = len(emb.computed)
            hook(stored)
            in_hook.extend(emb.computed[before:])

        mem.cold.on_embedded = watched
        assert mem.cold.index_pending(batch=64) == len(turns)
        assert {r.position: r.superseded_by for r in mem.cold.turns("c") if r.superseded_by is not None} \
            == {0: len(turns) - 1}
        assert in_hook == []
        assert "Switch my seat preference to window seat." in emb.computed  # embedded with the pool

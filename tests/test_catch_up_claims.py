"""A turn is embedded once when two catch-ups of one process want it at the same time
(tiers.catchup.Claims): in `tiermem serve` a context's inline catch-up and the background
indexer read the same backlog, an import's first pool being both the indexer's next pool
(log order) and the conversation's (position order). Before, each embedded it (the model
ran twice per turn; the store step's `embedded = 0` recheck kept one vector).

Real threads of one Memory: its background indexer and the caller's context, on both
engines. The model's runs are counted below the embedder's memo of recent texts (a text
found there costs no run): the indexer's first run is held until a second run starts, so
the context's catch-up runs while the indexer's pool is in flight, whichever turns it
picks; each turn's text must reach the model once."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from pg_server import fresh_schema

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.store import INDEX_POOL_BATCHES

BATCH = 8  # embedding_batch_size: a pool of 8 x INDEX_POOL_BATCHES = 128 turns
POOL = BATCH * INDEX_POOL_BATCHES
TURNS = 2 * POOL  # the indexer's first pool, and one more for the context to take
IMPORT_BATCH = 100  # > INLINE_INDEX_ROWS: an import's batch, which append never embeds
HOLD_S = 30.0  # at most this long the first model run waits for a second one to start
DRAIN_S = 120.0  # the indexer drains the rest within this (two pools on two busy cores)


class HeldRuns:
    """`embedder._compute` (the model's run, below the memo) counting each text it is
    given, the first run held until a second one starts (or HOLD_S passed)."""

    def __init__(self, embedder: FastEmbedder) -> None:
        self.compute = embedder._compute
        self.texts: Counter[str] = Counter()
        self.runs = 0
        self.first_in = threading.Event()
        self.second_in = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            n = self.runs
            self.runs += 1
            self.texts.update(texts)
        if n == 0:
            self.first_in.set()
            self.second_in.wait(HOLD_S)
        else:
            self.second_in.set()
        return self.compute(texts)


def _line(i: int) -> str:
    return f"imported turn {i}: the ferry to the island leaves at {i % 24}:{i % 60:02d}."


@pytest.mark.parametrize("engine", [
    "sqlite",  # ColdStore: pools read by rowid (the indexer) and by position (a conversation)
    "postgres",  # PostgresStore: each read starts from the first pending turn, held ones left out
])
def test_the_indexer_and_a_context_embed_each_turn_once(tmp_path: Path, request: pytest.FixtureRequest,
                                                        embedder: FastEmbedder, engine: str) -> None:
    extra = {} if engine == "sqlite" else {"cold_url": request.getfixturevalue("pg_url"),
                                           "cold_schema": fresh_schema()}
    cfg = Config(data_dir=tmp_path / "data", embedding_batch_size=BATCH, **extra)  # type: ignore[arg-type]
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:  # the import
        for start in range(0, TURNS, IMPORT_BATCH):
            mem.append_many("c", [{"role": "user" if i % 2 == 0 else "assistant", "content": _line(i)}
                                  for i in range(start, min(TURNS, start + IMPORT_BATCH))])
        assert mem.cold.pending_embeddings() == TURNS
    runs = HeldRuns(embedder)
    embedder._compute = runs  # type: ignore[method-assign]
    try:
        with Memory(cfg, embedder=embedder, hot=False) as mem:  # as `tiermem serve` runs: the indexer's thread
            assert mem._indexer is not None
            mem._indexer.wake.set()
            assert runs.first_in.wait(HOLD_S), "the indexer never ran the model"
            # the indexer's first pool is in the model now: the context's catch-up runs meanwhile
            ctx = mem.context("c", None, 2000)
            deadline = time.monotonic() + DRAIN_S
            while mem.cold.pending_embeddings() and time.monotonic() < deadline:
                time.sleep(0.1)
            assert mem.cold.pending_embeddings() == 0
    finally:
        del embedder._compute  # the class's method again
    assert runs.second_in.is_set()  # the two catch-ups did overlap
    mine = {_line(i) for i in range(TURNS)}
    assert set(runs.texts) >= mine  # each turn reached the model (its text as embedded)
    twice = {t: n for t, n in runs.texts.items() if t in mine and n > 1}
    assert twice == {}, f"{len(twice)} turn(s) embedded more than once"
    # the context's pool was the one the indexer did not hold; what it left is said
    assert ctx.plan.vectors_pending <= TURNS - POOL

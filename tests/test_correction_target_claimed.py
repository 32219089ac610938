"""A correction supersedes the statement it revises while the background indexer is
embedding that statement (`index_pending(read_claimed=True)`, tiers.catchup.Claims).

A live append's supersession check embeds the conversation's earlier pending turns
before its meaning search (consolidation.supersede, `Superseder._nearest`). Since one
process's catch-ups claim the turns they embed, that catch-up skipped the ones the
background indexer held: with an import's first pool in the indexer's hands, the old
statement had no vector, the search did not find it, nothing was superseded, and
nothing ever looked again (the statement's own check, once the indexer stored it, looks
back only). facts() called the old spending limit current for good.

Real threads of one Memory, its background indexer and the caller, on both engines. The
interleaving is forced: the indexer's model run over the pool that holds the old
statement is held (HOLD_S at most) until the test has read the facts after the
correction's append; the correction is appended only once the indexer is in that run.
The statement shares no word with the correction: only the meaning search finds it
(cosine ~0.39 over RETRACTION_ALONE_MIN_COSINE 0.35 with the test embedder)."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pending_correction import CALLER_THREADS, FILLER, FIX, HOLD_S, IMPORT_TURNS, OLD, settle
from pg_server import fresh_schema

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder

CORRECTION_POSITION = IMPORT_TURNS


class HeldPool:
    """The embedder's run over a pool holding OLD, in a thread other than the caller's
    (the indexer, or its catch-up's reading thread), held until `release` (HOLD_S at
    most); who ran the model over OLD, by thread."""

    def __init__(self, embedder: FastEmbedder) -> None:
        self.real = embedder.embed
        self.in_pool = threading.Event()
        self.release = threading.Event()
        self.embedded_old: list[str] = []

    def embed(self, texts: list[str], *args: Any, **kwargs: Any) -> np.ndarray:
        name = threading.current_thread().name
        if OLD in texts:
            self.embedded_old.append(name)
            if name not in CALLER_THREADS and not self.in_pool.is_set():
                self.in_pool.set()
                self.release.wait(HOLD_S)
        return self.real(texts, *args, **kwargs)


@pytest.mark.parametrize("engine", [
    "sqlite",  # ColdStore: the claimed rows are skipped after the read, in Python
    "postgres",  # PostgresStore: they are left out by the read's query (t.id <> ALL(held))
])
def test_a_correction_supersedes_a_statement_the_indexer_is_embedding(
        tmp_path: Path, request: pytest.FixtureRequest, embedder: FastEmbedder, engine: str) -> None:
    extra: dict[str, Any] = {} if engine == "sqlite" else {"cold_url": request.getfixturevalue("pg_url"),
                                                          "cold_schema": fresh_schema()}
    msgs: list[dict[str, Any]] = [{"role": "user", "content": OLD}, {"role": "assistant", "content": "Noted."}]
    for i in range((IMPORT_TURNS - len(msgs)) // 2):
        msgs += [{"role": "user", "content": f"{FILLER[i % len(FILLER)]} ({i})"},
                 {"role": "assistant", "content": "I see."}]
    held = HeldPool(embedder)
    embedder.embed = held.embed  # type: ignore[method-assign]
    try:
        with Memory(Config(data_dir=tmp_path / "data", **extra), embedder=embedder, hot=False,
                    background_indexing=True) as mem:
            hooked: Counter[int] = Counter()  # each position's after-embedding hooks
            hook = mem.cold.on_embedded
            assert hook is not None

            def counted(stored: list[tuple[str, int, np.ndarray]]) -> None:
                hooked.update(pos for _conv, pos, _v in stored)
                hook(stored)

            mem.cold.on_embedded = counted
            imported = mem.append_outcome("trip", msgs)
            key = mem.cold.key_of("default", "trip")  # the store's key (the outcome answers a token)
            assert key is not None and imported.positions == list(range(IMPORT_TURNS))
            # the indexer read the import and is running the model over the old statement
            assert held.in_pool.wait(HOLD_S), "the indexer never embedded the import's pool"
            try:
                position = mem.append("trip", {"role": "user", "content": FIX})
                right_after = {f.position: f.until_position for f in mem.facts("trip")}
            finally:
                held.release.set()
            settle(mem, key, CORRECTION_POSITION)
            later = {f.position: f.until_position for f in mem.facts("trip")}
            vectors = mem.cold.embeddings(key, range(CORRECTION_POSITION + 1))
    finally:
        del embedder.embed  # the class's method again
    assert position == CORRECTION_POSITION
    assert held.embedded_old[0] not in CALLER_THREADS, held.embedded_old  # the indexer read it first
    assert right_after.get(0) == CORRECTION_POSITION, f"#0 superseded by {right_after.get(0)} right after append"
    assert later.get(0) == CORRECTION_POSITION, f"#0 superseded by {later.get(0)} once the indexer is done"
    # every turn has its vector and was decided once, whoever embedded it first
    assert sorted(vectors) == list(range(CORRECTION_POSITION + 1))
    assert hooked == Counter(range(CORRECTION_POSITION + 1)), \
        {p: n for p, n in hooked.items() if n != 1} or sorted(set(range(CORRECTION_POSITION + 1)) - set(hooked))

"""A correction decided while the statement it revises had no vector yet is searched by
meaning again once every turn before it is embedded (consolidation.supersede
`Superseder.recheck`, the `supersession_rechecks` rows: m029, PostgreSQL m016).

The meaning search of a correction sees only the earlier turns that have a vector. When
the statement it revises had none at that moment (the background indexer held it and the
model call of the check's own catch-up failed; more than INLINE_INDEX_ROWS turns were
pending before it, so the check embedded only the first of them), nothing was superseded,
and the statement's own check, once it was embedded, looked back only: facts() called the
old value current for good. Now the correction is recorded to be re-checked, and the hook
of the catch-up that embeds the last of those turns decides it again.

Real threads of one Memory, its background indexer and the caller; real SQLite files and
a real PostgreSQL schema (pg_url). The old statement shares no word with the correction:
only the meaning search finds it (cosine ~0.39 over RETRACTION_ALONE_MIN_COSINE 0.35
with the test embedder)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pending_correction import CALLER_THREADS, FILLER, FIX, HOLD_S, IMPORT_TURNS, OLD, settle
from pg_server import fresh_schema

from tiermem import Config, Memory
from tiermem.consolidation.supersede import INLINE_INDEX_ROWS
from tiermem.tiers.embed_onnx import FastEmbedder

ENGINES = [
    "sqlite",  # ColdStore: a SQLite file
    "postgres",  # PostgresStore: a fresh schema of the session's server
]


def conversation(turns: int, old_at: int) -> list[dict[str, Any]]:
    """`turns` messages, user and assistant in turn, with OLD the user's at `old_at` (even)."""
    msgs: list[dict[str, Any]] = []
    i = 0
    while len(msgs) < turns:
        text = OLD if len(msgs) == old_at else f"{FILLER[i % len(FILLER)]} ({i})"
        msgs += [{"role": "user", "content": text}, {"role": "assistant", "content": "I see."}]
        i += 1
    return msgs[:turns]


@contextmanager
def memory(tmp_path: Path, request: pytest.FixtureRequest, engine: str, embedder: FastEmbedder,
           *, background: bool) -> Iterator[Memory]:
    extra: dict[str, Any] = {} if engine == "sqlite" else {"cold_url": request.getfixturevalue("pg_url"),
                                                          "cold_schema": fresh_schema()}
    with Memory(Config(data_dir=tmp_path / "data", **extra), embedder=embedder, hot=False,
                background_indexing=background) as mem:
        yield mem


def owed(mem: Memory, key: str) -> list[int] | None:
    """The conversation's recheck rows (None: a store from before them)."""
    rows = getattr(mem.cold, "rechecks", None)
    return rows(key) if rows is not None else None


def until(mem: Memory) -> dict[int, int | None]:
    """position -> the position superseding it, of every entry facts() lists."""
    return {f.position: f.until_position for f in mem.facts("trip")}


@pytest.mark.parametrize("engine", ENGINES)
def test_caller_model_failure_is_rechecked_after_the_indexer_stores_the_statement(
        tmp_path: Path, request: pytest.FixtureRequest, embedder: FastEmbedder, engine: str) -> None:
    # (a) the reviewer's case: the indexer holds the import's pool (OLD at #0); the
    # correction's check embeds it too (read_claimed), and that model call fails
    in_pool, release = threading.Event(), threading.Event()
    failed: list[str] = []
    real = embedder.embed

    def embed(texts: list[str], *args: Any, **kwargs: Any) -> np.ndarray:
        name = threading.current_thread().name
        if OLD in texts:
            if name in CALLER_THREADS and not failed:
                failed.append(name)
                raise RuntimeError("model failed in the caller's nested catch-up")
            if name not in CALLER_THREADS and not in_pool.is_set():
                in_pool.set()
                release.wait(HOLD_S)  # held until the correction was decided
        return real(texts, *args, **kwargs)

    embedder.embed = embed  # type: ignore[method-assign]
    try:
        with memory(tmp_path, request, engine, embedder, background=True) as mem:
            mem.append_outcome("trip", conversation(IMPORT_TURNS, 0))
            key = mem.cold.key_of("default", "trip")  # the store's key (the outcome answers a token)
            assert key is not None
            assert in_pool.wait(HOLD_S), "the indexer never embedded the import's pool"
            try:
                position = mem.append("trip", {"role": "user", "content": FIX})
                right_after = owed(mem, key)
            finally:
                release.set()
            settle(mem, key, position)
            later = until(mem)
            left = owed(mem, key)
    finally:
        del embedder.embed  # the class's method again
    assert failed == ["MainThread"]  # the check's own model call over OLD did fail
    assert position == IMPORT_TURNS
    assert later.get(0) == position, f"#0 superseded by {later.get(0)} once the indexer stored it"
    assert right_after == [position]  # recorded while #0 had no vector
    assert left == []  # re-checked once: its row is gone


@pytest.mark.parametrize("engine", ENGINES)
def test_a_target_past_the_checks_catch_up_is_rechecked_after_the_backlog(
        tmp_path: Path, request: pytest.FixtureRequest, embedder: FastEmbedder, engine: str) -> None:
    # (b) more than INLINE_INDEX_ROWS turns pending before the correction, all in the
    # indexer's held pool: the correction's check embeds the first INLINE_INDEX_ROWS of
    # them (read_claimed, in log order) and searches; OLD lies past them. (At #0 the
    # check would embed it: the miss needs the target past what the check embeds.)
    old_at = INLINE_INDEX_ROWS + 16
    turns = old_at + 20
    in_pool, release = threading.Event(), threading.Event()
    real = embedder.embed

    def embed(texts: list[str], *args: Any, **kwargs: Any) -> np.ndarray:
        if OLD in texts and threading.current_thread().name not in CALLER_THREADS and not in_pool.is_set():
            in_pool.set()
            release.wait(HOLD_S)  # held until the correction was decided
        return real(texts, *args, **kwargs)

    embedder.embed = embed  # type: ignore[method-assign]
    try:
        with memory(tmp_path, request, engine, embedder, background=True) as mem:
            mem.append_outcome("trip", conversation(turns, old_at))
            key = mem.cold.key_of("default", "trip")  # the store's key (the outcome answers a token)
            assert key is not None
            assert in_pool.wait(HOLD_S), "the indexer never embedded the import's pool"
            try:
                position = mem.append("trip", {"role": "user", "content": FIX})
                first = mem.cold.embeddings(key, range(position))  # what the check could see
                right_after = owed(mem, key)
            finally:
                release.set()
            settle(mem, key, position)
            later = until(mem)
            left = owed(mem, key)
    finally:
        del embedder.embed  # the class's method again
    assert position == turns
    assert old_at not in first and len(first) >= INLINE_INDEX_ROWS  # searched without OLD's vector
    assert later.get(old_at) == position, f"#{old_at} superseded by {later.get(old_at)} once the backlog is embedded"
    assert right_after == [position]
    assert left == []


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("text", [
    FIX,  # it finds OLD: superseded, nothing to re-check
    "Actually, forget the dentist appointment I mentioned.",  # it finds nothing, with every turn embedded
])
def test_no_recheck_when_nothing_was_pending(tmp_path: Path, request: pytest.FixtureRequest,
                                             embedder: FastEmbedder, engine: str, text: str) -> None:
    # (c) a live append after every earlier turn has its vector: no row, no second search
    with memory(tmp_path, request, engine, embedder, background=False) as mem:
        mem.append_outcome("trip", conversation(8, 0))
        key = mem.cold.key_of("default", "trip")  # the store's key (the outcome answers a token)
        assert key is not None
        mem.catch_up()
        assert mem.cold.pending_embeddings(key) == 0
        pending_reads: list[int] = []
        first_pending = getattr(mem.cold, "first_pending", None)  # None: the code before

        def counted(conversation_id: str, before: int) -> int | None:
            pending_reads.append(before)
            assert first_pending is not None
            return first_pending(conversation_id, before)

        if first_pending is not None:
            mem.cold.first_pending = counted  # type: ignore[method-assign]
        position = mem.append("trip", {"role": "user", "content": text})
        rows = owed(mem, key)
        facts = until(mem)
    assert (facts.get(0) == position) == (text == FIX)
    assert rows == []
    assert pending_reads == []  # the normal path asks nothing more

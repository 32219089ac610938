"""`migrate-store` carries the supersession re-checks the source still owes
(`supersession_rechecks`, consolidation.supersede `Superseder.recheck`).

A correction decided while the statement it revises had no vector (here: the model call
over that statement fails in the source, so it stays pending) revises nothing yet and is
recorded to be searched by meaning again once every turn before it is embedded. The
statement's own check, once embedded, looks back only: only that re-check supersedes it.
Before this the copy left the row behind: the target's catch-up embedded the statement,
found nothing to re-check, and facts() called the old value current there for good. The
copy now writes the source's rows with the conversation (not digested: derived, the
target removes them as it re-checks), and the target's catch-up that embeds the
statement re-checks the correction.

Real SQLite files, a real PostgreSQL schema (tests/pg_server.py), real Memory objects
with the bundled embedder, in both directions. The old statement shares no word with the
correction: only the meaning search finds it."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pg_server import MIGRATION_DIRECTIONS, Where, migrate, migration_sides, opened

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.tokens import BpeTokenCounter

CONV = "trip"
NS = "default"  # the namespace a Memory writes to when given none
OLD = "The most I can pay for the whole Lisbon trip is $3,250, please plan around that."
FIX = "Forget the spending limit I gave you, my company is paying for everything now."
FILLER = ["I had a long day at work.", "The weather was lovely this morning.", "I made pasta for dinner."]
# an import of more than INLINE_INDEX_ROWS turns (OLD at #0): its embedding is left to
# whoever catches up (here the background indexer, held); the correction lands after it
IMPORT_TURNS = 70
HOLD_S = 20.0  # the longest the indexer's model call is held for the test (seconds)
CALLER_THREADS = ("MainThread",)  # the test's thread: the append and its catch-ups
RECHECK_TABLE = "supersession_rechecks"  # m029 / PostgreSQL m016 (spelt out: read as the test's own SQL)


def config(tmp_path: Path, where: Where, name: str) -> Config:
    """A Memory's config on `where` (a SQLite side is its data dir's file); `name` keeps each
    Memory's own files apart."""
    engine, at = where
    if engine == "sqlite":
        return Config(data_dir=Path(at).parent, db_filename=Path(at).name)
    url, schema = at.rsplit("#", 1)
    return Config(data_dir=tmp_path / name, cold_url=url, cold_schema=schema)


def memory(tmp_path: Path, where: Where, name: str, embedder: FastEmbedder) -> Memory:
    return Memory(config(tmp_path, where, name), embedder=embedder, hot=False, background_indexing=False)


def conversation() -> list[dict[str, Any]]:
    """IMPORT_TURNS messages, user and assistant in turn, OLD the user's first."""
    msgs: list[dict[str, Any]] = []
    for i in range(IMPORT_TURNS // 2):
        text = OLD if i == 0 else f"{FILLER[i % len(FILLER)]} ({i})"
        msgs += [{"role": "user", "content": text}, {"role": "assistant", "content": "I see."}]
    return msgs


def owe_a_recheck(tmp_path: Path, src: Where, embedder: FastEmbedder, *, imported: bool = False) -> int:
    """The import and its correction in the source, as tests/test_supersede_recheck.py's
    case (a) forces it: the background indexer holds the import's pool (OLD at #0) while the
    correction is appended, and every model call over OLD fails, the correction check's own
    too. The correction is decided while OLD has no vector, recorded for a re-check, and
    OLD stays pending in the source. `imported`: the import is in the source already (its
    turns pending). The correction's position."""
    in_pool, release = threading.Event(), threading.Event()
    real = embedder.embed

    def embed(texts: list[str], *args: Any, **kwargs: Any) -> np.ndarray:
        if OLD in texts:
            if threading.current_thread().name not in CALLER_THREADS and not in_pool.is_set():
                in_pool.set()
                release.wait(HOLD_S)  # held until the correction was decided
            raise RuntimeError("the model fails on the old statement in the source")
        return real(texts, *args, **kwargs)

    embedder.embed = embed  # type: ignore[method-assign]
    try:
        with Memory(config(tmp_path, src, "source"), embedder=embedder, hot=False, background_indexing=True) as mem:
            if not imported:
                mem.append_outcome(CONV, conversation())
            assert in_pool.wait(HOLD_S), "the indexer never embedded the import's pool"
            try:
                position = mem.append(CONV, {"role": "user", "content": FIX})
            finally:
                release.set()
            assert until(mem).get(0) is None  # not superseded in the source
    finally:
        del embedder.embed  # the class's method again
    return position


def rechecks(where: Where, counter: BpeTokenCounter) -> list[int]:
    """The positions of CONV's recheck rows there."""
    with opened(where, counter) as store, store.reading() as conn:
        rows = conn.execute(store.dialect.sql(f"SELECT position FROM {RECHECK_TABLE} WHERE conversation_id = ? "
                                              "ORDER BY position"), (store.key_of(NS, CONV),)).fetchall()
    return [int(r[0]) for r in rows]


def pending(where: Where, counter: BpeTokenCounter) -> list[int]:
    """The positions of CONV's turns without a vector there."""
    with opened(where, counter) as store, store.reading() as conn:
        rows = conn.execute(store.dialect.sql("SELECT position FROM turns WHERE conversation_id = ? AND embedded = 0 "
                                              "ORDER BY position"), (store.key_of(NS, CONV),)).fetchall()
    return [int(r[0]) for r in rows]


def until(mem: Memory) -> dict[int, int | None]:
    """position -> the position superseding it, of every entry facts() lists."""
    return {f.position: f.until_position for f in mem.facts(CONV)}


@pytest.mark.parametrize("to_postgres", MIGRATION_DIRECTIONS)
def test_a_recheck_the_source_owed_supersedes_in_the_target(
        tmp_path: Path, pg_url: str, counter: BpeTokenCounter, embedder: FastEmbedder, to_postgres: bool) -> None:
    src, dst = migration_sides(tmp_path, pg_url, to_postgres)
    position = owe_a_recheck(tmp_path, src, embedder)
    assert position == IMPORT_TURNS
    assert (rechecks(src, counter), pending(src, counter)) == ([position], list(range(IMPORT_TURNS)))
    report = migrate(src, dst, counter)
    carried, waiting = rechecks(dst, counter), pending(dst, counter)
    with memory(tmp_path, dst, "target", embedder) as mem:
        mem.catch_up()  # OLD embedded here: its pool's hooks, then the re-check
        later = until(mem)
    # before: None (the row was left behind; OLD's own check looks back only)
    assert later.get(0) == position, f"#0 superseded by {later.get(0)} in the target"
    assert (carried, waiting, report.owed_rechecks) == ([position], list(range(IMPORT_TURNS)), 1)
    assert rechecks(dst, counter) == []  # re-checked once: its row is gone
    assert rechecks(src, counter) == [position]  # the source only read


@pytest.mark.parametrize("to_postgres", MIGRATION_DIRECTIONS)
def test_a_recheck_owed_after_the_copy_supersedes_in_the_target_after_a_rerun(
        tmp_path: Path, pg_url: str, counter: BpeTokenCounter, embedder: FastEmbedder, to_postgres: bool) -> None:
    # the import copied first (nothing owed); the source's writers went on: the correction,
    # owed a re-check there, reaches the target with the rerun's grown copy (`_copy_suffix`)
    src, dst = migration_sides(tmp_path, pg_url, to_postgres)
    with memory(tmp_path, src, "source", embedder) as mem:
        mem.append_outcome(CONV, conversation())  # left pending: more than INLINE_INDEX_ROWS turns
    first = migrate(src, dst, counter)
    position = owe_a_recheck(tmp_path, src, embedder, imported=True)
    report = migrate(src, dst, counter)  # the grown copy brought up to the source's
    carried = rechecks(dst, counter)
    with memory(tmp_path, dst, "target", embedder) as mem:
        mem.catch_up()
        later = until(mem)
    assert later.get(0) == position, f"#0 superseded by {later.get(0)} in the target"  # before: None
    assert (first.owed_rechecks, report.copied, report.owed_rechecks, carried) == (0, 1, 1, [position])
    assert rechecks(dst, counter) == []

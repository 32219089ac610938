"""`migrate-store` carries the supersession decisions the source still owes (tiers/owed.py).
A correction whose `on_embedded` hook failed in the source (a lock held past
busy_timeout_ms between its vector's commit and the decision) is embedded there and
recorded as owed (meta `owed-decision:<turn id>`), decided by the source's next catch-up.
The copy writes its vector and `embedded = 1` in the target, so no catch-up there embeds
it again, and before this the owed row was not copied: the target never decided it, and
the old value stayed current there for good ("12A" after "now 14C"). The copy now records
each owed turn in the target under the id it has there (the source's plus the copy's
offset, which a target holding rows of its own makes non-zero), and the target's next
catch-up decides it. Real SQLite files, a real PostgreSQL (tests/pg_server.py), a real
second connection holding the lock, and real Memory objects with the bundled embedder,
in both directions."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlean
from pg_server import MIGRATION_DIRECTIONS, Where, migrate, migration_sides, opened

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter

BUSY_TIMEOUT_MS = 300  # the source hook's wait for the lock, then it fails
CONV = "c"
ORDER = "My seat on the Lisbon flight is 12A."
CORRECTION = "Correction: my seat on the Lisbon flight is now 14C, not 12A."
DECIDED = [(0, "superseded"), (2, "current")]  # (position, status) of the facts once decided
OWED_PREFIX = "owed-decision:"  # tiers.owed's meta key prefix (spelt out: the test runs on the code before)
NS = "default"  # the namespace a Memory and a store write to when given none
OTHER = "other"  # a conversation of the target's own, for an id offset above 0
OTHER_MESSAGES = 4  # its messages: the copied ids are the source's plus at least this


def config(tmp_path: Path, where: Where, name: str) -> Config:
    """A Memory's config on `where` (a SQLite side is tmp_path / "store.db": its data dir's
    file); `name` keeps each Memory's own files apart."""
    engine, at = where
    if engine == "sqlite":
        return Config(data_dir=Path(at).parent, db_filename=Path(at).name, busy_timeout_ms=BUSY_TIMEOUT_MS)
    url, schema = at.rsplit("#", 1)
    return Config(data_dir=tmp_path / name, cold_url=url, cold_schema=schema, busy_timeout_ms=BUSY_TIMEOUT_MS)


def locker(where: Where) -> Callable[[], Any]:
    """A second connection taking the lock the hook meets; returns it (rolled back to release)."""
    engine, at = where

    def take() -> Any:
        if engine == "sqlite":
            # the store's own driver (another SQLite library's locks would not be seen in-process)
            conn = sqlean.connect(at, isolation_level=None)
            conn.execute("BEGIN IMMEDIATE")  # the write lock: the hook's set_superseded waits
            return conn
        url, schema = at.rsplit("#", 1)
        pconn = psycopg.connect(url)
        pconn.execute(f'LOCK TABLE "{schema}".messages IN ACCESS EXCLUSIVE MODE')  # an operator's
        return pconn
    return take


def order(mem: Memory) -> None:
    """The order and its answer, embedded and decided."""
    mem.append(CONV, {"role": "user", "content": ORDER})
    mem.append(CONV, {"role": "assistant", "content": "Noted."})
    mem.cold.index_pending()


def correct_under_lock(mem: Memory, take: Callable[[], Any]) -> None:
    """The order's correction, whose hook meets the lock once: its decision owed."""
    orig = mem.cold.on_embedded
    assert orig is not None
    held: list[Any] = []

    def hooked(stored: list[tuple[str, int, Any]]) -> None:
        # the lock arrives between the vectors' commit and the decision, once
        if not held:
            held.append(take())
            try:
                orig(stored)
            finally:
                held[0].rollback()
                held[0].close()
            return
        orig(stored)

    mem.cold.on_embedded = hooked
    mem.append(CONV, {"role": "user", "content": CORRECTION})
    assert held, "the correction was embedded behind the lock"
    assert facts(mem) != DECIDED  # the hook failed: the source owes the decision


def owed_ids(where: Where, counter: BpeTokenCounter) -> list[int]:
    """The turn ids the store records as owed a decision."""
    with opened(where, counter) as store, store.reading() as conn:
        rows = conn.execute(f"SELECT key FROM meta WHERE key LIKE '{OWED_PREFIX}%'").fetchall()
    return sorted(int(str(r[0])[len(OWED_PREFIX):]) for r in rows)


def turn_id(where: Where, counter: BpeTokenCounter, position: int) -> int:
    """The id of conversation CONV's turn at `position` there."""
    with opened(where, counter) as store, store.reading() as conn:
        row = conn.execute(store.dialect.sql("SELECT id FROM turns WHERE conversation_id = ? AND position = ?"),
                           (store.key_of(NS, CONV), position)).fetchone()
    return int(row[0])


def facts(mem: Memory) -> list[tuple[int, str]]:
    return [(f.position, f.status) for f in mem.facts(CONV)]


TARGETS = [
    # an empty target: the copied ids are the source's (offset 0)
    pytest.param(False, id="empty-target"),
    # a target holding a conversation of its own (--into-non-empty): the copied ids are the
    # source's plus its highest id, so the source's owed id names another turn there
    pytest.param(True, id="target-with-rows"),
]


def memory(tmp_path: Path, where: Where, name: str, embedder: FastEmbedder) -> Memory:
    return Memory(config(tmp_path, where, name), embedder=embedder, hot=False, background_indexing=False)


def sides(tmp_path: Path, pg_url: str, counter: BpeTokenCounter, to_postgres: bool,
          target_rows: bool) -> tuple[Where, Where]:
    """`migration_sides`, the target holding OTHER's messages where `target_rows`."""
    src, dst = migration_sides(tmp_path, pg_url, to_postgres)
    if target_rows:
        with opened(dst, counter) as store:
            for i in range(OTHER_MESSAGES):
                store.append(OTHER, Message(role="user", content=f"a note of the target's own, {i}"))
    return src, dst


def decided_in_target(tmp_path: Path, src: Where, dst: Where, counter: BpeTokenCounter, embedder: FastEmbedder,
                      target_rows: bool) -> None:
    """The source owes the correction's decision and a run copied it: the target records it
    owed under its own id, and its next catch-up decides it."""
    correction_in_source, correction_in_target = turn_id(src, counter, 2), turn_id(dst, counter, 2)
    assert (correction_in_target != correction_in_source) == target_rows
    # carried under the target's id: before, none (the source's row was not copied)
    assert owed_ids(dst, counter) == [correction_in_target]
    with memory(tmp_path, dst, "target", embedder) as mem:
        # copied embedded: no catch-up there embeds it again (the target's own may be pending)
        assert mem.cold.pending_embeddings(mem.cold.key_of(NS, CONV)) == 0
        mem.cold.index_pending()  # the owed decision is made here
        assert facts(mem) == DECIDED  # before: "12A" stayed current in the target for good
    assert owed_ids(dst, counter) == []  # decided: its record gone
    assert owed_ids(src, counter) == [correction_in_source]  # the source only read
    # what the target decided on its own is no change of the copy: a rerun leaves it alone
    again = migrate(src, dst, counter, into_non_empty=target_rows)
    assert (again.copied, again.already_present, again.owed_decisions) == (0, 1, 0)
    assert owed_ids(dst, counter) == []
    with memory(tmp_path, dst, "target", embedder) as mem:
        assert facts(mem) == DECIDED


@pytest.mark.parametrize("to_postgres", MIGRATION_DIRECTIONS)
@pytest.mark.parametrize("target_rows", TARGETS)
def test_a_correction_the_source_owed_is_decided_in_the_target(
        tmp_path: Path, pg_url: str, counter: BpeTokenCounter, embedder: FastEmbedder,
        to_postgres: bool, target_rows: bool) -> None:
    src, dst = sides(tmp_path, pg_url, counter, to_postgres, target_rows)
    with memory(tmp_path, src, "source", embedder) as mem:
        order(mem)
        correct_under_lock(mem, locker(src))
    assert owed_ids(src, counter) == [turn_id(src, counter, 2)]
    report = migrate(src, dst, counter, into_non_empty=target_rows)  # a fresh copy of the conversation
    assert (report.copied, report.owed_decisions) == (1, 1)
    decided_in_target(tmp_path, src, dst, counter, embedder, target_rows)


@pytest.mark.parametrize("to_postgres", MIGRATION_DIRECTIONS)
@pytest.mark.parametrize("target_rows", TARGETS)
def test_a_correction_owed_after_the_copy_is_decided_in_the_target_after_a_rerun(
        tmp_path: Path, pg_url: str, counter: BpeTokenCounter, embedder: FastEmbedder,
        to_postgres: bool, target_rows: bool) -> None:
    src, dst = sides(tmp_path, pg_url, counter, to_postgres, target_rows)
    with memory(tmp_path, src, "source", embedder) as mem:
        order(mem)
    assert migrate(src, dst, counter, into_non_empty=target_rows).owed_decisions == 0
    with memory(tmp_path, src, "source", embedder) as mem:  # the source's writers went on
        correct_under_lock(mem, locker(src))
    report = migrate(src, dst, counter, into_non_empty=target_rows)  # the grown copy brought up to the source's
    assert (report.copied, report.owed_decisions) == (1, 1)
    decided_in_target(tmp_path, src, dst, counter, embedder, target_rows)

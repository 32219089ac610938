"""`migrate-store` carries a source erasure (or a source change without messages) to a
target a read embedded. A source whose messages had no vectors yet (appended without the
indexer, or with it behind) was copied so; a context() or catch-up on the target then
embedded them there (and decided their labels and supersessions), which changed the
digest the copy recorded, so every rerun took it for a target writer's change of the copy
and refused the source's later erasure of that conversation, or its pin there, for good
(reported by the engineer of 2a149b0, whose test embeds in the source first to avoid it).
What the target computes on its own is no change of the copy now: the copy records a
digest per part a writer changes (COPIED_DIGEST, `copy_digest`). A target writer's pin,
append or retraction is still refused by name, nothing written; a plan a read kept
(store_plans) does not hold an erasure up. A copy recorded whole (a tiermem of
2026-12-06 before this) is recorded by part by a rerun that finds it identical.

Real SQLite files, a real PostgreSQL (tests/pg_server.py), in both directions, and a real
Memory with the bundled embedder reading the target."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from pg_server import fresh_schema, open_store

from tiermem.config import Config
from tiermem.memory import Memory
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.errors import MigrationRefused
from tiermem.tiers.formats import RETRACT_TYPE
from tiermem.tiers.migrate_store import COPIED_DIGEST, MigrationReport, _Side, migrate_store, record_digest
from tiermem.tiers.models import Message
from tiermem.tiers.store import ColdLog
from tiermem.tiers.tokens import BpeTokenCounter

NS = "ns"
GONE, KEPT = "b", "a"  # the source erases (or pins in) the first after the target's read
MESSAGES_EACH = 3
PINNED_AT, PRIORITY = 1, 3
QUERY = "what are the notes about?"
Where = tuple[str, str]  # open_store's (engine, where)


@contextmanager
def _opened(where: Where, counter: BpeTokenCounter) -> Iterator[Any]:
    store = open_store(where, counter)
    try:
        yield store
    finally:
        store.close()


def _spec(where: Where) -> tuple[str, str]:  # migrate_store's (source or target, schema)
    engine, at = where
    if engine == "sqlite":
        return at, "tiermem"
    url, schema = at.rsplit("#", 1)
    return url, schema


def _run(src: Where, dst: Where, counter: BpeTokenCounter) -> MigrationReport:
    (source, source_schema), (target, target_schema) = _spec(src), _spec(dst)
    return migrate_store(source, target, tokens=counter, source_schema=source_schema, target_schema=target_schema)


def _config(tmp_path: Path, where: Where, **extra: Any) -> Config:
    """A Memory's config on `where` (a SQLite side is a data dir's file)."""
    engine, at = where
    if engine == "sqlite":
        return Config(data_dir=Path(at).parent, **extra)
    url, schema = at.rsplit("#", 1)
    return Config(data_dir=tmp_path / "reader", cold_url=url, cold_schema=schema, **extra)


def _read_on_target(tmp_path: Path, dst: Where, embedder: FastEmbedder, *, store_plans: bool = False) -> None:
    """The target served after the copy: a context() per conversation, which embeds the
    messages the source had no vectors for."""
    with Memory(_config(tmp_path, dst, store_plans=store_plans), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        for name in (KEPT, GONE):
            mem.context(name, QUERY, namespace=NS)
            assert mem.cold.pending_embeddings(mem.cold.key_of(NS, name)) == 0


def _sides(tmp_path: Path, pg_url: str, counter: BpeTokenCounter,
           to_postgres: bool) -> tuple[Where, Where]:
    """(source, target): two conversations appended without vectors, copied and verified."""
    (tmp_path / "data").mkdir()
    sqlite_side: Where = ("sqlite", str(tmp_path / "data" / "tiermem.db"))
    pg_side: Where = ("postgres", f"{pg_url}#{fresh_schema()}")
    src, dst = (sqlite_side, pg_side) if to_postgres else (pg_side, sqlite_side)
    with _opened(src, counter) as store:  # no embedder: as an append without the indexer leaves them
        for name in (KEPT, GONE):
            for i in range(MESSAGES_EACH):
                store.append(name, Message(role="user", content=f"note {i} about {name}"), namespace=NS)
        assert store.pending_embeddings() == 2 * MESSAGES_EACH
    _run(src, dst, counter)
    return src, dst


def _change(where: Where, counter: BpeTokenCounter, change: Callable[[ColdLog, str], Any]) -> None:
    with _opened(where, counter) as store:
        change(store, store.key_of(NS, GONE))


DIRECTIONS = [
    # SQLite -> PostgreSQL: the read embeds in PostgreSQL
    pytest.param(True, id="to-postgres"),
    # PostgreSQL -> SQLite: the read embeds in SQLite
    pytest.param(False, id="to-sqlite"),
]
PLANS = [
    # a plain read: vectors, labels and supersessions computed there
    pytest.param(False, id="read"),
    # a read that keeps its plan (store_plans): the erasure takes it with the rest
    pytest.param(True, id="plan-kept"),
]


@pytest.mark.parametrize("to_postgres", DIRECTIONS)
@pytest.mark.parametrize("store_plans", PLANS)
def test_the_sources_erasure_reaches_a_target_a_read_embedded(tmp_path: Path, pg_url: str,
                                                              counter: BpeTokenCounter, embedder: FastEmbedder,
                                                              to_postgres: bool, store_plans: bool) -> None:
    src, dst = _sides(tmp_path, pg_url, counter, to_postgres)
    _read_on_target(tmp_path, dst, embedder, store_plans=store_plans)
    _change(src, counter, lambda s, k: s.delete_conversation(k))
    report = _run(src, dst, counter)  # before: MigrationRefused, 'the target changed its copy since'
    assert (report.erased_from_source, report.already_present, report.conversations) == (1, 1, 1)
    with _opened(dst, counter) as store:
        assert store.key_of(NS, GONE) is None
        assert [s["id"] for s in store.tombstones(namespace=NS)] == [GONE]


@pytest.mark.parametrize("to_postgres", DIRECTIONS)
def test_a_source_pin_reaches_a_target_a_read_embedded(tmp_path: Path, pg_url: str,
                                                       counter: BpeTokenCounter, embedder: FastEmbedder,
                                                       to_postgres: bool) -> None:
    src, dst = _sides(tmp_path, pg_url, counter, to_postgres)
    _read_on_target(tmp_path, dst, embedder)
    _change(src, counter, lambda s, k: s.set_pin(k, PINNED_AT, PRIORITY))
    report = _run(src, dst, counter)  # before: MigrationMismatch, 'changed in the target since it was copied'
    assert report.copied == 1
    with _opened(dst, counter) as store:
        key = store.key_of(NS, GONE)
        assert [(t.position, t.pinned_priority) for t in store.pinned_turns(key)] == [(PINNED_AT, PRIORITY)]
        # the source's rows replaced what the read computed; the target computes it again
        assert store.pending_embeddings(key) == MESSAGES_EACH
    _read_on_target(tmp_path, dst, embedder)
    _change(src, counter, lambda s, k: s.delete_conversation(k))
    assert _run(src, dst, counter).erased_from_source == 1


TARGET_WRITES = [
    # a target writer pins a copied message
    pytest.param(lambda s, k: s.set_pin(k, PINNED_AT, PRIORITY), "its pins", id="pin"),
    # it appends to the conversation
    pytest.param(lambda s, k: s.append(GONE, Message(role="user", content="written in the target"), namespace=NS),
                 "its messages", id="append"),
    # it retracts a copied message (an append of a control row)
    pytest.param(lambda s, k: s.append(GONE, Message(type=RETRACT_TYPE, position=1), namespace=NS),
                 "its messages", id="retraction"),
]


@pytest.mark.parametrize("to_postgres", DIRECTIONS)
@pytest.mark.parametrize(("write", "named"), TARGET_WRITES)
def test_a_target_writers_change_is_still_refused(tmp_path: Path, pg_url: str,
                                                  counter: BpeTokenCounter, embedder: FastEmbedder, to_postgres: bool,
                                                  write: Callable[[ColdLog, str], Any], named: str) -> None:
    src, dst = _sides(tmp_path, pg_url, counter, to_postgres)
    _read_on_target(tmp_path, dst, embedder)
    _change(dst, counter, write)
    with _opened(dst, counter) as store:
        before = [m.body for m in store.history(store.key_of(NS, GONE))]
    _change(src, counter, lambda s, k: s.delete_conversation(k))
    with pytest.raises(MigrationRefused) as refused:
        _run(src, dst, counter)
    assert f"conversation {GONE!r} of namespace {NS!r}" in str(refused.value)
    assert "the target changed its copy since (" in str(refused.value)
    assert named in str(refused.value)  # before: the part not named
    with _opened(dst, counter) as store:  # nothing written
        assert [m.body for m in store.history(store.key_of(NS, GONE))] == before
        assert store.tombstones(namespace=NS) == []


@pytest.mark.parametrize("to_postgres", DIRECTIONS)
def test_a_copy_recorded_whole_is_recorded_by_part(tmp_path: Path, pg_url: str,
                                                   counter: BpeTokenCounter, embedder: FastEmbedder,
                                                   to_postgres: bool) -> None:
    src, dst = _sides(tmp_path, pg_url, counter, to_postgres)
    target, schema = _spec(dst)
    side = _Side(target, schema=schema, tokens=counter)  # as a tiermem of 2026-12-06 before this recorded it
    try:
        with side.tx() as c:
            key = side.store.key_of(NS, GONE)
            rec = side.record(c, key)
            assert rec is not None
            side.set_meta(c, COPIED_DIGEST + key, record_digest(rec))
    finally:
        side.close()
    again = _run(src, dst, counter)  # identical: its digest is recorded by part
    assert (again.copied, again.already_present) == (0, 2)
    with _opened(dst, counter) as store, store.reading() as c:
        recorded = c.execute(store.dialect.sql("SELECT value FROM meta WHERE key = ?"),
                             (COPIED_DIGEST + key,)).fetchall()
    assert "pins" in json.loads(recorded[0][0])
    _read_on_target(tmp_path, dst, embedder)
    _change(src, counter, lambda s, k: s.delete_conversation(k))
    assert _run(src, dst, counter).erased_from_source == 1

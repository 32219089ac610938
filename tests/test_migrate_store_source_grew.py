"""`migrate-store` resumes (and reruns) where the source grew in a conversation already
copied. The log is append-only, so such a conversation's copy in the target is exactly a
prefix of the source's: a resume (after an interrupted run) or a rerun (after a verified
one) copies the new messages, numbered as a fresh conversation's (source id plus the
recorded offset, tiers/migrate_store.py's docstring), and its derived rows again. Each
such run failed with MigrationMismatch ('already in the target'), so the migration
could not be finished. A target copy that is not a prefix (the target was written to in
that conversation) is still refused, and nothing written.

Real SQLite files and a real PostgreSQL (tests/pg_server.py), in both directions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pg_server import MIGRATION_DIRECTIONS, Where, fresh_schema, migrate, migration_sides, opened

from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder
from tiermem.tiers.errors import MigrationMismatch
from tiermem.tiers.migrate_store import MigrationReport, migrate_store
from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter

NS = "ns"
NAMES = ("a", "b")
MESSAGES_EACH = 2  # per conversation before the first run
GROWN_BY = 3  # messages the source gains in a copied conversation between the runs
PIN_PRIORITY = 90  # an explicit pin on a grown message: a derived row that must follow it
GROWN_WORD = "zanzibar"  # in the grown messages only: the target's keyword index must find them
OWN = "own"  # a target writer's conversation
CONTEXT_BUDGET = 600  # tokens: a context call that stores a plan


class Interrupted(Exception):
    """The operator's ^C inside the second conversation's transaction."""


def _append(where: Where, counter: BpeTokenCounter, name: str, count: int, text: str) -> None:
    with opened(where, counter) as store:
        for i in range(count):
            store.append(name, Message(role="user", content=f"{text} {i}"), namespace=NS)


def _ids(where: Where, counter: BpeTokenCounter) -> dict[str, list[int]]:
    """Each conversation's message ids, by name, in position order."""
    sql = ("SELECT c.name, m.id FROM messages m JOIN conversations c ON c.id = m.conversation_id "
           "ORDER BY c.name, m.position")
    with opened(where, counter) as store, store.reading() as c:
        rows = c.execute(sql).fetchall()
    out: dict[str, list[int]] = {}
    for name, mid in rows:
        out.setdefault(str(name), []).append(int(mid))
    return out


def _first_copied(src: Where, dst: Where, counter: BpeTokenCounter, *, interrupted: bool) -> str:
    """Run the copy (interrupted inside the second conversation's transaction, or to the
    end); the name of the conversation it copied first."""
    seen: list[str] = []

    def interrupt_second(step: str) -> None:
        if not step.startswith("close:"):
            seen.append(step)
            if interrupted and len(seen) == len(NAMES):
                raise Interrupted

    if interrupted:
        with pytest.raises(Interrupted):
            migrate(src, dst, counter, fault=interrupt_second)
    else:
        migrate(src, dst, counter, fault=interrupt_second)
    with opened(src, counter) as store:
        return next(n for n in NAMES if store.key_of(NS, n) == seen[0])


def _grow(src: Where, counter: BpeTokenCounter, name: str) -> None:
    _append(src, counter, name, GROWN_BY, f"{GROWN_WORD} grown in the source")
    with opened(src, counter) as store:
        store.set_pin(store.key_of(NS, name), MESSAGES_EACH + GROWN_BY - 1, PIN_PRIORITY)


def _sides(tmp_path: Path, pg_url: str, counter: BpeTokenCounter,
           to_postgres: bool) -> tuple[Where, Where]:
    """(source, target), the source holding MESSAGES_EACH messages in each of NAMES."""
    src, dst = migration_sides(tmp_path, pg_url, to_postgres)
    for name in NAMES:
        _append(src, counter, name, MESSAGES_EACH, name)
    return src, dst


def _snapshot(where: Where, counter: BpeTokenCounter, name: str) -> tuple[list[Any], list[Any], list[Any]]:
    """The conversation's history, explicit pins and keyword hits for GROWN_WORD, by position."""
    with opened(where, counter) as store:
        key = store.key_of(NS, name)
        history = list(store.history(key))
        pins = sorted((t.position, t.pinned_priority) for t in store.pinned_turns(key))
        hits = sorted(p for _k, p, _s in store.search_bm25(GROWN_WORD, 10, conversation_id=key))
    return history, pins, hits


RUNS = [
    # the source grows in the conversation an interrupted run copied, then the resume
    pytest.param(True, id="resume"),
    # the source grows after a verified run, then a rerun
    pytest.param(False, id="rerun"),
]


@pytest.mark.parametrize("to_postgres", MIGRATION_DIRECTIONS)
@pytest.mark.parametrize("interrupted", RUNS)
def test_the_rerun_copies_what_the_source_appended(tmp_path: Path, pg_url: str,
                                                   counter: BpeTokenCounter, to_postgres: bool,
                                                   interrupted: bool) -> None:
    src, dst = _sides(tmp_path, pg_url, counter, to_postgres)
    grown = _first_copied(src, dst, counter, interrupted=interrupted)
    _grow(src, counter, grown)
    report = migrate(src, dst, counter)  # before: MigrationMismatch, 'already in the target'
    assert report.resumed and report.conversations == len(NAMES)
    assert report.copied == (len(NAMES) if interrupted else 1)  # the grown one, and the one interrupted
    for name in NAMES:
        assert _snapshot(dst, counter, name) == _snapshot(src, counter, name)
    history, pins, hits = _snapshot(dst, counter, grown)
    assert len(history) == MESSAGES_EACH + GROWN_BY and len(hits) == GROWN_BY
    assert (MESSAGES_EACH + GROWN_BY - 1, PIN_PRIORITY) in pins
    rerun = migrate(src, dst, counter)
    assert (rerun.copied, rerun.already_present) == (0, len(NAMES))
    _append(dst, counter, grown, 1, "an append to the target after the copy")  # draws a free id
    with opened(dst, counter) as store:
        assert len(store.history(store.key_of(NS, grown))) == MESSAGES_EACH + GROWN_BY + 1


TARGET_WRITES = [
    # the target gains a message in the copied conversation; the source did not change
    pytest.param(False, id="target-appended"),
    # both gained messages there: the target's copy is no longer a prefix of the source's
    pytest.param(True, id="both-appended"),
]


@pytest.mark.parametrize("to_postgres", MIGRATION_DIRECTIONS)
@pytest.mark.parametrize("source_grew", TARGET_WRITES)
def test_a_target_written_in_a_copied_conversation_is_refused(tmp_path: Path, pg_url: str,
                                                              counter: BpeTokenCounter, to_postgres: bool,
                                                              source_grew: bool) -> None:
    src, dst = _sides(tmp_path, pg_url, counter, to_postgres)
    copied = _first_copied(src, dst, counter, interrupted=False)
    _append(dst, counter, copied, 1, "written to the target")
    if source_grew:
        _grow(src, counter, copied)
    before = _snapshot(dst, counter, copied)
    with pytest.raises(MigrationMismatch, match="already in the target"):
        migrate(src, dst, counter)
    assert _snapshot(dst, counter, copied) == before  # nothing written


@pytest.mark.parametrize("to_postgres", MIGRATION_DIRECTIONS)
def test_new_rows_move_past_an_id_a_target_writer_took(tmp_path: Path, pg_url: str,
                                                       counter: BpeTokenCounter, to_postgres: bool) -> None:
    """A target append in another conversation after the run draws the id the grown
    conversation's first new message needs (SQLite: MAX(id) + 1; PostgreSQL: the sequence,
    reserved up to the first run's top): the offset moves past it, as for a conversation
    not copied yet."""
    src, dst = _sides(tmp_path, pg_url, counter, to_postgres)
    grown = _first_copied(src, dst, counter, interrupted=False)
    _append(dst, counter, OWN, 1, "written to the target between the runs")
    _grow(src, counter, grown)
    report = migrate(src, dst, counter)
    assert (report.copied, report.offset_moves) == (1, 1)
    assert _snapshot(dst, counter, grown) == _snapshot(src, counter, grown)
    ids = _ids(dst, counter)
    assert min(ids[grown][MESSAGES_EACH:]) > max(ids[OWN])  # numbered past the writer's row
    assert ids[grown] == sorted(ids[grown])  # the copied prefix first, as in the source
    _append(dst, counter, "after", 1, "an append after the copy")
    assert min(_ids(dst, counter)["after"]) > max(i for v in ids.values() for i in v)


def _use(mem: Memory, start: int, count: int) -> None:
    """Appends and what follows them in use: turn labels, vectors, warm summaries, plans."""
    mem.append_many("trip", [{"role": "user", "content": f"note {start + i}: weather in Porto"}
                             for i in range(count)], namespace=NS)
    mem.catch_up()
    mem.consolidate("trip", namespace=NS)
    mem.context("trip", "which snacks?", CONTEXT_BUDGET, namespace=NS)


def test_derived_rows_follow_the_grown_messages(tmp_path: Path, pg_url: str,
                                                engine_config: Config, embedder: Embedder,
                                                counter: BpeTokenCounter) -> None:
    """The source used as a Memory uses it (vectors, labels, a pin, warm summaries,
    plans) before the first run and after it: the rerun's copy verifies whole, as a fresh
    copy's, and the target's vectors count the grown turns'. Each engine as the source."""
    with Memory(engine_config, embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append("trip", {"role": "user", "content": "I am allergic to peanuts, never suggest them."}, namespace=NS)
        _use(mem, 0, MESSAGES_EACH)
        mem.pin("trip", 0, namespace=NS)
    if engine_config.cold_url is None:  # SQLite -> PostgreSQL
        source, source_schema = str(engine_config.data_dir), "tiermem"
        target, target_schema = pg_url, fresh_schema()
    else:  # PostgreSQL -> SQLite
        source, source_schema = str(engine_config.cold_url), engine_config.cold_schema
        target, target_schema = str(tmp_path / "target.db"), "tiermem"

    def run() -> MigrationReport:
        return migrate_store(source, target, tokens=counter, source_schema=source_schema,
                             target_schema=target_schema)

    first = run()
    with Memory(engine_config, embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append("trip", {"role": "user", "content": "I am no longer allergic to peanuts."}, namespace=NS)
        _use(mem, MESSAGES_EACH, GROWN_BY)
        mem.pin("trip", MESSAGES_EACH + 1, namespace=NS)
    again = run()  # before: MigrationMismatch, 'already in the target'
    assert again.copied == 1 and again.vectors > first.vectors

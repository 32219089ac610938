"""`migrate-store` resumes (and completes) when a target writer took an id a
conversation still to copy needs. Since the copy keeps each message's source id plus an
offset (tiers/migrate_store.py's docstring), an append to the target that was not stopped
could draw such an id: SQLite numbers an append MAX(id) + 1 (above the rows copied so far,
below the ones still to copy), PostgreSQL draws from its sequence before the run moves it.
That conversation's copy failed (SQLite's append-only trigger, psycopg's
UniqueViolation), and so did every resume: the migration could not be finished. Now the
conversation's transaction finds the id taken and moves the offset past the target's
highest id, for it and the rest (ID_OFFSET, the report's offset_moves).

Each case builds a two-conversation source whose ids make any copy order collide: the
conversation whose key sorts first holds one message, the other the rest, so the one
copied second always needs the id the target's next append draws. Real SQLite files, a
real PostgreSQL (tests/pg_server.py)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_server import Where, migrate, migration_sides, opened

import tiermem.tiers.migrate_store as migrate_module
from tiermem.tiers.migrate_store import ID_OFFSET, MigrationReport
from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter

NS = "ns"
FIRST_MESSAGES = 1  # the conversation copied first: it ends below the second's ids
SECOND_MESSAGES = 3
GROWN_BY = 2  # messages the source gains between the runs (the PostgreSQL case)
OWN = "own"  # the target writer's conversation


class Interrupted(Exception):
    """The operator's ^C inside the second conversation's transaction."""


def _append(where: Where, counter: BpeTokenCounter, name: str, count: int, text: str) -> None:
    with opened(where, counter) as store:
        for i in range(count):
            store.append(name, Message(role="user", content=f"{text} {i}"), namespace=NS)


def _ids(where: Where) -> dict[str, list[int]]:
    """Each conversation's message ids, by name, in position order."""
    sql = ("SELECT c.name, m.id FROM messages m JOIN conversations c ON c.id = m.conversation_id "
           "ORDER BY c.name, m.position")
    engine, at = where
    if engine == "sqlite":
        with closing(sqlite3.connect(at)) as conn:
            rows = conn.execute(sql).fetchall()
    else:
        url, schema = at.rsplit("#", 1)
        with psycopg.connect(url, autocommit=True) as pg:
            pg.execute(f'SET search_path TO "{schema}"')
            rows = pg.execute(sql).fetchall()
    out: dict[str, list[int]] = {}
    for name, mid in rows:
        out.setdefault(str(name), []).append(int(mid))
    return out


def _meta_offset(where: Where, counter: BpeTokenCounter) -> int:
    with opened(where, counter) as store, store.reading() as c:
        row = c.execute(store.dialect.sql("SELECT value FROM meta WHERE key = ?"), (ID_OFFSET,)).fetchone()
    return int(row[0])


def _build_source(where: Where, counter: BpeTokenCounter) -> list[str]:
    """Two conversations; their names in copy (key) order."""
    _append(where, counter, "x", 1, "x")
    _append(where, counter, "y", 1, "y")
    with opened(where, counter) as store:
        order = sorted(("x", "y"), key=lambda n: store.key_of(NS, n))
    _append(where, counter, order[1], SECOND_MESSAGES - FIRST_MESSAGES, order[1])
    return order


def _interrupted(src: Where, dst: Where, counter: BpeTokenCounter) -> None:
    seen: list[str] = []

    def interrupt_second(step: str) -> None:
        if not step.startswith("close:"):
            seen.append(step)
            if len(seen) == 2:
                raise Interrupted

    with pytest.raises(Interrupted):
        migrate(src, dst, counter, fault=interrupt_second)


def _between_runs(src: Where, dst: Where, counter: BpeTokenCounter, order: list[str],
                  monkeypatch: pytest.MonkeyPatch) -> MigrationReport:
    _interrupted(src, dst, counter)
    _append(dst, counter, OWN, 1, "written to the target between the runs")
    return migrate(src, dst, counter)


def _during_the_copy(src: Where, dst: Where, counter: BpeTokenCounter, order: list[str],
                     monkeypatch: pytest.MonkeyPatch) -> MigrationReport:
    def write_after_first(done: int, _total: int) -> None:
        if done == 1:
            _append(dst, counter, OWN, 1, "written to the target during the copy")

    return migrate(src, dst, counter, progress=write_after_first)


def _source_grew_between_runs(src: Where, dst: Where, counter: BpeTokenCounter, order: list[str],
                              monkeypatch: pytest.MonkeyPatch) -> MigrationReport:
    _interrupted(src, dst, counter)
    _append(src, counter, order[1], GROWN_BY, "grown in the source")  # ids past the first run's reservation
    _append(dst, counter, OWN, 1, "written to the target between the runs")
    return migrate(src, dst, counter)


def _before_the_reservation(src: Where, dst: Where, counter: BpeTokenCounter, order: list[str],
                            monkeypatch: pytest.MonkeyPatch) -> MigrationReport:
    real_copy = migrate_module._copy

    def write_then_copy(*args: Any, **kwargs: Any) -> None:  # after the preflight read the sequence
        _append(dst, counter, OWN, 1, "written to the target before the run moved its sequence")
        real_copy(*args, **kwargs)

    monkeypatch.setattr(migrate_module, "_copy", write_then_copy)
    return migrate(src, dst, counter)


Scenario = Callable[[Where, Where, BpeTokenCounter, list[str], pytest.MonkeyPatch], MigrationReport]
CASES: list[tuple[str, bool, Scenario]] = [
    # SQLite: an append between an interrupted run and its resume (review rcE, /tmp/rcE/mig2.py)
    ("sqlite-between-runs", False, _between_runs),
    # SQLite: an append while the copy runs, after the first conversation's commit
    ("sqlite-during-copy", False, _during_the_copy),
    # PostgreSQL: the source grew between the runs, and the target's sequence (reserved up
    # to the first run's top) handed an append the id the grown conversation needs
    ("postgres-source-grew", True, _source_grew_between_runs),
    # PostgreSQL: an append between the preflight's read of the sequence and the run's
    # reservation draws the first id the copy needs
    ("postgres-before-reservation", True, _before_the_reservation),
]


@pytest.mark.parametrize(("to_postgres", "scenario"), [(p, s) for _n, p, s in CASES], ids=[n for n, _p, _s in CASES])
def test_the_copy_completes_past_ids_a_target_writer_took(tmp_path: Path, pg_url: str,
                                                         counter: BpeTokenCounter, to_postgres: bool,
                                                         scenario: Scenario, monkeypatch: pytest.MonkeyPatch) -> None:
    src, dst = migration_sides(tmp_path, pg_url, to_postgres)
    order = _build_source(src, counter)
    report = scenario(src, dst, counter, order, monkeypatch)  # before: IntegrityError / UniqueViolation
    assert report.offset_moves == 1
    source_ids, ids = _ids(src), _ids(dst)
    assert ids[OWN] and set(ids) == {OWN, *order}  # the writer's row is kept
    offsets = {n: {t - s for s, t in zip(source_ids[n], ids[n], strict=True)} for n in order}
    assert all(len(o) == 1 for o in offsets.values()), offsets  # one offset per conversation: its order kept
    moved = [n for n in order if offsets[n] != {0}]  # an empty target: 0 until the move
    assert moved and moved == order[order.index(moved[0]):]  # the move holds for the rest of the copy
    assert all(min(ids[n]) > max(ids[OWN]) for n in moved)  # numbered past the writer's rows
    assert _meta_offset(dst, counter) == next(iter(offsets[order[-1]]))  # recorded for a resume
    rerun = migrate(src, dst, counter)
    assert (rerun.resumed, rerun.copied, rerun.offset_moves) == (True, 0, 0)
    _append(dst, counter, "after", 1, "an append after the copy")
    assert min(_ids(dst)["after"]) > max(i for n, v in ids.items() for i in v)

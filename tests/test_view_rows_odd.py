"""A stored view row of the wrong type or out of range never stops the next version from
being written. Before (a review, 2026-12-06), `put_summary` converted the previous view
row's columns with `int()`, and the sweep's `view_frontier` the newest row's end the same
way: after a rolling view whose `version` or `end_position` SQLite held as text,
`Memory.consolidate` raised ValueError, and so did every run of the consolidation
scheduler (`tiermem serve`'s background job, `tiermem consolidate`): logged and retried
every interval, the view never refreshed again. An `end_position` of 1e300 (SQLite) or
past MAX_POSITION (PostgreSQL's BIGINT holds it) was read as a view covering every future
turn: no refresh, ever, and the context showed the stale view. A version at PostgreSQL
INTEGER's largest made the next version overflow the column.

Now an odd row is absent to the readers and to `put_summary` alike (salvaged by the warm
tier, logged once): the new version is written after the highest version in range,
never onto the odd row's number (the UNIQUE key), and it covers the new turns. Real
SQLite and PostgreSQL; the rows rewritten behind tiermem's back with SQL.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from cold_helpers import sql_behind
from pg_server import fresh_schema

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.models import MAX_POSITION

pytestmark = pytest.mark.usefixtures("clean_env")

CONV = "views"
FIRST = 4  # turns covered by the view that is then rewritten
MORE = 2  # turns appended after it: the next refresh must cover them
PG_INTEGER_MAX = 2**31 - 1  # the version column's largest value on PostgreSQL

# (id, column, SQL value) -- what SQLite keeps in the view row's typed columns
SQLITE_CASES = [
    ("version-text", "version", "'one'"),  # int('one') in put_summary: ValueError
    ("version-real", "version", "2.5"),  # a REAL: the next version is 3, not 2.5 + 1
    ("version-huge", "version", str(2**40)),  # past MAX_VIEW_VERSION: the new one is not 2**40 + 1
    ("end-text", "end_position", "'far'"),  # int('far') in put_summary and in the sweep
    ("end-huge", "end_position", "1e300"),  # a view covering every future turn: never refreshed
    ("start-text", "start_position", "'x'"),
    ("tokens-text", "tokens", "'few'"),
    ("tokens-negative", "tokens", "-5"),
    ("created-text", "created_at", "'soon'"),
    ("created-huge", "created_at", "1e300"),  # no instant a datetime can show
]
# (id, column, SQL value) -- what PostgreSQL's typed columns can hold that no view has
POSTGRES_CASES = [
    ("version-last", "version", str(PG_INTEGER_MAX)),  # INTEGER's largest: + 1 overflowed the column
    ("end-huge", "end_position", str(MAX_POSITION + 1)),  # BIGINT holds it: covered every turn
    ("end-negative", "end_position", "-5"),
    ("tokens-negative", "tokens", "-5"),
    ("created-nan", "created_at", "'NaN'::float8"),
    ("created-infinite", "created_at", "'Infinity'::float8"),
]


def _messages(start: int, n: int) -> list[dict[str, Any]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}: the shipping label printed"}
            for i in range(start, start + n)]


def _open(cfg: Config, embedder: FastEmbedder) -> Memory:
    return Memory(cfg, embedder=embedder, hot=False, background_indexing=False)


def _versions(m: Memory, key: str) -> list[tuple[Any, Any]]:
    """(version, end_position) of every rolling row, as stored."""
    rows = m.cold._read("SELECT version, end_position FROM summaries WHERE conversation_id = "
                        + m.cold.dialect.placeholder + " AND kind = 'rolling'", (key,))
    return [(r[0], r[1]) for r in rows]


def _check(cfg: Config, embedder: FastEmbedder, column: str, value: str, caplog: pytest.LogCaptureFixture,
           *, scheduler: bool) -> None:
    with _open(cfg, embedder) as m:
        m.append_many(CONV, _messages(0, FIRST))
        m.consolidate(CONV)
        key = m.cold.key_of("default", CONV)
    assert key is not None
    sql_behind(cfg, f"UPDATE summaries SET {column} = {value} WHERE conversation_id = ? AND kind = 'rolling'",
               (key,))
    last = FIRST + MORE - 1
    with _open(cfg, embedder) as m:
        odd = _versions(m, key)
        m.append_many(CONV, _messages(FIRST, MORE))
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="tiermem.warm"):
            if scheduler:  # the service's background job, and `tiermem consolidate`
                sched = m.make_scheduler()
                sched.run_once()
                sched.run_once()
                assert sched.stats.errors == 0
            else:
                m.consolidate(CONV)
                m.consolidate(CONV)
        view = m.warm.latest(key, "rolling")
        assert view is not None and view.end_position == last, view
        stored = _versions(m, key)
        # the odd row is still there, untouched, and the new version shares no number with it
        assert all(r in stored for r in odd), (odd, stored)
        assert view.version not in [v for v, _ in odd]
        assert view.version < PG_INTEGER_MAX
        # one warning for the odd row, however many reads met it
        salvaged = [r for r in caplog.records if "salvage" in r.getMessage()]
        assert len(salvaged) <= 1, [r.getMessage() for r in salvaged]
        assert m.context(CONV, "shipping label", 5_000).messages


@pytest.mark.parametrize(("column", "value"), [c[1:] for c in SQLITE_CASES], ids=[c[0] for c in SQLITE_CASES])
@pytest.mark.parametrize("scheduler", [False, True], ids=["consolidate", "scheduler"])
def test_sqlite_odd_view_row_does_not_stop_the_next_version(
        tmp_path: Path, embedder: FastEmbedder, caplog: pytest.LogCaptureFixture, column: str, value: str,
        scheduler: bool) -> None:
    cfg = Config(data_dir=tmp_path / "data", warm_max_turns_behind=1)
    _check(cfg, embedder, column, value, caplog, scheduler=scheduler)


@pytest.mark.parametrize(("column", "value"), [c[1:] for c in POSTGRES_CASES], ids=[c[0] for c in POSTGRES_CASES])
def test_postgres_odd_view_row_does_not_stop_the_next_version(
        tmp_path: Path, embedder: FastEmbedder, pg_url: str, caplog: pytest.LogCaptureFixture,
        column: str, value: str) -> None:
    cfg = Config(data_dir=tmp_path / "data", cold_url=pg_url, cold_schema=fresh_schema(), warm_max_turns_behind=1)
    _check(cfg, embedder, column, value, caplog, scheduler=True)

"""Keyword search on PostgreSQL stays linear in its matches (found by bench_postgres:
search() took 2.5 s p50 in a 300-turn conversation, against 26 ms on SQLite).

Two faults, each with a test that fails without its fix:
- the planner inlined the `terms`/`df` CTEs into the join, so each term's document
  frequency was counted again for every matching row: quadratic in the matches;
- a word that PostgreSQL's english dictionary drops (e.g. "about", not in our stopword
  list) became an empty tsquery, and every `@@` against it sent the client a NOTICE.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from pg_server import fresh_schema

from tiermem.tiers.models import Message
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.tokens import BpeTokenCounter

MATCHING_TURNS = 1500  # every turn matches the query: the worst case for the df count
# the rows the executed plan's nodes produced, over its loops, per matching turn: linear,
# a handful (a scan of the hits per term, the join, the sort: 10-16 here); quadratic, the df
# count over the hits once per hit: ~9,000 here (13.5 M rows; the plan took ~25 s)
PLAN_ROWS_PER_MATCH = 50


class NoticeCountingStore(PostgresStore):
    notices = 0
    last_read: tuple[str, Any] = ("", ())  # the last query read, with its parameters

    def _read(self, sql: str, params: Any = ()) -> list[Any]:
        type(self).last_read = (sql, params)
        return super()._read(sql, params)

    @contextlib.contextmanager
    def _conn(self) -> Iterator[Any]:
        with super()._conn() as conn:
            if not getattr(conn, "_tm_counted", False):
                conn.add_notice_handler(lambda _d: setattr(type(self), "notices", type(self).notices + 1))
                conn._tm_counted = True
            yield conn


@pytest.fixture(scope="module")
def store(pg_url: str) -> Iterator[NoticeCountingStore]:
    s = NoticeCountingStore(pg_url, tokens=BpeTokenCounter(), schema=fresh_schema())
    s.append_many("c", [Message(role="user", content=f"line {i} about the weather in Porto")
                        for i in range(MATCHING_TURNS)], namespace="n")
    yield s
    s.close()


QUERIES = [
    ("weather in Porto", 0),  # every turn matches both terms
    # "about": a stopword of PostgreSQL's dictionary only: one NOTICE when its query is
    # made (the server's, harmless), never one per row
    ("what about the weather", 1),
]


@pytest.mark.parametrize(("query", "notices"), QUERIES)
def test_keyword_search_is_linear_in_its_matches_and_quiet(store: NoticeCountingStore, query: str,
                                                           notices: int) -> None:
    key = store.key_of("n", "c")
    assert key is not None
    NoticeCountingStore.notices = 0
    hits = store.search_bm25(query, 10, conversation_id=key)
    assert len(hits) == 10 and all(h[0] == key for h in hits)
    assert NoticeCountingStore.notices <= notices
    # the server's work for it (the search's own query, run again under EXPLAIN ANALYZE)
    rows = plan_rows(store, *NoticeCountingStore.last_read)
    assert rows < PLAN_ROWS_PER_MATCH * MATCHING_TURNS, f"{rows} plan rows for {MATCHING_TURNS} matching turns"


def plan_rows(store: PostgresStore, sql: str, params: Any) -> int:
    """How many rows the nodes of `sql`'s executed plan produced, each over all its loops."""
    with store.reading() as conn:
        plan = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params).fetchone()[0]
    total, nodes = 0, [plan[0]["Plan"]]
    while nodes:
        node = nodes.pop()
        total += int(node["Actual Rows"] * node["Actual Loops"])
        nodes += node.get("Plans", [])
    return total

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
import time
from collections.abc import Iterator
from typing import Any

import pytest
from pg_server import fresh_schema

from tiermem.tiers.models import Message
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.tokens import BpeTokenCounter

MATCHING_TURNS = 1500  # every turn matches the query: the worst case for the df count
# linear: ~10-30 ms here; the quadratic plan took ~25 s at this size (1 s at 300 turns)
SEARCH_LIMIT_S = 2.0


class NoticeCountingStore(PostgresStore):
    notices = 0

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
    t0 = time.perf_counter()
    hits = store.search_bm25(query, 10, conversation_id=key)
    took = time.perf_counter() - t0
    assert len(hits) == 10 and all(h[0] == key for h in hits)
    assert took < SEARCH_LIMIT_S, f"{took:.2f} s for {MATCHING_TURNS} matching turns"
    assert NoticeCountingStore.notices <= notices

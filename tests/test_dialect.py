"""tiers/dialect.py: a shared query is written once with `?` placeholders and each engine
gets it in its own paramstyle; the engines answer the shared methods from that one text."""

from __future__ import annotations

import pytest

from tiermem.tiers.cold import ColdStore
from tiermem.tiers.dialect import POSTGRES, SQLITE, SharedQueries
from tiermem.tiers.postgres import PostgresStore

CASES = [
    # plain positional parameters
    ("SELECT a FROM t WHERE b = ? AND c = ?", "SELECT a FROM t WHERE b = %s AND c = %s"),
    # a literal % must reach PostgreSQL as one %, so psycopg needs it doubled
    ("SELECT a FROM t WHERE b LIKE 'x%' AND c = ?", "SELECT a FROM t WHERE b LIKE 'x%%' AND c = %s"),
    # no parameters at all: unchanged
    ("SELECT COUNT(*) FROM t", "SELECT COUNT(*) FROM t"),
]


@pytest.mark.parametrize(("shared", "postgres"), CASES)
def test_a_shared_query_in_each_dialect(shared: str, postgres: str) -> None:
    assert SQLITE.sql(shared) == shared
    assert POSTGRES.sql(shared) == postgres


def test_values_lists_and_greatest() -> None:
    assert (SQLITE.params(3), POSTGRES.params(3)) == ("?,?,?", "%s,%s,%s")
    assert (SQLITE.greatest, POSTGRES.greatest) == ("MAX", "GREATEST")


@pytest.mark.parametrize(("engine", "dialect"), [(ColdStore, SQLITE), (PostgresStore, POSTGRES)])
def test_each_engine_answers_the_shared_methods_from_one_text(engine: type, dialect: object) -> None:
    assert issubclass(engine, SharedQueries) and engine.dialect is dialect
    # the engine does not define them again: one text per query
    for name in ("history", "turns", "put_summary", "view_frontier", "checkpoint", "search"):
        assert name not in vars(engine), name

"""PostgreSQL's namespace dense search when more rows share the k-th distance than fit
in the answer (equal vectors: a text written again, a fork's copies). `ORDER BY d LIMIT k`
kept any of the tied rows (a top-N sort's pick on a sequential scan, whichever the HNSW
walk met first on the index) and only those were sorted by id: the answer was not the
earliest tied rows, and differed from the exact one (distance, then id). The reference
here is the database's own exact scan, so float rounding cannot differ. SQLite's side is
tests/test_search_dense_ties.py (vec0 re-asked while the tie continues)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from pg_server import fresh_schema

from tiermem.tiers.postgres import HNSW_EF_SEARCH, PostgresStore, Vec
from tiermem.tiers.tokens import BpeTokenCounter

DIM = 32  # the width only sets the data's size; the tie is the same at 384
OTHER_NAMESPACE_ROWS_PER_ROW = 3  # the searched namespace is a quarter of the table
QUERIES = 12  # random queries per case: a top-N sort's pick depends on the query
SEED = 7

CASES = [
    # a tie across the k-th place, nearer distinct rows first (the seed's queries hit it)
    pytest.param(50, 40, 20, "random", id="tie-across-k"),
    # the tied vector is the query: every answer row is tied
    pytest.param(50, 40, 20, "tied", id="all-tied"),
    # k past the session's ef_search: the SET LOCAL branch asks one row more too
    pytest.param(300, 150, HNSW_EF_SEARCH + 20, "tied", id="k-past-ef-search"),
]


def unit(a: np.ndarray) -> np.ndarray:
    return (a / np.linalg.norm(a, axis=-1, keepdims=True)).astype(np.float32)


@pytest.fixture
def store(pg_url: str, counter: BpeTokenCounter) -> Iterator[PostgresStore]:
    s = PostgresStore(pg_url, tokens=counter, schema=fresh_schema())
    s.prepare_vectors(DIM)
    yield s
    s.close()


def plant(store: PostgresStore, rows: int, tied: int, rng: np.random.Generator) -> np.ndarray:
    """`rows` vectors in namespace "a" (`tied` of them one vector, at random places) among
    rows of namespace "b" that hold copies too; returns the tied vector."""
    total = rows * (1 + OTHER_NAMESPACE_ROWS_PER_ROW)
    vecs = unit(rng.standard_normal((total, DIM)))
    ns = ["a" if i % (1 + OTHER_NAMESPACE_ROWS_PER_ROW) == 0 else "b" for i in range(total)]
    a_rows = [i for i in range(total) if ns[i] == "a"]
    b_rows = [i for i in range(total) if ns[i] == "b"]
    tied_vec = unit(rng.standard_normal(DIM))
    vecs[rng.choice(a_rows, size=tied, replace=False)] = tied_vec
    vecs[rng.choice(b_rows, size=tied, replace=False)] = tied_vec
    with store._tx() as c:
        c.cursor().executemany(
            "INSERT INTO messages_vec(id, conversation_id, namespace, position, embedding) VALUES (%s, %s, %s, %s, %s)",
            [(i + 1, f"{ns[i]}-conv", ns[i], i, Vec(vecs[i])) for i in range(total)])
        c.execute("ANALYZE messages_vec")
    return tied_vec


def exact(store: PostgresStore, q: np.ndarray, k: int) -> list[int]:
    with store._tx() as c:
        c.execute("SET LOCAL enable_indexscan = off")
        rows = c.execute(f"SELECT position FROM messages_vec WHERE namespace = 'a' "
                         f"ORDER BY embedding::vector({DIM}) <-> %s::vector({DIM}), id LIMIT %s",
                         (Vec(q), k)).fetchall()
    return [int(r[0]) for r in rows]


@pytest.mark.parametrize(("rows", "tied", "k", "query"), CASES)
def test_namespace_ties_go_to_the_earliest_rows(store: PostgresStore, rows: int, tied: int, k: int,
                                               query: str) -> None:
    rng = np.random.default_rng(SEED)
    tied_vec = plant(store, rows, tied, rng)
    for _ in range(QUERIES):
        q = tied_vec if query == "tied" else unit(rng.standard_normal(DIM))
        got = [p for _, p, _ in store.search_dense(q, k, namespace="a")]
        assert got == exact(store, q, k)

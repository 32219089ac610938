"""A closed cold store answers every operation with StoreUnavailable naming the store and
"closed" (the service's 503 with Retry-After, as for a store that is down), never an
AttributeError on its connection.

Before: tiers/cold.py's close() sets the connection to None, and only `_polled` (every
write) and `reading()` checked it; `_read` (every read: history, stats, the key lookup
each Memory call starts with, ...), `embeddings`' vector lookup and `search_bm25`'s
lexical search used it directly and raised `AttributeError: 'NoneType' object has no
attribute 'execute'`, which the service answered 500 "internal error". PostgreSQL's store
checked its pool, but a caller's pool closed by its owner (or the store's own pool closed
by close() on another thread after the check) raised psycopg_pool's PoolClosed, which
`storage_problem` did not know (a 500 too).

Real parts: a SQLite file under tmp_path, the PostgreSQL of tests/pg_server.py, the
service app on a real Memory. The stores are filled, then closed, once per module: a
closed store changes no more, so the cases share it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from hash_embedder import DIM, HashEmbedder
from pg_server import fresh_schema

from tiermem import Config, Memory
from tiermem.evals.conversations import export_lines
from tiermem.service.app import create_app
from tiermem.service.handlers import STORAGE_RETRY_AFTER_S
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.errors import StoreUnavailable
from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter

CONV = "c1"
NS = "default"
TURNS = 6  # enough for a checkpoint, a pin and a fork inside the log
QUERY = "apples"
UNIT = np.full(DIM, 1 / np.sqrt(DIM), dtype=np.float32)  # a query vector of the store's width

Op = Callable[[Any, str], object]  # (store, conversation key) -> anything; must raise


def _consume(result: object) -> object:
    """A context manager is entered, an iterator drained: where they reach the store."""
    if hasattr(result, "__enter__"):
        with result:  # type: ignore[attr-defined]
            pass
    return result


# (operation on a closed store) -- what reached the connection unchecked before
STORE_OPS: list[tuple[str, Op]] = [
    ("history", lambda s, k: s.history(k)),  # _read: every read went through it
    ("get", lambda s, k: s.get(k, [0, 1])),  # _read, by position
    ("get_many", lambda s, k: s.get_many([(k, 0)])),  # _read, across conversations
    ("turns", lambda s, k: s.turns(k)),  # _read: the turn index (the planner's rows)
    ("active", lambda s, k: s.active(k)),  # _read: checkpoint and the messages after it
    ("key_of", lambda s, k: s.key_of(NS, CONV)),  # _read: the lookup each Memory call starts with
    ("list_names", lambda s, k: s.list_names(NS)),  # _read: conversations of a namespace
    ("stats", lambda s, k: s.stats()),  # _read: the store's counts
    ("namespace_stats", lambda s, k: s.namespace_stats(NS)),  # _read, one namespace
    ("pending_embeddings", lambda s, k: s.pending_embeddings()),  # _read: the indexer's lag
    ("tombstones", lambda s, k: s.tombstones()),  # _read: erasure records
    ("latest_summaries", lambda s, k: s.latest_summaries(k, "session", "s", 1)),  # _read: warm views
    ("view_frontier", lambda s, k: s.view_frontier()),  # _read: the warm views' scheduler
    ("embeddings", lambda s, k: s.embeddings(k, [0, 1])),  # the vector lookup by rowid
    ("search_dense", lambda s, k: s.search_dense(UNIT, 3, conversation_id=k)),  # vector search
    ("search_bm25 conversation", lambda s, k: s.search_bm25(QUERY, 3, conversation_id=k)),  # lexical, one conv
    ("search_bm25 namespace", lambda s, k: s.search_bm25(QUERY, 3, namespace=NS)),  # lexical, the namespace
    ("search hybrid", lambda s, k: s.search(QUERY, 3, conversation_id=k, query_vec=UNIT)),  # both fused
    ("turn_facts", lambda s, k: s.turn_facts(k)),  # _read: catch-up's rows with vectors
    ("integrity", lambda s, k: s.integrity()),  # _read: the derived tables' check
    ("index_pending", lambda s, k: s.index_pending()),  # the catch-up: reads its pool first
    ("rebuild", lambda s, k: s.rebuild()),  # recompute the derived tables
    ("fork", lambda s, k: s.fork(k, 1)),  # reads the parent before its transaction
    ("delete_conversation", lambda s, k: s.delete_conversation(k)),  # an erasure: selects its keys first
    ("prune", lambda s, k: s.prune(0.0, namespace=NS)),  # an erasure by age
    ("append", lambda s, k: s.append(CONV, Message(role="user", content="more"))),  # a write: checked before too
    ("set_pin", lambda s, k: s.set_pin(k, 0, 5)),  # a write: checked before too
    ("checkpoint", lambda s, k: s.checkpoint(k, "summary", 1)),  # a write: checked before too
    ("reading", lambda s, k: _consume(s.reading())),  # the raw access: checked before too
    ("transaction", lambda s, k: _consume(s.transaction())),  # the raw write access: checked before too
]


def _fill(store: Any) -> str:
    for i in range(TURNS):
        store.append(CONV, Message(role="user" if i % 2 == 0 else "assistant", content=f"turn {i} about {QUERY}"))
    store.index_pending()
    key = store.key_of(NS, CONV)
    assert key is not None
    assert store.embeddings(key, [0, 1]), "the closed store had vectors to look up"
    assert store.search_bm25(QUERY, 3, conversation_id=key), "and text to find"
    return str(key)


@pytest.fixture(scope="module")
def closed_sqlite(tmp_path_factory: pytest.TempPathFactory, counter: BpeTokenCounter) -> tuple[ColdStore, str]:
    store = ColdStore(tmp_path_factory.mktemp("closed") / "tiermem.db", tokens=counter, embedder=HashEmbedder())
    key = _fill(store)
    store.close()
    return store, key


def _assert_closed(exc: pytest.ExceptionInfo[StoreUnavailable], where: str, detail: str = "closed") -> None:
    assert where in str(exc.value), str(exc.value)
    assert detail in str(exc.value), str(exc.value)


@pytest.mark.parametrize("op", [op for _n, op in STORE_OPS], ids=[n for n, _op in STORE_OPS])
def test_a_closed_sqlite_store_is_unavailable(closed_sqlite: tuple[ColdStore, str], op: Op) -> None:
    store, key = closed_sqlite
    with pytest.raises(StoreUnavailable) as exc:
        op(store, key)
    _assert_closed(exc, str(store.path))


MemOp = Callable[[Memory], object]

# (Memory call after memory.cold.close(): what a shutdown leaves a request in flight with)
MEMORY_OPS: list[tuple[str, MemOp]] = [
    ("context with a query", lambda m: m.context(CONV, QUERY)),  # the planner: recall + recent turns
    ("context without a query", lambda m: m.context(CONV)),  # recent turns only
    ("search conversation", lambda m: m.search(CONV, QUERY)),  # hybrid: vectors + lexical
    ("search namespace", lambda m: m.search(None, QUERY)),  # across the namespace
    ("history", lambda m: m.history(CONV)),  # the log
    ("active", lambda m: m.active(CONV)),  # checkpoint and what follows
    ("facts", lambda m: m.facts(CONV)),  # statements and their validity
    ("conversations", lambda m: m.conversations()),  # the namespace's ids
    ("stats", lambda m: m.stats()),  # counts
    ("catch_up", lambda m: m.catch_up(CONV)),  # the indexer's catch-up
    ("consolidate", lambda m: m.consolidate(CONV)),  # the warm views, read and written through the store
    ("export", lambda m: list(export_lines(m, None, namespace=NS))),  # `tiermem export`'s lines
    ("pin", lambda m: m.pin(CONV, 0)),  # a write, after the key lookup
    ("append", lambda m: m.append(CONV, {"role": "user", "content": "more"})),  # a write: checked before too
]


@pytest.fixture(scope="module")
def closed_memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    mem = Memory(Config(data_dir=tmp_path_factory.mktemp("mem") / "data"), embedder=HashEmbedder(), hot=False,
                 background_indexing=False)
    try:
        for i in range(TURNS):
            mem.append(CONV, {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} about {QUERY}"})
        mem.catch_up(CONV)
        assert mem.search(CONV, QUERY), "the closed store had something to find"
        mem.cold.close()
        yield mem
    finally:
        mem.close()


@pytest.mark.parametrize("op", [op for _n, op in MEMORY_OPS], ids=[n for n, _op in MEMORY_OPS])
def test_memory_on_a_closed_sqlite_store_is_unavailable(closed_memory: Memory, op: MemOp) -> None:
    with pytest.raises(StoreUnavailable) as exc:
        op(closed_memory)
    _assert_closed(exc, str(closed_memory.cold.path))


# (request the service is answering when the store closes under it: a shutdown)
REQUESTS: list[tuple[str, str, dict[str, Any]]] = [
    ("POST", f"/v1/conversations/{CONV}/context", {"json": {"query": QUERY}}),  # the per-turn context
    ("GET", "/v1/search", {"params": {"q": QUERY, "conversation_id": CONV}}),  # search, the query in the URL
    ("POST", "/v1/search", {"json": {"q": QUERY}}),  # search across the namespace, the query in the body
    ("GET", f"/v1/conversations/{CONV}/history", {}),  # the log
    ("GET", "/v1/stats", {}),  # counts
]


@pytest.mark.parametrize(("method", "url", "kwargs"), REQUESTS, ids=[f"{m} {u}" for m, u, _k in REQUESTS])
def test_the_service_answers_503(tmp_path: Path, method: str, url: str, kwargs: dict[str, Any]) -> None:
    config = Config(data_dir=str(tmp_path / "data"))
    with Memory(config, embedder=HashEmbedder(), hot=False, background_indexing=False) as memory:
        memory.append(CONV, {"role": "user", "content": f"hello about {QUERY}"})
        app = create_app(config, memory, auth=False, start_scheduler=False)
        with TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False) as client:
            assert client.request(method, url, **kwargs).status_code == 200, "the request works while open"
            memory.cold.close()  # what a shutdown does under a request still being answered
            r = client.request(method, url, **kwargs)
        assert r.status_code == 503, r.text
        assert r.headers["Retry-After"] == str(STORAGE_RETRY_AFTER_S)
        assert "storage unavailable" in r.json()["detail"]


# (operation on a PostgreSQL store that cannot reach its pool any more)
PG_OPS: list[tuple[str, Op]] = [
    ("history", lambda s, k: s.history(k)),  # a read
    ("stats", lambda s, k: s.stats()),  # counts
    ("embeddings", lambda s, k: s.embeddings(k, [0, 1])),  # the vector lookup
    ("search_dense", lambda s, k: s.search_dense(UNIT, 3, conversation_id=k)),  # vector search
    ("search_bm25", lambda s, k: s.search_bm25(QUERY, 3, conversation_id=k)),  # lexical search
    ("append", lambda s, k: s.append(CONV, Message(role="user", content="more"))),  # a write
    ("delete_conversation", lambda s, k: s.delete_conversation(k)),  # an erasure
]


@pytest.fixture(scope="module", params=["store closed", "caller's pool closed"])
def closed_pg(request: pytest.FixtureRequest, pg_url: str, counter: BpeTokenCounter
              ) -> Iterator[tuple[Any, str, str]]:
    """(store, key, what the error says): the store closed by close() (checked before
    too), or a store on a caller's pool that its owner closed (PoolClosed before)."""
    from psycopg_pool import ConnectionPool

    from tiermem.tiers.postgres import PostgresStore

    if request.param == "store closed":
        store = PostgresStore(pg_url, tokens=counter, embedder=HashEmbedder(), schema=fresh_schema())
        key = _fill(store)
        store.close()
        yield store, key, "the store is closed"
        return
    pool = ConnectionPool(pg_url, min_size=1, max_size=2, open=True)
    store = PostgresStore(pool=pool, tokens=counter, embedder=HashEmbedder(), schema=fresh_schema())
    try:
        key = _fill(store)
        pool.close()  # the caller's own shutdown, before the store's
        yield store, key, "pool is closed"
    finally:
        store.close()
        pool.close()


@pytest.mark.parametrize("op", [op for _n, op in PG_OPS], ids=[n for n, _op in PG_OPS])
def test_a_closed_postgres_store_is_unavailable(closed_pg: tuple[Any, str, str], op: Op) -> None:
    store, key, detail = closed_pg
    with pytest.raises(StoreUnavailable) as exc:
        op(store, key)
    _assert_closed(exc, store.path, detail)

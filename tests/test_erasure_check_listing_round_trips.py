"""The listing calls learn of other processes' erasures without a round trip of their own
(tiermem.memory: conversations, conversations_page, tombstones and stats read the newest
tombstone's id as a column of the statement they send anyway, `*_and_erasure_mark`).
Before (c1bfcd4), each sent one statement more (`erased_after`) before it answered: on
PostgreSQL a round trip per call. What they read still tells an erasure by another
Memory apart: the call drops its copies before it returns.

PostgreSQL, one pooled connection traced by libpq (as
tests/test_erasure_check_round_trips.py does), each call against the store's own
statements it needs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pg_server import fresh_schema

from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder
from tiermem.tiers.migrate_store import unfinished_marks
from tiermem.tiers.postgres import PostgresStore, count_round_trips

NS = "acme"
PAGE = 1  # conversations_page's limit: the store reads one more
WARM_CALLS = 10  # past psycopg's prepare_threshold (5): every statement prepared before counting


@pytest.fixture
def mem(tmp_path: Path, embedder: Embedder, pg_url: str) -> Iterator[Memory]:
    # one pooled connection: the one count_round_trips traces
    cfg = Config(data_dir=tmp_path / "data", cold_url=pg_url, cold_schema=fresh_schema(), cold_pool_size=1)
    m = Memory(cfg, embedder=embedder, hot=False, background_indexing=False)
    for name in ("c", "d", "gone", "gone-elsewhere"):
        m.append(name, {"role": "user", "content": f"The thread {name}."}, namespace=NS)
    m.delete_conversation("gone", namespace=NS)  # a tombstone to list, acted on here
    yield m
    m.close()


def _cold(mem: Memory) -> PostgresStore:
    assert isinstance(mem.cold, PostgresStore)
    return mem.cold


# (call, the store statements it needs)
CALLS: list[tuple[str, Callable[[Memory], object], Callable[[Memory], object]]] = [
    # every name of the namespace
    ("conversations", lambda m: m.conversations(NS), lambda m: _cold(m).list_names(NS)),
    # a page of them
    ("conversations_page", lambda m: m.conversations_page(NS, limit=PAGE),
     lambda m: _cold(m).list_names(NS, limit=PAGE + 1)),
    # what is left of the namespace's erased conversations
    ("tombstones", lambda m: m.tombstones(namespace=NS), lambda m: _cold(m).tombstones(NS)),
    # a namespace's counts
    ("stats_namespace", lambda m: m.stats(namespace=NS), lambda m: _cold(m).namespace_stats(NS)),
    # every tier's counts: the store's and its views' failures
    # stats reads migrate-store's unfinished-copy marks too (bdd7a92): a statement it needs
    ("stats", lambda m: m.stats(), lambda m: (_cold(m).stats(), m.views.failing(), unfinished_marks(_cold(m)))),
]


@pytest.mark.parametrize(("call", "bare"), [(c[1], c[2]) for c in CALLS], ids=[c[0] for c in CALLS])
def test_a_listing_call_makes_no_round_trip_for_erasures(
        mem: Memory, call: Callable[[Memory], object], bare: Callable[[Memory], object]) -> None:
    for _ in range(WARM_CALLS):  # psycopg prepares a statement on its PREPARE_THRESHOLD-th run: a round trip
        call(mem)
        bare(mem)
    cold = _cold(mem)
    # before: one more each (erased_after)
    assert count_round_trips(cold, lambda: call(mem)) == count_round_trips(cold, lambda: bare(mem))


@pytest.mark.parametrize("call", [c[1] for c in CALLS], ids=[c[0] for c in CALLS])
def test_an_erasure_elsewhere_is_still_seen_by_a_listing_call(
        mem: Memory, tmp_path: Path, embedder: Embedder, call: Callable[[Memory], object]) -> None:
    seen = mem._erasure_mark
    cfg = Config(data_dir=tmp_path / "data", cold_url=mem.config.cold_url, cold_schema=mem.config.cold_schema)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as other:
        other.delete_conversation("gone-elsewhere", namespace=NS)
    call(mem)
    assert mem._erasure_mark > seen  # read with the call's statement, and acted on


def test_an_empty_listing_still_sees_an_erasure_elsewhere(mem: Memory, tmp_path: Path, embedder: Embedder) -> None:
    """A listing of no rows reads no mark in them: one statement of its own then."""
    seen = mem._erasure_mark
    cfg = Config(data_dir=tmp_path / "data", cold_url=mem.config.cold_url, cold_schema=mem.config.cold_schema)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as other:
        other.delete_conversation("gone-elsewhere", namespace=NS)
    assert mem.conversations("empty") == [] and mem.tombstones(namespace="empty") == []
    assert mem._erasure_mark > seen

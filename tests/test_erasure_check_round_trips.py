"""A process learns of other processes' erasures without a round trip of its own on the
calls that name a conversation (tiermem.memory: the newest tombstone's id is read by the
statement that looks the conversation up, `key_and_erasure_mark`, and by PostgreSQL's
one-statement append). Before, each such call sent one statement more (`erased_after`)
before its lookup: 3 round trips for a history page that needs 2. And what it reads
still tells an erasure by another Memory apart: the next call drops its copies.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pg_server import fresh_schema

from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder
from tiermem.tiers.postgres import PostgresStore, count_round_trips

NS = "acme"
WARM_CALLS = 10  # past psycopg's prepare_threshold (5): every statement prepared before counting


@pytest.fixture
def mem(tmp_path: Path, embedder: Embedder, pg_url: str) -> Iterator[Memory]:
    # one pooled connection: the one count_round_trips traces
    cfg = Config(data_dir=tmp_path / "data", cold_url=pg_url, cold_schema=fresh_schema(), cold_pool_size=1)
    m = Memory(cfg, embedder=embedder, hot=False, background_indexing=False)
    m.append("c", {"role": "user", "content": "The garden needs water on Tuesdays."}, namespace=NS)
    m.append("gone", {"role": "user", "content": "Something to erase."}, namespace=NS)
    yield m
    m.close()


def _bare(mem: Memory, fn: Callable[[PostgresStore, str], object]) -> Callable[[], object]:
    """The store's own statements a call needs: its lookup, then `fn` with the key."""
    cold = mem.cold
    assert isinstance(cold, PostgresStore)

    def run() -> object:
        key = cold.key_of(NS, "c")
        assert key is not None
        return fn(cold, key)
    return run


# (call, the store statements it needs after its lookup)
CALLS: list[tuple[str, Callable[[Memory], object], Callable[[PostgresStore, str], object]]] = [
    # a history page: the log read
    ("history", lambda m: m.history("c", namespace=NS), lambda c, k: c.history(k, start=0, end=None)),
    # the pins of a turn: one write
    ("pin", lambda m: m.pin("c", 0, namespace=NS), lambda c, k: c.set_pin(k, 0, 50)),
]


@pytest.mark.parametrize("call, bare", [(c[1], c[2]) for c in CALLS], ids=[c[0] for c in CALLS])
def test_a_call_naming_a_conversation_makes_no_round_trip_for_erasures(
        mem: Memory, call: Callable[[Memory], object], bare: Callable[[PostgresStore, str], object]) -> None:
    for _ in range(WARM_CALLS):  # psycopg prepares a statement on its PREPARE_THRESHOLD-th run: a round trip
        call(mem)
        _bare(mem, bare)()
    assert isinstance(mem.cold, PostgresStore)
    assert count_round_trips(mem.cold, lambda: call(mem)) == count_round_trips(mem.cold, _bare(mem, bare))


def test_an_erasure_elsewhere_is_still_seen(mem: Memory, tmp_path: Path, embedder: Embedder) -> None:
    assert isinstance(mem.cold, PostgresStore)
    seen = mem._erasure_mark
    cfg = Config(data_dir=tmp_path / "data", cold_url=mem.config.cold_url, cold_schema=mem.config.cold_schema)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as other:
        other.delete_conversation("gone", namespace=NS)
    mem.history("c", namespace=NS)
    assert mem._erasure_mark > seen  # read with the lookup, and acted on

"""An append's memo scope: its conversation's key, known without a lookup per append.

b2c32da looked the conversation's key up (`ColdLog.key_of`) before every append, to
label and count the messages within its memo scope: on PostgreSQL a second round trip
on top of the append's one statement. And the first append of a new conversation (no
key yet) was remembered under its namespace and name, so the `context()` that follows,
which asks within the key's scope, computed the labels and counts of that message
again. `Memory` now keeps the keys it has met (an append's, a read's) and refiles the
first append's results under the key the store issued (`tiers.memo.move_scope`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pg_server import fresh_schema

from tiermem import Config, Memory
from tiermem.consolidation import classify, supersede
from tiermem.tiers import lexical
from tiermem.tiers.embed import Embedder
from tiermem.tiers.memo import memo_scope, remembered_for
from tiermem.tiers.postgres import PostgresStore, count_round_trips

TEXT = "From now on, always answer me in French, never in English."
NS = "acme"


@pytest.fixture(params=["sqlite", "postgres"])
def mem(request: pytest.FixtureRequest, tmp_path: Path, embedder: Embedder) -> Iterator[Memory]:
    engine: dict[str, object] = {}
    if request.param == "postgres":
        # one pooled connection: the one count_round_trips traces
        engine = {"cold_url": request.getfixturevalue("pg_url"), "cold_schema": fresh_schema(), "cold_pool_size": 1}
    m = Memory(Config(data_dir=tmp_path / "data", **engine), embedder=embedder, hot=False,  # type: ignore[arg-type]
               background_indexing=False)
    classify.clear_memo()
    supersede.clear_memo()
    lexical.forget_terms()
    m.tokens.clear_memo()  # type: ignore[attr-defined]
    yield m
    m.close()


def _first(mem: Memory) -> None:
    pass  # the conversation does not exist yet


def _later(mem: Memory) -> None:
    mem.append("c", {"role": "user", "content": "hello"}, namespace=NS)


def _recreated(mem: Memory) -> None:
    mem.append("c", {"role": "user", "content": "hello"}, namespace=NS)
    mem.delete_conversation("c", namespace=NS)


def _recreated_elsewhere(mem: Memory) -> None:
    """Erased and created again behind this Memory's back (another process): its kept key
    is stale, and the append after next must find the new one."""
    mem.append("c", {"role": "user", "content": "hello"}, namespace=NS)
    with Memory(mem.config, embedder=mem.embedder, hot=False, background_indexing=False) as other:
        other.delete_conversation("c", namespace=NS)
        other.append("c", {"role": "user", "content": "hello again"}, namespace=NS)
    mem.append("c", {"role": "user", "content": "one more"}, namespace=NS)


BEFORE: list[tuple[str, Callable[[Memory], None]]] = [
    # the first append creates the conversation: its key is issued inside the append
    ("first append", _first),
    # the conversation exists and this Memory has appended to it
    ("later append", _later),
    # erased here, then created again by the append: a new key, never the erased one's
    ("re-created after an erasure", _recreated),
    # erased and created again by another Memory: the stale key is corrected by one append
    ("re-created elsewhere", _recreated_elsewhere),
]


@pytest.mark.parametrize("name, before", BEFORE, ids=[b[0] for b in BEFORE])
def test_an_appended_message_is_remembered_for_its_conversations_key(mem: Memory, name: str,
                                                                      before: Callable[[Memory], None]) -> None:
    before(mem)
    mem.append("c", {"role": "user", "content": TEXT}, namespace=NS)
    key = mem.cold.key_of(NS, "c")
    assert key is not None
    hits = classify._label_memo.hits, mem.tokens.memo_hits  # type: ignore[attr-defined]
    with remembered_for(memo_scope(mem.cold.db_uuid, key)):  # where context() asks
        mem.classifier.classify(TEXT, "user")
        mem.tokens.count(TEXT)
    assert (classify._label_memo.hits - hits[0], mem.tokens.memo_hits - hits[1]) == (1, 1), name  # type: ignore[attr-defined]


def test_an_append_to_a_known_conversation_is_one_round_trip(mem: Memory) -> None:
    if not isinstance(mem.cold, PostgresStore):
        pytest.skip("round trips are PostgreSQL's")
    mem.append("c", {"role": "user", "content": "first: creates the conversation"}, namespace=NS)
    for i in range(3):  # the prepared statement exists after the first calls
        mem.append("c", {"role": "user", "content": f"warm {i}"}, namespace=NS)
    assert count_round_trips(mem.cold, lambda: mem.append("c", {"role": "user", "content": "one more"},
                                                           namespace=NS)) == 1

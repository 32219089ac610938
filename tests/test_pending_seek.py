"""One conversation's catch-up (an append's own embedding pass, a search's, a view
refresh's) seeks to that conversation's pending turns through turns_pending_by_pos
(m022), in position order; before, SQLite walked the conversation's primary key from the
resume position and looked up every turn to test `embedded = 0` (all 60k turns of a huge
conversation, for the one new turn). Checked on the plans SQLite chooses for the
statements really run, and on what gets embedded: the conversation's pending turns, no
other's, and a catch-up that failed half way resumes with the rest."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cold_helpers import raw
from hash_embedder import HashEmbedder
from store_trace import traced

from tiermem.tiers.cold import ColdStore
from tiermem.tiers.models import Message
from tiermem.tiers.schema import MIGRATIONS
from tiermem.tiers.tokens import BpeTokenCounter

LONG_TURNS = 40  # embedded turns ahead of the pending one: the walk's cost before m022
OTHER_TURNS = 6  # another conversation's pending turns: never embedded by the long one's pass
# spelled out, not imported: this file must load against the code before m022 (the plan
# tests fail there, which is the point)
PENDING_BY_POSITION_INDEX = "turns_pending_by_pos"
PER_CONVERSATION_INDEXES = (PENDING_BY_POSITION_INDEX, "turns_pending_by_conv")


def _store(db: Path, counter: BpeTokenCounter) -> ColdStore:
    """'long': LONG_TURNS embedded turns and a newer one pending; 'other' in another
    namespace: OTHER_TURNS pending."""
    s = ColdStore(db, tokens=counter, embedder=HashEmbedder())  # type: ignore[arg-type]
    s.append_many("long", [Message(role="user", content=f"long {t}") for t in range(LONG_TURNS)], namespace="a")
    s.index_pending()
    s.append("long", Message(role="user", content="long newest"), namespace="a")
    s.append_many("other", [Message(role="user", content=f"other {t}") for t in range(OTHER_TURNS)], namespace="b")
    return s


@pytest.fixture
def store(tmp_path: Path, counter: BpeTokenCounter) -> Iterator[ColdStore]:
    """`_store`'s layout, closed after the test."""
    s = _store(tmp_path / "tiermem.db", counter)
    try:
        yield s
    finally:
        s.close()


def _append_late(s: ColdStore, turns: int) -> None:
    """`turns` more turns of 'long', pending behind its newest."""
    s.append_many("long", [Message(role="user", content=f"late {t}") for t in range(turns)], namespace="a")


def _key(s: ColdStore, namespace: str, name: str) -> str:
    key = s.key_of(namespace, name)
    assert key is not None
    return key


def _pending_reads(store: ColdStore, action: Callable[[], object]) -> list[tuple[str, str]]:
    """(statement, plan step on turns) of every read of pending turns `action` ran."""
    return [(sql, step[-1]) for sql in traced(store, action)
            if sql.split()[0].upper() == "SELECT" and "embedded = 0" in sql
            for step in store._read("EXPLAIN QUERY PLAN " + sql) if re.match(r"SEARCH (t|turns)\b", step[-1])]


CALLS: list[tuple[str, Callable[[ColdStore, str], object]]] = [
    # an append's own pass, a search's, a view refresh's: the whole conversation
    ("index_pending", lambda s, k: s.index_pending(conversation_id=k)),
    # supersession's inline pass: only the turns before a correction (end=)
    ("index_pending_end", lambda s, k: s.index_pending(conversation_id=k, end=LONG_TURNS, max_rows=1)),
    # the pool smaller than the pending turns: each read resumes after the last one read
    ("index_pending_pools", lambda s, k: s.index_pending(conversation_id=k, batch=1, pool_batches=1)),
    # supersession asks first whether any turn waits (a seek before m022 too: a guard)
    ("pending_embeddings", lambda s, k: s.pending_embeddings(k)),
]


@pytest.mark.parametrize("name,call", CALLS, ids=[c[0] for c in CALLS])
def test_a_conversation_s_catch_up_seeks_to_its_pending_turns(store: ColdStore, name: str,
                                                               call: Callable[[ColdStore, str], object]) -> None:
    key = _key(store, "a", "long")
    steps = _pending_reads(store, lambda: call(store, key))
    assert steps, "no read of pending turns traced"
    # every read names a per-conversation pending index; the primary key (a walk of
    # every turn) and turns_pending (every tenant's pending turns) never
    assert [s for s in steps if not any(f"INDEX {i} " in s[1] for i in PER_CONVERSATION_INDEXES)] == []
    if name.startswith("index_pending"):
        assert all(f"INDEX {PENDING_BY_POSITION_INDEX} (conversation_id=? AND position>?" in s[1]
                   for s in steps), steps


def test_only_the_conversation_s_pending_turns_are_embedded(store: ColdStore) -> None:
    long_key, other_key = _key(store, "a", "long"), _key(store, "b", "other")
    _append_late(store, 3)
    # end= stops at that position: the newest turn and the first late one only
    assert store.index_pending(conversation_id=long_key, end=LONG_TURNS + 1) == 2
    assert store.pending_embeddings(long_key) == 2
    assert store.index_pending(conversation_id=long_key) == 2
    assert store.pending_embeddings(long_key) == 0
    assert len(store.embeddings(long_key, list(range(LONG_TURNS + 4)))) == LONG_TURNS + 4
    # the other conversation's turns wait for their own pass
    assert store.pending_embeddings(other_key) == OTHER_TURNS
    assert store.embeddings(other_key, list(range(OTHER_TURNS))) == {}
    assert store.index_pending(conversation_id=other_key) == OTHER_TURNS
    assert store.stats()["pending_embeddings"] == 0


def test_a_failed_catch_up_resumes_with_the_rest(store: ColdStore) -> None:
    key, other_key = _key(store, "a", "long"), _key(store, "b", "other")
    _append_late(store, 9)
    stores: list[str] = []

    def fault(step: str) -> None:
        if step == "index_pending.store":
            stores.append(step)
            if len(stores) == 2:
                raise OSError("database is full")

    store._fault = fault
    with pytest.raises(OSError, match="database is full"):
        store.index_pending(conversation_id=key, batch=2, pool_batches=2)
    store._fault = None
    assert store.pending_embeddings(key) == 10 - 4  # the first pool of 4 is stored
    assert store.index_pending(conversation_id=key, batch=2, pool_batches=2) == 6
    assert store.pending_embeddings(key) == 0
    assert len(store.embeddings(key, list(range(LONG_TURNS + 10)))) == LONG_TURNS + 10
    assert store.pending_embeddings(other_key) == OTHER_TURNS


def test_a_store_from_before_gets_the_index(tmp_path: Path, counter: BpeTokenCounter) -> None:
    version_before = [m.__name__ for m in MIGRATIONS].index("m022_index_pending_by_position")
    db = tmp_path / "tiermem.db"
    _store(db, counter).close()
    with raw(db) as conn:
        conn.execute(f"DROP INDEX {PENDING_BY_POSITION_INDEX}")
        conn.execute(f"PRAGMA user_version = {version_before}")
    store = ColdStore(db, tokens=counter, embedder=HashEmbedder())  # type: ignore[arg-type]
    try:
        assert store.version == len(MIGRATIONS)
        key = _key(store, "a", "long")
        steps = _pending_reads(store, lambda: store.index_pending(conversation_id=key))
        assert steps and all(PENDING_BY_POSITION_INDEX in s[1] for s in steps), steps
        assert store.pending_embeddings(key) == 0
    finally:
        store.close()

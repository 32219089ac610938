"""A namespace's embedding catch-up and its stats' pending count start from the
namespace's conversations (index turns_pending_by_conv, or turns_pending_by_pos), not from
every tenant's turns waiting for a vector (turns_pending): another tenant's import backlog
must not slow them.
Checked on the plans SQLite chooses for the statements really run, and on the results."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from hash_embedder import HashEmbedder
from store_trace import traced

from tiermem.tiers.cold import ColdStore
from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter


def _store(tmp_path: Path, counter: BpeTokenCounter) -> ColdStore:
    """Tenant 'probe': 3 conversations, one turn of each pending; tenant 'bulk': a backlog
    of 300 pending turns (an import without an indexer)."""
    s = ColdStore(tmp_path / "tiermem.db", tokens=counter, embedder=HashEmbedder())  # type: ignore[arg-type]
    for c in range(3):
        s.append_many(f"p{c}", [Message(role="user", content=f"probe {c} {t}") for t in range(4)], namespace="probe")
    s.index_pending(namespace="probe")
    for c in range(3):
        s.append(f"p{c}", Message(role="user", content=f"probe {c} late"), namespace="probe")
    for c in range(10):
        s.append_many(f"b{c}", [Message(role="user", content=f"bulk {c} {t}") for t in range(30)], namespace="bulk")
    return s


def _plans(store: ColdStore, action: Callable[[], object]) -> list[tuple[str, str]]:
    """(statement, plan step) of every statement `action` ran."""
    return [(sql, step[-1]) for sql in traced(store, action) if sql.split()[0].upper() == "SELECT"
            for step in store._read("EXPLAIN QUERY PLAN " + sql)]


CALLS: list[tuple[str, Callable[[ColdStore], object]]] = [
    # the pending count of stats(namespace=)
    ("namespace_stats", lambda s: s.namespace_stats("probe")),
    # a namespace's catch-up (search(namespace=) runs one before searching)
    ("index_pending", lambda s: s.index_pending(namespace="probe")),
]


@pytest.mark.parametrize("name,call", CALLS, ids=[c[0] for c in CALLS])
def test_a_namespace_reads_only_its_own_pending_turns(tmp_path: Path, counter: BpeTokenCounter, name: str,
                                                       call: Callable[[ColdStore], object]) -> None:
    store = _store(tmp_path, counter)
    try:
        steps = _plans(store, lambda: call(store))
        # turns_pending holds every tenant's pending turns: walking it is the backlog's cost
        assert [s for s in steps if re.search(r"\bturns_pending\b(?!_)", s[1])] == []
        # one of the per-conversation pending indexes (m018's, or m022's by position, which
        # SQLite may pick for the count: it covers it as well)
        assert any(re.search(r"\bturns_pending_by_(conv|pos)\b", s[1]) for s in steps), steps
    finally:
        store.close()


def test_the_results_are_the_namespace_s(tmp_path: Path, counter: BpeTokenCounter) -> None:
    store = _store(tmp_path, counter)
    try:
        assert store.namespace_stats("probe")["pending_embeddings"] == 3
        assert store.namespace_stats("bulk")["pending_embeddings"] == 300
        # a pool smaller than the backlog: the catch-up resumes by rowid across conversations
        assert store.index_pending(namespace="probe", batch=1, pool_batches=2) == 3
        assert store.namespace_stats("probe")["pending_embeddings"] == 0
        assert store.namespace_stats("bulk")["pending_embeddings"] == 300
        assert store.index_pending(namespace="bulk", batch=16, pool_batches=4) == 300
        assert store.stats()["pending_embeddings"] == 0
    finally:
        store.close()

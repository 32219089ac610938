"""A conversation too large for one erasure batch (SQLite) is detached: its tombstone and
the deletion of its metadata row commit in one short transaction, its rows are deleted in
batches after. Its idempotency keys (each request's key, its fingerprint and positions)
went only with the last batch, so until then `idempotency_record(old key)` still read
them, and a failed or killed purge left them until the next open or erasure. They are
deleted in the detaching transaction (a review of idempotency keys, 2026-12-06).
PostgreSQL erases in one transaction: nothing of the conversation outlives its commit."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cold_helpers import raw
from hash_embedder import HashEmbedder

from tiermem.tiers.cold import ERASE_BATCH_MESSAGES, ColdStore
from tiermem.tiers.models import Message, append_fingerprint
from tiermem.tiers.tokens import BpeTokenCounter

CHUNK = 100  # messages an append carries, each under its own key
CHUNKS = 5  # more than one erasure batch in all: the conversation is detached
assert CHUNK * CHUNKS > ERASE_BATCH_MESSAGES
KEYS = [f"job-{i}" for i in range(CHUNKS)]


class StopBeforePurge(RuntimeError):
    """Raised at the detaching commit's step: the rows' batches never run."""


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ColdStore]:
    s = ColdStore(tmp_path / "tiermem.db", tokens=BpeTokenCounter(), embedder=HashEmbedder())
    try:
        yield s
    finally:
        s.close()


def fill(store: ColdStore) -> str:
    for i, k in enumerate(KEYS):
        msgs = [Message(role="user", content=f"turn {i * CHUNK + t} of the long ticket") for t in range(CHUNK)]
        store.append_batch("long", msgs, namespace="acme", idempotency_key=k, fingerprint=append_fingerprint(msgs))
    store.append("short", Message(role="user", content="a short one"), namespace="acme")
    key = store.key_of("acme", "long")
    assert key is not None and all(store.idempotency_record(key, k) is not None for k in KEYS)  # the premise
    return key


def key_rows(db: Path, key: str) -> int:
    with raw(db) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM idempotency_keys WHERE conversation_id = ?",
                                (key,)).fetchone()[0])


def owed(db: Path) -> int:
    with raw(db) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM erase_owed").fetchone()[0])


# every retention operation that goes through the batched erasure
ERASURES: list[tuple[str, Callable[[ColdStore, str], object]]] = [
    ("delete_conversation", lambda s, key: s.delete_conversation(key)),
    ("delete_namespace", lambda s, key: s.delete_namespace("acme")),
    ("prune", lambda s, key: s.prune(float("inf"), namespace="acme")),  # everything is older than forever
]


@pytest.mark.parametrize("erase", [e[1] for e in ERASURES], ids=[e[0] for e in ERASURES])
def test_the_keys_go_with_the_detaching_commit(store: ColdStore, erase: Callable[[ColdStore, str], object]) -> None:
    key = fill(store)

    def stop(name: str) -> None:
        if name == "erase:detached":
            raise StopBeforePurge(name)

    store._fault = stop
    with pytest.raises(StopBeforePurge):
        erase(store, key)
    store._fault = None
    # the premise: detached and committed, its rows owed
    assert store.key_of("acme", "long") is None and owed(store.path) == 1
    assert [store.idempotency_record(key, k) for k in KEYS] == [None] * CHUNKS
    assert key_rows(store.path, key) == 0


def test_a_new_incarnation_takes_the_old_keys_afresh(store: ColdStore) -> None:
    key = fill(store)

    def step(name: str) -> None:
        if name == "erase:detached":  # between the detaching commit and the rows' batches
            msgs = [Message(role="user", content="a new start")]
            out = store.append_batch("long", msgs, namespace="acme", idempotency_key=KEYS[0],
                                     fingerprint=append_fingerprint(msgs))
            seen.append((out.key, out.positions, out.replayed, store.idempotency_record(key, KEYS[0])))

    seen: list[tuple[str, list[int], bool, object]] = []
    store._fault = step
    store.delete_conversation(key)
    store._fault = None
    [(new, positions, replayed, old_record)] = seen
    assert (new != key, positions, replayed, old_record) == (True, [0], False, None)
    assert key_rows(store.path, key) == 0 and owed(store.path) == 0
    assert store.idempotency_record(new, KEYS[0]) is not None

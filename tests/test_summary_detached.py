"""A summary written while an erasure deletes its conversation in batches (SQLite: one
larger than a batch is detached, its metadata row deleted in one short transaction, then
its rows deleted batch by batch) is refused: `put_summary` requires the conversation row,
as PostgreSQL's does (FOR UPDATE on it). Before, SQLite's checked only that the
conversation had messages, which a detached one keeps until its last batch: the summary
(and its fold) was written, then deleted by that batch, a write for nothing (a warm
refresh answered by its LLM meanwhile)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cold_helpers import raw
from hash_embedder import HashEmbedder

from tiermem.tiers.cold import ERASE_BATCH_MESSAGES, ColdStore
from tiermem.tiers.errors import ConversationNotFound
from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter
from tiermem.tiers.warm import Sentence, SummaryView, WarmStore

TURNS = 450  # more than the first batch: detached, then at least two batches of rows
assert TURNS > 2 * ERASE_BATCH_MESSAGES


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ColdStore]:
    s = ColdStore(tmp_path / "tiermem.db", tokens=BpeTokenCounter(), embedder=HashEmbedder())
    try:
        yield s
    finally:
        s.close()


def derived_rows(db: Path, key: str) -> dict[str, int]:
    """The conversation's summaries and checkpoints (warm folds) in the file now."""
    with raw(db) as conn:
        return {table: int(conn.execute(f"SELECT COUNT(*) FROM {table} WHERE conversation_id = ?",
                                        (key,)).fetchone()[0]) for table in ("summaries", "checkpoints")}


@pytest.mark.parametrize("stop", [
    "erase:detached",  # the detaching commit, before the first batch of its rows
    "erase:purge",  # after a batch of its rows, more to come
])
@pytest.mark.parametrize("fold", [False, True])  # a rolling view writes its fold in the same transaction
def test_a_summary_of_a_detached_conversation_is_refused(store: ColdStore, stop: str, fold: bool) -> None:
    store.append_many("long", [Message(role="user", content=f"turn {t} of the long ticket about the boiler")
                               for t in range(TURNS)], namespace="acme")
    key = store.key_of("acme", "long") or ""
    warm = WarmStore(store)
    view = SummaryView(key, "rolling", "", 0, 0, TURNS - 1, (Sentence("the long ticket about the boiler", (0,)),),
                       0, "extractive", 0.0)
    seen: list[tuple[str, dict[str, int]]] = []

    def step(name: str) -> None:
        if name != stop or seen:
            return
        try:
            warm.put(view, fold=fold)
            outcome = "written"
        except ConversationNotFound:
            outcome = "refused"
        seen.append((outcome, derived_rows(store.path, key)))

    store._fault = step
    store.delete_conversation(key)
    store._fault = None
    # the premise: stopped between the detaching commit and its rows' last batch
    assert len(seen) == 1
    assert seen == [("refused", {"summaries": 0, "checkpoints": 0})]
    assert derived_rows(store.path, key) == {"summaries": 0, "checkpoints": 0}

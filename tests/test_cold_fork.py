"""Fork is one transaction (invariant 7): a failure at any step leaves no trace of the
child, and a fork that commits holds exactly the prefix, its index rows and vectors,
and the latest checkpoint at or before `up_to`, with the parent unchanged."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from cold_helpers import conversation_rows, raw, table_rows

from tiermem.tiers.cold import ColdStore
from tiermem.tiers.errors import ConversationNotFound, PositionOutOfRange, ValidationError
from tiermem.tiers.models import Message

STEPS = [
    "fork:conversation",  # after the conversation row
    "fork:messages",  # after the message prefix
    "fork:index",  # after the turn-index and FTS rows
    "fork:vectors",  # after the copied embeddings
    "fork:checkpoint",  # after the checkpoint and pins, the last step before COMMIT
]
TOPICS = ["the flight leaves Lisbon at nine", "no red-eye flights please", "the hotel has a pool",
          "budget is two thousand euros", "vegetarian meals only", "window seat preferred",
          "the conference ends on Friday", "return via Madrid", "book the airport taxi",
          "travel insurance is covered"]


class Boom(RuntimeError):
    pass


@pytest.fixture
def parent(cold: ColdStore) -> ColdStore:
    cold.append_many("parent", [Message(role="user" if i % 2 == 0 else "assistant", content=t)
                                for i, t in enumerate(TOPICS)])
    cold.index_pending()
    cold.checkpoint("parent", "summary up to 2", 2)
    cold.checkpoint("parent", "summary up to 5", 5)
    cold.checkpoint("parent", "summary up to 8", 8)
    cold.set_pin("parent", 1, 80)
    cold.set_pin("parent", 7, 60)
    return cold


def _parent_state(cold: ColdStore) -> dict[str, Any]:
    vecs = cold.embeddings("parent", list(range(len(TOPICS))))
    return {
        "conversation": cold.conversation("parent"),
        "history": [(m.position, m.body, m.created_at) for m in cold.history("parent")],
        "turns": cold.turns("parent"),
        "checkpoint": cold.latest_checkpoint("parent"),
        "vectors": {p: v.tobytes() for p, v in vecs.items()},
    }


@pytest.mark.parametrize("step", STEPS)
def test_failure_mid_fork_leaves_no_child(parent: ColdStore, step: str) -> None:
    before_parent = _parent_state(parent)
    with raw(parent.path) as conn:
        before_tables = table_rows(conn)

    def fault(name: str) -> None:
        if name == step:
            raise Boom(name)

    parent._fault = fault
    with pytest.raises(Boom):
        parent.fork("parent", 6, new_id="child")
    parent._fault = None

    assert parent.conversation("child") is None
    with raw(parent.path) as conn:
        assert conversation_rows(conn, "child") == dict.fromkeys(conversation_rows(conn, "child"), 0)
        # no orphan anywhere: FTS and vec rows are keyed by ids, not conversations
        assert table_rows(conn) == before_tables
    assert _parent_state(parent) == before_parent
    # the failed attempt left nothing in the way of a real one
    assert parent.fork("parent", 6, new_id="child") == "child"
    assert len(parent.history("child")) == 7


@pytest.mark.parametrize(
    ("up_to", "checkpoint_at"),
    [
        (0, None),  # before the first checkpoint: the child has none
        (2, 2),  # exactly at a checkpoint: that one applies
        (6, 5),  # between checkpoints: the latest one at or before up_to
        (9, 8),  # the whole conversation: the latest checkpoint
    ],
)
def test_child_holds_exactly_the_prefix(parent: ColdStore, up_to: int, checkpoint_at: int | None) -> None:
    before_parent = _parent_state(parent)
    child = parent.fork("parent", up_to)
    assert child != "parent"

    info = parent.conversation(child)
    assert info is not None
    assert (info["namespace"], info["parent_id"], info["fork_position"], info["messages"]) == (
        "default", "parent", up_to, up_to + 1)
    # the prefix, byte for byte, with the parent's timestamps
    assert [(m.position, m.body, m.created_at) for m in parent.history(child)] == before_parent["history"][: up_to + 1]
    # its turn-index rows (token counts, hashes, pins) travel with it
    parent_turns = {t.position: t for t in before_parent["turns"]}
    for t in parent.turns(child):
        p = parent_turns[t.position]
        assert (t.role, t.tokens, t.content_hash, t.pinned_priority) == (p.role, p.tokens, p.content_hash,
                                                                         p.pinned_priority)
    assert len(parent.turns(child)) == up_to + 1
    # its embeddings, already computed: nothing pending
    child_vecs = parent.embeddings(child, list(range(up_to + 1)))
    assert {p: v.tobytes() for p, v in child_vecs.items()} == {
        p: v for p, v in before_parent["vectors"].items() if p <= up_to}
    assert parent.pending_embeddings(child) == 0
    # the checkpoint that applies at up_to, and only that one
    cp = parent.latest_checkpoint(child)
    if checkpoint_at is None:
        assert cp is None
    else:
        assert cp is not None and (cp.position, cp.summary) == (checkpoint_at, f"summary up to {checkpoint_at}")
    with raw(parent.path) as conn:
        rows = conversation_rows(conn, child)
    assert rows == {"conversations": 1, "messages": up_to + 1, "turns": up_to + 1, "fts": up_to + 1,
                    "checkpoints": 0 if checkpoint_at is None else 1,
                    "pins": sum(1 for p in (1, 7) if p <= up_to), "vectors": up_to + 1}
    # the parent is unchanged
    assert _parent_state(parent) == before_parent


def test_child_is_searchable_and_grows_on_its_own(parent: ColdStore) -> None:
    child = parent.fork("parent", 4, new_id="child")
    assert parent.append("child", Message(role="user", content="actually, book a train instead")) == 5
    assert parent.index_pending() == 1  # only the new turn: the prefix came with its vectors
    assert parent.last_position("parent") == len(TOPICS) - 1
    hits = parent.search("hotel swimming pool", k=3, conversation_id=child)
    assert hits[0].position == 2 and "dense" in hits[0].ranks
    hits = parent.search("train", k=3, conversation_id=child)
    assert hits[0].position == 5 and set(hits[0].ranks) == {"dense", "bm25"}
    # the child's vectors live in its own partition, equal to the parent's
    assert np.array_equal(parent.embeddings(child, [2])[2], parent.embeddings("parent", [2])[2])
    with raw(parent.path) as conn:
        assert conversation_rows(conn, child)["vectors"] == 6
        assert conversation_rows(conn, "parent")["vectors"] == len(TOPICS)


@pytest.mark.parametrize(
    ("source", "up_to", "new_id", "error"),
    [
        ("missing", 0, None, ConversationNotFound),  # no such parent
        ("parent", -1, None, PositionOutOfRange),  # before the first message
        ("parent", 10, None, PositionOutOfRange),  # past the last message
        ("parent", 3, "parent", ValidationError),  # the child id is taken
    ],
)
def test_bad_fork_writes_nothing(parent: ColdStore, source: str, up_to: int, new_id: str | None,
                                 error: type[Exception]) -> None:
    with raw(parent.path) as conn:
        before = table_rows(conn)
    with pytest.raises(error):
        parent.fork(source, up_to, new_id=new_id)
    with raw(parent.path) as conn:
        assert table_rows(conn) == before

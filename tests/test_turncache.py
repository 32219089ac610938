"""The planner's in-process copy of a conversation (tiers/turncache.py) follows the log:
it grows with appends, picks up vectors stored later, reloads when the log changed
under it, and stays inside its memory bound."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tiermem import Memory
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.models import Message
from tiermem.tiers.turncache import MAX_GROUP_TURNS, SESSION_GAP_S, TurnCache


def msgs(n: int, start: int = 0, **kw: object) -> list[Message]:
    return [Message(role="user" if i % 2 == 0 else "assistant", content=f"turn {i} about topic {i % 7}", **kw)
            for i in range(start, start + n)]


def test_grows_with_appends_without_reloading(cold: ColdStore) -> None:
    cache = TurnCache(cold)
    cold.append_many("c", msgs(5))
    cold.index_pending()
    first = cache.get("c")
    cold.append_many("c", msgs(3, 5))
    cold.index_pending()
    second = cache.get("c")
    assert list(first.positions) == [0, 1, 2, 3, 4]  # a snapshot does not move
    assert list(second.positions) == list(range(8))
    assert second.has_vec.all()
    assert [int(t) for t in second.tokens] == [r.tokens for r in cold.turns_at("c", list(range(8)))]
    stored = cold.embeddings("c", list(range(8)))
    assert second.vectors is not None
    for p in range(8):
        np.testing.assert_array_equal(second.vectors[p], stored[p])
    assert cache.stats()["reloads"] == 0


def test_vectors_stored_after_the_turn_are_picked_up(cold: ColdStore) -> None:
    cache = TurnCache(cold)
    cold.append_many("c", msgs(4))
    before = cache.get("c")
    assert not before.has_vec.any()  # unknown, not a zero-similarity guess
    cold.index_pending()
    after = cache.get("c")
    assert after.has_vec.all()
    assert after.vectors is not None and np.allclose(np.linalg.norm(after.vectors, axis=1), 1.0, atol=1e-4)


def test_a_conversation_rewritten_by_another_connection_is_reloaded(cold: ColdStore, tmp_path: Path) -> None:
    cache = TurnCache(cold)
    cold.append_many("c", msgs(6))
    assert len(cache.get("c")) == 6
    # another connection (as another process would) prunes it and writes it anew, shorter
    other = ColdStore(cold.path, tokens=cold.tokens, embedder=cold.embedder)
    try:
        other.prune(float("inf"), all_namespaces=True)
        other.append_many("c", [Message(role="user", content="a new beginning")])
    finally:
        other.close()
    # the old incarnation's copy is reloaded (to nothing); the new one has its own key
    assert list(cache.get("c").positions) == []
    assert cache.stats()["reloads"] == 1
    new_key = cold.key_of("default", "c")
    assert new_key is not None and new_key != "c"
    assert list(cache.get(new_key).positions) == [0]


def test_prune_and_rebuild_through_memory_drop_the_copy(cold_memory: Memory) -> None:
    cold_memory.append_many("c", [{"role": "user", "content": f"hello {i}"} for i in range(4)])
    assert len(cold_memory.turns.get("c")) == 4
    cold_memory.rebuild()
    assert cold_memory.turns.stats()["conversations"] == 0
    cold_memory.prune(0.0)
    assert len(cold_memory.turns.get("c")) == 0


def test_stays_inside_its_memory_bound(cold: ColdStore) -> None:
    cache = TurnCache(cold, max_bytes=1)  # room for only the conversation in use
    for conv in ("a", "b", "c"):
        cold.append_many(conv, msgs(3))
        cache.get(conv)
    assert cache.stats()["conversations"] == 1
    assert len(cache.get("a")) == 3  # dropped, not lost: read again from the log


@pytest.mark.parametrize(
    ("sessions", "gaps", "expected"),
    [
        # session ids decide the episodes when the caller gives them
        (["s1", "s1", "s2", "s2"], [0, 0, 0, 0], [0, 0, 1, 1]),
        # without session ids, a pause longer than SESSION_GAP_S starts a new episode
        ([None, None, None, None], [0, 10, SESSION_GAP_S + 1, 10], [0, 0, 1, 1]),
        # switching from a session id to none starts a new episode too
        (["s1", None, None], [0, 1, 1], [0, 1, 1]),
    ],
)
def test_episodes(cold: ColdStore, sessions: list[str | None], gaps: list[float], expected: list[int]) -> None:
    t = 1_700_000_000.0
    batch = []
    for i, (s, g) in enumerate(zip(sessions, gaps, strict=True)):
        t += g
        batch.append(Message(role="user", content=f"m{i}", session_id=s, created_at=t))
    cold.append_many("c", batch)
    assert [int(g) for g in TurnCache(cold).get("c").groups] == expected


def test_long_talk_without_sessions_is_cut_into_bounded_episodes(cold: ColdStore) -> None:
    t = 1_700_000_000.0
    cold.append_many("c", [Message(role="user", content=f"m{i}", created_at=t + i) for i in range(MAX_GROUP_TURNS + 5)])
    groups = TurnCache(cold).get("c").groups
    assert int(groups[MAX_GROUP_TURNS - 1]) == 0 and int(groups[MAX_GROUP_TURNS]) == 1

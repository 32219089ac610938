"""`last_message_at` after an append batch: the latest `created_at` the conversation has
seen, set once per batch (one statement, not one per row), never moved back."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiermem.tiers.cold import ColdStore
from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter


def _msg(created: float | None) -> Message:
    return Message.model_validate({"role": "user", "content": f"at {created}", "created_at": created})


# (the batches' created_at values, the last_message_at after them)
CASES = [
    ([[5.0, 9.0, 7.0]], 9.0),              # out of order within a batch: its latest
    ([[5.0, 9.0], [6.0]], 9.0),            # a later batch of older messages moves nothing back
    ([[5.0], [8.0, 3.0]], 8.0),            # a later batch with a newer one moves it forward
]


@pytest.mark.parametrize(("batches", "want"), CASES)
def test_last_message_at_is_the_latest_created(tmp_path: Path, counter: BpeTokenCounter, batches: list[list[float]],
                                               want: float) -> None:
    cold = ColdStore(tmp_path / "t.db", tokens=counter)
    try:
        for b in batches:
            cold.append_many("c", [_msg(t) for t in b])
        key = cold.key_of("default", "c")
        assert key is not None
        info = cold.conversation(key)
        assert info is not None and info["last_message_at"] == want and info["messages"] == sum(map(len, batches))
    finally:
        cold.close()


def test_a_batch_without_times_is_stamped_with_its_rows_times(tmp_path: Path, counter: BpeTokenCounter) -> None:
    cold = ColdStore(tmp_path / "t.db", tokens=counter)
    try:
        cold.append_many("c", [_msg(None), _msg(None)])
        key = cold.key_of("default", "c")
        assert key is not None
        info = cold.conversation(key)
        assert info is not None
        assert info["last_message_at"] == max(r.created_at for r in cold.turns(key))  # no later clock reading
    finally:
        cold.close()

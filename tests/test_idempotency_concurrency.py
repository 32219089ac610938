"""Processes that append the same request under one idempotency key at the same moment
(a client's retry racing its first attempt, two workers handed one job): exactly one
writes, every one answers the same positions, on both engines, for a new conversation
(created by whichever wins) and for one that exists. Real processes (multiprocessing,
spawned), each with its own Memory and store connections."""

from __future__ import annotations

import pytest
from hash_embedder import HashEmbedder
from store_workers import BATCH, BATCH_MESSAGES, WORKERS, race_keyed_appends

from tiermem.config import Config
from tiermem.memory import Memory


@pytest.mark.parametrize("existing", [False, True], ids=["new_conversation", "existing_conversation"])
def test_one_key_written_once_by_racing_processes(engine_config: Config, existing: bool) -> None:
    before = 0
    if existing:
        with Memory(engine_config, embedder=HashEmbedder(), hot=False, background_indexing=False) as mem:
            before = len(mem.append_many("shared", [{"role": "user", "content": "hello"}], namespace="acme"))
    answers = race_keyed_appends(engine_config)
    want = list(range(before, before + BATCH_MESSAGES))
    assert all(positions == want for positions, _ in answers), answers
    assert sorted(replayed for _, replayed in answers) == [False] + [True] * (WORKERS - 1)
    with Memory(engine_config, embedder=HashEmbedder(), hot=False, background_indexing=False) as mem:
        history = mem.history("shared", namespace="acme")
        assert [m.position for m in history] == list(range(before + BATCH_MESSAGES))
        assert [m.text for m in history[before:]] == [m["content"] for m in BATCH]


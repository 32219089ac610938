"""A namespace's erasure in batches (SQLite) drops the Redis keys and in-process copies of
each batch's conversations right after that batch commits (`on_erased`): when a later
batch fails, the caller gets the error, and what the committed batches erased has no copy
left in Redis (before: nothing was dropped, since the report never reached the Memory).
A real embedded Redis, a real failure between two batches."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import full_memory

from tiermem import Config
from tiermem.tiers.embed import Embedder

TURNS = 80  # per conversation: the first batch (200 messages at most) takes two of them
CONVERSATIONS = 6


class BatchFailed(RuntimeError):
    pass


def test_a_failure_after_a_batch_leaves_no_copy_of_what_it_erased(tmp_path: Path, embedder: Embedder) -> None:
    cfg = Config(data_dir=tmp_path / "data")
    with full_memory(cfg, embedder) as mem:
        for c in range(CONVERSATIONS):
            mem.append_many(f"c{c}", [{"role": "user", "content": f"turn {t} of ticket {c}"} for t in range(TURNS)],
                            namespace="big")
        keys = {f"c{c}": mem.cold.key_of("big", f"c{c}") or "" for c in range(CONVERSATIONS)}
        assert mem.hot is not None
        tier = mem.hot.tier
        assert all(tier.read(k) is not None for k in keys.values())  # the premise: every set is there

        def fail(name: str) -> None:
            if name == "erase:batch":
                raise BatchFailed("the second batch never ran")

        mem.cold._fault = fail  # type: ignore[attr-defined]
        with pytest.raises(BatchFailed):
            mem.delete_namespace("big")
        mem.cold._fault = None  # type: ignore[attr-defined]
        gone = [name for name in keys if mem.cold.key_of("big", name) is None]
        assert 1 <= len(gone) < CONVERSATIONS  # one batch committed, not all
        assert [name for name in gone if tier.read(keys[name]) is not None] == []
        assert all(tier.read(keys[name]) is not None for name in keys if name not in gone)
        report = mem.delete_namespace("big")  # the retry erases the rest, and drops theirs
        assert report.conversations == CONVERSATIONS - len(gone)
        assert all(tier.read(k) is None for k in keys.values())

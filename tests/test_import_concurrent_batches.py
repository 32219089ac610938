"""Two imports of the same file at once write it once whatever their batch sizes. Each
chunk was appended under an idempotency key of its position and its content, so two
imports that cut the file into other chunks (another `batch`, or another point where
interleaved conversations' partial chunks were flushed) had different keys for the same
messages and both wrote them. A chunk is now written only where the conversation ends
(a conditional append at its first position): a chunk cut elsewhere is refused there,
the import checks the data dir again and appends only what it lacks (a review of
idempotency keys, 2026-12-06)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from convo_fixtures import support_lines, write_jsonl
from pg_server import fresh_schema

from tiermem.config import Config
from tiermem.evals.conversations import Dataset, import_dataset, read_conversations
from tiermem.memory import Memory
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.models import ENVELOPE_FIELDS

LIMITS = {"max_content_bytes": 1 << 20, "max_metadata_bytes": 1 << 14}
WHOLE = 1000  # a batch larger than any conversation of the file (19 messages each)


@pytest.fixture(params=["sqlite", "postgres"])
def config(request: pytest.FixtureRequest, tmp_path: Path) -> Config:
    """Both engines: a refused or replayed key is the store's own."""
    extra: dict[str, str] = {}
    if request.param == "postgres":
        extra = {"cold_url": request.getfixturevalue("pg_url"), "cold_schema": fresh_schema()}
    return Config(data_dir=tmp_path / "data", **extra)  # type: ignore[arg-type]


def memory(config: Config, embedder: FastEmbedder) -> Memory:
    return Memory(config, embedder=embedder, hot=False, background_indexing=False)


def dataset(tmp_path: Path, interleaved: bool) -> Dataset:
    a, b = support_lines("a"), support_lines("b")
    lines = [x for pair in zip(a, b, strict=True) for x in pair] if interleaved else a + b
    return read_conversations(write_jsonl(tmp_path / "in.jsonl", lines), **LIMITS)


# (id, the first import's batch, the second's, how many progress calls the first makes
# before the second runs whole (the first comes after every check, before any write),
# whether the file interleaves its two conversations line by line)
RACES: list[tuple[str, int, int, int, bool]] = [
    ("small_then_whole_before_any_write", 4, WHOLE, 1, False),  # the second writes "a" whole at 0
    ("whole_then_small_before_any_write", WHOLE, 4, 1, False),  # the second's chunks 0..3, 4..7, ...
    ("small_then_other_small_after_a_chunk", 4, 7, 2, False),  # both cut from 4: 4..7 against 4..10
    ("other_sizes_mid_conversation", 3, 5, 4, False),  # the first wrote 0..8 of "a", the second checks 9
    ("interleaved_small_then_whole", 2, WHOLE, 1, True),  # partial chunks flushed at 2 x MAX_PENDING_CHUNKS
    ("interleaved_other_sizes_midway", 3, 2, 6, True),
]


@pytest.mark.parametrize(("first_batch", "second_batch", "calls", "interleaved"), [r[1:] for r in RACES],
                         ids=[r[0] for r in RACES])
def test_two_batch_sizes_at_once_write_the_file_once(tmp_path: Path, config: Config, embedder: FastEmbedder,
                                                     first_batch: int, second_batch: int, calls: int,
                                                     interleaved: bool) -> None:
    seen = [0]
    reports = []
    finished: list[tuple[int, str]] = []

    def second_runs_now(_n: int) -> None:
        seen[0] += 1
        if seen[0] == calls:  # the second import, whole, between two steps of the first
            with memory(config, embedder) as other:
                reports.append(import_dataset(other, dataset(tmp_path, interleaved), namespace="default",
                                              batch=second_batch))

    with memory(config, embedder) as mem:
        reports.insert(0, import_dataset(mem, dataset(tmp_path, interleaved), namespace="default",
                                         batch=first_batch, progress=second_runs_now,
                                         finished=lambda n, name: finished.append((n, name))))
        got = {c: [m.body for m in mem.history(c, namespace="default")] for c in mem.conversations("default")}
    want: dict[str, list[dict[str, Any]]] = {
        c.conversation_id: [{k: v for k, v in m.items() if k not in ENVELOPE_FIELDS} for m in c.messages]
        for c in dataset(tmp_path, interleaved).conversations}
    assert got == want
    # between them, every message was written once and found present once
    total = sum(len(v) for v in want.values())
    assert sum(r.appended for r in reports) == total
    assert sum(r.already_present for r in reports) == total
    # the first import says of each conversation once what it appended
    assert sorted(name for _, name in finished) == ["a", "b"]
    assert sum(n for n, _ in finished) == reports[0].appended

"""Two imports of the same file at once write it once. Each import checked what the data
dir held before writing (`stored_prefix`), then appended: two that both checked before
either wrote (an import run again while the first still ran, a retried job) each
appended the whole file, and every conversation held every message twice, with no
error (measured: two `tiermem import` processes of one 3,000-message file left 6,000).
Each chunk is now a conditional append at its first position (`expect_position`), so
the second writer of a chunk writes nothing: it finds the chunk stored, checks it
against the file and counts it as present (a bug hunt, 2026-12-06; two batch sizes:
tests/test_import_concurrent_batches.py; until the review of 2026-12-06 the chunks went
under idempotency keys of their position: tests/test_import_client_keys.py)."""

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
BATCH = 4  # small chunks, so that a conversation takes several appends


@pytest.fixture(params=["sqlite", "postgres"])
def config(request: pytest.FixtureRequest, tmp_path: Path) -> Config:
    """Both engines: a replay is the store's own (its idempotency keys)."""
    extra: dict[str, str] = {}
    if request.param == "postgres":
        extra = {"cold_url": request.getfixturevalue("pg_url"), "cold_schema": fresh_schema()}
    return Config(data_dir=tmp_path / "data", **extra)  # type: ignore[arg-type]


def memory(config: Config, embedder: FastEmbedder) -> Memory:
    return Memory(config, embedder=embedder, hot=False, background_indexing=False)


def stored(config: Config, embedder: FastEmbedder) -> dict[str, list[dict[str, Any]]]:
    with memory(config, embedder) as mem:
        return {c: [m.body for m in mem.history(c, namespace="default")] for c in mem.conversations("default")}


def dataset(tmp_path: Path) -> Dataset:
    return read_conversations(write_jsonl(tmp_path / "in.jsonl", support_lines("a") + support_lines("b")), **LIMITS)


# (id, how many progress calls the first import makes before the second runs whole:
# the first call comes after every conversation was checked and before any write)
RACES: list[tuple[str, int]] = [
    ("before_any_write", 1),  # both checked an empty data dir
    ("after_a_chunk", 2),  # the first wrote one chunk of "a" before the second checked
    ("in_the_second_conversation", 7),  # "a" written whole, "b" checked as empty by both
]


@pytest.mark.parametrize("calls", [r[1] for r in RACES], ids=[r[0] for r in RACES])
def test_two_imports_at_once_write_the_file_once(tmp_path: Path, config: Config, embedder: FastEmbedder,
                                                  calls: int) -> None:
    seen = [0]
    reports = []

    def second_runs_now(_n: int) -> None:
        seen[0] += 1
        if seen[0] == calls:  # the second import, whole, between two steps of the first
            with memory(config, embedder) as other:
                reports.append(import_dataset(other, dataset(tmp_path), namespace="default", batch=BATCH))

    with memory(config, embedder) as mem:
        reports.insert(0, import_dataset(mem, dataset(tmp_path), namespace="default", batch=BATCH,
                                         progress=second_runs_now))
    want = {c.conversation_id: [{k: v for k, v in m.items() if k not in ENVELOPE_FIELDS} for m in c.messages]
            for c in dataset(tmp_path).conversations}
    assert stored(config, embedder) == want
    # between them, every message was written once and found present once
    total = sum(len(v) for v in want.values())
    assert sum(r.appended for r in reports) == total
    assert sum(r.already_present for r in reports) == total


def test_a_plain_reimport_still_appends_nothing(tmp_path: Path, config: Config, embedder: FastEmbedder) -> None:
    for _ in range(2):
        with memory(config, embedder) as mem:
            report = import_dataset(mem, dataset(tmp_path), namespace="default", batch=BATCH)
    assert (report.appended, report.already_present) == (0, 38)

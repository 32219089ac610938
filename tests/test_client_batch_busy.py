"""A batch larger than `INLINE_INDEX_ROWS` is committed first and its supersession decided
by the rules after the commit, in transactions of its own. When another process held the
database then, the append was answered 503 "rolled back" although the messages were
stored, and a client with `retries` stored the batch twice. Now the append answers its
positions, the batch is stored once, and the supersession waits for the turns'
embedding, which decides it (`Memory._on_embedded`). A real lock, held by another
process on the same database file from the moment the batch committed.

Fails on the code before: the first attempt answered 503 and the retry stored the batch
again (positions 71..135)."""

from __future__ import annotations

import logging
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from client_helpers import CONV, NS, TRIP, served
from cold_helpers import HOLDER_EXIT_TIMEOUT_S, hold_lock, release
from service_helpers import TOKEN_ACME

from tiermem import Memory
from tiermem.client import Client
from tiermem.consolidation.supersede import INLINE_INDEX_ROWS
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.models import AppendResult

BUSY_TIMEOUT_MS = 200  # how long the server's write waits for the lock before it gives up
RELEASE_AFTER_S = 0.8  # the other process ends its transaction this long after the batch committed
FILLER = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"Small talk number {i} about the weather."}
          for i in range(INLINE_INDEX_ROWS)]
CORRECTION = {"role": "user", "content": "Actually, not Lisbon: I am flying to Porto on the 14th."}
BATCH = [*FILLER, CORRECTION]  # one more than a live batch: the rules decide it after the commit


@pytest.fixture
def url_mem(tmp_path: Path, embedder: FastEmbedder) -> Iterator[tuple[str, Memory]]:
    with served(tmp_path / "data", embedder, busy_timeout_ms=BUSY_TIMEOUT_MS) as got:
        yield got


def _superseded(mem: Memory) -> list[Any]:
    return [f for f in mem.facts(CONV, namespace=NS) if f.status == "superseded"]


def test_a_large_batch_committed_before_a_busy_lock_answers_its_positions_once(
        url_mem: tuple[str, Memory], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    url, mem = url_mem
    holders: list[subprocess.Popen[str]] = []
    real_append: Callable[..., AppendResult] = mem.cold.append_batch

    def committed_then_locked(*args: Any, **kw: Any) -> AppendResult:
        res = real_append(*args, **kw)  # committed: from here on the messages are stored
        if not holders:  # the first attempt only: another process takes the write lock
            proc = hold_lock(mem.config.db_path)
            holders.append(proc)
            threading.Timer(RELEASE_AFTER_S, release, args=(proc,)).start()
        return res

    monkeypatch.setattr(mem.cold, "append_batch", committed_then_locked)
    try:
        with caplog.at_level(logging.WARNING, logger="tiermem"), \
                Client(url, token=TOKEN_ACME, namespace=NS, retries=2) as client:
            positions = client.append_many(CONV, BATCH)
            # before: 503 "rolled back", then the retry appended the batch again
            assert positions == list(range(len(TRIP), len(TRIP) + len(BATCH)))
            assert [m.body for m in client.history(CONV)] == [*TRIP, *BATCH]  # stored once
    finally:
        for proc in holders:
            release(proc)
            proc.wait(timeout=HOLDER_EXIT_TIMEOUT_S)
    assert holders and "decide supersession" in caplog.text  # the lock was met after the commit
    assert _superseded(mem) == []  # not decided yet: the rules' write met the lock
    mem.catch_up(CONV, namespace=NS)  # the embedding (the indexer's, the scheduler's) decides it
    assert [(f.position, f.until_position) for f in _superseded(mem)] == [(0, len(TRIP) + len(BATCH) - 1)]

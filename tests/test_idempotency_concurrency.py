"""Processes that append the same request under one idempotency key at the same moment
(a client's retry racing its first attempt, two workers handed one job): exactly one
writes, every one answers the same positions, on both engines, for a new conversation
(created by whichever wins) and for one that exists. Real processes (multiprocessing,
spawned), each with its own Memory and store connections."""

from __future__ import annotations

import multiprocessing
import queue
from typing import Any

import pytest
from hash_embedder import HashEmbedder
from pg_server import pg_url  # noqa: F401  (pytest fixture)

from tiermem.config import Config
from tiermem.memory import Memory

WORKERS = 6
BATCH_MESSAGES = 20  # a batch long enough that the writers' transactions overlap
START_TIMEOUT_S = 120.0  # every child opened its Memory (imports, migrations) by then
RESULT_TIMEOUT_S = 120.0
BATCH = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"step {i} of the plan"}
         for i in range(BATCH_MESSAGES)]


def _worker(config: Config, ready: Any, go: Any, results: Any) -> None:
    with Memory(config, embedder=HashEmbedder(), hot=False, background_indexing=False) as mem:
        ready.put(True)
        go.wait()
        out = mem.append_outcome("shared", BATCH, idempotency_key="job-7", namespace="acme")
        results.put((out.positions, out.replayed))


@pytest.mark.parametrize("existing", [False, True], ids=["new_conversation", "existing_conversation"])
def test_one_key_written_once_by_racing_processes(engine_config: Config, existing: bool) -> None:
    before = 0
    if existing:
        with Memory(engine_config, embedder=HashEmbedder(), hot=False, background_indexing=False) as mem:
            before = len(mem.append_many("shared", [{"role": "user", "content": "hello"}], namespace="acme"))
    ctx = multiprocessing.get_context("spawn")
    ready, results, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=_worker, args=(engine_config, ready, go, results)) for _ in range(WORKERS)]
    for p in procs:
        p.start()
    try:
        for _ in procs:
            ready.get(timeout=START_TIMEOUT_S)
        go.set()
        answers = [results.get(timeout=RESULT_TIMEOUT_S) for _ in procs]
    except queue.Empty:
        pytest.fail("a worker did not answer")
    finally:
        for p in procs:
            p.join(timeout=RESULT_TIMEOUT_S)
            if p.is_alive():
                p.kill()
    want = list(range(before, before + BATCH_MESSAGES))
    assert all(positions == want for positions, _ in answers), answers
    assert sorted(replayed for _, replayed in answers) == [False] + [True] * (WORKERS - 1)
    with Memory(engine_config, embedder=HashEmbedder(), hot=False, background_indexing=False) as mem:
        history = mem.history("shared", namespace="acme")
        assert [m.position for m in history] == list(range(before + BATCH_MESSAGES))
        assert [m.text for m in history[before:]] == [m["content"] for m in BATCH]


"""Child processes for the store conformance tests, on either engine:

    python tests/store_workers.py append ENGINE TARGET SCHEMA WORKER N GO
    python tests/store_workers.py forever ENGINE TARGET SCHEMA

Both open the store (ENGINE sqlite: TARGET is the file; postgres: TARGET is the URL and
SCHEMA the schema). `append` waits for the file GO, appends N messages "wWORKER-i" one
by one to conversation "shared", and prints the positions as one JSON list. `forever`
appends batches of 3 to conversation "killed" until it is killed, printing each batch's
positions after its commit.

`race_keyed_appends` (imported by the tests, not run as a script): processes spawned
with multiprocessing, each with its own Memory, append one batch under one idempotency
key at the same moment.
"""

from __future__ import annotations

import json
import multiprocessing
import queue
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tiermem.config import Config

WORKERS = 6  # racing processes of race_keyed_appends
BATCH_MESSAGES = 20  # a batch long enough that the writers' transactions overlap
START_TIMEOUT_S = 120.0  # every child opened its Memory (imports, migrations) by then
RESULT_TIMEOUT_S = 120.0
BATCH = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"step {i} of the plan"}
         for i in range(BATCH_MESSAGES)]


def open_store(engine: str, target: str, schema: str):  # type: ignore[no-untyped-def]
    from tiermem.tiers.tokens import BpeTokenCounter

    if engine == "sqlite":
        from tiermem.tiers.cold import ColdStore

        return ColdStore(Path(target), tokens=BpeTokenCounter(), embedder=None)
    from tiermem.tiers.postgres import PostgresStore

    return PostgresStore(target, tokens=BpeTokenCounter(), schema=schema, pool_max=1)


def append(engine: str, target: str, schema: str, worker: str, n: str, go: str) -> None:
    from tiermem.tiers.models import Message

    store = open_store(engine, target, schema)
    print("ready", flush=True)
    deadline = time.monotonic() + 60
    while not Path(go).exists():
        if time.monotonic() > deadline:
            raise SystemExit("start file never appeared")
        time.sleep(0.002)
    positions = [store.append("shared", Message(role="user", content=f"w{worker}-{i}")) for i in range(int(n))]
    store.close()
    print(json.dumps(positions), flush=True)


def forever(engine: str, target: str, schema: str) -> None:
    from tiermem.tiers.models import Message

    store = open_store(engine, target, schema)
    i = 0
    while True:
        got = store.append_many("killed", [Message(role="user", content=f"batch {i} part {j}") for j in range(3)])
        print(json.dumps(got), flush=True)
        i += 1


def _keyed_appender(config: Config, ready: Any, go: Any, results: Any) -> None:
    from hash_embedder import HashEmbedder

    from tiermem.memory import Memory

    try:  # several processes open a fresh schema at once: its migrations wait on each other
        mem = Memory(config, embedder=HashEmbedder(), hot=False, background_indexing=False)
    except Exception as exc:  # the failure itself is the answer the test reports
        ready.put(repr(exc))
        return
    with mem:
        ready.put(True)
        go.wait()
        try:
            out = mem.append_outcome("shared", BATCH, idempotency_key="job-7", namespace="acme")
        except Exception as exc:  # the failure itself is the answer the test reports
            results.put(repr(exc))
        else:
            results.put((out.positions, out.replayed))


def race_keyed_appends(config: Config) -> list[Any]:
    """WORKERS spawned processes, each with its own Memory on `config`, append BATCH to
    conversation "shared" of namespace "acme" under one idempotency key once all of them
    have opened it (asserted); each one's answer: (positions, replayed), or the repr of
    the error it raised."""
    import pytest

    ctx = multiprocessing.get_context("spawn")
    ready, results, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=_keyed_appender, args=(config, ready, go, results)) for _ in range(WORKERS)]
    for p in procs:
        p.start()
    try:
        opened = [ready.get(timeout=START_TIMEOUT_S) for _ in procs]
        go.set()
        assert opened == [True] * WORKERS, opened
        return [results.get(timeout=RESULT_TIMEOUT_S) for _ in procs]
    except queue.Empty:
        pytest.fail("a worker did not answer")
    finally:
        for p in procs:
            p.join(timeout=RESULT_TIMEOUT_S)
            if p.is_alive():
                p.kill()


if __name__ == "__main__":
    {"append": append, "forever": forever}[sys.argv[1]](*sys.argv[2:])

"""Child processes for the store conformance tests, on either engine:

    python tests/store_workers.py append ENGINE TARGET SCHEMA WORKER N GO
    python tests/store_workers.py forever ENGINE TARGET SCHEMA

Both open the store (ENGINE sqlite: TARGET is the file; postgres: TARGET is the URL and
SCHEMA the schema). `append` waits for the file GO, appends N messages "wWORKER-i" one
by one to conversation "shared", and prints the positions as one JSON list. `forever`
appends batches of 3 to conversation "killed" until it is killed, printing each batch's
positions after its commit.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


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


if __name__ == "__main__":
    {"append": append, "forever": forever}[sys.argv[1]](*sys.argv[2:])

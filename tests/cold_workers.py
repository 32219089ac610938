"""Child processes for the cold-tier tests (run as `python tests/cold_workers.py CMD ...`).

Each writes to the database through the real ColdStore, in its own interpreter, so the
tests exercise SQLite's cross-process locking and crash recovery, not threads.

    append DB WORKER N GO   wait for the file GO, append N messages "wWORKER-i" one by
                            one, print the positions as one JSON list
    open SYNC K DB...       for each DB in turn: meet the other K-1 processes (files in the
                            directory SYNC), then open (and migrate) it, print its version
    ingest DB               load the embedder (the runtime Memory builds by default, the
                            ONNX export: ~1 s, the torch pipeline took ~15 s), then append
                            forever, printing "A pos" after each commit and "E n" after each
                            embedding batch; embedding falls behind on purpose, so a kill
                            always leaves a gap
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def _wait_for(go: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not go.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"start file {go} never appeared")
        time.sleep(0.002)


def append(db: str, worker: str, n: str, go: str) -> None:
    from tiermem.tiers.cold import ColdStore
    from tiermem.tiers.models import Message
    from tiermem.tiers.tokens import BpeTokenCounter

    store = ColdStore(Path(db), tokens=BpeTokenCounter(), embedder=None)
    print("ready", flush=True)
    _wait_for(Path(go))
    positions = [store.append("shared", Message(role="user", content=f"w{worker}-{i}")) for i in range(int(n))]
    store.close()
    print(json.dumps(positions), flush=True)


def open_db(sync: str, parties: str, *dbs: str) -> None:
    import os

    from tiermem.tiers.cold import ColdStore
    from tiermem.tiers.tokens import BpeTokenCounter

    counter = BpeTokenCounter()
    for i, db in enumerate(dbs):
        # a barrier through the file system: every party opens database i at once
        (Path(sync) / f"{i}-{os.getpid()}").touch()
        deadline = time.monotonic() + 60
        while len(list(Path(sync).glob(f"{i}-*"))) < int(parties):
            if time.monotonic() > deadline:
                raise SystemExit("the other process never arrived")
            time.sleep(0.001)
        store = ColdStore(Path(db), tokens=counter)
        print(store.version, flush=True)
        store.close()


def ingest(db: str) -> None:
    from tiermem.tiers.cold import ColdStore
    from tiermem.tiers.embed_onnx import build_embedder
    from tiermem.tiers.models import Message
    from tiermem.tiers.tokens import BpeTokenCounter

    embedder = build_embedder()
    embedder.embed(["warm up"])  # load the model before the clock starts
    store = ColdStore(Path(db), tokens=BpeTokenCounter(), embedder=embedder)
    print("ready", flush=True)
    for i in range(1_000_000):
        pos = store.append("ingest", Message(role="user", content=f"message {i}: the quick brown fox {i * 7}"))
        print(f"A {pos}", flush=True)  # acknowledged: committed before this line
        if i % 20 == 19:
            # embed 10 of every 20 appended turns: the embedding lag only grows
            done = store.index_pending(batch=10, max_rows=10)
            print(f"E {done}", flush=True)


if __name__ == "__main__":
    cmd, *args = sys.argv[1:]
    {"append": append, "open": open_db, "ingest": ingest}[cmd](*args)

"""A child process of tests/test_labels_append_during_pass.py: one labelling pass over a
conversation's turns (`set_labels`, as a rebuild's relabelling makes it) on its own store.

    python tests/label_pass_worker.py ENGINE WHERE KEY TURNS

ENGINE is "sqlite" (WHERE: the database file) or "postgres" (WHERE: URL#schema). The
child opens the store and prints "ready"; at a line on stdin it labels turns 0..TURNS-1
of KEY with PASS_LABEL in one call and prints one JSON line: {"ended": the wall-clock
time the call returned}, or {"error": the exception's type name, "message": its text}.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

# every turn made load-bearing, so each one's change moves the pin version once
PASS_LABEL = ("fact", True, 60, "the pass")
# the child waits for its own locks far longer than the pass lasts: what the test measures
# is the other process's wait, not this one's
PASS_LOCK_WAIT_MS = 120_000


def main(engine: str, where: str, key: str, turns: int) -> None:
    from tiermem.tiers.cold import ColdStore
    from tiermem.tiers.postgres import PostgresStore
    from tiermem.tiers.store import ColdLog
    from tiermem.tiers.tokens import BpeTokenCounter

    store: ColdLog
    if engine == "sqlite":
        store = ColdStore(Path(where), tokens=BpeTokenCounter(), busy_timeout_ms=PASS_LOCK_WAIT_MS)
    else:
        url, schema = where.rsplit("#", 1)
        store = PostgresStore(url, tokens=BpeTokenCounter(), schema=schema, lock_timeout_ms=PASS_LOCK_WAIT_MS)
    try:
        labels = [(pos, *PASS_LABEL) for pos in range(turns)]
        print("ready", flush=True)
        sys.stdin.readline()
        try:
            store.set_labels(key, labels)
            print(json.dumps({"ended": time.time()}), flush=True)
        except Exception as exc:  # the answer the test checks: which error, not a traceback
            print(json.dumps({"error": type(exc).__name__, "message": str(exc)}), flush=True)
    finally:
        store.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))

"""A child process of tests/test_labels_pause_across_conversations.py: a relabelling
pass over many conversations one after another (`set_labels` per conversation, as a
rebuild's `_relabel_all` makes them) on its own SQLite store.

    python tests/label_passes_worker.py DB_FILE KEY...

The child opens the store and prints "ready"; at a line on stdin it labels every turn of
each KEY with PASS_LABEL, one call per key, back to back, and prints one JSON line:
{"ended": the wall-clock time the last call returned}, or {"error": the exception's type
name, "message": its text}.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

PASS_LABEL = ("fact", True, 60, "the pass")
# the child waits for its own locks far longer than the passes last: what the test
# measures is the other process's wait, not this one's
PASS_LOCK_WAIT_MS = 120_000


def main(db: Path, keys: list[str]) -> None:
    from tiermem.tiers.cold import ColdStore
    from tiermem.tiers.tokens import BpeTokenCounter

    store = ColdStore(db, tokens=BpeTokenCounter(), busy_timeout_ms=PASS_LOCK_WAIT_MS)
    try:
        passes = [(key, [(t.position, *PASS_LABEL) for t in store.turns(key)]) for key in keys]
        print("ready", flush=True)
        sys.stdin.readline()
        try:
            for key, labels in passes:
                store.set_labels(key, labels)
            print(json.dumps({"ended": time.time()}), flush=True)
        except Exception as exc:  # the answer the test checks: which error, not a traceback
            print(json.dumps({"error": type(exc).__name__, "message": str(exc)}), flush=True)
    finally:
        store.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])

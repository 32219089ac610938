"""A child process of tests/test_labels_append_during_pass.py and
tests/test_labels_pause_across_conversations.py: a relabelling pass (`set_labels`, as a
rebuild's relabelling makes it) over every turn of each conversation named, one call per
conversation, back to back, on its own store.

    python tests/label_pass_worker.py ENGINE WHERE KEY...

ENGINE is "sqlite" (WHERE: the database file) or "postgres" (WHERE: URL#schema). The
child opens the store, reads each KEY's turns and prints "ready"; at a line on stdin it
labels them with PASS_LABEL and prints one JSON line (tests/go_child.py `serve`):
{"ended": the wall-clock time the last call returned}, or {"error": ..., "message": ...}.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from go_child import serve

# every turn made load-bearing, so each one's change moves the pin version once
PASS_LABEL = ("fact", True, 60, "the pass")
# the child waits for its own locks far longer than the passes last: what the test
# measures is the other process's wait, not this one's
PASS_LOCK_WAIT_MS = 120_000


def main(engine: str, where: str, keys: list[str]) -> None:
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
        passes = [(key, [(t.position, *PASS_LABEL) for t in store.turns(key)]) for key in keys]

        def relabel() -> dict[str, Any]:
            for key, labels in passes:
                store.set_labels(key, labels)
            return {}

        serve(relabel)
    finally:
        store.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])

"""A child process of tests/test_postgres_rebuild_append.py: a rebuild of a PostgreSQL
store (`PostgresStore.rebuild`, the vectors left to a later catch-up).

    python tests/pg_rebuild_worker.py URL#SCHEMA [hang]

The child opens the store and prints "ready"; at a line on stdin it rebuilds and prints
one JSON line (tests/go_child.py `serve`): {"ended": the wall-clock time the call
returned, "turns": how many turn rows it wrote}, or {"error": ..., "message": ...}. With
`hang`, it prints "batch" after its first batch of turn rows commits and sleeps there
(to be killed).
"""

from __future__ import annotations

import sys
import time
from typing import Any

from go_child import serve

# the child waits for its own locks far longer than the test lasts: what the test
# measures is the other process's wait, not this one's
REBUILD_LOCK_WAIT_MS = 120_000
HANG_S = 600.0


def main(where: str, hang: bool) -> None:
    from tiermem.tiers.postgres import PostgresStore
    from tiermem.tiers.tokens import BpeTokenCounter

    url, schema = where.rsplit("#", 1)
    store = PostgresStore(url, tokens=BpeTokenCounter(), schema=schema, lock_timeout_ms=REBUILD_LOCK_WAIT_MS)

    def step(name: str) -> None:
        if name == "rebuild:batch":
            print("batch", flush=True)
            time.sleep(HANG_S)

    if hang:
        store._fault = step

    def rebuild() -> dict[str, Any]:
        return {"turns": store.rebuild(embed=False)["turns"]}

    try:
        serve(rebuild)
    finally:
        store.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:] == ["hang"])

"""A child process of tests/test_postgres_label_lock_order.py: writes to conversations'
labels or supersessions on its own PostgresStore, each at the moment the test says.

    python tests/pg_lock_order_worker.py URL SCHEMA

The child opens the store and prints "ready"; then for each line on stdin, a JSON object
{"key": the conversation's key, "op": "set_labels" or "set_superseded", "args": a list of
labels or {"pairs": [...], "labels": [...]}} (a label is [position, intent, load_bearing,
priority, reason]), it makes that one call at once and prints one JSON line: {"ok": true},
or {"error": the exception's type name, "sqlstate": its SQLSTATE}. It ends at EOF.
"""

from __future__ import annotations

import json
import sys

# longer than any step of the test's staging on a loaded machine: a writer waits for the
# lock it queued on, and what ends a wait in a cycle is the server's deadlock detector
# (deadlock_timeout, 1 s by default), not this limit
LOCK_WAIT_MS = 60_000


def main(url: str, schema: str) -> None:
    from tiermem.tiers.postgres import PostgresStore
    from tiermem.tiers.tokens import BpeTokenCounter

    store = PostgresStore(url, tokens=BpeTokenCounter(), schema=schema, lock_timeout_ms=LOCK_WAIT_MS)
    try:
        print("ready", flush=True)
        for line in sys.stdin:
            job = json.loads(line)
            key, op, args = job["key"], job["op"], job["args"]
            try:
                if op == "set_labels":
                    store.set_labels(key, [tuple(lab) for lab in args])
                elif op == "set_superseded":
                    store.set_superseded(key, [tuple(p) for p in args["pairs"]], [tuple(lab) for lab in args["labels"]])
                else:
                    raise SystemExit(f"unknown op {op!r}")
                print(json.dumps({"ok": True}), flush=True)
            except Exception as exc:  # the answer the test checks: which error, not a traceback
                print(json.dumps({"error": type(exc).__name__, "sqlstate": getattr(exc, "sqlstate", None)}),
                      flush=True)
    finally:
        store.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

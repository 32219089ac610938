"""A prune keeps every append another process had acknowledged while it ran (SQLite, real
processes; the deterministic cases are tests/test_prune_append_race.py). A child keeps
appending to one idle conversation from the prune's first batch on, each append printed
after its commit; before the fix the prune's next batch erased the conversation with
them (review r_tenant, 2026-12-07). Ordered by the child's printed acknowledgement, not
by sleeps: the hook between the prune's batches waits for the first.

Run as a script, this file is the child:

    python tests/test_prune_append_race_process.py DB NAMESPACE NAME GO STOP

It opens the store on DB, prints "ready", waits for the file GO, then appends fresh
messages to NAME in NAMESPACE one at a time, printing [key, position, text] after each
commit, until the file STOP exists.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NS = "t"
TURNS = 80  # per conversation: the first batch takes "a" and "b", "c" comes in the next
DAY_S = 86_400.0
CUTOFF_AGE_S = 3_600.0  # the prune takes what has been idle for an hour
CHILD_TIMEOUT_S = 120.0  # the child's start (imports) and its stop


def child(db: str, namespace: str, name: str, go: str, stop: str) -> None:
    from tiermem.tiers.cold import ColdStore
    from tiermem.tiers.models import Message
    from tiermem.tiers.tokens import BpeTokenCounter

    store = ColdStore(Path(db), tokens=BpeTokenCounter())
    print("ready", flush=True)
    deadline = time.monotonic() + CHILD_TIMEOUT_S
    while not Path(go).exists():
        if time.monotonic() > deadline:
            raise SystemExit("the start file never appeared")
        time.sleep(0.002)
    i = 0
    while not Path(stop).exists():
        text = f"acknowledged {i}"
        got = store.append_batch(name, [Message(role="user", content=text)], namespace=namespace)
        print(json.dumps([got.key, got.positions[0], text]), flush=True)
        i += 1
    store.close()


def test_a_prune_keeps_what_another_process_appended_while_it_ran(tmp_path: Path) -> None:
    from tiermem.tiers.cold import ERASE_BATCH_MESSAGES, ColdStore
    from tiermem.tiers.models import Message
    from tiermem.tiers.tokens import BpeTokenCounter

    assert 2 * TURNS <= ERASE_BATCH_MESSAGES < 3 * TURNS
    db, go, stop = tmp_path / "tiermem.db", tmp_path / "go", tmp_path / "stop"
    old = time.time() - DAY_S
    store = ColdStore(db, tokens=BpeTokenCounter())
    proc = None
    try:
        keys = {name: store.append_batch(name, [Message(role="user", content=f"{name} turn {t}", created_at=old)
                                                for t in range(TURNS)], namespace=NS).key
                for name in ("a", "b", "c")}
        proc = subprocess.Popen([sys.executable, __file__, str(db), NS, "c", str(go), str(stop)],
                                stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        acked: list[list[object]] = []

        def step(name: str) -> None:
            if name == "erase:batch" and not acked:
                go.touch()  # the child starts appending, and keeps on through the next batches
                assert proc is not None and proc.stdout is not None
                acked.append(json.loads(proc.stdout.readline()))

        store._fault = step
        report = store.prune(time.time() - CUTOFF_AGE_S, namespace=NS)
        store._fault = None
        stop.touch()
        # from the buffered stream the hook read from (communicate() would skip what it holds)
        assert proc.stdout is not None
        acked += [json.loads(line) for line in proc.stdout.read().splitlines()]
        assert proc.wait(timeout=CHILD_TIMEOUT_S) == 0

        assert report.conversation_ids == ["a", "b"] and report.messages == 2 * TURNS
        assert [t["id"] for t in store.tombstones(NS)] == ["a", "b"]
        # every acknowledged append is where it was acknowledged: same incarnation, position
        assert store.key_of(NS, "c") == keys["c"]
        stored = [[keys["c"], m.position, m.text] for m in store.history(keys["c"], start=TURNS)]
        assert acked and stored == acked
        assert [m.position for m in store.history(keys["c"])] == list(range(TURNS + len(acked)))
    finally:
        stop.touch()
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        store.close()


if __name__ == "__main__":
    child(*sys.argv[1:])

"""A namespace's erasure and a prune commit in batches of whole conversations (SQLite),
the store's lock free between them: a large tenant's erasure held the write lock for its
whole length (seconds for thousands of turns), stalling every other tenant of the
process and other processes' writes. Each conversation still goes whole or not at all: a
process killed between batches leaves the rest whole, the next open scrubs what was
erased, and a retry erases the rest. With real files and a real SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from tiermem.tiers.cold import ERASE_BATCH_MESSAGES, ColdStore
from tiermem.tiers.models import ErasureReport, Message
from tiermem.tiers.tokens import BpeTokenCounter

ROOT = Path(__file__).resolve().parent.parent
TURNS = 80  # per conversation: two fit in a batch, a third does not
CONVERSATIONS = 6
assert 2 * TURNS <= ERASE_BATCH_MESSAGES < 3 * TURNS


def canary(c: int) -> str:
    return f"zqcanary{c:02d}xyzzy"


def fill(store: ColdStore) -> None:
    for c in range(CONVERSATIONS):
        texts = [f"turn {t} of ticket {c} about the router" for t in range(TURNS)]
        texts[TURNS // 2] += f" code {canary(c)}"
        store.append_many(f"c{c}", [Message(role="user", content=t) for t in texts],
                          namespace="big" if c % 2 == 0 else "big/team")
    store.append("mine", Message(role="user", content="my own ticket"), namespace="other")


def files_with(db: Path, needle: str) -> bool:
    return any(needle.encode() in p.read_bytes() for p in (db, Path(f"{db}-wal")) if p.exists())


# (how, its erasure, how many conversations it erases)
ERASURES: list[tuple[str, Callable[[ColdStore], ErasureReport]]] = [
    ("delete_namespace", lambda s: s.delete_namespace("big")),  # with the namespace below it
    ("prune", lambda s: s.prune(2**40, namespace="big")),  # three of the six
]


@pytest.mark.parametrize("how,erase", ERASURES, ids=[e[0] for e in ERASURES])
def test_batches_free_the_lock_between_them(tmp_path: Path, counter: BpeTokenCounter, how: str,
                                           erase: Callable[[ColdStore], ErasureReport]) -> None:
    store = ColdStore(tmp_path / "tiermem.db", tokens=counter)
    try:
        fill(store)
        between: list[bool] = []

        def step(name: str) -> None:
            if name != "erase:batch":
                return
            # another thread's call gets the store between two batches
            reader = threading.Thread(target=lambda: store.history("mine"))
            reader.start()
            reader.join(10)
            between.append(not reader.is_alive())

        store._fault = step
        report = erase(store)
        store._fault = None
        n = CONVERSATIONS if how == "delete_namespace" else CONVERSATIONS // 2
        # before: one transaction for the whole namespace, nobody else in between (the
        # first batch holds two conversations; later ones are sized by time)
        assert len(between) >= 2 and all(between)
        assert (report.conversations, report.messages, len(report.tombstones)) == (n, n * TURNS, n)
        assert report.scrubbed
        assert not any(files_with(store.path, canary(c)) for c in range(0, CONVERSATIONS, 2))
        assert [m.text for m in store.history("mine")] == ["my own ticket"]
    finally:
        store.close()


CHILD = """
import sys, time
from pathlib import Path
from tiermem.tiers.cold import ERASE_BATCH_MESSAGES, ColdStore
from tiermem.tiers.tokens import BpeTokenCounter

def step(name):
    if name == "erase:batch":
        print("BATCH", flush=True)
        time.sleep(600)

store = ColdStore(Path(sys.argv[1]), tokens=BpeTokenCounter())
store._fault = step
store.delete_namespace("big")
print("NOT KILLED", flush=True)
"""


def test_a_kill_between_batches_leaves_whole_conversations_and_a_retry_finishes(
        tmp_path: Path, counter: BpeTokenCounter) -> None:
    db = tmp_path / "tiermem.db"
    store = ColdStore(db, tokens=counter)
    fill(store)
    store.close()
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(db)], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "BATCH"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(30)
    store = ColdStore(db, tokens=counter)  # the next open scrubs what the first batch erased
    try:
        gone = {t["id"] for t in store.tombstones("big")} | {t["id"] for t in store.tombstones("big/team")}
        assert len(gone) == 2
        for c in range(CONVERSATIONS):
            ns = "big" if c % 2 == 0 else "big/team"
            key = store.key_of(ns, f"c{c}")
            if f"c{c}" in gone:
                assert key is None and not files_with(db, canary(c))
            else:  # whole: every message of it
                assert key is not None and len(store.history(key)) == TURNS
        report = store.delete_namespace("big")  # the retry
        assert report.conversations == CONVERSATIONS - 2
        assert not any(files_with(db, canary(c)) for c in range(CONVERSATIONS))
    finally:
        store.close()


def test_a_conversation_created_during_the_erasure_stays(tmp_path: Path, counter: BpeTokenCounter) -> None:
    # the erasure takes the conversations there were when it began: a writer that keeps
    # creating conversations in the namespace cannot keep it going (one created after a
    # single-transaction erasure would stay too)
    store = ColdStore(tmp_path / "tiermem.db", tokens=counter)
    try:
        fill(store)
        made: list[str] = []

        def step(name: str) -> None:
            if name == "erase:batch" and not made:
                made.append(store.append_batch("late", [Message(role="user", content="new")], namespace="big").key)

        store._fault = step
        report = store.delete_namespace("big")
        store._fault = None
        assert report.conversations == CONVERSATIONS and made[0] not in report.keys
        assert store.key_of("big", "late") == made[0]
    finally:
        store.close()

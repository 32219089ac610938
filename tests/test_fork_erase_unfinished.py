"""An erasure never reports scrubbed while an unfinished fork holds a copy (SQLite).

A fork of a long prefix copies it in batches under a key bound to no name, recorded as
owed to its process (`erase_owed`, reason 'fork'). Another process that erased the
parent between two batches left that copy alone ("one still being copied is left") and
answered scrubbed: true, wal_truncated: true while the database file held the copied
text; it stayed until the fork's next batch noticed, or, the fork's process stopped or
killed, until the next open or erasure (a reviewer: 4 of 4 runs with the fork's process
stopped between batches, 1 of 44 unpaused). The fork's record names its parent now, and
the erasure deletes the unfinished copy with the rest and scrubs it; the fork, resumed,
fails with ConversationNotFound. A record without its parent (an older tiermem still
forking) makes the erasure answer scrubbed: false, with the reason.

Real files, a real forking process stopped (SIGSTOP) between its batches, then killed
(SIGKILL) or resumed (SIGCONT)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cold_helpers import raw

import tiermem.tiers.cold as cold_module
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.embed import Embedder
from tiermem.tiers.models import ErasureReport, Message
from tiermem.tiers.tokens import BpeTokenCounter

ROOT = Path(__file__).resolve().parent.parent
TURNS = 260
UP_TO = TURNS - 1
BATCH = 50  # the forking process's FORK_BATCH_MESSAGES: a few hundred turns take several batches
STOP_AFTER_BATCHES = 2  # the fork stops itself after this many committed batches
CANARY = re.compile(rb"zq5forkerase(\d{4})q")
STOPPED_WAIT_S = 30.0  # the forking process reaching its stop (an import and two batches)
POLL_S = 0.02

CHILD = f"""
import json, os, signal, sys
from pathlib import Path
import tiermem.tiers.cold as cold
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.tokens import BpeTokenCounter

cold.FORK_BATCH_MESSAGES = {BATCH}
batches = []
def step(name):
    if name == "fork:batch":
        batches.append(name)
        if len(batches) == {STOP_AFTER_BATCHES}:  # between two batches, the store's lock free
            print("STOPPING", flush=True)
            os.kill(os.getpid(), signal.SIGSTOP)

store = ColdStore(Path(sys.argv[1]), tokens=BpeTokenCounter())
store._fault = step
try:
    store.fork(store.key_of("acme", "long"), {UP_TO}, new_id="copy")
    print(json.dumps({{"fork": "published"}}), flush=True)
except Exception as exc:
    print(json.dumps({{"fork": type(exc).__name__}}), flush=True)
finally:
    store.close()
"""


def fill(db: Path, counter: BpeTokenCounter, embedder: Embedder) -> None:
    store = ColdStore(db, tokens=counter, embedder=embedder)
    try:
        store.append_many("long", [Message(role="user", content=f"turn {t} of the ticket zq5forkerase{t:04d}q")
                                   for t in range(TURNS)], namespace="acme")
        store.append("mine", Message(role="user", content="my own ticket about the boiler"), namespace="other")
        store.index_pending()
    finally:
        store.close()


def canaries(directory: Path) -> dict[str, int]:
    """The data files that hold a copy of the erased text: name -> distinct turns found."""
    out = {}
    for p in sorted(directory.iterdir()):
        if p.is_file() and (n := len(set(CANARY.findall(p.read_bytes())))):
            out[p.name] = n
    return out


def owed(db: Path) -> list[tuple[str, str]]:
    with raw(db) as conn:
        return [(str(k), str(r)) for k, r in conn.execute("SELECT key, reason FROM erase_owed ORDER BY key")]


def copied(db: Path, key: str) -> int:
    with raw(db) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM messages WHERE conversation_id = ?", (key,)).fetchone()[0])


def wait_stopped(proc: subprocess.Popen[str]) -> None:
    """Until the process is stopped (its state in /proc 'T'): its SIGSTOP is asynchronous."""
    deadline = time.monotonic() + STOPPED_WAIT_S
    while time.monotonic() < deadline:
        state = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if state in ("T", "t"):
            return
        time.sleep(POLL_S)
    raise AssertionError("the forking process did not stop between its batches")


@pytest.fixture
def forking(tmp_path: Path, counter: BpeTokenCounter, embedder: Embedder) -> Iterator[subprocess.Popen[str]]:
    """A process forking 'long' (acme), stopped between two of its batches, a part of the
    copy committed under its unpublished key."""
    db = tmp_path / "tiermem.db"
    fill(db, counter, embedder)
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(db)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "STOPPING"
        wait_stopped(proc)
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)


def erase_conversation(store: ColdStore) -> ErasureReport:
    return store.delete_conversation(store.key_of("acme", "long") or "")


def erase_namespace(store: ColdStore) -> ErasureReport:
    return store.delete_namespace("acme")


# (how the parent is erased, an erasure's first batch in messages, the erasure)
ERASURES = [
    # 260 turns > 200: detached, then its rows deleted in batches after the commit
    ("conversation, detached", cold_module.ERASE_BATCH_MESSAGES, erase_conversation),
    # one transaction takes the whole namespace, the parent with it
    ("namespace, one transaction", 1000, erase_namespace),
]
# what becomes of the stopped fork after the erasure
AFTER = [
    "killed",  # kill -9: nothing of it runs again; before, its copy waited for the next open
    "resumed",  # its next batch finds the parent gone and fails
]


@pytest.mark.parametrize("after", AFTER)
@pytest.mark.parametrize("what,batch,erase", ERASURES, ids=[e[0] for e in ERASURES])
def test_the_erasure_takes_the_unfinished_copy_and_the_fork_fails(
        tmp_path: Path, counter: BpeTokenCounter, embedder: Embedder, forking: subprocess.Popen[str],
        monkeypatch: pytest.MonkeyPatch, what: str, batch: int,
        erase: Callable[[ColdStore], ErasureReport], after: str) -> None:
    db = tmp_path / "tiermem.db"
    [(key, reason)] = owed(db)
    # the premise: a part of the prefix copied under the fork's key, its process stopped
    assert reason == cold_module.FORK_OWED_REASON and 0 < copied(db, key) < TURNS
    monkeypatch.setattr(cold_module, "ERASE_BATCH_MESSAGES", batch)
    store = ColdStore(db, tokens=counter, embedder=embedder)  # another process's open leaves a live fork
    try:
        assert copied(db, key) > 0
        report = erase(store)
        assert report.conversation_ids[:1] == ["long"] and report.messages >= TURNS
        # before: scrubbed and truncated while the copy's text was in tiermem.db
        assert (report.scrubbed, report.wal_truncated, report.not_rewritten) == (True, True, "")
        assert canaries(tmp_path) == {}
        assert copied(db, key) == 0 and owed(db) == []
        if after == "killed":
            forking.send_signal(signal.SIGKILL)
            forking.wait(30)
        else:
            forking.send_signal(signal.SIGCONT)
            out, _ = forking.communicate(timeout=60)
            assert forking.returncode == 0
            # the error the fork raises for a parent erased under it, not "deleted by another process"
            assert json.loads(out.strip().splitlines()[-1]) == {"fork": "ConversationNotFound"}
        assert store.key_of("acme", "copy") is None and copied(db, key) == 0 and owed(db) == []
    finally:
        store.close()
    assert canaries(tmp_path) == {}
    ColdStore(db, tokens=counter, embedder=embedder).close()  # a fresh open finds nothing owed
    assert canaries(tmp_path) == {} and owed(db) == []


def test_a_fork_recorded_without_its_parent_is_not_reported_scrubbed(
        tmp_path: Path, counter: BpeTokenCounter, embedder: Embedder, forking: subprocess.Popen[str]) -> None:
    """A record with no parent (as an older tiermem, still running, writes it): the erasure
    cannot tell what the copy holds, so it leaves it and says it did not scrub; the next
    open after the fork's process died deletes the copy and scrubs it."""
    db = tmp_path / "tiermem.db"
    [(key, _)] = owed(db)
    with raw(db) as conn:
        conn.execute("UPDATE erase_owed SET parent = NULL WHERE key = ?", (key,))
    store = ColdStore(db, tokens=counter, embedder=embedder)
    try:
        report = store.delete_conversation(store.key_of("acme", "long") or "")
        assert report.scrubbed is False and "unfinished fork" in report.not_rewritten
        assert copied(db, key) > 0 and canaries(tmp_path)  # the premise: the copy is there
    finally:
        store.close()
    forking.send_signal(signal.SIGKILL)
    forking.wait(30)
    ColdStore(db, tokens=counter, embedder=embedder).close()  # the next open: deleted and scrubbed
    assert copied(db, key) == 0 and owed(db) == [] and canaries(tmp_path) == {}

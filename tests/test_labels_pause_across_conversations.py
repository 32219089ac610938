"""A relabelling pass over many conversations (a rebuild's `_relabel_all`: `set_labels`
per conversation, back to back) on SQLite pauses by the time it holds the write lock, not
per conversation.

SQLite's write lock is the file's: a pass over one conversation holds off appends to every
other, and a waiting writer (SQLite's busy handler or the store's own polling, sleeping up
to 100 ms between tries) gets in only where a gap is long enough for one of its tries.
Before, set_labels paused (0.15 s) after each batch but the last of its own call, so each
conversation over 200 turns paid a pause of its own, needed or not (300 conversations of
300 turns: +45 s to a rebuild), and passes over many conversations of one batch each
paused nowhere. Now the store counts the lock's hold across calls and pauses (just over
the longest busy sleep) once it has been held a spell (tiers.cold `ColdStore._SPELL_S`),
whichever conversation each batch wrote: the first test checks that an append to another
conversation still goes through within a short busy timeout while a child relabels many
conversations back to back (it passed before too: the gaps between calls let it in, by
chance); the second bounds the time of passes over conversations just over one batch
(failed before: 3.8 s against the bound of 2.34 s, its pauses alone 3.6 s).

Real child processes (tests/label_passes_worker.py), a real SQLite file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cold_helpers import write_lock_held
from label_passes_worker import PASS_LABEL

from tiermem.tiers.cold import ColdStore
from tiermem.tiers.dialect import LABEL_BATCH_TURNS
from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter

ROOT = Path(__file__).resolve().parent.parent
WORKER = Path(__file__).with_name("label_passes_worker.py")
SEED_LABEL = ("statement", False, 0, "seed")  # not load-bearing: the pass changes every turn
# conversations of at most one first batch each: before, no pause anywhere between them
SMALL_CONVERSATIONS, SMALL_TURNS = 120, 150
APPEND_WAIT_MS = 150  # the appender's busy timeout (Config.busy_timeout_ms, lowered)
APPENDS_DURING = 3
STAGE_TIMEOUT_S = 120.0
POLL_S = 0.005
# conversations just over one first batch: before, each paid one pause of its own
MID_CONVERSATIONS, MID_TURNS = 24, 300
OLD_PAUSE_S = 0.15  # the pause each of them paid before (1.5x the longest busy sleep)
# the relabelling of MID_CONVERSATIONS x MID_TURNS (~7k turns, ~0.2 s of lock and a few
# pauses on 2 loaded cores) within this: before, its pauses alone took 24 x 0.15 = 3.6 s
MID_PASS_BOUND_S = 0.65 * MID_CONVERSATIONS * OLD_PAUSE_S


def seed(store: ColdStore, n: int, turns: int) -> list[str]:
    return [store.append_batch(f"conv{i:04d}", [Message(role="user", content=f"turn {t} of {i} says something.")
                                                for t in range(turns)], labels=[SEED_LABEL] * turns).key
            for i in range(n)]


def answer(child: subprocess.Popen[str]) -> Any:
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line, f"the child ended (exit status {child.wait()})"
    return json.loads(line) if line.startswith("{") else line.strip()


def test_append_goes_through_while_another_process_relabels_many_small_conversations(tmp_path: Path) -> None:
    assert SMALL_TURNS <= LABEL_BATCH_TURNS  # each conversation one batch: the case with no pause before
    db = tmp_path / "tiermem.db"
    appender = ColdStore(db, tokens=BpeTokenCounter(), busy_timeout_ms=APPEND_WAIT_MS)
    try:
        keys = seed(appender, SMALL_CONVERSATIONS, SMALL_TURNS)
        other = appender.append_batch("elsewhere", [Message(role="user", content="a conversation of its own")]).key
        child = subprocess.Popen([sys.executable, str(WORKER), str(db), *keys], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        try:
            assert answer(child) == "ready"
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
            deadline = time.monotonic() + STAGE_TIMEOUT_S
            while not write_lock_held(db):
                assert child.poll() is None and time.monotonic() < deadline, "the passes never held the lock"
                time.sleep(POLL_S)
            waits: list[float] = []
            for i in range(APPENDS_DURING):
                # to a conversation the passes do not write: SQLite's lock is the file's
                began = time.perf_counter()
                positions = appender.append_batch("elsewhere", [Message(role="user", content=f"meanwhile {i}")]).positions
                waits.append(time.perf_counter() - began)
                assert positions == [1 + i]
            appended_by = time.time()
            done = answer(child)
        finally:
            if child.stdin is not None:
                child.stdin.close()
            try:
                child.wait(timeout=STAGE_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        assert "ended" in done, done
        # the appends returned while the passes were still running: none waited for their end
        assert appended_by < done["ended"], (waits, appended_by, done)
        assert len(appender.turns(other)) == 1 + APPENDS_DURING
        # every pass finished, every turn labelled
        intent, bearing, priority, reason = PASS_LABEL
        for key in keys:
            rows = appender.turns(key)
            assert len(rows) == SMALL_TURNS
            assert all((r.intent, r.load_bearing, r.priority, r.label_reason) == (intent, bearing, priority, reason)
                       for r in rows), key
    finally:
        appender.close()


def test_relabelling_conversations_over_one_batch_pauses_by_lock_time(tmp_path: Path) -> None:
    assert MID_TURNS > LABEL_BATCH_TURNS  # before, each conversation's pass paid a pause of its own
    store = ColdStore(tmp_path / "tiermem.db", tokens=BpeTokenCounter())
    try:
        keys = seed(store, MID_CONVERSATIONS, MID_TURNS)
        labels = [(pos, *PASS_LABEL) for pos in range(MID_TURNS)]
        began = time.perf_counter()
        for key in keys:
            store.set_labels(key, labels)
        took = time.perf_counter() - began
        assert took < MID_PASS_BOUND_S, took
        assert all(r.label_reason == PASS_LABEL[3] for key in keys for r in store.turns(key))
    finally:
        store.close()

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
chance); the second watches passes over conversations just over one batch: every pause
follows a spell of lock time since the last, and none is skipped once a spell is held
(failed before: a pause of 0.15 s after each conversation's first batch, ~10 ms of lock).

Real child processes (tests/label_pass_worker.py), a real SQLite file; the second test
notes each write transaction's span and each pause (the main thread's sleeps) as they
happen, and replays the store's rule over them.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cold_helpers import write_lock_held
from go_child import answer, start, stop, wait_for
from label_pass_worker import PASS_LABEL

from tiermem.tiers.cold import ColdStore
from tiermem.tiers.dialect import LABEL_BATCH_TURNS
from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter

WORKER = Path(__file__).with_name("label_pass_worker.py")
SEED_LABEL = ("statement", False, 0, "seed")  # not load-bearing: the pass changes every turn
# conversations of at most one first batch each: before, no pause anywhere between them
SMALL_CONVERSATIONS, SMALL_TURNS = 120, 150
APPEND_WAIT_MS = 150  # the appender's busy timeout (Config.busy_timeout_ms, lowered)
APPENDS_DURING = 3
# conversations just over one first batch: before, each paid one pause of its own
MID_CONVERSATIONS, MID_TURNS = 24, 300
# the relabelling of them run twice (a second rebuild), each pass changing every turn:
# ~0.3 s of lock on 2 loaded cores, room for the rule to act a few times
RELABELS = (PASS_LABEL, SEED_LABEL)
# the store times a batch's hold around its transaction, the test inside it: the two
# differ by the call's own overhead (microseconds), so the replay gives this much either way
MEASURE_SLACK_S = 0.002


def seed(store: ColdStore, n: int, turns: int) -> list[str]:
    return [store.append_batch(f"conv{i:04d}", [Message(role="user", content=f"turn {t} of {i} says something.")
                                                for t in range(turns)], labels=[SEED_LABEL] * turns).key
            for i in range(n)]


def test_append_goes_through_while_another_process_relabels_many_small_conversations(tmp_path: Path) -> None:
    assert SMALL_TURNS <= LABEL_BATCH_TURNS  # each conversation one batch: the case with no pause before
    db = tmp_path / "tiermem.db"
    appender = ColdStore(db, tokens=BpeTokenCounter(), busy_timeout_ms=APPEND_WAIT_MS)
    try:
        keys = seed(appender, SMALL_CONVERSATIONS, SMALL_TURNS)
        other = appender.append_batch("elsewhere", [Message(role="user", content="a conversation of its own")]).key
        child = start(WORKER, "sqlite", str(db), *keys)
        try:
            wait_for(lambda: write_lock_held(db), child, "the passes never held the lock")
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
            stop(child)
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


class WatchedStore(ColdStore):
    """A ColdStore noting each write transaction's span (perf_counter() at its start and
    end) while `watching`: a pass's batch holds SQLite's write lock for its span."""

    def __init__(self, path: Path, **kwargs: Any) -> None:
        self.watching = False  # (set first: opening the store writes its schema)
        self.spans: list[tuple[float, float]] = []
        super().__init__(path, **kwargs)

    @contextlib.contextmanager
    def _tx(self) -> Iterator[Any]:
        began = time.perf_counter()
        with super()._tx() as conn:
            yield conn
        if self.watching:
            self.spans.append((began, time.perf_counter()))


def test_relabelling_conversations_over_one_batch_pauses_by_lock_time(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    assert MID_TURNS > LABEL_BATCH_TURNS  # before, each conversation's pass paid a pause of its own
    store = WatchedStore(tmp_path / "tiermem.db", tokens=BpeTokenCounter())
    pauses: list[tuple[float, float]] = []  # (perf_counter() at its start, seconds asked)
    real_sleep = time.sleep
    main = threading.current_thread()

    def sleep(seconds: float) -> None:  # noted, then slept as asked
        if threading.current_thread() is main:
            pauses.append((time.perf_counter(), seconds))
        real_sleep(seconds)

    try:
        keys = seed(store, MID_CONVERSATIONS, MID_TURNS)
        monkeypatch.setattr(time, "sleep", sleep)
        store.watching = True
        for label in RELABELS:
            labels = [(pos, *label) for pos in range(MID_TURNS)]
            for key in keys:
                store.set_labels(key, labels)
        store.watching = False
        monkeypatch.undo()
        assert all(r.label_reason == RELABELS[-1][3] for key in keys for r in store.turns(key))
    finally:
        store.close()
    spans = store.spans
    assert len(spans) >= len(RELABELS) * MID_CONVERSATIONS  # one batch a conversation's pass at least
    # enough lock time before the last batch for the rule to act (~0.3 s on 2 loaded cores)
    held_before_last = sum(end - began for began, end in spans[:-1])
    assert held_before_last > ColdStore._SPELL_S + MEASURE_SLACK_S, held_before_last
    # Replay the store's rule over what happened. `held`: the lock time since the last
    # pause or the last gap a waiter could have taken the lock in (the store's spell).
    held = 0.0
    last_end: float | None = None
    taken = 0
    for i, (began, end) in enumerate(spans):
        before = [(at, seconds) for at, seconds in pauses if (last_end is None or at >= last_end) and at < began]
        if before:
            # a pause only once the lock has been held a spell, whichever conversations'
            # batches held it (before: one after each conversation's first batch, ~10 ms)
            assert held >= ColdStore._SPELL_S - MEASURE_SLACK_S, (i, held, before)
            # one pause, just over the longest busy sleep (before: 0.15 s)
            assert [seconds for _at, seconds in before] == [store.LOCK_PAUSE_S], (i, before)
            taken += 1
            held = 0.0
        elif last_end is not None and began - last_end >= store.LOCK_PAUSE_S:
            held = 0.0  # a gap as long as a pause: a waiter had its turn without one
        else:
            # no pause: the lock not yet held a spell (a pass over conversations of a
            # batch or two each that never pauses leaves a waiter no gap at all)
            assert held < ColdStore._SPELL_S + MEASURE_SLACK_S, (i, held)
        held += end - began
        last_end = end
    # every pause came before a batch: none after the last, none elsewhere
    assert taken == len(pauses) and taken >= 1, (taken, pauses)

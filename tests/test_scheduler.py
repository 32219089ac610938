"""The consolidation scheduler: refreshes views once they are over their freshness
budget (time driven through an injectable clock), bounded per run, resumes after a
restart, refuses to run in a forked child, and shuts down cleanly."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

import pytest

from tiermem.consolidation.scheduler import ConsolidationScheduler
from tiermem.consolidation.summarize import ExtractiveSummarizer, SourceTurn
from tiermem.consolidation.views import FAILED_VIEW_BACKOFF_S, ViewMaintainer
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.errors import SummarizerError
from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter
from tiermem.tiers.warm import Sentence, WarmStore

T0 = 1_800_000_000.0


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def append(
    cold: ColdStore, conv: str, n: int, *, at: float, start: int = 0, session: str | None = None
) -> None:
    msgs = [
        Message(
            role="user" if i % 2 == 0 else "assistant",
            content=f"Turn {start + i}: please remember that item {start + i} costs {start + i} dollars.",
            session_id=session,
            created_at=at,
        )
        for i in range(n)
    ]
    cold.append_many(conv, msgs, labels=[("statement", False, 0, "test")] * n)


def make(
    cold: ColdStore,
    counter: BpeTokenCounter,
    clock: Clock,
    *,
    summarizer: Any = None,
    max_turns: int = 10,
    max_seconds: float = 100.0,
    max_views: int = 50,
) -> ConsolidationScheduler:
    warm = WarmStore(cold)
    m = ViewMaintainer(
        cold,
        warm,
        summarizer or ExtractiveSummarizer(counter),
        counter,
        target_tokens=60,
        max_turns_behind=max_turns,
        max_seconds_behind=max_seconds,
        clock=clock,
        backoff_clock=clock,
    )
    return ConsolidationScheduler(m, interval_s=30.0, max_views_per_run=max_views, clock=clock)


def versions(cold: ColdStore, conv: str) -> dict[tuple[str, str], int]:
    rows = cold._read(
        "SELECT kind, key, MAX(version) FROM summaries WHERE conversation_id = ? GROUP BY kind, key", (conv,)
    )
    return {(r[0], r[1]): int(r[2]) for r in rows}


def test_refreshes_once_over_the_time_budget_and_not_before(
    cold: ColdStore, counter: BpeTokenCounter
) -> None:
    clock = Clock(T0)
    sched = make(cold, counter, clock, max_turns=10, max_seconds=100.0)
    append(cold, "c", 5, at=T0, session="s")
    assert sched.run_once() == 0  # 5 turns, 0 s: within budget
    clock.now = T0 + 100.0
    assert sched.run_once() == 0  # exactly at the budget is not over it
    assert versions(cold, "c") == {}
    clock.now = T0 + 100.5
    assert sched.run_once() == 3  # rolling, constraints, session s
    assert versions(cold, "c") == {("rolling", ""): 1, ("constraints", ""): 1, ("session", "s"): 1}
    assert sched.stats.last_selected == 3 and sched.stats.lag_seconds == pytest.approx(100.5)
    assert sched.run_once() == 0  # fresh again
    # new turns start a new clock from the oldest uncovered one
    append(cold, "c", 2, at=T0 + 150, start=5, session="s")
    clock.now = T0 + 200
    assert sched.run_once() == 0
    clock.now = T0 + 251
    assert sched.run_once() == 3
    assert versions(cold, "c") == {("rolling", ""): 2, ("constraints", ""): 2, ("session", "s"): 2}


def test_refreshes_once_over_the_turn_budget_and_not_before(
    cold: ColdStore, counter: BpeTokenCounter
) -> None:
    clock = Clock(T0)
    sched = make(cold, counter, clock, max_turns=10, max_seconds=1e9)
    append(cold, "c", 10, at=T0)
    assert sched.run_once() == 0  # 10 behind is the budget, not over it
    append(cold, "c", 1, at=T0, start=10)
    assert sched.run_once() == 2  # 11 behind: rolling and constraints (no sessions)
    assert sched.stats.lag_turns == 11
    append(cold, "c", 10, at=T0, start=11)
    assert sched.run_once() == 0
    append(cold, "c", 1, at=T0, start=21)
    assert sched.run_once() == 2


def test_bounded_per_run_most_behind_first(cold: ColdStore, counter: BpeTokenCounter) -> None:
    clock = Clock(T0 + 1000)
    sched = make(cold, counter, clock, max_turns=5, max_seconds=1e9, max_views=2)
    append(cold, "small", 6, at=T0)
    append(cold, "big", 40, at=T0)
    assert sched.run_once() == 2
    assert set(versions(cold, "big")) == {("rolling", ""), ("constraints", "")}
    assert versions(cold, "small") == {}
    assert sched.stats.saturated
    assert sched.run_once() == 2
    assert set(versions(cold, "small")) == {("rolling", ""), ("constraints", "")}
    assert sched.run_once() == 0 and not sched.stats.saturated


def test_restart_resumes_from_the_database(cold: ColdStore, counter: BpeTokenCounter) -> None:
    clock = Clock(T0 + 1000)
    a = make(cold, counter, clock, max_turns=5, max_seconds=1e9, max_views=1)
    append(cold, "c", 20, at=T0, session="s1")
    assert a.run_once() == 1  # only one of three stale views this run
    a.shutdown()
    done = versions(cold, "c")
    assert len(done) == 1
    append(cold, "c", 20, at=T0, start=20, session="s2")
    b = make(cold, counter, clock, max_turns=5, max_seconds=1e9)  # a new process's scheduler
    assert b.run_once() == 4  # the two left behind by A, A's one again (new turns), session s2
    assert versions(cold, "c") == {
        ("rolling", ""): 2 if ("rolling", "") in done else 1,
        ("constraints", ""): 2 if ("constraints", "") in done else 1,
        ("session", "s1"): 2 if ("session", "s1") in done else 1,
        ("session", "s2"): 1,
    }
    assert b.run_once() == 0


class Flaky:
    name = "flaky"

    def __init__(self, counter: BpeTokenCounter) -> None:
        self.inner = ExtractiveSummarizer(counter)
        self.fail = True

    def summarize(self, turns: Sequence[SourceTurn], *, target_tokens: int) -> list[Sentence]:
        if self.fail:
            raise SummarizerError(self.name, "model overloaded")
        return self.inner.summarize(turns, target_tokens=target_tokens)


def test_failing_summarizer_keeps_old_versions_and_the_run_goes_on(
    cold: ColdStore, counter: BpeTokenCounter
) -> None:
    clock = Clock(T0 + 1000)
    flaky = Flaky(counter)
    sched = make(cold, counter, clock, summarizer=flaky, max_turns=5, max_seconds=1e9)
    append(cold, "c", 10, at=T0)
    # the constraint extract needs no summarizer; the rolling view fails and stays absent
    assert sched.run_once() == 1
    assert versions(cold, "c") == {("constraints", ""): 1}
    warm = sched.maintainer.warm
    assert "model overloaded" in warm.errors("c", "rolling")[0][0]
    assert sched.stats.errors == 0  # a summarizer failure is recorded, not an error of the run
    flaky.fail = False
    assert sched.run_once() == 0 and sched.stats.held_back == 1  # its backoff (test_view_backoff.py)
    clock.now += FAILED_VIEW_BACKOFF_S
    assert sched.run_once() == 1
    assert versions(cold, "c") == {("constraints", ""): 1, ("rolling", ""): 1}


def test_background_job_runs_and_shuts_down_cleanly(cold: ColdStore, counter: BpeTokenCounter) -> None:
    clock = Clock(T0 + 1000)
    sched = make(cold, counter, clock, max_turns=5, max_seconds=1e9)
    sched.interval_s = 0.05
    append(cold, "c", 12, at=T0)
    sched.start(run_now=True)
    try:
        with pytest.raises(RuntimeError):
            sched.start()
        assert sched.running
        deadline = time.monotonic() + 10
        while versions(cold, "c") != {("rolling", ""): 1, ("constraints", ""): 1}:
            assert time.monotonic() < deadline, "the job never refreshed"
            time.sleep(0.02)
    finally:
        sched.shutdown(wait=True)
    assert not sched.running
    runs = sched.stats.runs
    append(cold, "c", 12, at=T0, start=12)
    time.sleep(0.2)
    assert sched.stats.runs == runs  # nothing runs after shutdown
    sched.shutdown()  # idempotent
    snap = sched.snapshot()
    assert snap["runs"] >= 1 and snap["last_duration_s"] is not None and snap["schedule_lag_s"] is not None


def test_refuses_to_run_in_a_forked_child(cold: ColdStore, counter: BpeTokenCounter) -> None:
    clock = Clock(T0 + 1000)
    sched = make(cold, counter, clock, max_turns=5, max_seconds=1e9)
    append(cold, "c", 12, at=T0)
    sched.start()
    try:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # child: must not touch the parent's connection, must do nothing
            code = 1
            try:
                n = sched.run_once()
                os.write(w, f"{n},{sched.stats.refused_forked},{int(sched.running)}".encode())
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        _, status = os.waitpid(pid, 0)
        out = os.read(r, 100).decode()
        os.close(r)
        assert os.WEXITSTATUS(status) == 0
        assert out == "0,1,0"
        assert versions(cold, "c") == {}
        assert sched.run_once() == 2  # the parent still runs
    finally:
        sched.shutdown()


def test_validation(cold: ColdStore, counter: BpeTokenCounter) -> None:
    m = make(cold, counter, Clock(T0)).maintainer
    with pytest.raises(ValueError):
        ConsolidationScheduler(m, interval_s=0, max_views_per_run=1)
    with pytest.raises(ValueError):
        ConsolidationScheduler(m, interval_s=1, max_views_per_run=0)

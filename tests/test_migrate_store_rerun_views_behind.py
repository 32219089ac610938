"""A `migrate-store` rerun that brings a copied conversation up to date puts it back in
the target's warm-view sweep, on both engines. The sweep (`WarmStore.frontier`) reads only
the conversations whose `views_seq` moved since their views were last found current; an
append bumps it, and so did the rerun's rewrite on PostgreSQL, not on SQLite: a SQLite
target whose sweep had marked the conversation current never looked at it again, so its
views stayed behind the messages the rerun copied (the source's views, copied with them,
did not cover them: its scheduler had not run yet) until the next append to that
conversation, however far over their freshness budget.

Real SQLite files and a real PostgreSQL (tests/pg_server.py), in both directions; the
real scheduler and extractive summarizer on each side."""

from __future__ import annotations

from pathlib import Path

import pytest
from pg_server import migrate, migration_sides, opened

from tiermem.consolidation.scheduler import ConsolidationScheduler
from tiermem.consolidation.summarize import ExtractiveSummarizer
from tiermem.consolidation.views import ViewMaintainer
from tiermem.tiers.models import Message
from tiermem.tiers.store import ColdLog
from tiermem.tiers.tokens import BpeTokenCounter
from tiermem.tiers.warm import WarmStore

NS, NAME, SESSION = "ns", "a", "s1"
T0 = 1_800_000_000.0  # the messages' created_at
MAX_SECONDS = 100.0  # the views' freshness budget in seconds
MAX_TURNS = 10  # and in turns
LATER = T0 + MAX_SECONDS + 1  # every view not covering its log is over its budget
FIRST, GROWN_BY = 4, 3  # messages before the first run, gained by the source after it
LABEL = ("statement", False, 0, "test")


def _append(store: ColdLog, n: int, start: int) -> None:
    store.append_many(NAME, [Message(role="user" if i % 2 == 0 else "assistant", session_id=SESSION, created_at=T0,
                                     content=f"Turn {i}: the spare key is under pot {i}.")
                             for i in range(start, start + n)], namespace=NS, labels=[LABEL] * n)


def _sweep(store: ColdLog, counter: BpeTokenCounter) -> int:
    """One run of the real scheduler (views over budget refreshed), then one more, which
    finds them current and marks the conversation so (out of the next sweeps)."""
    m = ViewMaintainer(store, WarmStore(store), ExtractiveSummarizer(counter), counter, target_tokens=60,
                       max_turns_behind=MAX_TURNS, max_seconds_behind=MAX_SECONDS, clock=lambda: LATER)
    sched = ConsolidationScheduler(m, interval_s=30.0, max_views_per_run=1000, clock=lambda: LATER)
    refreshed = sched.run_once()
    sched.run_once()
    return refreshed


def _ends(store: ColdLog) -> dict[str, int]:
    """Each view's latest end position."""
    key = store.key_of(NS, NAME)
    warm = WarmStore(store)
    views = {"rolling": warm.latest(key, "rolling"), "constraints": warm.latest(key, "constraints"),
             "session": warm.latest(key, "session", SESSION)}
    return {kind: -1 if v is None else v.end_position for kind, v in views.items()}


DIRECTIONS = [
    # SQLite -> PostgreSQL (passed before: the PostgreSQL path bumped views_seq)
    pytest.param(True, id="to-postgres"),
    # PostgreSQL -> SQLite (failed before: the sweep never looked again)
    pytest.param(False, id="to-sqlite"),
]


@pytest.mark.parametrize("to_postgres", DIRECTIONS)
def test_a_rerun_that_grows_a_conversation_puts_it_back_in_the_sweep(
        tmp_path: Path, pg_url: str, counter: BpeTokenCounter, to_postgres: bool) -> None:
    src, dst = migration_sides(tmp_path, pg_url, to_postgres)
    with opened(src, counter) as store:
        _append(store, FIRST, 0)
        assert _sweep(store, counter) == 3  # rolling, constraints, session s1: written, covering the log
    migrate(src, dst, counter)
    with opened(dst, counter) as store:
        assert _sweep(store, counter) == 0  # the copied views cover the copied log: marked current
        assert WarmStore(store).frontier() == []
    with opened(src, counter) as store:  # the source grows; its scheduler has not run since
        _append(store, GROWN_BY, FIRST)
    assert migrate(src, dst, counter).copied == 1
    last = FIRST + GROWN_BY - 1
    with opened(dst, counter) as store:
        key = store.key_of(NS, NAME)
        assert len(store.history(key)) == FIRST + GROWN_BY
        assert set(_ends(store).values()) == {FIRST - 1}  # the views cover the first run's messages only
        # before, on SQLite: [] (views_seq not moved), and the sweep refreshed nothing
        assert [f.conversation_id for f in WarmStore(store).frontier()] == [key]
        assert _sweep(store, counter) == 3
        assert set(_ends(store).values()) == {last}
        assert WarmStore(store).frontier() == []

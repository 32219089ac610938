"""The epoch clock's two edges (cache_ttl_s, planner.build `_log_time` / `_expired`).

1. A message stamped more than `MAX_STAMP_AHEAD_S` (a day) ahead of the wall clock (a
   wrong date, a year typo) counts as the wall clock at the call that read
   it, so it cannot hold the conversation's epoch clock ahead: a later real gap past the TTL
   still starts a new epoch. A stamp within the bound (a local time read as UTC is at most
   14 h ahead) is taken as it is. On the code before, one far-future stamp held the clock
   ahead for ever: the real gap after it extended the epoch (all misses).
2. `system_messages="before_latest"` keeps the previous call's turns and appends; a call past
   the TTL starts anew there too, with the same reason as the default layout. On the code
   before it kept the turns whatever the gap ("the turns from #N are kept ...").

The steps here are stamped around the real wall clock (the bound is measured against it)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tiermem import Config, Memory
from tiermem.planner.build import DEFAULT_CACHE_TTL_S, MAX_STAMP_AHEAD_S
from tiermem.tiers.embed import Embedder

pytestmark = pytest.mark.usefixtures("shared_vectors")

BUDGET = 2000  # tokens: room to extend an epoch by one exchange
HOUR_S = 3600.0
DAY_S = 86_400.0
TURNS = 6  # turns before the first call, one second apart
HISTORY_AGO_S = 120.0  # the history starts this long before the test: every step but a pause is past
STEP_S = 10.0  # seconds of server time between calls: all well inside the TTL
PAUSE_S = 2 * HOUR_S  # a real pause past the default TTL
LAST_STAMP = 253_402_300_799.0  # 9999-12-31 23:59:59 UTC, the latest created_at accepted
Stamp = Callable[[float], float]  # the server's time at a step -> the message's created_at
Step = list[tuple[str, Stamp]]


def _server(t: float) -> float:
    return t


def _paused(t: float) -> float:
    return t + PAUSE_S


SERVER: Step = [("assistant", _server), ("user", _server)]  # a normal exchange
REAL_GAP: Step = [("assistant", _server), ("user", _paused)]  # the user comes back two hours later


def _history(mem: Memory, start: float) -> float:
    """A short conversation ending in a user message; returns the newest turn's time."""
    mem.append_many("c", [{"role": "user" if i % 2 == 0 else "assistant",
                           "content": f"turn {i}: the night train to Vienna leaves from platform {i + 3}",
                           "created_at": start + i} for i in range(TURNS)])
    mem.append("c", {"role": "user", "content": "Which platform was the train?", "created_at": start + TURNS})
    return start + TURNS


def _one(stamp: Stamp) -> Step:
    """A step of one user message stamped by `stamp`."""
    return [("user", stamp)]


# (steps after the first call, the indexes of the steps that started a new epoch)
AHEAD_CASES = [
    # the year 2100 (a typo, a bad import): counts as the wall clock, so the real two-hour
    # pause after it is seen (before: step 1 restarted and the pause was never seen: [1])
    pytest.param([_one(_server), _one(lambda t: 4_102_444_800.0), SERVER, REAL_GAP], [3], id="year-2100"),
    # the latest stamp append accepts (9999-12-31 23:59:59; milliseconds stored as seconds
    # are refused there): the same (before: [1])
    pytest.param([_one(_server), _one(lambda t: LAST_STAMP), SERVER, REAL_GAP], [3], id="year-9999"),
    # just past the bound (a wrong date): the wall clock, the pause is seen (before: [1])
    pytest.param([_one(_server), _one(lambda t: t + MAX_STAMP_AHEAD_S + HOUR_S), SERVER, REAL_GAP], [3],
                 id="an-hour-past-the-bound"),
    # just within it (a clock a day fast): taken as it is, a gap past the TTL at once, and it
    # holds the clock ahead for at most the bound: the pause, behind it, is not seen
    pytest.param([_one(_server), _one(lambda t: t + MAX_STAMP_AHEAD_S - HOUR_S), SERVER, REAL_GAP], [1],
                 id="an-hour-within-the-bound"),
    # a local time read as UTC (two hours fast): within the bound, the 55d1284 behaviour
    # (one new epoch at its first step ahead; the pause is behind it)
    pytest.param([_one(_server), _one(_paused), SERVER, REAL_GAP], [1], id="two-hours-fast"),
    # no skew at all: only the real pause starts a new epoch
    pytest.param([_one(_server), SERVER, SERVER, REAL_GAP], [3], id="no-skew"),
]


@pytest.mark.parametrize(("steps", "restarts"), AHEAD_CASES)
def test_a_stamp_far_ahead_of_the_wall_clock_does_not_hold_the_clock(
        tmp_path: Path, embedder: Embedder, steps: list[Step], restarts: list[int]) -> None:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        server = _history(mem, time.time() - HISTORY_AGO_S)
        first = mem.context("c", "Which platform was the train?", budget=BUDGET)
        seen: list[int] = []
        for i, step in enumerate(steps):
            server += STEP_S
            for j, (role, stamp) in enumerate(step):
                mem.append("c", {"role": role, "content": f"step {i}: {role} {j} on the night train",
                                 "created_at": stamp(server)})
            cache = mem.context("c", f"step {i}: which platform?", budget=BUDGET).plan.cache
            if cache.new_epoch:
                assert "the provider's cache has expired" in cache.reason, (i, cache.reason)
                seen.append(i)
        assert seen == restarts
        assert cache.epoch == first.plan.cache.epoch + len(restarts)


def test_the_bound_is_a_day() -> None:
    # wider than any local time read as UTC (UTC+14 at most), far narrower than a wrong date
    assert MAX_STAMP_AHEAD_S == DAY_S


def _expired(gap_s: float, ttl_s: float) -> str:
    return (f"the provider's cache has expired ({gap_s:,.0f} s since the previous call > "
            f"cache_ttl_s = {ttl_s:,.0f} s)")


# (system_messages, config's cache_ttl_s (None: the default), seconds between the two calls'
# newest turns, the second call's reason when it starts anew ("" keeps the previous turns))
LAYOUT_CASES = [
    # the default layout: a gap past the TTL is a new epoch (85737d1)
    pytest.param("as_is", None, PAUSE_S, _expired(PAUSE_S, DEFAULT_CACHE_TTL_S), id="as-is-past-ttl"),
    # before_latest, the same gap: the turns start anew with the same reason (before: kept)
    pytest.param("before_latest", None, PAUSE_S, _expired(PAUSE_S, DEFAULT_CACHE_TTL_S),
                 id="before-latest-past-ttl"),
    # before_latest, Anthropic's five minutes configured and 400 s: anew (before: kept)
    pytest.param("before_latest", 300.0, 400.0, _expired(400.0, 300.0), id="before-latest-five-minutes"),
    # before_latest a minute later: the previous call's turns are kept and appended to
    pytest.param("before_latest", None, 60.0, "", id="before-latest-a-minute"),
    # before_latest with the TTL off (0): a week later the turns are still kept
    pytest.param("before_latest", 0.0, 7 * DAY_S, "", id="before-latest-off-a-week"),
]


@pytest.mark.parametrize(("layout", "ttl_s", "gap_s", "reason"), LAYOUT_CASES)
def test_before_latest_honours_the_cache_ttl(tmp_path: Path, embedder: Embedder, layout: str,
                                             ttl_s: float | None, gap_s: float, reason: str) -> None:
    cfg = Config(data_dir=tmp_path / "data", system_messages=layout,
                 **({} if ttl_s is None else {"cache_ttl_s": ttl_s}))
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        # a week and a day back, so even the week's gap is in the past
        last = _history(mem, time.time() - 8 * DAY_S)
        first = mem.context("c", "Which platform was the train?", budget=BUDGET)
        assert first.plan.cache.new_epoch  # the conversation's first call
        mem.append("c", {"role": "assistant", "content": "Platform 5, I think.", "created_at": last + 1})
        mem.append("c", {"role": "user", "content": "And when does it leave?", "created_at": last + gap_s})
        second = mem.context("c", "And when does it leave?", budget=BUDGET)
        a, b = first.plan.cache, second.plan.cache
        assert b.new_epoch is bool(reason), b.reason
        if reason:
            assert b.reason == reason
            assert (b.epoch, b.epoch_calls) == (a.epoch + 1, 1)
        else:
            assert (b.epoch, b.epoch_calls) == (a.epoch, a.epoch_calls + 1) and "expired" not in b.reason
            if layout == "before_latest":
                assert "are kept as the previous call sent them" in b.reason, b.reason

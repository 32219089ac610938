"""A turn stamped ahead of the sweeper's clock by a little (two hosts' clocks under a
second apart, or `now` read once before a frontier scan during which turns are
appended) counts as stamped now, 0 s waited: within `FUTURE_STAMP_TOLERANCE_S`
(tiers.warm) it is not "unknown". Counted unknown, the view's age stood in, and a
current view built ten minutes ago read "600 s behind, over budget": the sweep refreshed
it early, an LLM call each (review r_c4). Beyond the tolerance the stamp is unknown and
the upper bound stands in, as before (tests/test_staleness_future_stamp.py).

Real SQLite files; the maintainer's clock is set, not slept on."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tiermem import Memory
from tiermem.config import Config
from tiermem.tiers.warm import FUTURE_STAMP_TOLERANCE_S, SummaryView, staleness

MAX_SECONDS_BEHIND = 300.0  # seconds: the view's seconds budget
BUILT_AGO_S = 600.0  # seconds: how long before the late turn the views were built
EARLIER = [f"I like item {j}." for j in range(4)]
LATE = "One more thing: I like tea."


@pytest.mark.parametrize(("ahead_s", "seconds", "over"), [
    (0.0, 0.0, False),  # stamped at now: 0 s waited
    (0.5, 0.0, False),  # half a second ahead (clock skew): counts as now
    (FUTURE_STAMP_TOLERANCE_S, 0.0, False),  # at the tolerance: still counts as now
    (FUTURE_STAMP_TOLERANCE_S + 1, BUILT_AGO_S, True),  # beyond it: unknown, the view's age
])
def test_the_rule(ahead_s: float, seconds: float, over: bool) -> None:
    now = 1_000_000.0
    view = SummaryView(conversation_id="c", kind="rolling", key="", version=1, start_position=0,
                       end_position=3, sentences=(), tokens=0, summarizer="t", created_at=now - BUILT_AGO_S)
    st = staleness(view, last_position=4, last_message_at=now + ahead_s, max_turns=1000,
                   max_seconds=MAX_SECONDS_BEHIND, now=now, first_uncovered_at=now + ahead_s)
    assert st.turns_behind == 1
    assert st.seconds_behind == pytest.approx(seconds)
    assert st.over_budget is over


@pytest.mark.parametrize("session", [
    None,  # the rolling and constraint views
    "s1",  # a session's view
])
@pytest.mark.parametrize(("skew_s", "picked"), [
    (0.0, False),  # control: the sweeper's clock agrees with the appender's
    (-0.5, False),  # the sweeper's clock half a second behind: the turn counts as stamped now
    (-30.0, False),  # half a minute behind: still within the tolerance
    (-(FUTURE_STAMP_TOLERANCE_S + 60), True),  # two minutes behind: unknown, the views' age (600 s) stands in
])
def test_a_stamp_a_little_ahead_counts_as_now(tmp_path: Path, session: str | None, skew_s: float,
                                              picked: bool) -> None:
    mem = Memory(Config(data_dir=tmp_path / "data", warm_max_seconds_behind=MAX_SECONDS_BEHIND,
                        warm_max_turns_behind=20), hot=False, background_indexing=False)
    try:
        mem.append_many("c", [{"role": "user", "content": t} for t in EARLIER], session_id=session)
        built = time.time() - BUILT_AGO_S
        mem.views.clock = lambda: built
        mem.consolidate("c")
        now = time.time()
        mem.append("c", {"role": "user", "content": LATE}, session_id=session, created_at=now)
        mem.views.clock = lambda: now + skew_s
        key = mem._key("c", None)[2]
        kinds = [("session", session)] if session else [("rolling", ""), ("constraints", "")]
        swept = dict(mem.views.stale_views_detailed(50))
        for kind, view_key in kinds:
            st = mem.views.staleness(key, kind, view_key)
            assert st.turns_behind == 1
            assert st.over_budget is picked
            assert ((key, kind, view_key) in swept) is picked
            if picked:
                assert swept[(key, kind, view_key)].seconds_behind > MAX_SECONDS_BEHIND
            else:
                assert st.seconds_behind == 0.0
    finally:
        mem.views.clock = time.time
        mem.close()

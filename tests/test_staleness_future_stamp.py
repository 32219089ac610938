"""A turn stamped ahead of the server's clock (a client's clock fast: append's
`created_at` taken as given) does not turn off a view's seconds budget: how long it
waited is unknown, so the upper bound stands in, as when that time is not known at all
(tiers.warm `staleness`: now - the view's created_at; for a view with no version yet,
now - the conversation's creation). Taken as is, now - stamp was negative, clamped to 0:
the view read "0s behind", never over budget, and the sweep never picked it.

Real SQLite files; the maintainer's clock is moved ten minutes on (no sleeping)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tiermem import Memory
from tiermem.config import Config

MAX_SECONDS_BEHIND = 300.0  # seconds: the view's seconds budget
LATER_S = 600.0  # seconds the clock moves on after the late turn: twice the budget
HOUR_S = 3600.0
DAY_S = 86400.0
EARLIER = [f"Sentence {i} about the trip to Rome." for i in range(4)]
LATE = "My flight is now on Friday, not Thursday."


def _open(tmp_path: Path) -> Memory:
    # a turns budget far above the few turns behind: only the seconds budget can trip
    return Memory(Config(data_dir=tmp_path / "data", warm_max_seconds_behind=MAX_SECONDS_BEHIND,
                         warm_max_turns_behind=1000), hot=False, background_indexing=False)


# (kind, session of the earlier turns, session of the late turn, consolidate before it)
CASES = [
    ("rolling", None, None, True),  # the rolling view exists, the late turn after it
    ("rolling", None, None, False),  # no rolling view yet: every turn, the first too, is late
    ("session", "s1", "s1", True),  # the session's view exists, the late turn after it
    ("session", "s1", "s2", True),  # a new session whose first turn is the late one: no view yet
]


@pytest.mark.parametrize("ahead_s", [
    0.0,  # control: stamped by the server's clock
    HOUR_S,  # a client clock an hour fast
    DAY_S,  # a wrong date
])
@pytest.mark.parametrize(("kind", "earlier_session", "late_session", "consolidate"), CASES)
def test_a_turn_stamped_ahead_still_counts_its_wait(tmp_path: Path, ahead_s: float, kind: str,
                                                     earlier_session: str | None, late_session: str | None,
                                                     consolidate: bool) -> None:
    mem = _open(tmp_path)
    try:
        late = time.time() + ahead_s
        for text in EARLIER:
            # with no view to come, the earlier turns are late too (the first uncovered one)
            mem.append("c", {"role": "user", "content": text}, session_id=earlier_session,
                       created_at=None if consolidate else late)
        if consolidate:
            mem.consolidate("c")
        mem.append("c", {"role": "user", "content": LATE}, session_id=late_session, created_at=late)
        key = mem._key("c", None)[2]
        view_key = late_session or ""
        mem.views.clock = lambda: time.time() + LATER_S
        st = mem.views.staleness(key, kind, view_key)
        assert st.turns_behind >= 1
        assert st.seconds_behind > MAX_SECONDS_BEHIND and st.over_budget
        swept = dict(mem.views.stale_views_detailed(50))
        assert (key, kind, view_key) in swept  # the sweep picks it, and says how long
        assert swept[(key, kind, view_key)].seconds_behind > MAX_SECONDS_BEHIND
    finally:
        mem.views.clock = time.time
        mem.close()

"""A refresh whose new version still shows a corrected line as current is reported as a
failed refresh, not counted as a new version.

s1 says "My flight leaves Monday at 9am. My hotel is the Hilton Riverside."; s2 corrects
the hotel, and the catch-up decides the supersession, so s1's session view is outdated.
The LLM restates the old hotel verbatim whenever it summarizes s1 alone, so the refresh
stores a version that still shows it as current. `_settle` recorded that as a failed
refresh (STILL_OUTDATED_ERROR, a view_failures row, backed off), yet the refresh set no
failure for `take_failure`, so `sweep_refresh` answered Swept.NEW_VERSION: a sweep
counted the view as refreshed (`Memory.consolidate()`'s count, `complete` True, the
scheduler's refreshed_total, nothing in last_summarizer_failures: `tiermem consolidate`
exited 0) and `refresh_all` did not list it. Now it is a failure in each of those.

Real stores (a SQLite file; PostgreSQL through tests/pg_server.py), the real classifier
and supersession, a real local chat-completions endpoint (tests/llm_endpoint.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from llm_endpoint import serving
from view_llm_helpers import (
    CONV,
    CORRECTION,
    ENGINES,
    QUERY,
    S1,
    cold_settings,
    hilton_current,
    open_memory,
    restates,
)

from tiermem.consolidation.views import STILL_OUTDATED_ERROR

S1_VIEW = ("session", "s1")


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> dict[str, Any]:
    return cold_settings(request)


@pytest.mark.parametrize("trigger", [
    "sweep",  # Memory.consolidate(): s1 counted as refreshed, complete True, no failure before
    "named",  # Memory.consolidate(conv) (refresh_all): s1 counted, not in failures before
    "scheduler",  # a scheduler run: s1 in refreshed_total, not in last_summarizer_failures before
])
def test_still_outdated_refresh_is_a_failure(engine: dict[str, Any], tmp_path: Path, trigger: str) -> None:
    for endpoint in serving(restates):
        with open_memory(engine, tmp_path, endpoint) as mem:
            for i, text in enumerate(S1):
                mem.append(CONV, {"role": ("user", "assistant")[i % 2], "content": text}, session_id="s1")
            mem.consolidate(CONV)
            conv = mem._key(CONV, None)[2]
            built = mem.warm.latest(conv, *S1_VIEW)
            assert built is not None
            mem.append(CONV, {"role": "user", "content": CORRECTION}, session_id="s2")
            mem.context(CONV, QUERY)  # its catch-up decides the supersession
            assert (conv, *S1_VIEW) in mem.views.stale_views(10)  # outdated: the sweeps pick it first

            if trigger == "scheduler":
                sched = mem.make_scheduler()
                refreshed = sched.run_once()
                failed = [(f.conversation, f.kind, f.key, f.error) for f in sched.last_summarizer_failures]
                assert sched.last_failures == ()
                # every view the run picked got a new version except the one still outdated
                assert refreshed == sched.stats.refreshed_total == sched.stats.last_selected - 1
            else:
                done = mem.consolidate() if trigger == "sweep" else mem.consolidate(CONV)
                failed = [(f.conversation, f.kind, f.key, f.error) for f in done.failures]
                assert not done.complete
                # every view the call refreshed counts, except the one still outdated
                assert int(done) == done.picked - 1 >= 1

            # the refresh stored a new version, still showing the old hotel: a failed
            # refresh (recorded and backed off as before), reported as one
            after = mem.warm.latest(conv, *S1_VIEW)
            assert after is not None and after.version > built.version
            assert hilton_current(mem, conv, *S1_VIEW)
            assert [(c, k, key) for c, k, key, _e in failed] == [(conv, *S1_VIEW)]
            assert STILL_OUTDATED_ERROR in str(failed[0][3])
            failure = mem.cold.view_failure(conv, *S1_VIEW)
            assert failure is not None and failure[3] == 1
            assert (conv, *S1_VIEW) in mem.views.held_back()

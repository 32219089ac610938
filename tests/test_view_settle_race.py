"""A correction decided while an LLM refresh runs is not counted as a failed refresh.

s1 says "My flight leaves Monday at 9am. My hotel is the Hilton Riverside."; while the
summarizer's (seconds-long) call for a refresh is in flight, a second Memory on the same
store appends s2's correction of the hotel and decides it (its catch-up). The view the
refresh writes still rewords the old hotel: the summarizer got the turn before the
correction existed. 87648e2's `_settle` judged the written view against the store at
that moment, so it recorded STILL_OUTDATED_ERROR (a view_failures row, failing() > 0, a
WARNING) and held the view back 30 s+, though it was outdated through no fault of the
summarizer. Now `_settle` counts only what the summarizer was given (the log's pin
version and hidden positions read before the sources): nothing is recorded, and the
next sweep refreshes the view. A summarizer that restates the old value with no
correction in flight is still recorded and backed off (tests/test_view_outdated_llm_once.py).

Real stores (a SQLite file; PostgreSQL through tests/pg_server.py), the real classifier
and supersession, a real local chat-completions endpoint (tests/llm_endpoint.py) whose
handler writes the correction through the second Memory during the call."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from llm_endpoint import LLMEndpoint, Reply, Request, completion, serving
from view_llm_helpers import CONV, CORRECTION, ENGINES, QUERY, S1, cold_settings, hilton_current, reworded
from view_llm_helpers import open_memory as open_llm_memory

from tiermem import Memory
from tiermem.consolidation.views import STILL_OUTDATED_ERROR

S1_MORE = ("Also book me a taxi to the airport.", "Taxi booked for Monday.")
VIEWS = [("rolling", ""), ("session", "s1")]  # the LLM-summarized views of the conversation


class CorrectsDuringCall:
    """A reply that rewords; the first request after `arm()` first writes and decides the
    correction through `other` (a second Memory on the same store), as another process
    would while this one waits on its LLM."""

    def __init__(self) -> None:
        self.other: Memory | None = None
        self.armed = False
        self.injected = False

    def arm(self, other: Memory) -> None:
        self.other, self.armed = other, True

    def __call__(self, req: Request) -> Reply:
        if self.armed and self.other is not None:
            self.armed = False
            self.other.append(CONV, {"role": "user", "content": CORRECTION}, session_id="s2")
            self.other.context(CONV, QUERY)  # its catch-up decides the supersession
            self.injected = True
        return completion(reworded(req.prompt))


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> dict[str, Any]:
    return cold_settings(request)


def open_memory(engine: dict[str, Any], tmp_path: Path, endpoint: LLMEndpoint) -> Memory:
    # one turn behind is over budget, so the sweep picks s1 for its new turns
    return open_llm_memory(engine, tmp_path, endpoint, warm_max_turns_behind=1)


@pytest.mark.parametrize("trigger", [
    "named",  # Memory.views.refresh of s1 (as consolidate(conv)): recorded as failed, backed off 30 s before
    "sweep",  # a sweep (the scheduler's run) picks the views: the one in flight recorded as failed before
])
def test_correction_during_llm_call_is_no_failure(engine: dict[str, Any], tmp_path: Path, trigger: str,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    reply = CorrectsDuringCall()
    for endpoint in serving(reply):
        with open_memory(engine, tmp_path, endpoint) as mem:
            for i, text in enumerate(S1):
                mem.append(CONV, {"role": ("user", "assistant")[i % 2], "content": text}, session_id="s1")
            mem.consolidate(CONV)
            conv = mem._key(CONV, None)[2]
            assert hilton_current(mem, conv, "session", "s1")
            with open_memory(engine, tmp_path, endpoint) as other:
                for i, text in enumerate(S1_MORE):
                    mem.append(CONV, {"role": ("user", "assistant")[i % 2], "content": text}, session_id="s1")
                reply.arm(other)
                with caplog.at_level(logging.WARNING, logger="tiermem"):
                    if trigger == "named":
                        mem.views.refresh(conv, "session", "s1")
                    else:
                        assert mem.consolidate() >= 1
            assert reply.injected
            # the view written from the input before the correction still rewords the old
            # hotel (in a sweep, the first view asked for: the rolling one, whose request
            # comes first; s1 is refreshed after the correction; a named refresh of s1
            # leaves the rolling view as it was, outdated by the correction as well)
            stuck = [k for k in VIEWS if hilton_current(mem, conv, *k)]
            in_flight = ("session", "s1") if trigger == "named" else ("rolling", "")
            assert in_flight in stuck
            # ... which is no failed refresh: no row, no error, no warning, not held back
            for kind, key in [*VIEWS, ("constraints", "")]:
                assert mem.cold.view_failure(conv, kind, key) is None, (kind, key)
                assert all(e[0] != STILL_OUTDATED_ERROR for e in mem.warm.errors(conv, kind, key)), (kind, key)
            assert mem.views.failing() == (0, None)
            assert mem.views.held_back() == set()
            assert not [r for r in caplog.records if "left a superseded" in r.getMessage()]
            # the next sweep finds it outdated and refreshes it first
            kind, key = in_flight
            assert (conv, kind, key) in mem.views.stale_views(10)
            version = mem.warm.latest(conv, kind, key).version  # type: ignore[union-attr]
            asked = len(endpoint.requests)
            assert mem.consolidate() >= len(stuck)
            assert len(endpoint.requests) > asked
            after = mem.warm.latest(conv, kind, key)
            assert after is not None and after.version > version
            assert not [k for k in VIEWS if hilton_current(mem, conv, *k)]
            assert mem.views.failing() == (0, None)
            # and then nothing is outdated: no sweep asks again
            mem.consolidate(CONV)
            asked = len(endpoint.requests)
            assert mem.consolidate() == 0
            assert len(endpoint.requests) == asked

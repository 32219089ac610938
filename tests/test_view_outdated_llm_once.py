"""A session view with an LLM summarizer is refreshed once after a correction in a later
session, not on every sweep.

s1 says "My flight leaves Monday at 9am. My hotel is the Hilton Riverside."; s2 corrects
the hotel. An LLM rewords the turns, so s1's lines are not found in their turn's text,
and 414785d took such a line as outdated while the correction's position was past the
view's end: a session view's end stays at its own session's last turn, so s1's view was
"outdated" however often it was rebuilt (a summarizer call and a sweep slot every run,
the conversation never marked current) and so was one first built after the correction.
With scheduler_max_views_per_run=1, OUTDATED_SEVERITY (inf) put it first on every run and
the rolling view was never refreshed. Now a line keeps which superseded statements its
turns had when it was written (`Sentence.seen_superseded`), and a refresh that still
leaves a superseded line as current (an LLM that restates the old value) is recorded as
a failure and backed off (consolidation.views `_settle`).

Real stores (a SQLite file; PostgreSQL through tests/pg_server.py), the real classifier
and supersession, a real local chat-completions endpoint (tests/llm_endpoint.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from llm_endpoint import LLMEndpoint, Reply, Request, serving
from view_llm_helpers import (
    CONV,
    CORRECTION,
    ENGINES,
    QUERY,
    S1,
    cold_settings,
    numbers,
    open_memory,
    restates,
    rewords,
)

from tiermem import Memory
from tiermem.consolidation.views import STILL_OUTDATED_ERROR
from tiermem.tiers.warm import SummaryView

SWEEPS_AFTER = 4  # sweeps after the one refresh that must find nothing to do
LATER_TURNS = 4  # s3's turns: the rolling view falls behind by these
SWEEPS_TO_CATCH_UP = 6  # one view per run: s1 at most once, then constraints, rolling, s3


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> dict[str, Any]:
    return cold_settings(request)


@pytest.fixture
def endpoint() -> Iterator[LLMEndpoint]:
    yield from serving(rewords)


def s1(mem: Memory) -> SummaryView:
    view = mem.warm.latest(mem._key(CONV, None)[2], "session", "s1")
    assert view is not None
    return view


def current_text(view: SummaryView) -> str:
    return " ".join(s.text for s in view.sentences if s.status == "current").lower()


def say(mem: Memory, texts: tuple[str, ...], session: str) -> None:
    roles = ("user", "assistant")
    for i, text in enumerate(texts):
        mem.append(CONV, {"role": roles[i % 2], "content": text}, session_id=session)


@pytest.mark.parametrize("first_build", [
    "before-correction",  # s1's view built, then corrected in s2: refreshed once (looped before)
    "after-correction",  # s1's view first built after the correction: never refreshed again (looped before)
])
def test_outdated_view_refreshed_once(engine: dict[str, Any], tmp_path: Path, endpoint: LLMEndpoint,
                                      first_build: str) -> None:
    with open_memory(engine, tmp_path, endpoint) as mem:
        say(mem, S1, "s1")
        if first_build == "before-correction":
            mem.consolidate(CONV)
            assert "hilton riverside" in current_text(s1(mem))
        say(mem, (CORRECTION,), "s2")
        mem.context(CONV, QUERY)  # its catch-up decides the supersession
        if first_build == "before-correction":
            asked = len(endpoint.requests)
            assert mem.consolidate() >= 1  # the sweep refreshes the outdated view
            assert len(endpoint.requests) > asked
        mem.consolidate(CONV)  # every view of the conversation, the rolling one past the correction
        built = s1(mem)
        assert "hilton" not in current_text(built) and "monday at 9am" in current_text(built), built.sentences

        asked = len(endpoint.requests)
        for _ in range(SWEEPS_AFTER):
            assert mem.consolidate() == 0
            mem.consolidate(CONV)
        assert len(endpoint.requests) == asked, [r.prompt for r in endpoint.requests[asked:]]
        assert s1(mem).version == built.version
        assert mem.views.stale_views(10) == []  # and the conversation is current again
        assert mem.views.failing()[0] == 0


@pytest.mark.parametrize("reply", [
    rewords,  # the refresh makes s1 current: picked once (picked on every run before)
    restates,  # the refresh leaves the old hotel as current: recorded, backed off (picked on every run before)
], ids=["rewords", "restates"])
def test_outdated_view_leaves_others_their_turn(engine: dict[str, Any], tmp_path: Path,
                                                 reply: Callable[[Request], Reply]) -> None:
    for endpoint in serving(reply):
        # one view per run, and every view one turn behind over budget
        with open_memory(engine, tmp_path, endpoint, scheduler_max_views_per_run=1,
                         warm_max_turns_behind=1) as mem:
            say(mem, S1, "s1")
            conv = mem._key(CONV, None)[2]
            mem.consolidate(CONV)
            say(mem, (CORRECTION,), "s2")
            mem.context(CONV, QUERY)
            say(mem, tuple(f"New fact {j}: the locker code is {j}{j}{j}." for j in range(LATER_TURNS)), "s3")
            asked = len(endpoint.requests)
            picked: list[tuple[str, str, str]] = []
            for _ in range(SWEEPS_TO_CATCH_UP):
                picked += mem.views.stale_views(1)
                mem.consolidate()
            last = mem.cold.last_position(conv)
            rolling = mem.warm.latest(conv, "rolling")
            assert rolling is not None and rolling.end_position == last, picked
            assert picked.count((conv, "session", "s1")) == 1, picked
            assert (conv, "session", "s3") in picked
            s1_asks = [r for r in endpoint.requests[asked:] if numbers(r) <= {0, 1}]
            assert len(s1_asks) == 1
            failure = mem.cold.view_failure(conv, "session", "s1")
            if reply is restates:
                # recorded as a failed refresh: the sweeps leave it alone for the backoff
                assert failure is not None and failure[3] == 1
                assert (conv, "session", "s1") in mem.views.held_back()
                assert mem.warm.errors(conv, "session", "s1")[0][0] == STILL_OUTDATED_ERROR
            else:
                assert failure is None
                assert "hilton" not in current_text(s1(mem))

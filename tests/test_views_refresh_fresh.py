"""`ViewMaintainer.refresh_all` (what `Memory.consolidate(conv)` runs) refreshes only the
views with turns after their end, and `refresh` of a view that covers the log answers it
without taking the view's lease.

Before: `refresh_all` called `refresh` for every session of the conversation, and
`refresh` claimed the view's lease (a write transaction) before finding nothing new,
then released it (another one): two write transactions per session on every call, 4 s
at 20,000 turns in 954 sessions with nothing new, every other writer of the store
waiting behind each of them. The views answered must stay exactly the same.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tiermem.consolidation import views as views_module
from tiermem.consolidation.summarize import ExtractiveSummarizer
from tiermem.consolidation.views import ViewMaintainer
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter
from tiermem.tiers.warm import SummaryView, WarmStore

T0 = 1_800_000_000.0  # POSIX seconds: the conversation's first turn
SESSIONS = 6
TURNS_PER_SESSION = 4
TARGET_TOKENS = 200
CONV = "c"


def _turn(i: int, session: str) -> Message:
    return Message(role="user" if i % 2 == 0 else "assistant", session_id=session, created_at=T0 + 60 * i,
                   content=f"Turn {i} of {session}: we planned the trip to the lake and booked a cabin.")


def _fill(cold: ColdStore) -> int:
    msgs = [_turn(s * TURNS_PER_SESSION + i, f"s{s}") for s in range(SESSIONS) for i in range(TURNS_PER_SESSION)]
    cold.append_many(CONV, msgs)
    return len(msgs)


def _statements(cold: ColdStore, fn: Callable[[], object]) -> tuple[object, list[str]]:
    """`fn()`'s result and the SQL statements it ran on the store's connection."""
    seen: list[str] = []
    with cold.reading() as conn:
        conn.set_trace_callback(seen.append)
    try:
        out = fn()
    finally:
        with cold.reading() as conn:
            conn.set_trace_callback(None)
    return out, seen


def _claims(statements: list[str]) -> int:
    return sum(1 for s in statements if "INSERT INTO view_claims" in s)


def _writes(statements: list[str]) -> int:
    return sum(1 for s in statements if s.strip().upper().startswith("BEGIN"))


def _key(v: SummaryView) -> tuple[str, str, int, int]:
    return (v.kind, v.key, v.version, v.end_position)


@pytest.mark.parametrize(("appended", "stale_sessions"), [
    # nothing new: no view is refreshed, no lease taken (before: 2 + SESSIONS claims)
    ([], 0),
    # a turn in the last session: rolling, constraints and that session
    ([("s5", 1)], 1),
    # turns in an old session and a new one: those two sessions only
    ([("s1", 2), ("s9", 1)], 2),
])
@pytest.mark.parametrize("page", [
    None,  # the default page: the whole conversation in one read
    5,  # pages of 5 turns: a session's turns span pages, the last page is short
    TURNS_PER_SESSION,  # pages that end exactly where sessions end
])
def test_refresh_all_refreshes_only_views_behind_the_log(
        cold: ColdStore, counter: BpeTokenCounter, appended: list[tuple[str, int]], stale_sessions: int,
        page: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    if page is not None:
        monkeypatch.setattr(views_module, "SESSION_SCAN_PAGE_TURNS", page)
    warm = WarmStore(cold)
    views = ViewMaintainer(cold, warm, ExtractiveSummarizer(counter), counter, target_tokens=TARGET_TOKENS,
                           max_turns_behind=1, max_seconds_behind=1.0, label_grace_s=0)
    n = _fill(cold)
    first = views.refresh_all(CONV)
    assert len(first) == 2 + SESSIONS
    for session, count in appended:
        cold.append_many(CONV, [_turn(n + i, session) for i in range(count)])
        n += count
    out, statements = _statements(cold, lambda: views.refresh_all(CONV))
    assert isinstance(out, list)
    stale = (2 if appended else 0) + stale_sessions
    assert _claims(statements) == stale, statements
    # every view current, in the order refresh_all always answered them: rolling,
    # constraints, then the sessions by id; each the newest stored version
    sessions = sorted({s for s in (f"s{i}" for i in range(SESSIONS))} | {s for s, _ in appended})
    assert [(v.kind, v.key) for v in out] == [("rolling", ""), ("constraints", "")] + [
        ("session", s) for s in sessions]
    for v in out:
        latest = warm.latest(CONV, v.kind, v.key)
        assert latest is not None and _key(latest) == _key(v) and latest.sentences == v.sentences
        assert v.end_position >= max(p for p, sid, _ in warm.turn_times(CONV, -1)
                                     if v.kind != "session" or sid == v.key)
    # the views nobody appended to are the very versions of the first call
    before = {(v.kind, v.key): v for v in first}
    untouched = [v for v in out if v.kind == "session" and v.key not in {s for s, _ in appended}]
    assert [_key(v) for v in untouched] == [_key(before[(v.kind, v.key)]) for v in untouched]


@pytest.mark.parametrize("kind,key", [
    # each kind of view, covering the log: answered with no write transaction
    ("rolling", ""),
    ("constraints", ""),
    ("session", "s0"),  # an old session (the log went on after it)
    ("session", "s5"),  # the last one
])
def test_refresh_of_a_covering_view_takes_no_lease(cold: ColdStore, counter: BpeTokenCounter, kind: str,
                                                   key: str, tmp_path: Path) -> None:
    warm = WarmStore(cold)
    views = ViewMaintainer(cold, warm, ExtractiveSummarizer(counter), counter, target_tokens=TARGET_TOKENS,
                           max_turns_behind=1, max_seconds_behind=1.0, label_grace_s=0)
    _fill(cold)
    current = views.refresh(CONV, kind, key)
    assert current is not None
    again, statements = _statements(cold, lambda: views.refresh(CONV, kind, key))
    assert isinstance(again, SummaryView) and _key(again) == _key(current)
    assert _writes(statements) == 0 and _claims(statements) == 0, statements
    # control: a full refresh still goes through the lease
    _full, statements = _statements(cold, lambda: views.refresh(CONV, kind, key, full=True))
    assert _claims(statements) == 1

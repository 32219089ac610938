"""A call in another zone reads the same told periods whatever the order the turns and the
zones came in: the turn cache derives at load in its own zone and, for a call in another,
derives again every turn whose text names a time (planner.timeline.told's flag), not only
those that resolved to a period in its own zone. Whether what a text names falls inside the
accepted years, or is a day at all, depends on the zone: "built 126 years ago" on New Year's
Day 2026 at 05:00Z is 1900 in UTC but 1899 (refused) in Los Angeles, where it is still 2025;
"on Feb 29th" at 03:00Z on 1 January 2025 is no day of 2025 in UTC but 29 February 2024 in
Los Angeles. On the code before, such a turn loaded before the other zone's first call had
no period there, while one appended after it had (the append path derived every turn in
every kept zone)."""

from __future__ import annotations

import calendar
import math

import pytest

from tiermem.planner.timeline import told, told_span
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.models import Message
from tiermem.tiers.turncache import TurnCache
from tiermem.tiers.zones import zone

LA = "America/Los_Angeles"
TOKYO = "Asia/Tokyo"
UTC = "UTC"
FILLER = "Hello there, nice to meet you."


def utc(*fields: int) -> float:
    """POSIX seconds of a UTC wall time (year, month, day, hour)."""
    return float(calendar.timegm((*fields, *(0,) * (6 - len(fields)))))


CASES = [  # (the cache's zone, the call's zone, text, stored seconds)
    # 1900 in UTC, 1899 in Los Angeles (out of range): no period in the cache's zone (fails before)
    (LA, UTC, "My house was built 126 years ago", utc(2026, 1, 1, 5)),
    # no 29 February in UTC's 2025, one in Los Angeles' 2024 (fails before)
    (UTC, LA, "We got married on Feb 29th", utc(2025, 1, 1, 3)),
    # the calendar's far end: 2201 in Tokyo (out of range), still 2200 in UTC
    (TOKYO, UTC, "I am home today", utc(2200, 12, 31, 20)),
    # ordinary: a period in both zones, another day in each
    (LA, TOKYO, "I went hiking yesterday", utc(2026, 12, 5, 5)),
    # ordinary: no time named, no period anywhere
    (LA, UTC, "The soup was too salty.", utc(2026, 12, 5, 5)),
]


def _span(cache: TurnCache, conv: str, call_zone: str) -> tuple[float, float] | None:
    table = cache.get(conv, call_zone)
    assert table.told_start is not None and table.told_end is not None
    start, end = float(table.told_start[-1]), float(table.told_end[-1])
    return None if math.isnan(start) else (start, end)


@pytest.mark.parametrize(("own", "call", "text", "created"), CASES)
def test_both_load_orders_give_the_other_zones_full_derivation(
        cold: ColdStore, own: str, call: str, text: str, created: float) -> None:
    cold.append("c", Message(role="user", content=FILLER, created_at=created - 60))
    cold.index_pending()
    arrived_after = TurnCache(cold, derive=told, zone=own)
    arrived_after.get("c")
    arrived_after.get("c", call)  # the call's zone is kept before the turn arrives
    cold.append("c", Message(role="user", content=text, created_at=created))
    cold.index_pending()
    loaded_before = TurnCache(cold, derive=told, zone=own)
    loaded_before.get("c")  # the turn is derived in the cache's own zone first
    full = _span(TurnCache(cold, derive=told, zone=call), "c", call)
    assert full == told_span(text, created, zone(call))
    assert _span(loaded_before, "c", call) == full
    assert _span(arrived_after, "c", call) == full


def test_the_bug_cases_differ_between_the_zones() -> None:
    """The two cases that failed before are ones whose period exists in one zone only."""
    for own, call, text, created in CASES[:2]:
        assert told_span(text, created, zone(own)) is None
        assert told_span(text, created, zone(call)) is not None


@pytest.mark.parametrize("text", [
    "My house was built 126 years ago",  # resolved in one zone, refused in another
    "We got married on Feb 29th",  # a day in one zone's year only
    "I am home today",
    "We've lived here since 2019",  # the present perfect's start
    "I just moved to a new flat",  # a recency word
    "see you next Tues",  # an abbreviated weekday
    "The soup was too salty.",  # no time: the flag is off
])
@pytest.mark.parametrize("created", [utc(2026, 1, 1, 5), utc(2025, 1, 1, 3), utc(2200, 12, 31, 20)])
def test_the_flag_is_the_same_in_every_zone_and_set_wherever_a_period_is(text: str, created: float) -> None:
    results = [told(text, created, zone(name)) for name in (UTC, LA, TOKYO, "Pacific/Kiritimati", "Etc/GMT+12")]
    assert len({tells for _span, tells in results}) == 1
    assert all(tells for span, tells in results if span is not None)


def test_appended_turns_that_name_no_time_are_derived_in_the_own_zone_only(cold: ColdStore) -> None:
    """Before: every appended turn was derived once more in each kept zone (up to 8 more)."""
    calls: list[str] = []

    def counting(text: str | None, created: float, tz: object) -> tuple[tuple[float, float] | None, bool]:
        calls.append(str(tz))
        return told(text, created, tz)  # type: ignore[arg-type]

    cold.append("c", Message(role="user", content=FILLER, created_at=utc(2026, 12, 5)))
    cold.index_pending()
    cache = TurnCache(cold, derive=counting, zone=UTC)
    for name in (UTC, LA, TOKYO):
        cache.get("c", name)
    calls.clear()
    cold.append_many("c", [Message(role="user", content=f"{FILLER} {i}", created_at=utc(2026, 12, 5, 1))
                           for i in range(5)] + [Message(role="user", content="I went hiking yesterday",
                                                         created_at=utc(2026, 12, 5, 2))])
    cold.index_pending()
    cache.get("c", LA)
    assert len(calls) == 5 + 3  # the undated five once; the dated one in all three zones

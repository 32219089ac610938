"""tiers.zones: the one home of (POSIX seconds, zone) -> local calendar day and shown time.

In UTC every answer is the arithmetic tiermem did before zones existed (the default must
not move a byte); in any other zone a day runs from local midnight to local midnight, 23 or
25 hours long across a DST change, and a shown time carries its UTC offset.
"""

from __future__ import annotations

import calendar
from datetime import date

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tiermem.planner.dates import query_windows
from tiermem.tiers.errors import ValidationError
from tiermem.tiers.zones import (
    DAY_S,
    UTC,
    day_start,
    local_day,
    optional_timezone,
    shown_day,
    shown_time,
    zone,
)

HOUR_S = 3600.0
EPOCH_ORD = date(1970, 1, 1).toordinal()


def utc(*fields: int) -> float:
    """POSIX seconds of a UTC wall time (year, month, day, hour, minute)."""
    return float(calendar.timegm((*fields, *(0,) * (6 - len(fields)))))


@pytest.mark.parametrize(("ts", "name", "day"), [
    # 21:00 Friday 4 Dec 2026 in Los Angeles (PST, -08:00) is 05:00 Saturday in UTC
    (utc(2026, 12, 5, 5), "America/Los_Angeles", date(2026, 12, 4)),
    (utc(2026, 12, 5, 5), "UTC", date(2026, 12, 5)),
    # 08:00 Monday in Tokyo (+09:00) is 23:00 Sunday in UTC
    (utc(2026, 12, 6, 23), "Asia/Tokyo", date(2026, 12, 7)),
    # a half-hour zone: 23:59 UTC is 05:29 the next day in Kolkata (+05:30)
    (utc(2026, 12, 6, 23, 59), "Asia/Kolkata", date(2026, 12, 7)),
    # the last instant of a local day: 23:59 PDT on Saturday 31 Oct is 06:59 UTC on 1 Nov
    (utc(2026, 11, 1, 6, 59), "America/Los_Angeles", date(2026, 10, 31)),
])
def test_local_day(ts: float, name: str, day: date) -> None:
    assert local_day(ts, zone(name)) == day.toordinal()


@pytest.mark.parametrize(("day", "name", "hours"), [
    # an ordinary day in Los Angeles: 24 hours, from 08:00 UTC
    (date(2026, 12, 3), "America/Los_Angeles", 24),
    # DST ends on Sunday 1 Nov 2026 (02:00 PDT -> 01:00 PST): that day is 25 hours long
    (date(2026, 11, 1), "America/Los_Angeles", 25),
    # DST starts on Sunday 8 Mar 2026 (02:00 PST -> 03:00 PDT): 23 hours
    (date(2026, 3, 8), "America/Los_Angeles", 23),
    # Berlin's autumn change, Sunday 25 Oct 2026: 25 hours
    (date(2026, 10, 25), "Europe/Berlin", 25),
    # UTC days are always 24 hours
    (date(2026, 11, 1), "UTC", 24),
])
def test_a_local_day_runs_midnight_to_midnight_whatever_its_length(day: date, name: str, hours: int) -> None:
    tz = zone(name)
    start, end = day_start(day.toordinal(), tz), day_start(day.toordinal() + 1, tz)
    assert end - start == hours * HOUR_S
    # the day's first and last second are that day, the next second is the next day
    assert local_day(start, tz) == day.toordinal()
    assert local_day(end - 1, tz) == day.toordinal()
    assert local_day(end, tz) == day.toordinal() + 1


@pytest.mark.parametrize(("ts", "name", "time", "day"), [
    # UTC: as before zones existed, no zone shown
    (utc(2026, 12, 5, 5), "UTC", "05 Dec 2026 05:00", "05 Dec 2026"),
    # elsewhere the local clock and its offset, so the model reads the user's time
    (utc(2026, 12, 5, 5), "America/Los_Angeles", "04 Dec 2026 21:00 -08:00", "04 Dec 2026 -08:00"),
    # summer time: the offset shown is the one in force then
    (utc(2026, 7, 5, 5), "America/Los_Angeles", "04 Jul 2026 22:00 -07:00", "04 Jul 2026 -07:00"),
    (utc(2026, 12, 6, 23, 59), "Asia/Kolkata", "07 Dec 2026 05:29 +05:30", "07 Dec 2026 +05:30"),
    # an IANA name for UTC other than "UTC" shows its (zero) offset: it is not the default
    (utc(2026, 12, 5, 5), "Etc/UTC", "05 Dec 2026 05:00 +00:00", "05 Dec 2026 +00:00"),
])
def test_shown_times_carry_the_offset_unless_utc(ts: float, name: str, time: str, day: str) -> None:
    assert shown_time(ts, zone(name)) == time
    assert shown_day(ts, zone(name)) == day


def test_a_time_no_calendar_can_show_is_none() -> None:
    assert shown_time(1e20, zone("America/Los_Angeles")) is None
    assert shown_day(float("nan"), UTC) is None


@given(st.floats(min_value=utc(1900, 1, 1), max_value=utc(2200, 12, 31), allow_nan=False))
def test_utc_is_the_arithmetic_of_before(ts: float) -> None:
    # the formulas planner.dates and planner.timeline used before zones: the default must
    # give the same days and midnights to the bit (LoCoMo figures, cached prefixes)
    day = EPOCH_ORD + int(ts // DAY_S)
    assert local_day(ts, UTC) == day
    assert day_start(day, UTC) == (day - EPOCH_ORD) * DAY_S


def test_query_windows_are_the_zones_days() -> None:
    # "yesterday" asked at 21:30 on Friday 4 Dec in Los Angeles is Thursday 3 Dec there:
    # from its local midnight (08:00 UTC) to the next
    asked = utc(2026, 12, 5, 5, 30)
    (w,) = query_windows("what did I do yesterday?", asked, zone=zone("America/Los_Angeles"))
    assert (w.start, w.end) == (utc(2026, 12, 3, 8), utc(2026, 12, 4, 8))
    # in UTC the same instant is Saturday, so yesterday is Friday 4 Dec UTC, as before
    (w,) = query_windows("what did I do yesterday?", asked)
    assert (w.start, w.end) == (utc(2026, 12, 4), utc(2026, 12, 5))


@pytest.mark.parametrize(("name", "says"), [
    ("Mars/Olympus_Mons", "not a known IANA time zone"),  # no such zone
    ("america/los angeles", "not a known IANA time zone"),  # a misspelling is not guessed at
    ("../../etc/passwd", "not a known IANA time zone"),  # a path, not a zone key
    ("", "1 to 64 characters"),  # empty
    ("Europe/" + "x" * 80, "1 to 64 characters"),  # past MAX_ZONE_NAME_CHARS
    ("-08:00", "not a known IANA time zone"),  # an offset is no zone name (it has no DST rules)
])
def test_an_unknown_zone_is_refused_naming_it(name: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        zone(name)


@pytest.mark.parametrize(("value", "expected"), [
    (None, None),  # a call that names no zone: the configured one applies
    ("UTC", "UTC"),
    ("America/Los_Angeles", "America/Los_Angeles"),
])
def test_optional_timezone_passes_a_zone_or_none(value: object, expected: str | None) -> None:
    assert optional_timezone(value) == expected


@pytest.mark.parametrize(("value", "says"), [
    ("", "1 to 64 characters"),  # empty is no "unset": refused, as check_timezone refuses it
    ("Mars/Olympus_Mons", "not a known IANA time zone"),
    (8, r"a string\), got int"),  # an offset in hours is no zone
])
def test_optional_timezone_refuses_what_check_timezone_refuses(value: object, says: str) -> None:
    with pytest.raises(ValidationError, match=says) as e:
        optional_timezone(value, "tz")
    assert e.value.field == "tz"

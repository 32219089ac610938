"""The last year tiermem reads days of (MAX_YEAR, 2200) is read in what turns tell of, as in
what queries name.

Invariants:
- planner.dates reads the years MIN_YEAR..MAX_YEAR, both included, and planner.timeline's
  own phrases (a month without a year, a day of a month, "next month", "next year") the
  same years: a turn sent in 2200 that says "in February" tells of February 2200, as the
  query "in February" asked then names it. Before, timeline stopped one year short (2199),
  so such a turn told of nothing while a query named the period.
- A period past MAX_YEAR is still none ("next month" in December 2200).
"""

from __future__ import annotations

import datetime as dt

import pytest

from tiermem.planner.dates import query_windows
from tiermem.planner.timeline import told_span
from tiermem.tiers.zones import MAX_YEAR, zone


def _ts(iso: str, tz: str = "UTC") -> float:
    return dt.datetime.fromisoformat(iso).replace(tzinfo=zone(tz)).timestamp()


# (turn text, sent at (local ISO), zone, the first local day it tells of, or None)
CASES = [
    # a month without a year, said in MAX_YEAR: before, None
    ("We went skiing in February.", "2200-03-10T12:00", "UTC", "2200-02-01"),
    # a day of a month without a year: before, None
    ("My exam was on May 3rd.", "2200-06-01T12:00", "UTC", "2200-05-03"),
    # "next month" inside MAX_YEAR: before, None
    ("We fly out next month.", "2200-06-10T12:00", "UTC", "2200-07-01"),
    # "next year" said in the year before: before, None
    ("We move abroad next year.", "2199-06-01T12:00", "UTC", "2200-01-01"),
    # a zone whose offset is not whole hours, late in MAX_YEAR's last month: its November
    ("I moved house in November.", "2200-12-31T23:30", "Asia/Kathmandu", "2200-11-01"),
    # past MAX_YEAR: none, as before
    ("We fly out next month.", "2200-12-10T12:00", "UTC", None),
    ("We move abroad next year.", "2200-06-01T12:00", "UTC", None),
]


@pytest.mark.parametrize(("text", "sent", "tz", "first_day"), CASES)
def test_turns_of_the_last_year_tell_of_its_days(text: str, sent: str, tz: str, first_day: str | None) -> None:
    span = told_span(text, _ts(sent, tz), zone(tz))
    if first_day is None:
        assert span is None
    else:
        assert span is not None
        assert span[0] == _ts(f"{first_day}T00:00", tz)


def test_a_query_and_a_turn_of_the_last_year_name_the_same_month() -> None:
    # the turn tells of the month the question asks about, in the last year read
    sent = _ts(f"{MAX_YEAR}-03-10T12:00")
    (window,) = query_windows("What did we do in February?", sent)
    assert told_span("We went skiing in February.", sent) == (window.start, window.end)

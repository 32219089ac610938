"""Query time windows: a table per format, invalid dates, false positives, relative phrases
against a fixed `now`, and a property that no string makes the extractor raise."""

from __future__ import annotations

import calendar
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tiermem.planner import dates
from tiermem.planner.dates import DAY_S, TimeWindow, query_windows

# Wednesday 15 May 2024, 12:00 UTC: mid-week and mid-month, so "this"/"last" periods differ.
NOW = float(calendar.timegm((2024, 5, 15, 12, 0, 0)))


def days(query: str, now: float = NOW) -> list[tuple[str, str]]:
    """Windows as (first day, day after the last) ISO dates, which read better than seconds."""
    return [(_iso(w.start), _iso(w.end)) for w in query_windows(query, now)]


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).date().isoformat()


@pytest.mark.parametrize(("query", "expected"), [
    # day month year, with ordinal, "of", comma, abbreviation
    ("what did I do on 13 October 2023?", [("2023-10-13", "2023-10-14")]),
    ("on the 13th of Oct, 2023", [("2023-10-13", "2023-10-14")]),
    # month day, year
    ("October 13, 2023", [("2023-10-13", "2023-10-14")]),
    ("oct 13 2023", [("2023-10-13", "2023-10-14")]),
    ("Sept 1st, 2023", [("2023-09-01", "2023-09-02")]),
    # ISO, also with a time after it, and with slashes
    ("2023-10-13", [("2023-10-13", "2023-10-14")]),
    ("at 2023-10-13T09:30:00Z", [("2023-10-13", "2023-10-14")]),
    ("2023/1/5", [("2023-01-05", "2023-01-06")]),
    # leap day exists in 2024
    ("29 Feb 2024", [("2024-02-29", "2024-03-01")]),
])
def test_absolute_days(query: str, expected: list[tuple[str, str]]) -> None:
    assert days(query) == expected


@pytest.mark.parametrize(("query", "expected"), [
    ("when did we talk in May 2023?", [("2023-05-01", "2023-06-01")]),
    # a month without a year: the latest up to today's month, "last" the one before it
    ("When did Jo go camping in March?", [("2024-03-01", "2024-04-01")]),
    ("what did we discuss in early December?", [("2023-12-01", "2024-01-01")]),  # not the coming one
    ("what happened in May?", [("2024-05-01", "2024-06-01")]),  # today's month
    ("what happened last May?", [("2023-05-01", "2023-06-01")]),  # before today's month
    ("this may help, in march order", []),  # "may" and "march" count only as "May", "March"
    ("ever since August", []),  # open-ended
    ("Oct, 2023", [("2023-10-01", "2023-11-01")]),
    ("in December of 2023", [("2023-12-01", "2024-01-01")]),
    # a full date claims its month name: one window, not two
    ("13 October 2023", [("2023-10-13", "2023-10-14")]),
    # a month and a day of it: both, sorted by start
    ("3 Oct 2023 or was it October 2023", [("2023-10-01", "2023-11-01"), ("2023-10-03", "2023-10-04")]),
])
def test_months(query: str, expected: list[tuple[str, str]]) -> None:
    assert days(query) == expected


@pytest.mark.parametrize(("query", "expected"), [
    ("what happened in 2022?", [("2022-01-01", "2023-01-01")]),
    ("during 2022", [("2022-01-01", "2023-01-01")]),
    ("throughout the year 2021", [("2021-01-01", "2022-01-01")]),
    # no "in"/"during": a number, not a year
    ("I have 2 cats and 2023 was fun", []),
    ("book 2022 tickets", []),
    # a quantity after "in"
    ("answer in 2000 words", []),
    ("respond in 1500 ms", []),
    ("up in 2000%", []),
])
def test_years(query: str, expected: list[tuple[str, str]]) -> None:
    assert days(query) == expected


@pytest.mark.parametrize("query", [
    "31 February 2023",  # no such day
    "2023-13-45",  # no such month
    "2023-02-30",
    "in 1899",  # before 1900
    "13 October 2201",  # after 2200
    "Octember 2023",  # not a month
    "what did we do recently?",  # too vague
    "a while ago",
    "in the summer",  # which summer is a guess
    "this summer",  # 15 May is not in one: the coming one or the last is a guess
    "the last fall I had",  # a noun after "the", not a time relative to today
    "a few times ago",  # not a unit of time
    "at Christmas",  # the last one or the coming one is a guess
    "I got it back two weeks later",  # "back" not right after the period
    "",
])
def test_not_windows(query: str) -> None:
    assert query_windows(query, NOW) == []


@pytest.mark.parametrize(("query", "expected"), [
    ("what did we say today?", [("2024-05-15", "2024-05-16")]),
    ("Yesterday", [("2024-05-14", "2024-05-15")]),
    ("the day before yesterday", [("2024-05-13", "2024-05-14")]),
    # calendar weeks run Monday to Monday
    ("this week", [("2024-05-13", "2024-05-20")]),
    ("what happened last week?", [("2024-05-06", "2024-05-13")]),
    ("a week ago", [("2024-05-06", "2024-05-13")]),
    ("two weeks ago", [("2024-04-29", "2024-05-06")]),
    # rolling: the 7 days ending today
    ("over the past week", [("2024-05-09", "2024-05-16")]),
    ("in the last 3 days", [("2024-05-13", "2024-05-16")]),
    ("this month", [("2024-05-01", "2024-06-01")]),
    ("last month", [("2024-04-01", "2024-05-01")]),
    ("3 months ago", [("2024-02-01", "2024-03-01")]),
    ("this year", [("2024-01-01", "2025-01-01")]),
    ("LAST YEAR", [("2023-01-01", "2024-01-01")]),
    ("5 days ago", [("2024-05-10", "2024-05-11")]),
    ("one day ago", [("2024-05-14", "2024-05-15")]),
    # 2 to 5 days back, both included
    ("a few days ago", [("2024-05-10", "2024-05-14")]),
    # vague counts of larger units: whole calendar weeks, months, years, 2..5 back ("couple": 2..3)
    ("a few weeks ago", [("2024-04-08", "2024-05-06")]),
    ("several months ago", [("2023-12-01", "2024-04-01")]),
    ("a couple of weeks ago", [("2024-04-22", "2024-05-06")]),
    ("couple days ago", [("2024-05-12", "2024-05-14")]),
    ("a couple years ago", [("2021-01-01", "2023-01-01")]),
    # seasons (northern, meteorological): with a year, the one starting in it
    ("in the summer of 2022", [("2022-06-01", "2022-09-01")]),
    ("fall 2021", [("2021-09-01", "2021-12-01")]),
    ("winter 2023", [("2023-12-01", "2024-03-01")]),  # into the next year
    # "last": the latest that ended before today (15 May: winter 2023/24 has ended)
    ("what did we do last summer?", [("2023-06-01", "2023-09-01")]),
    ("last winter", [("2023-12-01", "2024-03-01")]),
    ("last spring", [("2023-03-01", "2023-06-01")]),  # this spring has not ended yet
    # "this": the one that holds today
    ("this spring", [("2024-03-01", "2024-06-01")]),
    # "back" as "ago"
    ("a month back", [("2024-04-01", "2024-05-01")]),
    ("a few weeks back", [("2024-04-08", "2024-05-06")]),
    # holidays: with a year, that day; "last" / "this past", the latest before today
    ("Christmas Eve 2022", [("2022-12-24", "2022-12-25")]),  # not read as Christmas
    ("NEW YEARS   EVE, 2021", [("2021-12-31", "2022-01-01")]),  # any case, spacing, no apostrophe
    ("Halloween of 2021", [("2021-10-31", "2021-11-01")]),
    ("Thanksgiving 2023", [("2023-11-23", "2023-11-24")]),  # the fourth Thursday of November
    ("what did I cook last Thanksgiving?", [("2023-11-23", "2023-11-24")]),
    ("last Christmas", [("2023-12-25", "2023-12-26")]),
    ("this past Valentine\u2019s Day", [("2024-02-14", "2024-02-15")]),  # a curly apostrophe
    # two phrases naming the same day: one window
    ("yesterday, i.e. 14 May 2024", [("2024-05-14", "2024-05-15")]),
    # too far back for the year range
    ("9999 years ago", []),
])
def test_relative(query: str, expected: list[tuple[str, str]]) -> None:
    assert days(query) == expected


def test_window_keeps_its_words() -> None:
    assert query_windows("what did I do on 13 October 2023 and last week?", NOW) == [
        TimeWindow(float(calendar.timegm((2023, 10, 13, 0, 0, 0))),
                   float(calendar.timegm((2023, 10, 14, 0, 0, 0))), "13 October 2023"),
        TimeWindow(NOW - 9.5 * DAY_S, NOW - 2.5 * DAY_S, "last week"),
    ]


@pytest.mark.parametrize("now", [float("nan"), float("inf"), -1e300, 1e300])
def test_unusable_now_gives_no_relative_windows(now: float) -> None:
    assert days("yesterday or 13 October 2023", now) == [("2023-10-13", "2023-10-14")]


_FRAGMENTS = ["13", "October", "Oct.", "2023", "2023-10-13", "in", "during", "last", "past", "week",
              "days", "ago", "a few", "today", ",", "31 February", "9999", "th", "of", "summer", "Fall",
              "the", "this past", "Christmas", "NEW", "Year's", "Eve", "couple", "several", "back", "months",
              "yesterday", "2023/1/5", "SEPT", "this"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=12), st.sampled_from(_FRAGMENTS)), max_size=12),
       st.one_of(st.floats(), st.just(NOW)))
def test_never_raises(parts: list[str], now: float) -> None:
    windows = query_windows(" ".join(parts), now)
    assert all(w.start < w.end and w.start % DAY_S == 0 and w.end % DAY_S == 0 for w in windows)
    assert windows == sorted(windows, key=lambda w: (w.start, w.end))
    assert len({(w.start, w.end) for w in windows}) == len(windows)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(_FRAGMENTS), st.sampled_from([" ", "  ", "\t"])), max_size=14))
def test_rule_words_only_skip_rules_that_cannot_match(parts: list[str]) -> None:
    # each rule runs only when one of its words is in the text: the same windows as with
    # every rule always run, for any mix of the time words the rules look for
    text = " ".join(parts)
    every = [(p, r, None) for p, r, _words in dates._RULES]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dates, "_RULES", every)
        unfiltered = query_windows(text, NOW)
    assert query_windows(text, NOW) == unfiltered


def test_undated_months_can_be_left_to_the_caller() -> None:
    # planner.timeline reads a turn's undated month by its tense ("we're going in June"),
    # so it asks for every window but that one
    assert [w.text for w in query_windows("camping in March, on 2 April 2024", NOW)] == ["in March", "2 April 2024"]
    assert [w.text for w in query_windows("camping in March, on 2 April 2024", NOW, undated_months=False)] == [
        "2 April 2024"]

"""Time windows named in a query ("13 October 2023", "last week", "3 days ago"), offline.

The planner boosts retrieved turns whose time falls inside a window the query names. Matching is
case-insensitive, ASCII-only, stdlib-only, and needs no model.

Recognised (month names full or as 3-letter abbreviations, plus "Sept"; an optional "." after
an abbreviation; optional st/nd/rd/th after a day; optional commas):

- a day: "13 October 2023", "13th of Oct, 2023", "October 13, 2023", "Oct 13 2023",
  "2023-10-13", "2023/10/13" -> that day (a day, here and below, is the calendar day of the
  zone `query_windows` is given: `Config.timezone`, UTC by default; tiers.zones);
- a month: "October 2023", "Oct, 2023", "October of 2023" -> that calendar month;
- a year, only after "in", "during" or "throughout" ("in 2022", "during the year 2022") and not
  followed by a unit ("in 2000 ms", "in 2000 words") -> that calendar year. A bare number such as
  "2022 tickets" or "2023 was fun" is not a date;
- relative to `now` (the time of the conversation's latest message, not the wall clock):
  - "today", "yesterday", "the day before yesterday" -> that day (today: the zone's day
    holding `now`);
  - "this week" / "last week" -> the ISO calendar week (Monday to Monday) holding today / the one
    before; likewise "this month" / "last month" and "this year" / "last year" for calendar
    months and years;
  - "N days ago" (or "back") -> that single day; "N weeks/months/years ago" -> the calendar week, month or
    year N back, so "a week ago" is "last week" and "a month ago" is "last month". N is digits,
    one..twelve, or "a"/"an";
  - "a few days ago" -> 2 to 5 days ago, both ends included; likewise "a few" or "several"
    weeks, months or years ago -> the calendar weeks, months or years 2 to 5 back, and "a
    couple of" (or "a couple", "couple of") days, weeks, months or years ago -> 2 to 3 back;
- a season (meteorological, northern hemisphere: spring March-May, summer June-August,
  autumn or fall September-November, winter December to February): "summer 2022", "the
  summer of 2022" -> that summer ("winter 2022" is December 2022 to February 2023);
  "last summer" -> the latest summer that ended before today; "this summer" -> the summer
  that holds today, and nothing outside one (whether "this winter" in October is the coming
  one or the last is a guess);
- a holiday of a fixed day, or US Thanksgiving (the fourth Thursday of November): Christmas
  (Eve, Day), New Year's (Eve, Day), Halloween, Valentine's Day, Thanksgiving. With a year
  ("Christmas 2022", "Halloween of 2021") -> that day; "last Christmas" or "this past
  Christmas" -> the latest one before today. A bare "at Christmas" is not a window (past or
  coming is a guess);
  - "past week/month/year", "last/past N days/weeks/months/years" -> a rolling span that ends
    with today and starts the day after the same date one unit (or N units) back, so
    "past week" is the 7 days ending today.
- a month without a year after "in", "during" or "last" ("what did we discuss in June?",
  "in early June"; "May" and "March" only capitalised: "in march order" is no month) -> the
  latest such month up to today's ("in June" asked in June is this June; "last June" the one
  before): a memory is asked about what has been, and of several Junes the latest is the
  likeliest meant.

Not windows: vague words ("recently", "a while ago"), a day without a year ("on the 13th",
"on June 3rd"), a month after "since" (open-ended, as "since 2022"), a season without a year
or "last"/"this" ("in the summer"), times of day.

Invariants:
- every window is whole days of the zone: `start` and `end` are its local midnights (in
  UTC, the default, midnights UTC), `start < end`; `end` is exclusive and may lie after `now`
  ("today", "this week" run to the end of the period);
- each piece of text yields at most one window: patterns claim their span in priority order (full
  dates, then months, years, relative phrases), so "13 October 2023" is not also "October 2023";
  an invalid date ("31 February 2023", "2023-13-45") claims its span and yields nothing;
- only years 1900..2200 count, for absolute and relative windows alike; a `now` outside that
  range (or NaN) means no relative windows;
- the result is sorted by (start, end) with duplicate (start, end) pairs dropped, keeping the
  first phrase in the text; `query_windows` never raises on any string.
"""

from __future__ import annotations

import bisect
import calendar
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date

from tiermem.tiers.zones import DAY_S as DAY_S  # re-exported: planner.rank and the tests read it here
from tiermem.tiers.zones import END_ORD, MAX_YEAR, MIN_ORD, MIN_YEAR, UTC, Zone, bounded_day, day_start

WEEK_DAYS = 7
MONTHS_PER_YEAR = 12
FEW_DAYS_NEAREST = 2  # "a few days ago": 2..5 days back, both included
FEW_DAYS_FARTHEST = 5
# "a few"/"several" weeks, months or years ago: that many units back, both included, as days
VAGUE_BACK = {"few": (FEW_DAYS_NEAREST, FEW_DAYS_FARTHEST), "several": (FEW_DAYS_NEAREST, FEW_DAYS_FARTHEST),
              "couple": (2, 3)}
SEASON_MONTHS = 3
THANKSGIVING_MONTH = 11
THANKSGIVING_NTH_THURSDAY = 4
THURSDAY = 3  # date.weekday(): Monday is 0
# holiday -> (month, day) of a fixed-day holiday; None: computed (planner.dates._holiday_day)
HOLIDAYS: dict[str, tuple[int, int] | None] = {
    "christmas eve": (12, 24), "christmas day": (12, 25), "christmas": (12, 25),
    "new year's eve": (12, 31), "new years eve": (12, 31), "new year's day": (1, 1), "new years day": (1, 1),
    "halloween": (10, 31), "valentine's day": (2, 14), "valentines day": (2, 14), "thanksgiving": None,
}
# a season's first month; winter starts in December of its year and runs into the next
SEASON_START_MONTH = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}

Span = tuple[int, int]  # [first day, end day) as proleptic Gregorian ordinals


@dataclass(frozen=True)
class TimeWindow:
    start: float  # POSIX seconds, inclusive: a local midnight of the zone asked in
    end: float  # POSIX seconds, exclusive
    text: str  # the words of the query it came from, e.g. "13 October 2023", "last week"


# Month names that are also common words ("this may help", "in march order"): a month only
# when capitalised, in every rule that reads a month without a year (planner.timeline too).
CAPITALISED_ONLY_MONTHS = ("may", "march")
_MONTHS = {name: i for i, name in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), start=1)}
_MONTH = (r"(?P<m>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
          r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\b\.?")
_DAY = r"(?P<d>[0-9]{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?P<y>[0-9]{4})\b"
_SEP = r"(?:,\s*|\s+)"

_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
            "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}
# Four digits at most: enough for any real query, and keeps the arithmetic small.
_NUM = r"(?P<n>[0-9]{1,4}|" + "|".join(sorted(_NUMBERS, key=len, reverse=True)) + ")"
# "last a days" is not English, so the rolling form takes digits and number words only.
_COUNT = r"(?P<n>[0-9]{1,4}|" + "|".join(sorted(set(_NUMBERS) - {"a", "an"}, key=len, reverse=True)) + ")"
_UNIT = r"(?P<u>day|week|month|year)"
_SEASON = "(?P<s>" + "|".join(SEASON_START_MONTH) + ")"
# longest first, so "Christmas Eve" is not read as "Christmas"; any apostrophe or none
_HOLIDAY = ("(?P<h>" + "|".join(sorted((k.replace("'", "['\u2019]?").replace(" ", r"\s+") for k in HOLIDAYS),
                                      key=len, reverse=True)) + r")\b")
# After "in 2000", these make it a quantity, not a year ("reply in 2000 words").
_QUANTITY_UNITS = (r"ms|millis(?:econds?)?|seconds?|secs?|minutes?|mins?|hours?|hrs?|words?|tokens?"
                   r"|characters?|chars?|lines?|bytes?|[kmgt]b|pages?|steps?|rows?|items?|records?"
                   r"|dollars?|usd|eur(?:os?)?|points?|px|pixels?|calories|kcal|km|miles?|meters?|feet"
                   r"|lbs?|kg|units?|times|people|users")


def _re(pattern: str) -> re.Pattern[str]:
    # ASCII: Unicode case folding would let "ſ" match "s" and "١" match [0-9] via \d.
    return re.compile(pattern, re.IGNORECASE | re.ASCII)


# --- resolvers: match (and today's ordinal, None when `now` is unusable) -> day span ---------


def _date_span(year: int, month: int | None, day: int) -> Span | None:
    if month is None or not MIN_YEAR <= year <= MAX_YEAR:
        return None
    try:
        first = date(year, month, day).toordinal()
    except ValueError:  # 31 February, month 13
        return None
    return first, first + 1


def _month_span(index: int) -> Span | None:
    """Calendar month `index` = year * 12 + (month - 1)."""
    year, m0 = divmod(index, MONTHS_PER_YEAR)
    if not MIN_YEAR <= year <= MAX_YEAR:
        return None
    next_year, next_m0 = divmod(index + 1, MONTHS_PER_YEAR)
    return date(year, m0 + 1, 1).toordinal(), date(next_year, next_m0 + 1, 1).toordinal()


def _year_span(year: int) -> Span | None:
    if not MIN_YEAR <= year <= MAX_YEAR:
        return None
    return date(year, 1, 1).toordinal(), date(year + 1, 1, 1).toordinal()


def _week_span(today: int, weeks_back: int) -> Span:
    monday = today - date.fromordinal(today).weekday() - WEEK_DAYS * weeks_back
    return monday, monday + WEEK_DAYS


def _month_index(day: int) -> int:
    d = date.fromordinal(day)
    return d.year * MONTHS_PER_YEAR + d.month - 1


def _back(today: int, n: int, unit: str) -> int | None:
    """The ordinal of the same date n units before today (day clamped to the month's length)."""
    if unit == "day":
        return today - n
    if unit == "week":
        return today - WEEK_DAYS * n
    d = date.fromordinal(today)
    index = _month_index(today) - n * (MONTHS_PER_YEAR if unit == "year" else 1)
    year, m0 = divmod(index, MONTHS_PER_YEAR)
    if not MIN_YEAR <= year <= MAX_YEAR:
        return None
    return date(year, m0 + 1, min(d.day, calendar.monthrange(year, m0 + 1)[1])).toordinal()


def _count(m: re.Match[str]) -> int:
    n = m["n"].lower()
    return int(n) if n.isdigit() else _NUMBERS[n]


def _day_month_year(m: re.Match[str], today: int | None) -> Span | None:
    return _date_span(int(m["y"]), _MONTHS.get(m["m"][:3].lower()), int(m["d"]))


def _iso(m: re.Match[str], today: int | None) -> Span | None:
    return _date_span(int(m["y"]), int(m["mo"]), int(m["d"]))


def _month_year(m: re.Match[str], today: int | None) -> Span | None:
    month = _MONTHS.get(m["m"][:3].lower())
    return None if month is None else _month_span(int(m["y"]) * MONTHS_PER_YEAR + month - 1)


def _year(m: re.Match[str], today: int | None) -> Span | None:
    return _year_span(int(m["y"]))


def _days_back(first: int, last: int) -> Callable[[re.Match[str], int | None], Span | None]:
    """A fixed run of days: `first`..`last` days before today, both included."""
    def resolve(m: re.Match[str], today: int | None) -> Span | None:
        return None if today is None else (today - last, today - first + 1)
    return resolve


def _units_back(today: int, n: int, unit: str) -> Span | None:
    """The day, calendar week, month or year `n` units before today's."""
    if unit == "day":
        return today - n, today - n + 1
    if unit == "week":
        return _week_span(today, n)
    if unit == "month":
        return _month_span(_month_index(today) - n)
    return _year_span(date.fromordinal(today).year - n)


def _ago(m: re.Match[str], today: int | None) -> Span | None:
    return None if today is None else _units_back(today, _count(m), m["u"].lower())


def _vague_ago(m: re.Match[str], today: int | None) -> Span | None:
    """"a few weeks ago": from the unit VAGUE_BACK's farthest back to its nearest, whole units."""
    if today is None:
        return None
    nearest, farthest = VAGUE_BACK[m["v"].lower()]
    unit = m["u"].lower()
    first, last = _units_back(today, farthest, unit), _units_back(today, nearest, unit)
    return None if first is None or last is None else (first[0], last[1])


def _month_no_year(m: re.Match[str], today: int | None) -> Span | None:
    """"in May": the latest May up to today's month (a memory is asked about the past);
    "last May": the latest one before today's month."""
    month = _MONTHS.get(m["m"][:3].lower())
    if today is None or month is None or (m["m"].lower() in CAPITALISED_ONLY_MONTHS and not m["m"][0].isupper()):
        return None
    current = _month_index(today)
    index = date.fromordinal(today).year * MONTHS_PER_YEAR + month - 1
    if index > current or (index == current and m["which"].lower() == "last"):
        index -= MONTHS_PER_YEAR
    return _month_span(index)


def _season_span(season: str, year: int) -> Span | None:
    """The season that starts in `year` (winter: December `year` to February `year` + 1)."""
    start = _month_span(year * MONTHS_PER_YEAR + SEASON_START_MONTH[season] - 1)
    end = _month_span(year * MONTHS_PER_YEAR + SEASON_START_MONTH[season] - 1 + SEASON_MONTHS - 1)
    return None if start is None or end is None else (start[0], end[1])


def _holiday_day(name: str, year: int) -> int | None:
    """The ordinal of holiday `name` (a HOLIDAYS key, any case, curly apostrophe allowed) in `year`."""
    if not MIN_YEAR <= year <= MAX_YEAR:
        return None
    key = " ".join(name.lower().replace("\u2019", "'").split())
    if key not in HOLIDAYS:
        return None
    fixed = HOLIDAYS[key]
    if fixed is not None:
        return date(year, *fixed).toordinal()
    first = date(year, THANKSGIVING_MONTH, 1)
    return first.toordinal() + (THURSDAY - first.weekday()) % WEEK_DAYS + WEEK_DAYS * (THANKSGIVING_NTH_THURSDAY - 1)


def _holiday_year(m: re.Match[str], today: int | None) -> Span | None:
    day = _holiday_day(m["h"], int(m["y"]))
    return None if day is None else (day, day + 1)


def _holiday_last(m: re.Match[str], today: int | None) -> Span | None:
    if today is None:
        return None
    year = date.fromordinal(today).year
    for y in (year, year - 1):
        day = _holiday_day(m["h"], y)
        if day is not None and day < today:
            return day, day + 1
    return None


def _season_year(m: re.Match[str], today: int | None) -> Span | None:
    return _season_span(m["s"].lower(), int(m["y"]))


def _season_relative(m: re.Match[str], today: int | None) -> Span | None:
    if today is None:
        return None
    season, year = m["s"].lower(), date.fromordinal(today).year
    for y in (year, year - 1, year - 2):  # the latest occurrences first
        span = _season_span(season, y)
        if span is None:
            continue
        if m["which"].lower() == "last" and span[1] <= today:
            return span
        if m["which"].lower() == "this" and span[0] <= today < span[1]:
            return span
    return None


def _calendar(m: re.Match[str], today: int | None) -> Span | None:
    if today is None:
        return None
    back, unit = int(m["which"].lower() == "last"), m["u"].lower()
    if unit == "week":
        return _week_span(today, back)
    if unit == "month":
        return _month_span(_month_index(today) - back)
    return _year_span(date.fromordinal(today).year - back)


def _rolling(m: re.Match[str], today: int | None) -> Span | None:
    if today is None:
        return None
    n = _count(m) if m.groupdict().get("n") else 1
    start = _back(today, n, m["u"].lower())
    return None if start is None else (start + 1, today + 1)


# Words one of which a rule's match must hold (lower case), or None: a rule whose words are
# all absent from the text is not run. Most text names no time, and each rule's scan costs
# more than these substring tests.
_MONTH_WORDS = tuple(_MONTHS)
_SEASON_WORDS = tuple(SEASON_START_MONTH)
_HOLIDAY_WORDS = ("christmas", "year", "halloween", "valentine", "thanksgiving")  # "new  year": any spacing
_Resolver = Callable[[re.Match[str], int | None], Span | None]

# Priority order: an earlier pattern's match claims its text before a later one can.
_RULES: list[tuple[re.Pattern[str], _Resolver, tuple[str, ...] | None]] = [
    (_re(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH}{_SEP}{_YEAR}"), _day_month_year, _MONTH_WORDS),
    (_re(rf"\b{_MONTH}\s+{_DAY}{_SEP}{_YEAR}"), _day_month_year, _MONTH_WORDS),
    # Lookarounds, not \b: "2023-10-13T09:00" has a letter right after the day.
    (_re(r"(?<![0-9])(?P<y>[0-9]{4})(?P<sep>[-/])(?P<mo>[0-9]{1,2})(?P=sep)(?P<d>[0-9]{1,2})(?![0-9])"), _iso,
     ("-", "/")),
    (_re(rf"\b{_MONTH}{_SEP}(?:of\s+)?{_YEAR}"), _month_year, _MONTH_WORDS),
    (_re(rf"\b(?:the\s+)?{_SEASON}\s+(?:of\s+)?{_YEAR}"), _season_year, _SEASON_WORDS),
    (_re(rf"\b{_HOLIDAY}{_SEP}(?:of\s+)?{_YEAR}"), _holiday_year, _HOLIDAY_WORDS),
    (_re(rf"\b(?:in|during|throughout)\s+(?:the\s+year\s+)?{_YEAR}(?![-/.:][0-9])(?!\s*%)"
         rf"(?!\s+(?:{_QUANTITY_UNITS})\b)"), _year, None),
    (_re(r"\b(?:the\s+)?day\s+before\s+yesterday\b"), _days_back(2, 2), ("yesterday",)),
    (_re(r"\byesterday\b"), _days_back(1, 1), ("yesterday",)),
    (_re(r"\btoday\b"), _days_back(0, 0), ("today",)),
    (_re(r"\b(?:a\s+)?(?P<v>few|couple|several)(?:\s+of)?\s+(?P<u>day|week|month|year)s\s+(?:ago|back)\b"), _vague_ago,
     ("ago", "back")),
    (_re(rf"\b{_NUM}\s+{_UNIT}s?\s+(?:ago|back)\b"), _ago, ("ago", "back")),
    (_re(rf"\b(?:the\s+)?(?:last|past)\s+{_COUNT}\s+{_UNIT}s?\b"), _rolling, ("last", "past")),
    # Singular only: "in past years" is vague, "the past year" is not.
    (_re(r"\b(?:the\s+)?past\s+(?P<u>week|month|year)\b"), _rolling, ("past",)),
    (_re(r"\b(?P<which>this|last)\s+(?P<u>week|month|year)\b"), _calendar, ("this", "last")),
    # not after "the": "the last summer we spent there" names no time relative to today
    (_re(rf"(?<!\bthe\s)\b(?P<which>this|last)\s+{_SEASON}\b"), _season_relative, _SEASON_WORDS),
    (_re(rf"\b(?:last|this\s+past)\s+{_HOLIDAY}"), _holiday_last, _HOLIDAY_WORDS),
    # after every dated form has claimed its text: a month named without a year
    (_re(rf"\b(?P<which>in|during|last)\s+(?:early\s+|late\s+|mid-?\s*)?{_MONTH}(?!\s*,?\s*(?:of\s+)?[0-9])"),
     _month_no_year, _MONTH_WORDS),
]


def query_windows(text: str, now: float, *, undated_months: bool = True, zone: Zone = UTC) -> list[TimeWindow]:
    """Time windows named in `text`; `now` (POSIX seconds) anchors relative phrases
    (the planner passes the time of the conversation's latest message, not the wall clock),
    and `zone` says whose calendar the days are (the user's: `Config.timezone`).
    `undated_months=False` leaves a month without a year unread: a question asks about the
    latest one, but a turn may tell of the coming one (planner.timeline reads it by tense)."""
    return _windows(text, now, undated_months=undated_months, zone=zone)[0]


def _windows(text: str, now: float, *, undated_months: bool = True, zone: Zone = UTC) -> tuple[list[TimeWindow], bool]:
    """`query_windows`, and whether any of its phrases occurs in `text` (claimed), whether or
    not it resolves to a window: the same for every zone and every `now` (only what a phrase
    resolves to, and whether that falls inside the accepted years, depends on them)."""
    today = bounded_day(now, zone)
    # Claimed spans never overlap, so sorted by start they are sorted by end too and only the
    # neighbours of an insertion point can overlap a new span (a linear scan is quadratic on
    # a long paste full of "today").
    claimed: list[tuple[int, int]] = []
    hits: list[tuple[int, TimeWindow]] = []
    low = text.lower()
    for pattern, resolve, words in _RULES:
        if resolve is _month_no_year and not undated_months:
            continue
        if words is not None and not any(w in low for w in words):
            continue
        for m in pattern.finditer(text):
            lo, hi = m.span()
            i = bisect.bisect_left(claimed, (lo, hi))
            if (i > 0 and claimed[i - 1][1] > lo) or (i < len(claimed) and claimed[i][0] < hi):
                continue
            claimed.insert(i, (lo, hi))
            try:
                span = resolve(m, today)
            except (ValueError, OverflowError):  # belt and braces: a query must never break planning
                span = None
            if span is None or not MIN_ORD <= span[0] < span[1] <= END_ORD:
                continue
            hits.append((lo, TimeWindow(day_start(span[0], zone), day_start(span[1], zone), m[0])))
    hits.sort(key=lambda h: (h[1].start, h[1].end, h[0]))
    out: list[TimeWindow] = []
    for _, w in hits:
        if not out or (out[-1].start, out[-1].end) != (w.start, w.end):
            out.append(w)
    return out, bool(claimed)


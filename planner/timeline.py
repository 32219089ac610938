"""When a turn says something happened: relative time expressions resolved at ingest.

"I went to a support group yesterday", sent on 8 May 2023, is about 7 May 2023. Each turn's
text is read once, when the turn cache first loads it (`told_span` is the turn cache's
`derive` hook), and the time it names is resolved against the turn's own timestamp into
absolute days of the user's calendar (`Config.timezone`, UTC by default; tiers.zones: at
21:00 on Friday in Los Angeles, "yesterday" is Thursday there, not Friday as in UTC): derived data, held next to the turn's vector in the turn cache,
recomputed from the log whenever that cache reloads (a restart, `rebuild`), never stored in
the cold tier.

Recognised: everything `planner.dates.query_windows` reads ("13 October 2023", "yesterday",
"last week", "two weeks ago", "a few days ago", "this month", ...), plus phrases that name a
time people tell of rather than ask about:

- "tomorrow", "tonight", "this morning/afternoon/evening", "last night" -> that day;
- "last <weekday>" -> the latest such weekday strictly before the message's day (on a
  Saturday, "last Saturday" is a week back); "this past <weekday>" likewise;
  "next <weekday>" -> the first such weekday strictly after it; "this <weekday>" -> that
  day of the message's (Monday-to-Sunday) week. After "last", "next" or "this" a weekday
  may be abbreviated where the abbreviation is no English word ("last Fri", "next Tues";
  not "Sat" or "Sun": "I last sat there");
- a bare weekday, "on Friday" or "Friday night" (full names only) -> the latest such
  weekday strictly before the message's day, or the first after it when its sentence
  speaks of what is to come ("will", "'ll", "going to", "can't wait", ...);
- "last weekend" -> the Saturday and Sunday before the message's week; "this weekend" ->
  the weekend of the message's week; "N weekends ago" -> N weekends back; "over (on, at,
  during) the weekend" -> the latest weekend begun before the message's day, or the next
  one when its sentence looks ahead;
- a month without a year ("in May", "since August", "in early June"; "May" and "March"
  only capitalised) -> the latest such month up to the message's month, or the first from
  it when its sentence looks ahead; "last May" -> the latest May before the message's
  month; "this May" -> the May of the message's year;
- a day of a month without a year ("on May 3rd", "the 14th of June", "Sept. 3") -> the
  latest such day up to the message's day, or the next when its sentence looks ahead;
- "next week/month/year" -> the calendar period after the message's;
- a duration up to now, in the present perfect ("I've had them for 3 years", "we have been
  friends for two months now") -> when it began: the calendar unit that many back, as "3
  years ago" reads; "since 2019" after a present perfect ("I've lived here since 2019") -> that
  year. A duration alone ("I'm away for two weeks", "it took 3 years") tells no start.

Recency words, read only when the text tells no time more precisely, and only in a
sentence that is not a question ("Have you painted lately?" tells nothing):

- a first-person event "just" done ("I just joined", "we've just moved"; not a verb of mind:
  "I just wanted to say hi") -> the JUST_DAYS days before the message's day and that day;
- "the other day" -> the OTHER_DAY_DAYS days before the message's day;
- "recently", "lately" -> the RECENT_DAYS days before the message's day and that day.

Not resolved: "a while ago", a weekday as a habit ("on Fridays"), a day without its month
("on the 3rd").

Invariants:
- `told_span(text, created, zone)` never raises; it returns None when the text names no time
  it can resolve, else one (start, end) span of whole days of `zone` (local midnight to local
  midnight) in POSIX seconds, start < end;
- `told(text, created, zone)` is `told_span` and whether the text names a time at all, a
  flag the same in every zone: a text that names none resolves to None in every zone (the
  turn cache derives again in another zone only the turns that name one);
- of several spans in one text, the narrowest is kept (ties: the earliest), since it says
  most precisely when;
- the years are planner.dates' (MIN_YEAR..MAX_YEAR, both included): a turn of 2200 that says
  "in June" or "next month" tells of a day as a query of 2200 names one; a span past them is
  none;
- the planner uses these spans only as extra evidence: `told_closeness` credits a turn that
  tells of a period the query names, and `when_mask` marks turns that say when something
  happened, for questions that ask when (`asks_when`). Nothing here names a person, topic
  or date of any data set.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from datetime import date

import numpy as np

# the month and year spans are planner.dates' own: one bound on the years (MIN_YEAR..MAX_YEAR,
# both included) for what queries name and what turns tell of
from tiermem.planner.dates import (
    CAPITALISED_ONLY_MONTHS,
    WEEK_DAYS,
    TimeWindow,
    _month_span,
    _windows,
    _year_span,
    query_windows,
)
from tiermem.tiers.turncache import TurnTable
from tiermem.tiers.zones import DAY_S, END_ORD, MAX_YEAR, MIN_ORD, MIN_YEAR, UTC, Zone, bounded_day, day_start

SATURDAY = 5  # date.weekday(): Monday is 0
WEEKEND_DAYS = 2
MONTHS_PER_YEAR = 12
MAX_TEXT_CHARS = 4000  # only a turn's opening is read: time words of a long paste say little
# A turn that tells of a period just outside the query's gets at most this share of the credit,
# fading to nothing this many days away (as planner.rank does for the turn's own time).
OUTSIDE_CREDIT = 0.5
SLACK_DAYS = 3.0

_WEEKDAYS = {name: i for i, name in enumerate(
    ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"))}
# Abbreviations are read only where they are no English word ("I last sat there", "the last
# sun"): Sat and Sun are left out.
_WEEKDAY_ABBREVIATIONS = {"mon": 0, "tue": 1, "tues": 1, "wed": 2, "thu": 3, "thur": 3, "thurs": 3, "fri": 4}
_WEEKDAY_INDEX = {**_WEEKDAYS, **_WEEKDAY_ABBREVIATIONS}
_WEEKDAY = ("(?P<wd>monday|tuesday|wednesday|thursday|friday|saturday|sunday|"
            + "|".join(sorted(_WEEKDAY_ABBREVIATIONS, key=len, reverse=True)) + r")\b\.?")
_FULL_WEEKDAY = r"(?P<wd>monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b"
_NUMBERS = {"a": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}


def _re(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE | re.ASCII)


_TOMORROW = _re(r"\btomorrow\b")
_THIS_DAY = _re(r"\b(?:tonight|this\s+(?:morning|afternoon|evening))\b")
_LAST_NIGHT = _re(r"\blast\s+night\b")
_LAST_WEEKDAY = _re(rf"\b(?:last|this\s+past)\s+{_WEEKDAY}")
_NEXT_WEEKDAY = _re(rf"\bnext\s+{_WEEKDAY}")
_THIS_WEEKDAY = _re(rf"\bthis\s+{_WEEKDAY}")  # that day of the message's week
# "on Friday", "Friday night": full names only, not after last/next/this (read above)
_BARE_WEEKDAY = _re(rf"(?<!\blast\s)(?<!\bnext\s)(?<!\bthis\s)(?<!\bpast\s)"
                    rf"\b(?:(?<=\bon\s){_FULL_WEEKDAY}|{_FULL_WEEKDAY.replace('wd', 'wd2')}"
                    rf"(?=\s+(?:morning|afternoon|evening|night)\b))")
# Words that put a sentence's bare weekday ahead of its message rather than behind it.
_FUTURE = _re(r"\b(?:will|won't|going\s+to|gonna|plan(?:s|ning)?\s+to|can't\s+wait|looking\s+forward|"
              r"hope\s+to|tomorrow|upcoming|coming\s+up)\b|'ll\b")
_SENTENCE_END = _re(r"[.!?;\n]")
# A run of time told only vaguely, read only when nothing more precise is: an event "just"
# done (in the first person's perfect or past) is within JUST_DAYS of its message; "recently"
# or "lately" within RECENT_DAYS.
# (Verbs of mind are no events: "I just wanted to say hi".)
_JUST = _re(r"\b(?:i|we|i've|we've|i\s+have|we\s+have|i'd|we'd)\s+(?:only\s+)?just\s+"
            r"(?!(?:wanted|needed|wondered|figured|realized|realised|remembered|noticed|hoped|loved|liked)\b)"
            r"(?:got|went|had|made|came|took|did|saw|met|won|ran|began|bought|found|left|moved|heard|"
            r"became|built|wrote|sold|gave|[a-z]+ed)\b")
_RECENTLY = _re(r"\b(?:recently|lately)\b")
_OTHER_DAY = _re(r"\bthe\s+other\s+day\b")
JUST_DAYS = 3
OTHER_DAY_DAYS = 7  # "the other day": within the week before the message's day
RECENT_DAYS = 30
_WEEKEND = _re(r"\b(?P<which>last|this|past)\s+weekend\b")
_WEEKENDS_AGO = _re(r"\b(?P<n>[0-9]|a|one|two|three|four|five|six)\s+weekends?\s+ago\b")
_NEXT_PERIOD = _re(r"\bnext\s+(?P<u>week|month|year)\b")
_THE_WEEKEND = _re(r"\b(?:over|on|at|during)\s+the\s+weekend\b")
_MONTH_NAMES = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
                "october", "november", "december")
# Not followed by a day or a year: "in May 2022" and "May 3, 2023" are planner.dates'.
_NO_YEAR = r"(?!\s*,?\s*(?:of\s+)?[0-9])"
# A month without a year, "May" / "March" only capitalised (CAPITALISED_ONLY_MONTHS).
_BARE_MONTH = _re(r"\b(?P<which>in|last|this|since|during)\s+(?:early\s+|late\s+|mid-?\s*)?"
                  rf"(?P<m>{'|'.join(_MONTH_NAMES)})\b{_NO_YEAR}")
# A day of a month without a year ("on May 3rd", "the 3rd of June"); the abbreviations that
# are no English word may stand for a month here ("Sept 3").
_MONTH_ABBREVIATIONS = {"jan": 0, "feb": 1, "apr": 3, "jun": 5, "jul": 6, "aug": 7, "sep": 8, "sept": 8,
                        "oct": 9, "nov": 10, "dec": 11}
_MONTH_INDEX = {**{name: i for i, name in enumerate(_MONTH_NAMES)}, **_MONTH_ABBREVIATIONS}  # word -> 0..11
_ANY_MONTH = ("(?P<m>" + "|".join(sorted(_MONTH_INDEX, key=len, reverse=True))
              + r")\b(?!['\u2019]s\b)\.?")  # "June's apples" names no day
# The words of a text, once, gate the weekday and month patterns: most turns name neither,
# and a set lookup costs less than a scan for either (a "\b(?:...)" alternation is slow).
_WORD = re.compile(r"[a-z]+")
_WEEKDAY_WORDS = frozenset(_WEEKDAY_INDEX)
_MONTH_WORDS = frozenset(_MONTH_INDEX)
_MONTH_DAY = _re(rf"\b{_ANY_MONTH}\s+(?P<d>[0-9]{{1,2}})(?:st|nd|rd|th)?\b{_NO_YEAR}")
_DAY_MONTH = _re(rf"\b(?P<d>[0-9]{{1,2}})(?:st|nd|rd|th)?\s+of\s+{_ANY_MONTH}{_NO_YEAR}"
                 rf"|\b(?P<d2>[0-9]{{1,2}})(?:st|nd|rd|th)\s+{_ANY_MONTH.replace('<m>', '<m2>')}{_NO_YEAR}")

# "'ve had them for 3 years", "has been teaching for ten years now": the perfect, then at most
# a few words, then the duration; the words may not end the clause (no "." between)
_PERFECT = r"(?:'ve|\bhave|\bhas|(?<=\w)'s\s+been)\s+(?:been\s+)?(?:[a-z'-]+\s+){0,5}?"
_FOR_SINCE_NUMBERS = ("a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|"
                      "thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty")
_FOR_DURATION = _re(_PERFECT + r"for\s+(?:about\s+|almost\s+|nearly\s+|over\s+|around\s+)?"
                    rf"(?P<n>[0-9]{{1,3}}|{_FOR_SINCE_NUMBERS})\s+(?P<u>day|week|month|year)s?\b")
_SINCE_YEAR = _re(_PERFECT + r"since\s+(?P<y>[0-9]{4})\b")
# Questions that ask for a time: "when did ...", "what date ...", "how long ago ...", "which year",
# "how long has ..." (a duration up to now: when it began).
# Opening the question, with a preposition or "around" before it or not: "In what year ...",
# "On which day ...", "Around when ...", "What was the date of ...".
_ASKS_WHEN = _re(r"^\W*(?:(?:around|about|roughly|approximately|since|by|until)\s+)?when\b"
                 r"|^\W*(?:(?:in|on|at|during|by|for)\s+)?(?:what|which)\s+"
                 r"(?:date|day|month|year|week|weekend|time)\b"
                 r"|^\W*what\s+(?:was|is)\s+the\s+(?:date|day|month|year)\b"
                 r"|\bhow\s+long\s+(?:ago|has|have)\b|\bhow\s+many\s+(?:days|weeks|months|years)\s+ago\b")


def _extra_spans(text: str, today: int) -> tuple[list[tuple[int, int]], bool]:
    """Day spans (ordinals, end exclusive) of the phrases `query_windows` does not read, and
    whether `text` holds any of them, in range or not (the same in every zone)."""
    out: list[tuple[int, int]] = []
    weekday = date.fromordinal(today).weekday()
    words = _words(text)  # each pattern runs only if its words are here
    if "tomorrow" in words and _TOMORROW.search(text):
        out.append((today + 1, today + 2))
    if ("tonight" in words or "this" in words) and _THIS_DAY.search(text):
        out.append((today, today + 1))
    if "night" in words and _LAST_NIGHT.search(text):
        out.append((today - 1, today))
    if not words.isdisjoint(_WEEKDAY_WORDS):
        out += _weekday_spans(text, today, weekday)
    monday = today - weekday
    if "weekend" in words or "weekends" in words:
        out += _weekend_spans(text, weekday, monday)
    # the parsers above yield a span per match; these two drop a match whose day or month
    # falls outside the years (or is no day, 29 February) in this zone's year only
    named = False
    if not words.isdisjoint(_MONTH_WORDS):
        spans, named = _month_spans(text, today)
        out += spans
    if "next" in words:
        spans, next_named = _next_period_spans(text, today, monday)
        out += spans
        named = named or next_named
    return [s for s in out if MIN_ORD <= s[0] < s[1] <= END_ORD], named or bool(out)


def _words(text: str) -> AbstractSet[str]:
    """The lower-cased ASCII words of `text`, for the word gates."""
    return set(_WORD.findall(text.lower()))


def _next_period_spans(text: str, today: int, monday: int) -> tuple[list[tuple[int, int]], bool]:
    """Spans (ordinals) of "next week / month / year": the calendar period after the message's;
    and whether `text` names any (in range or not)."""
    out: list[tuple[int, int]] = []
    named = False
    d = date.fromordinal(today)
    for m in _NEXT_PERIOD.finditer(text):
        named = True
        unit = m["u"].lower()
        span: tuple[int, int] | None
        if unit == "week":
            span = (monday + WEEK_DAYS, monday + 2 * WEEK_DAYS)
        elif unit == "month":
            span = _month_span(d.year * MONTHS_PER_YEAR + d.month)  # the month after this one
        else:
            span = _year_span(d.year + 1)
        if span is not None:
            out.append(span)
    return out, named


def _weekend_spans(text: str, weekday: int, monday: int) -> list[tuple[int, int]]:
    """Saturday-to-Monday spans (ordinals) of the weekends `text` names."""
    out: list[tuple[int, int]] = []
    for m in _WEEKEND.finditer(text):
        saturday = monday + SATURDAY - (0 if m["which"].lower() == "this" else WEEK_DAYS)
        out.append((saturday, saturday + WEEKEND_DAYS))
    for m in _WEEKENDS_AGO.finditer(text):
        n = int(m["n"]) if m["n"].isdigit() else _NUMBERS[m["n"].lower()]
        saturday = monday + SATURDAY - WEEK_DAYS * n
        out.append((saturday, saturday + WEEKEND_DAYS))
    for m in _THE_WEEKEND.finditer(text):
        if _looks_ahead(text, m.start()):
            saturday = monday + SATURDAY + (0 if weekday < SATURDAY else WEEK_DAYS)
        else:  # the latest weekend begun before the message's day
            saturday = monday + SATURDAY - (0 if weekday > SATURDAY else WEEK_DAYS)
        out.append((saturday, saturday + WEEKEND_DAYS))
    return out


def _weekday_spans(text: str, today: int, weekday: int) -> list[tuple[int, int]]:
    """Day spans (ordinals) of the weekdays `text` names: last, next, this, or bare."""
    out: list[tuple[int, int]] = []
    for m in _LAST_WEEKDAY.finditer(text):
        back = (weekday - _WEEKDAY_INDEX[m["wd"].lower()]) % WEEK_DAYS or WEEK_DAYS
        out.append((today - back, today - back + 1))
    for m in _NEXT_WEEKDAY.finditer(text):
        ahead = (_WEEKDAY_INDEX[m["wd"].lower()] - weekday) % WEEK_DAYS or WEEK_DAYS
        out.append((today + ahead, today + ahead + 1))
    for m in _THIS_WEEKDAY.finditer(text):
        day = today - weekday + _WEEKDAY_INDEX[m["wd"].lower()]
        out.append((day, day + 1))
    for m in _BARE_WEEKDAY.finditer(text):
        day = _WEEKDAYS[(m["wd"] or m["wd2"]).lower()]
        if _looks_ahead(text, m.start()):
            ahead = (day - weekday) % WEEK_DAYS or WEEK_DAYS
            out.append((today + ahead, today + ahead + 1))
        else:
            back = (weekday - day) % WEEK_DAYS or WEEK_DAYS
            out.append((today - back, today - back + 1))
    return out


def _month_spans(text: str, today: int) -> tuple[list[tuple[int, int]], bool]:
    """Month spans (ordinals) of the months `text` names without a year: "last May" is the
    latest May before the message's month, "this May" the message's year's; "in May" (or
    "since", "during") the latest May up to the message's month, or the first from it when
    its sentence speaks of what is to come. And whether `text` names any such month or day,
    whether or not it is one in this zone's year (the same in every zone)."""
    out: list[tuple[int, int]] = []
    named = False
    d = date.fromordinal(today)
    current = d.year * MONTHS_PER_YEAR + d.month - 1
    for m in _BARE_MONTH.finditer(text):
        name = m["m"].lower()
        if name in CAPITALISED_ONLY_MONTHS and not m["m"][0].isupper():
            continue
        named = True
        month0, which = _MONTH_INDEX[name], m["which"].lower()
        this_year = d.year * MONTHS_PER_YEAR + month0
        if which == "this":
            index = this_year
        elif which == "last":
            index = this_year if this_year < current else this_year - MONTHS_PER_YEAR
        elif _looks_ahead(text, m.start()):
            index = this_year if this_year >= current else this_year + MONTHS_PER_YEAR
        else:
            index = this_year if this_year <= current else this_year - MONTHS_PER_YEAR
        span = _month_span(index)
        if span is not None:
            out.append(span)
    for m in [*_MONTH_DAY.finditer(text), *_DAY_MONTH.finditer(text)]:
        word = m["m"] or m["m2"]
        if word.lower() in CAPITALISED_ONLY_MONTHS and not word[0].isupper():
            continue
        named = True
        month0, number = _MONTH_INDEX[word.lower()], int(m["d"] or m["d2"])
        day = _day_of(d.year, month0, number)
        if day is None:
            continue
        ahead = _looks_ahead(text, m.start())
        if ahead and day < today:
            day = _day_of(d.year + 1, month0, number)
        elif not ahead and day > today:
            day = _day_of(d.year - 1, month0, number)
        if day is not None:
            out.append((day, day + 1))
    return out, named


def _day_of(year: int, month0: int, day: int) -> int | None:
    """The ordinal of a day, or None where there is no such day (30 February) or year."""
    if not MIN_YEAR <= year <= MAX_YEAR:
        return None
    try:
        return date(year, month0 + 1, day).toordinal()
    except ValueError:
        return None


def _sentence(text: str, at: int) -> str:
    """The sentence of `text` that holds offset `at`."""
    starts = [m.end() for m in _SENTENCE_END.finditer(text, 0, at)]
    end = _SENTENCE_END.search(text, at)
    return text[starts[-1] if starts else 0:end.start() if end else len(text)]


def _looks_ahead(text: str, at: int) -> bool:
    """Whether the sentence of `text` that holds offset `at` speaks of what is to come."""
    return _FUTURE.search(_sentence(text, at)) is not None


def _asked(text: str, at: int) -> bool:
    """Whether the sentence of `text` that holds offset `at` is a question ("Have you painted
    lately?" tells nothing of when)."""
    end = _SENTENCE_END.search(text, at)
    return end is not None and end.group() == "?"


def _vague_spans(text: str, today: int) -> tuple[list[tuple[int, int]], bool]:
    """Day spans of the recency words of told (not asked) sentences ("I just joined",
    "recently"), narrowest first; and whether there are any, in range or not."""
    out = []
    low = text.lower()
    if "just" in low and any(not _asked(text, m.start()) for m in _JUST.finditer(text)):
        out.append((today - JUST_DAYS, today + 1))
    if "other day" in low and any(not _asked(text, m.start()) for m in _OTHER_DAY.finditer(text)):
        out.append((today - OTHER_DAY_DAYS, today))
    if ("recent" in low or "lately" in low) and any(not _asked(text, m.start()) for m in _RECENTLY.finditer(text)):
        out.append((today - RECENT_DAYS, today + 1))
    return [s for s in out if MIN_ORD <= s[0] < s[1] <= END_ORD], bool(out)


_TENS = {"thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18,
         "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50}


def _began(text: str, created: float, zone: Zone) -> tuple[list[tuple[float, float]], bool]:
    """When the durations up to now that `text` tells of began (POSIX spans), read as
    planner.dates reads "N units ago" / "in YYYY" (its public `query_windows`); and whether
    `text` tells of any (resolved or not)."""
    low = text.lower()
    if "for " not in low and "since " not in low:  # most turns: skip the perfect's regexes
        return [], False
    phrases = []
    for m in _FOR_DURATION.finditer(text):
        n = m["n"].lower()
        count = _TENS.get(n) or (1 if n in ("a", "an") else None)
        phrases.append(f"{count if count is not None else n} {m['u'].lower()}s ago")
    phrases += [f"in {m['y']}" for m in _SINCE_YEAR.finditer(text)]
    return [(w.start, w.end) for p in phrases for w in query_windows(p, created, zone=zone)], bool(phrases)


def told(text: str | None, created: float, zone: Zone = UTC) -> tuple[tuple[float, float] | None, bool]:
    """`told_span`, and whether `text` names a time at all (resolved or not: a phrase that
    resolves outside the accepted years in this zone may resolve inside in another), worked
    out by the same pass that parses it. The turn cache's `derive`: only turns that name a
    time are derived again in another zone."""
    if not text:
        return None, False
    try:
        now = float(created)
    except (ValueError, OverflowError, TypeError):  # never raises: a turn must never break loading the cache
        return None, False
    today = bounded_day(now, zone)  # None outside the years: in every zone alike
    if today is None:
        return None, False
    try:
        text = text[:MAX_TEXT_CHARS]
        windows, named = _windows(text, now, undated_months=False, zone=zone)
        spans = [(w.start, w.end) for w in windows]
        extra, extra_named = _extra_spans(text, today)
        spans += [(day_start(s, zone), day_start(e, zone)) for s, e in extra]
        began, began_named = _began(text, now, zone)
        spans += began
        named = named or extra_named or began_named
        if not spans:
            # read only when nothing else is, and the flag with it: where another zone finds a
            # span above, `named` is already set
            vague, vague_named = _vague_spans(text, today)
            spans = [(day_start(s, zone), day_start(e, zone)) for s, e in vague]
            named = named or vague_named
    except (ValueError, OverflowError, TypeError):
        # what this zone could not read another zone may: derive it there again
        return None, True
    if not spans:
        return None, named
    return min(spans, key=lambda s: (s[1] - s[0], s[0])), named


def told_span(text: str | None, created: float, zone: Zone = UTC) -> tuple[float, float] | None:
    """The period `text`, sent at `created` (POSIX seconds), says something happened in:
    (start, end) POSIX seconds of whole days of `zone` (the user's calendar), or None."""
    return told(text, created, zone)[0]


def asks_when(query: str) -> bool:
    """Whether the query asks for a time ("when did ...", "what date ...", "how long ago ...",
    "how long has ...": a duration up to now asks when it began)."""
    return bool(_ASKS_WHEN.search(query))


def when_mask(told_start: np.ndarray | None, n: int) -> np.ndarray:
    """Per turn: whether it says when something happened (it has a resolved span)."""
    if told_start is None or told_start.shape[0] < n:
        return np.zeros(n, dtype=bool)
    return ~np.isnan(told_start[:n])


def told_closeness(told_start: np.ndarray | None, told_end: np.ndarray | None, n: int,
                   windows: Sequence[TimeWindow]) -> np.ndarray:
    """Per turn, 0..1: how closely the period it tells of meets a period the query names (1
    when they overlap, at most OUTSIDE_CREDIT when within SLACK_DAYS, else 0)."""
    out = np.zeros(n, dtype=np.float64)
    if told_start is None or told_end is None or not windows or told_start.shape[0] < n:
        return out
    start, end = told_start[:n], told_end[:n]
    known = ~np.isnan(start)
    if not known.any():
        return out
    slack = SLACK_DAYS * DAY_S
    s, e = np.where(known, start, 0.0), np.where(known, end, 0.0)
    for w in windows:
        gap = np.maximum(w.start - e, 0.0) + np.maximum(s - w.end, 0.0)  # 0 when they overlap
        near = np.where(gap > 0, OUTSIDE_CREDIT * np.clip(1.0 - gap / slack, 0.0, 1.0), 1.0)
        out = np.maximum(out, np.where(known, near, 0.0))
    return out


# Weights on planner.rank's scale (z-score sums; the best turns of a conversation score about
# 5-10), chosen leave-one-conversation-out on the LoCoMo dev conversations (README, issue 19).
# A turn telling of the period the query names gets TOLD_DATE, well under planner.rank's DATE
# for a turn sent in it: what was said on the day ranks above what was said later about the day.
# Scaling this with DATE (4 with 8, 3 with 6, 6 with 12) won no fold (README, issue 19).
TOLD_DATE = 1.0
WHEN_BOOST = 0.5  # a turn that says when, for a question that asks when


def timeline_boost(table: TurnTable, query: str, windows: Sequence[TimeWindow],
                   sent_credit: np.ndarray | None = None) -> np.ndarray:
    """Per turn of `table`: the score the periods its turns tell of add for `query`. With
    `sent_credit` (planner.rank's date score, for when each turn was sent) a turn gets one date
    credit, the larger of the two, never both."""
    n = len(table)
    out = TOLD_DATE * told_closeness(table.told_start, table.told_end, n, windows)
    if sent_credit is not None and sent_credit.shape[0] == n:
        out = np.maximum(out - sent_credit, 0.0)
    if WHEN_BOOST and asks_when(query):
        out += WHEN_BOOST * when_mask(table.told_start, n)
    return out

"""Calendar days and shown times in the user's time zone: the one home of (ts, zone) -> day.

tiermem stores each message's time as POSIX seconds (`created_at`). Which calendar day that
is depends on where the user is: 21:00 on Friday in Los Angeles is 05:00 on Saturday in UTC,
so "yesterday" said then is Thursday, not Friday. Every place that turns seconds into a day
(planner.dates' "today", planner.timeline's told days) or into a shown time (the context's
headings, planner.render and planner.statements) goes through this module, with the zone of
`Config.timezone`.

Invariants:
- with `UTC` every function is the arithmetic tiermem did before zones existed (days are
  `epoch ordinal + ts // 86400`, times are formatted without a zone), so contexts and recall
  figures under the default do not move by a byte;
- in any other zone a day runs from one local midnight to the next, whatever its length
  (23 or 25 hours across a DST change: zoneinfo's rules), and a shown time carries its UTC
  offset ("04 Dec 2026 21:00 -08:00") so that the model reads it as the user's clock;
- `zone(name)` accepts exactly the IANA names zoneinfo knows (the OS database, else the
  `tzdata` package) and raises ValueError naming the name otherwise; `check_timezone` is
  the same check at a call's edge (a per-call zone: `Memory.context(timezone=)`, HTTP,
  MCP), a ValidationError naming the field.
"""

from __future__ import annotations

import calendar
import datetime as dt
import functools
import zoneinfo

from tiermem.tiers.errors import ValidationError

__all__ = ["DAY_S", "END_DAY_S", "END_ORD", "FIRST_DAY_S", "MAX_YEAR", "MAX_ZONE_NAME_CHARS", "MIN_ORD", "MIN_YEAR",
           "TIMEZONE_DOC", "UTC", "UTC_NAME", "Zone", "bounded_day", "check_timezone", "day_start", "local_datetime",
           "local_day", "offset_suffix", "optional_timezone", "shown_day", "shown_time", "zone"]

DAY_S = 86_400.0
UTC_NAME = "UTC"
UTC: dt.tzinfo = dt.UTC
Zone = dt.tzinfo
MAX_ZONE_NAME_CHARS = 64  # the longest IANA name is about 30 characters
# a call's `timezone`, as the HTTP schema and the MCP tool document it
TIMEZONE_DOC = ("the user's IANA time zone for this call (e.g. `America/Los_Angeles`): the calendar of the days "
                "turns tell of ('yesterday') and the query names, and the clock of the context's dates (shown "
                "with their UTC offset unless UTC); omitted: the server's `timezone` setting (UTC by default). A "
                "change from the conversation's previous call starts a new prompt-cache epoch")
# the years whose days tiermem reads (planner.dates, planner.timeline): an instant outside
# [FIRST_DAY_S, END_DAY_S) has no day (`bounded_day`), in every zone alike
MIN_YEAR = 1900
MAX_YEAR = 2200
FIRST_DAY_S = float(calendar.timegm((MIN_YEAR, 1, 1, 0, 0, 0)))  # POSIX seconds of MIN_YEAR's first UTC midnight
END_DAY_S = float(calendar.timegm((MAX_YEAR + 1, 1, 1, 0, 0, 0)))  # the UTC midnight after MAX_YEAR's last day
# the same bound as day ordinals (proleptic Gregorian): a span of days [start, end) is read
# only within [MIN_ORD, END_ORD]
MIN_ORD = dt.date(MIN_YEAR, 1, 1).toordinal()
END_ORD = dt.date(MAX_YEAR + 1, 1, 1).toordinal()  # exclusive: the day after MAX_YEAR's last
_EPOCH_ORD = dt.date(1970, 1, 1).toordinal()
_SECONDS_PER_MINUTE = 60
_MINUTES_PER_HOUR = 60


@functools.lru_cache(maxsize=64)
def zone(name: str) -> Zone:
    """The zone an IANA name (`America/Los_Angeles`, `UTC`) names; ValueError for any other
    text. `UTC` is `datetime.UTC` itself, the fast path every function here takes."""
    if name == UTC_NAME:
        return UTC
    if not isinstance(name, str) or not name or len(name) > MAX_ZONE_NAME_CHARS:
        raise ValueError(f"must be an IANA time zone name of 1 to {MAX_ZONE_NAME_CHARS} characters "
                         f"(e.g. 'America/Los_Angeles' or 'UTC'), got {name!r}")
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        # ValueError: a path-like key ("../x", "/etc/passwd"); OSError: an unreadable file
        raise ValueError(f"is not a known IANA time zone name (e.g. 'America/Los_Angeles' or 'UTC'): "
                         f"{name!r}") from None


def check_timezone(value: object, field: str = "timezone") -> str:
    """`value` when it is a zone name `zone` knows; else ValidationError naming `field` (a
    call's zone is refused before anything is read or computed)."""
    if not isinstance(value, str):
        raise ValidationError(field, f"must be an IANA time zone name (a string), got {type(value).__name__}")
    try:
        zone(value)
    except ValueError as e:
        raise ValidationError(field, str(e)) from None
    return value


def optional_timezone(value: object, field: str = "timezone") -> str | None:
    """`check_timezone(value)`, or None when `value` is None (a call that names no zone: the
    configured one applies)."""
    return None if value is None else check_timezone(value, field)


def _offset_s(ts: float, tz: Zone) -> float:
    """The zone's UTC offset at instant `ts`, in seconds (0 for UTC)."""
    if tz is UTC:
        return 0.0
    off = dt.datetime.fromtimestamp(ts, tz=tz).utcoffset()
    return 0.0 if off is None else off.total_seconds()


def local_day(ts: float, tz: Zone = UTC) -> int:
    """The proleptic Gregorian ordinal of the local calendar day holding instant `ts`. The
    caller bounds `ts` (`bounded_day` does)."""
    return _EPOCH_ORD + int((ts + _offset_s(ts, tz)) // DAY_S)


def bounded_day(ts: float, tz: Zone = UTC) -> int | None:
    """`local_day` of `ts` when the instant lies in [FIRST_DAY_S, END_DAY_S), else None (NaN
    too). The bound is on the instant, not on the local day, so whether `ts` has a day at all
    is the same in every zone."""
    # Chained comparison rather than math.isfinite: NaN fails it, and a huge int cannot overflow.
    if not FIRST_DAY_S <= ts < END_DAY_S:
        return None
    return local_day(ts, tz)


def day_start(ordinal: int, tz: Zone = UTC) -> float:
    """POSIX seconds of the local midnight that starts day `ordinal` (where DST skips
    midnight, the instant the day's clock starts from)."""
    if tz is UTC:
        return (ordinal - _EPOCH_ORD) * DAY_S
    return dt.datetime.combine(dt.date.fromordinal(ordinal), dt.time(0), tzinfo=tz).timestamp()


def local_datetime(ts: float, tz: Zone = UTC) -> dt.datetime:
    """Instant `ts` on the zone's clock (aware). OverflowError, OSError or ValueError for a
    time no calendar can show, as `datetime.fromtimestamp`."""
    return dt.datetime.fromtimestamp(ts, tz=tz)


def offset_suffix(moment: dt.datetime, tz: Zone = UTC) -> str:
    """" -08:00" (the moment's UTC offset) in a zone other than UTC; "" in UTC, whose
    shown times carry no zone (as before zones existed)."""
    if tz is UTC:
        return ""
    off = moment.utcoffset() or dt.timedelta(0)
    sign = "-" if off < dt.timedelta(0) else "+"
    minutes = abs(int(off.total_seconds())) // _SECONDS_PER_MINUTE
    return f" {sign}{minutes // _MINUTES_PER_HOUR:02d}:{minutes % _MINUTES_PER_HOUR:02d}"


def shown_time(ts: float, tz: Zone = UTC) -> str | None:
    """Date and minute of `ts` as the context shows it ("04 Dec 2026 21:00 -08:00"; in UTC
    "05 Dec 2026 05:00", no zone); None for a time no calendar can show."""
    try:
        moment = local_datetime(ts, tz)
        return moment.strftime("%d %b %Y %H:%M") + offset_suffix(moment, tz)
    except (OverflowError, OSError, ValueError):
        return None


def shown_day(ts: float, tz: Zone = UTC) -> str | None:
    """The date of `ts` as the context shows it ("04 Dec 2026 -08:00": whose day it is; in
    UTC "05 Dec 2026", no zone); None for a time no calendar can show."""
    try:
        moment = local_datetime(ts, tz)
        return moment.strftime("%d %b %Y") + offset_suffix(moment, tz)
    except (OverflowError, OSError, ValueError):
        return None

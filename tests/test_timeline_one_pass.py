"""planner.timeline.told works out whether a text names a time in the same pass that parses it:
every pattern scans a text once per call, through the one list of patterns the parsers read
(before, a text with no period was scanned again by a retyped copy of each parser's gates and
patterns, planner.dates.names_a_time and timeline._names_a_time: twice the CPU for most turns,
and a pattern added to a parser but not its copy would have set no flag). Spies, not mocks: each
wraps the module's real compiled pattern and counts its scans."""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterator

import pytest

from tiermem.planner import dates, timeline
from tiermem.planner.timeline import told
from tiermem.tiers.zones import zone

MONDAY = float(calendar.timegm((2023, 5, 8, 13, 56, 0)))
ZONES = ("UTC", "America/Los_Angeles", "Asia/Tokyo")


class Counting:
    """A real compiled pattern that counts the scans made with it."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern
        self.scans = 0

    def search(self, text: str, *args: int) -> re.Match[str] | None:
        self.scans += 1
        return self.pattern.search(text, *args)

    def finditer(self, text: str, *args: int) -> Iterator[re.Match[str]]:
        self.scans += 1
        return self.pattern.finditer(text, *args)


@pytest.mark.parametrize(("name", "text"), [
    # a gate passes, the pattern finds nothing: a text with no period (scanned twice before)
    ("_LAST_NIGHT", "Good night, see you around."),
    ("_THIS_DAY", "This is the best soup I ever had."),
    ("_NEXT_PERIOD", "The shop next to mine sells bread."),
    ("_FOR_DURATION", "Thanks for the tea and the biscuits."),
    ("_JUST", "It is just a small garden."),
    ("_RECENTLY", "The most recent one was blue."),
    ("_BARE_MONTH", "Things went well since august, I think."),
    ("_WEEKEND", "The weekend market was busy."),
])
def test_a_timeline_pattern_scans_a_text_once(monkeypatch: pytest.MonkeyPatch, name: str, text: str) -> None:
    spy = Counting(getattr(timeline, name))
    monkeypatch.setattr(timeline, name, spy)
    told(text, MONDAY, zone("UTC"))
    assert spy.scans == 1


@pytest.mark.parametrize("text", [
    "He works at the bank today? no, yesterday's paper",  # rules that match: claimed once
    "The yesterday song is a classic.",  # a word gate passes ("yesterday")
    "We talked about the past and the weekend.",  # "past" passes the rolling rules' gate
    "No time here at all.",  # no gate passes
])
def test_a_dates_rule_scans_a_text_once(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    spies = [(Counting(pattern), resolve, words) for pattern, resolve, words in dates._RULES]
    monkeypatch.setattr(dates, "_RULES", spies)
    told(text, MONDAY, zone("UTC"))
    assert all(spy.scans <= 1 for spy, _resolve, _words in spies), [
        (spy.pattern.pattern[:40], spy.scans) for spy, _r, _w in spies if spy.scans > 1]


@pytest.mark.parametrize("text", [
    "Have you painted lately?",  # a recency word asked, not told: no period in any zone
    "Anything cool going on recently?",
    "this may help",  # "may" and "march" are months only when capitalised
    "we ordered them in march order",
])
def test_phrases_no_parser_reads_set_no_flag(text: str) -> None:
    """The flag is what the parsers read, not what a retyped pattern list matched: these name
    no time in any zone, so the turn cache need not derive them again (the flag was set before)."""
    assert {told(text, MONDAY, zone(name)) for name in ZONES} == {(None, False)}

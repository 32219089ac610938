"""The adapters' and the CLI's per-call time zone tests' shared conversation: the dentist,
told at 05:00 UTC on Saturday 5 Dec 2026, which is 21:00 on Friday 4 Dec in Los Angeles,
then a week of notes that push it out of the recent tail, so that it comes back retrieved
under a day heading: the heading's day and offset are the zone the call planned in."""

from __future__ import annotations

import calendar
from collections.abc import Iterable

from tiermem.memory import Memory, NamespacedMemory

LA = "America/Los_Angeles"
BUDGET = 250  # tokens: the dentist comes back retrieved (under a heading), not in the tail
QUESTION = "When did I go to the dentist?"
DENTIST = "Went to the dentist, two fillings."
NOTE_DAYS = 6  # days of notes after the dentist's
# the dentist's heading, per zone the context is planned in
HEADINGS = {
    LA: "(04 Dec 2026 -08:00)",  # 21:00 on Friday there, shown with its offset
    None: "(05 Dec 2026)",  # the memory's zone (UTC by default): Saturday, no offset shown
}
BAD_ZONE = "Mars/Olympus_Mons"


def utc(*fields: int) -> float:
    """POSIX seconds of a UTC wall time (year, month, day, hour, minute)."""
    return float(calendar.timegm((*fields, *(0,) * (6 - len(fields)))))


def seed(mem: Memory | NamespacedMemory, conv: str) -> None:
    turns = [(utc(2026, 12, 5, 5), "user", DENTIST), (utc(2026, 12, 5, 5, 1), "assistant", "Ouch, rest up.")]
    for i in range(NOTE_DAYS):
        turns += [(utc(2026, 12, 6 + i, 12), "user", f"Note {i}: I like green tea."),
                  (utc(2026, 12, 6 + i, 12, 1), "assistant", f"Noted {i}.")]
    mem.append_many(conv, [{"role": r, "content": t, "created_at": ts} for ts, r, t in turns])


def headings(texts: Iterable[object]) -> list[str]:
    """The day headings of the retrieved block among a context's message texts."""
    block = next(str(t) for t in texts if "retrieved" in str(t))
    return [line for line in block.splitlines() if line.startswith("(")]

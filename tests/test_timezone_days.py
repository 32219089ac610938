"""The user's calendar end to end through `Memory` (a real SQLite file, the suite's embedder):
with `Config.timezone` the days a turn tells of, the day a query's "yesterday" names and the
context's date headings are the user's, not UTC's.

A user in Los Angeles who writes at 21:00 on Friday 4 Dec 2026 ("I went to the dentist
yesterday") is at 05:00 on Saturday in UTC. On the code before (every day UTC's) the dentist
was filed under Friday, the heading said "05 Dec 2026" with no zone, and "what did I do
yesterday?" asked that evening looked at Friday (UTC) and brought Friday's lunch first.
"""

from __future__ import annotations

import calendar
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder

HOUR_S = 3600.0
PST_S = 8 * HOUR_S  # Los Angeles is UTC-08:00 in winter...
PDT_S = 7 * HOUR_S  # ...and UTC-07:00 in summer time
BUDGET = 180  # tokens: a tail of one turn, so the earlier ones come back only as retrieved


def utc(*fields: int) -> float:
    """POSIX seconds of a UTC wall time (year, month, day, hour, minute)."""
    return float(calendar.timegm((*fields, *(0,) * (6 - len(fields)))))


def pst(day: int, hour: int, minute: int = 0, month: int = 12) -> float:
    """POSIX seconds of a Los Angeles winter wall time in 2026."""
    return utc(2026, month, day, hour, minute) + PST_S


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="minutes")


MORNING_DENTIST = "Off to the dentist now, wish me luck."
LUNCH = "Had lunch with Sam at the noodle place."
TOLD_DENTIST = "I went to the dentist yesterday, two fillings."
QUESTION = "What did I do yesterday?"
WEEK = [  # (sent, role, text), Wednesday 2 to Friday 4 December 2026, Los Angeles time
    (pst(2, 9), "user", "Morning! Heading into the office early today."),
    (pst(2, 9, 5), "assistant", "Have a productive day."),
    (pst(3, 10), "user", MORNING_DENTIST),  # Thursday 10:00 PST = Thursday 18:00 UTC
    (pst(3, 10, 5), "assistant", "Good luck, you'll be fine."),
    (pst(4, 12), "user", LUNCH),  # Friday 12:00 PST = Friday 20:00 UTC
    (pst(4, 12, 5), "assistant", "Sounds tasty!"),
    (pst(4, 21), "user", TOLD_DENTIST),  # Friday 21:00 PST = Saturday 05:00 UTC
    (pst(4, 21, 2), "assistant", "Ouch, hope it heals quickly."),
]


def _open(tmp_path: Path, embedder: Embedder, timezone: str, base: Config | None = None) -> Memory:
    settings = base.model_dump(exclude_unset=True) if base is not None else {"data_dir": tmp_path / "data"}
    return Memory(Config(**settings, timezone=timezone), embedder=embedder, hot=False, background_indexing=False)


def _week(mem: Memory) -> list[int]:
    """WEEK and the evening's question appended to conversation "c"; WEEK's positions."""
    positions = mem.append_many("c", [{"role": r, "content": t, "created_at": ts} for ts, r, t in WEEK],
                                session_id="week")
    mem.append("c", {"role": "user", "content": QUESTION, "created_at": pst(4, 21, 30)})
    return positions


@pytest.mark.parametrize(("timezone", "told", "best", "headings"), [
    # the user's calendar: "yesterday" said on Friday evening is Thursday 3 Dec there (from
    # its local midnight, 08:00 UTC); asked that evening it brings Thursday's dentist first;
    # the headings are local days with their offset, the evening turn under Friday
    ("America/Los_Angeles", ("2026-12-03T08:00+00:00", "2026-12-04T08:00+00:00"), MORNING_DENTIST,
     ["(03 Dec 2026 -08:00)", "(04 Dec 2026 -08:00)"]),
    # the default, as before zones existed: UTC's Saturday, so "yesterday" is Friday UTC,
    # whose lunch comes first, and the headings are UTC days without a zone
    ("UTC", ("2026-12-04T00:00+00:00", "2026-12-05T00:00+00:00"), LUNCH,
     ["(03 Dec 2026)", "(04 Dec 2026)", "(05 Dec 2026)"]),
])
def test_the_dentist_yesterday_is_the_users_thursday(tmp_path: Path, embedder: Embedder, timezone: str,
                                                     told: tuple[str, str], best: str, headings: list[str]) -> None:
    with _open(tmp_path, embedder, timezone) as mem:
        positions = _week(mem)
        table = mem.turns.get("c")
        assert table.told_start is not None and table.told_end is not None
        i = table.index_of(positions[WEEK.index(next(w for w in WEEK if w[2] == TOLD_DENTIST))])
        assert i is not None
        assert (_iso(table.told_start[i]), _iso(table.told_end[i])) == told

        ctx = mem.context("c", QUESTION, budget=BUDGET)
        retrieved = sorted((it for it in ctx.plan.items if it.slice == "retrieved"), key=lambda it: -it.score)
        by_position = {p: text for p, (_ts, _r, text) in zip(positions, WEEK, strict=True)}
        assert retrieved and by_position[retrieved[0].positions[0]] == best
        assert "date 'yesterday' +8.00" in retrieved[0].reason  # sent within the day asked about
        block = next(str(m["content"]) for m in ctx.messages
                     if m["role"] == "system" and "retrieved" in str(m["content"]))
        shown = [line for line in block.splitlines() if line.startswith("(")]
        assert [h for h in shown if h in headings] == headings, block


def test_across_the_end_of_summer_time_a_day_is_25_hours(tmp_path: Path, embedder: Embedder) -> None:
    # Los Angeles leaves summer time at 02:00 on Sunday 1 Nov 2026: that Sunday runs from
    # 00:00 PDT (07:00 UTC) to 00:00 PST on Monday (08:00 UTC)
    saturday = utc(2026, 10, 31, 10) + PDT_S  # 10:00 PDT
    monday_evening = pst(2, 20, month=11)  # 20:00 PST = 04:00 UTC on Tuesday
    with _open(tmp_path, embedder, "America/Los_Angeles") as mem:
        positions = mem.append_many("c", [
            {"role": "user", "content": "Packing for the trail tomorrow.", "created_at": saturday},
            {"role": "user", "content": "I went hiking yesterday, my legs ache.", "created_at": monday_evening},
            # Monday evening's small talk: the tail, so Saturday's turn comes back retrieved
            *({"role": "user" if k % 2 == 0 else "assistant", "content": text, "created_at": monday_evening + 60 * k}
              for k, text in enumerate(["How was work today?", "Long, lots of email.", "Any plans tonight?",
                                        "Just a quiet dinner at home.", "Enjoy it!", "Thanks, I will."], start=1)),
        ], session_id="weekend")
        mem.append("c", {"role": "user", "content": "What was I packing for?", "created_at": monday_evening + HOUR_S})
        table = mem.turns.get("c")
        assert table.told_start is not None and table.told_end is not None
        tomorrow, yesterday = table.index_of(positions[0]), table.index_of(positions[1])
        assert tomorrow is not None and yesterday is not None
        # both tell of Sunday 1 Nov, the 25-hour day, in the offsets in force at each end
        for i in (tomorrow, yesterday):
            assert (_iso(table.told_start[i]), _iso(table.told_end[i])) == (
                "2026-11-01T07:00+00:00", "2026-11-02T08:00+00:00")
        block = "\n".join(str(m["content"]) for m in mem.context("c", "What was I packing for?", budget=BUDGET).messages)
        # each day's heading shows the offset in force that day: summer time on Saturday,
        # standard time on Monday
        assert "(31 Oct 2026 -07:00)" in block and "(02 Nov 2026 -08:00)" in block, block


def test_both_engines_keep_the_users_days(tmp_path: Path, embedder: Embedder, engine_config: Config) -> None:
    # the days are the planner's arithmetic over the stored seconds: the same on PostgreSQL
    with _open(tmp_path, embedder, "America/Los_Angeles", engine_config) as mem:
        positions = _week(mem)
        table = mem.turns.get("c")
        assert table.told_start is not None
        i = table.index_of(positions[6])  # TOLD_DENTIST
        assert i is not None and _iso(table.told_start[i]) == "2026-12-03T08:00+00:00"
        ctx = mem.context("c", QUESTION, budget=BUDGET)
        best = max((it for it in ctx.plan.items if it.slice == "retrieved"), key=lambda it: it.score)
        assert best.positions[0] == positions[2]  # MORNING_DENTIST, Thursday's

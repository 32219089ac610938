"""A time zone per call, not per deployment: `Memory.context(timezone=)` and
`Memory.namespaced(ns, timezone=)`. One Memory (the config's zone UTC) serves a user in
Los Angeles and one in Tokyo whose turns were stored at the same seconds; each call sees its
own user's days: the day a turn tells of, the day "yesterday" asks about, the dates of the
headings, and the turn cache never hands one zone's told days to a call in another.

The turns, in UTC, and what day they are for each user:

- 10:00Z on Thursday 3 Dec: 02:00 Thursday in Los Angeles, 19:00 Thursday in Tokyo;
- 10:00Z on Friday 4 Dec: 02:00 Friday in Los Angeles, 19:00 Friday in Tokyo;
- 05:00Z on Saturday 5 Dec ("I went hiking yesterday"), and the question at 05:30Z: 21:00
  Friday in Los Angeles (yesterday: Thursday, from its midnight at 08:00Z), 14:00 Saturday in
  Tokyo (yesterday: Friday, from its midnight at 15:00Z on Thursday).

So "yesterday" holds the dentist for the Los Angeles user and the cinema for the one in
Tokyo. On the code before there was no per-call zone (a TypeError: every call was UTC's).
"""

from __future__ import annotations

import calendar
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder

BUDGET = 180  # tokens: a tail of one turn, so the earlier ones come back only as retrieved
LA = "America/Los_Angeles"
TOKYO = "Asia/Tokyo"


def utc(*fields: int) -> float:
    """POSIX seconds of a UTC wall time (year, month, day, hour, minute)."""
    return float(calendar.timegm((*fields, *(0,) * (6 - len(fields)))))


DENTIST = "Went to the dentist, two fillings."
CINEMA = "Went to the cinema, saw a thriller."
HIKING = "I went hiking yesterday, my legs ache."
QUESTION = "What did I do yesterday?"
TURNS = [  # (stored seconds, role, text): the same for both users
    (utc(2026, 12, 3, 10), "user", DENTIST),
    (utc(2026, 12, 3, 10, 1), "assistant", "Ouch, rest up."),
    (utc(2026, 12, 4, 10), "user", CINEMA),
    (utc(2026, 12, 4, 10, 1), "assistant", "Sounds fun!"),
    (utc(2026, 12, 5, 5), "user", HIKING),
    (utc(2026, 12, 5, 5, 1), "assistant", "Stretch well."),
    (utc(2026, 12, 5, 5, 30), "user", QUESTION),
]

# per zone: the day HIKING tells of (UTC instants of its local midnights), the turn whose
# day "yesterday" asks about, and the heading of the dentist's day
DAYS = {
    # Thursday 3 Dec in Los Angeles: its midnights at 08:00Z; the dentist (02:00 Thursday there)
    LA: (("2026-12-03T08:00", "2026-12-04T08:00"), DENTIST, "(03 Dec 2026 -08:00)"),
    # Friday 4 Dec in Tokyo: its midnights at 15:00Z the day before; the cinema (19:00 Friday there)
    TOKYO: (("2026-12-03T15:00", "2026-12-04T15:00"), CINEMA, "(03 Dec 2026 +09:00)"),
    # UTC, the config's: Friday 4 Dec UTC, which holds the cinema (10:00Z); headings without a zone
    "UTC": (("2026-12-04T00:00", "2026-12-05T00:00"), CINEMA, "(03 Dec 2026)"),
}


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M")


def _open(tmp_path: Path, embedder: Embedder) -> Memory:
    return Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False, background_indexing=False)


def _fill(mem: Memory, conv: str, namespace: str | None = None) -> list[int]:
    return mem.append_many(conv, [{"role": r, "content": t, "created_at": ts} for ts, r, t in TURNS],
                           session_id="week", namespace=namespace)


def _told(mem: Memory, conv: str, position: int, zone: str | None) -> tuple[str, str]:
    table = mem.turns.get(conv, zone)
    i = table.index_of(position)
    assert i is not None and table.told_start is not None and table.told_end is not None
    return _iso(table.told_start[i]), _iso(table.told_end[i])


# the date credit in full: sent within the day asked about (a turn just outside it gets less)
WITHIN_YESTERDAY = "date 'yesterday' +8.00"


def _in_yesterday(ctx: object, positions: list[int]) -> set[str]:
    """The user turns retrieved that the plan credits as sent within 'yesterday'."""
    texts = {p: t for p, (_ts, r, t) in zip(positions, TURNS, strict=True) if r == "user"}
    return {texts[it.positions[0]] for it in ctx.plan.items  # type: ignore[attr-defined]
            if it.slice == "retrieved" and WITHIN_YESTERDAY in it.reason and it.positions[0] in texts}


def _headings(ctx: object) -> list[str]:
    block = next(str(m["content"]) for m in ctx.messages  # type: ignore[attr-defined]
                 if m["role"] == "system" and "retrieved" in str(m["content"]))
    return [line for line in block.splitlines() if line.startswith("(")]


def _sees(mem: Memory, conv: str, positions: list[int], zone: str, ctx: object) -> None:
    told, yesterday, heading = DAYS[zone]
    assert _told(mem, conv, positions[4], zone) == told
    assert _in_yesterday(ctx, positions) == {yesterday}
    assert heading in _headings(ctx), _headings(ctx)


@pytest.mark.parametrize("zone", [
    LA,  # the user in Los Angeles: Thursday's dentist was yesterday
    TOKYO,  # the user in Tokyo, same stored seconds: Friday's cinema was
])
def test_two_users_in_one_memory_see_their_own_days(tmp_path: Path, embedder: Embedder, zone: str) -> None:
    with _open(tmp_path, embedder) as mem:
        alice, bob = _fill(mem, "alice"), _fill(mem, "bob")
        # the other user asks first, in the other zone: nothing of theirs leaks into this call
        other = TOKYO if zone == LA else LA
        mem.context("bob", QUESTION, budget=BUDGET, timezone=other)
        ctx = mem.context("alice", QUESTION, budget=BUDGET, timezone=zone)
        _sees(mem, "alice", alice, zone, ctx)
        _sees(mem, "bob", bob, other, mem.context("bob", QUESTION, budget=BUDGET, timezone=other))


def test_no_zone_is_the_configs(tmp_path: Path, embedder: Embedder) -> None:
    # the default, as before: the config's zone (UTC here), headings without a zone
    with _open(tmp_path, embedder) as mem:
        positions = _fill(mem, "c")
        _sees(mem, "c", positions, "UTC", mem.context("c", QUESTION, budget=BUDGET))
        assert _told(mem, "c", positions[4], None) == DAYS["UTC"][0]


def test_alternating_zones_on_one_conversation_never_mix_days(tmp_path: Path, embedder: Embedder) -> None:
    # one conversation read in turn by calls in three zones: each call gets its own zone's
    # told days and windows, never the ones the previous call derived
    with _open(tmp_path, embedder) as mem:
        positions = _fill(mem, "c")
        for zone in (LA, TOKYO, LA, "UTC", TOKYO):
            _sees(mem, "c", positions, zone, mem.context("c", QUESTION, budget=BUDGET, timezone=zone))
        # a turn appended after the zones were derived is derived in each of them
        late = mem.append("c", {"role": "user", "content": "The day before yesterday I rested.",
                                "created_at": utc(2026, 12, 5, 6)})
        assert _told(mem, "c", late, LA)[0] == "2026-12-02T08:00"  # Wednesday in Los Angeles
        assert _told(mem, "c", late, TOKYO)[0] == "2026-12-02T15:00"  # Thursday in Tokyo
        assert _told(mem, "c", late, None)[0] == "2026-12-03T00:00"  # Thursday UTC


def test_a_namespaced_view_defaults_to_its_users_zone(tmp_path: Path, embedder: Embedder) -> None:
    with _open(tmp_path, embedder) as mem:
        alice = mem.namespaced("acme", timezone=LA).namespaced("alice")  # inherits Los Angeles
        bob = mem.namespaced("acme/bob", timezone=TOKYO)
        a, b = _fill(mem, "c", "acme/alice"), _fill(mem, "c", "acme/bob")
        _sees(mem, mem.cold.key_of("acme/alice", "c") or "", a, LA, alice.context("c", QUESTION, budget=BUDGET))
        _sees(mem, mem.cold.key_of("acme/bob", "c") or "", b, TOKYO, bob.context("c", QUESTION, budget=BUDGET))
        # a call's own zone wins over the view's
        ctx = bob.context("c", QUESTION, budget=BUDGET, timezone=LA)
        assert _in_yesterday(ctx, b) == {DENTIST}

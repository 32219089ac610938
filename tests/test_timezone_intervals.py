"""A superseded statement's validity interval is shown on the user's clock: with
`Config.timezone` the times carry the local offset ("04 Dec 2026 21:00 -08:00"), in the
pinned line and in the plan's reason; in UTC (the default) as before zones existed.

On the code before every interval was UTC's without a zone ("05 Dec 2026 05:00"), which a
model reads as the user's local time: eight hours off in Los Angeles.
"""

from __future__ import annotations

import calendar
from pathlib import Path

import pytest

from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder

BUDGET = 400
PST_S = 8 * 3600.0  # Los Angeles is UTC-08:00 in December


def pst(day: int, hour: int, minute: int = 0) -> float:
    """POSIX seconds of a Los Angeles wall time in December 2026."""
    return float(calendar.timegm((2026, 12, day, hour, minute, 0))) + PST_S


@pytest.mark.parametrize(("timezone", "interval"), [
    # local times with their offset: the name was valid from 21:00 to 21:30 Friday evening there
    ("America/Los_Angeles", "valid 04 Dec 2026 21:00 -08:00 until 04 Dec 2026 21:30 -08:00"),
    # the default: UTC's Saturday morning, no zone shown, exactly as before
    ("UTC", "valid 05 Dec 2026 05:00 until 05 Dec 2026 05:30"),
])
def test_a_superseded_pin_shows_its_interval_on_the_users_clock(tmp_path: Path, embedder: Embedder,
                                                                 timezone: str, interval: str) -> None:
    with Memory(Config(data_dir=tmp_path / "data", timezone=timezone), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        p = mem.append("c", {"role": "user", "content": "My dog's name is Biscuit.", "created_at": pst(4, 21)})
        mem.pin("c", p, priority=100)
        mem.append_many("c", [{"role": "user" if i % 2 else "assistant", "content": f"nice weather ({i})",
                               "created_at": pst(4, 21, 1 + i)} for i in range(12)])
        mem.append("c", {"role": "user", "content": "Actually, my dog's name is Pepper now.",
                         "created_at": pst(4, 21, 30)})
        mem.append_many("c", [{"role": "user" if i % 2 else "assistant", "content": f"pasta for lunch ({i})",
                               "created_at": pst(4, 21, 31 + i)} for i in range(12)])
        mem.append("c", {"role": "user", "content": "Book the vet for my dog.", "created_at": pst(4, 22)})
        ctx = mem.context("c", "Book the vet for my dog.", budget=BUDGET)
        pinned = next(str(m["content"]) for m in ctx.messages
                      if m["role"] == "system" and str(m["content"]).startswith("Standing instructions"))
        line = next(ln for ln in pinned.split("\n") if "Biscuit" in ln)
        assert interval in line, line
        item = next(it for it in ctx.plan.items if it.slice == "pinned" and it.positions == [p])
        assert interval.replace("valid ", f"valid #{p} ").split(" until ")[0] in item.reason, item.reason

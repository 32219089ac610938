"""A change of the user's time zone between two calls starts a new prompt-cache epoch, as a
budget or system prompt change does: the previous context's dates and headings are another
clock's, so extending it would show one conversation on two clocks. The plan says why.
The same zone again extends the epoch as before.

On the code before there was no per-call zone (a TypeError)."""

from __future__ import annotations

import calendar
from pathlib import Path

import pytest

from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder

BUDGET = 2000  # tokens: room to extend an epoch
LA = "America/Los_Angeles"
TOKYO = "Asia/Tokyo"


def utc(*fields: int) -> float:
    return float(calendar.timegm((*fields, *(0,) * (6 - len(fields)))))


@pytest.mark.parametrize(("first", "second", "new_epoch", "reason"), [
    # another zone: a new epoch, and the plan names both zones
    (LA, TOKYO, True, "time zone changed (America/Los_Angeles -> Asia/Tokyo): the dates shown are another "
                      "clock's"),
    # from the config's zone (None: UTC here) to a zone of the call's own: also a change
    (None, LA, True, "time zone changed (UTC -> America/Los_Angeles)"),
    # the config's zone named explicitly is the same zone: the epoch goes on
    (None, "UTC", False, ""),
    # the same zone again: the epoch goes on
    (TOKYO, TOKYO, False, ""),
])
def test_a_zone_change_starts_a_new_epoch(tmp_path: Path, embedder: Embedder, first: str | None, second: str,
                                          new_epoch: bool, reason: str) -> None:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append_many("c", [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} about trains",
                               "created_at": utc(2026, 12, 4, 10, i)} for i in range(6)])
        mem.append("c", {"role": "user", "content": "Which train do I take?", "created_at": utc(2026, 12, 4, 11)})
        before = mem.context("c", "Which train do I take?", budget=BUDGET, timezone=first)
        after = mem.context("c", "Which train do I take?", budget=BUDGET, timezone=second)
        assert after.plan.cache.new_epoch is new_epoch
        assert after.plan.cache.epoch == before.plan.cache.epoch + (1 if new_epoch else 0)
        assert reason in after.plan.cache.reason
        if not new_epoch:  # extended: the previous context is kept byte for byte
            assert after.messages[:len(before.messages) - 1] == before.messages[:-1]

"""planner.render TERSE: the retrieved block's header is short and a session heading carries
the date only (no session id), so a small budget holds more retrieved turns; the budget
stays hard and the plan still names every shown turn's position."""

from __future__ import annotations

import re

import pytest

from tiermem import Memory
from tiermem.planner import render

DAY_S = 86_400.0
T0 = 1_700_000_000.0
TOPICS = ["sailing on the lake", "baking sourdough bread", "restoring an old bicycle", "growing tomatoes",
          "learning the violin", "painting watercolours", "climbing at the gym", "repairing a radio"]


def _talk(mem: Memory) -> None:
    """Eight sessions on eight days, each with a turn about one hobby among small talk."""
    for d, topic in enumerate(TOPICS):
        t = T0 + d * DAY_S
        batch = [
            {"role": "user", "name": "Ann", "content": f"This week I spent hours {topic}, it was great.",
             "created_at": t},
            {"role": "assistant", "name": "Bob", "content": "Nice, glad you had fun.", "created_at": t + 60},
            {"role": "user", "name": "Ann", "content": "Anyway, how is work going?", "created_at": t + 120},
            {"role": "assistant", "name": "Bob", "content": "Busy but fine, thanks.", "created_at": t + 180},
        ]
        mem.append_many("c", batch, session_id=f"session_{d + 1}")
    mem.append("c", {"role": "user", "name": "Ann", "content": "What hobbies have I spent hours on?",
                     "created_at": T0 + 9 * DAY_S})


def _retrieved(mem: Memory, budget: int) -> tuple[str, int, int]:
    ctx = mem.context("c", "What hobbies have I spent hours on?", budget=budget, record=False)
    assert ctx.tokens <= budget  # the budget is hard
    block = next(str(m["content"]) for m in ctx.messages
                 if str(m.get("content", "")).startswith((render.HEADERS["retrieved"], render.VERBOSE_RETRIEVED_HEADER)))
    shown = sum(len(it.positions) for it in ctx.plan.items if it.slice == "retrieved")
    return block, shown, ctx.tokens


@pytest.mark.parametrize(("terse", "header", "heading"), [
    (1, render.HEADERS["retrieved"], re.compile(r"^\(\d\d \w{3} \d{4}\)$")),  # the default: the date only
    (0, render.VERBOSE_RETRIEVED_HEADER, re.compile(r"^\(\d\d \w{3} \d{4}, session_\d+\)$")),  # as before: date, session
])
def test_block_header_and_headings(cold_memory: Memory, monkeypatch: pytest.MonkeyPatch, terse: int,
                                   header: str, heading: re.Pattern[str]) -> None:
    monkeypatch.setattr(render, "TERSE", terse)
    _talk(cold_memory)
    block, shown, _tokens = _retrieved(cold_memory, 400)
    lines = block.split("\n")
    assert lines[0] == header
    headings = [ln for ln in lines[1:] if ln.startswith("(")]
    assert headings and all(heading.match(h) for h in headings), headings
    assert shown >= 1


def test_terse_fits_more_turns_in_a_small_budget(cold_memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    _talk(cold_memory)
    got = {}
    for terse in (0, 1):
        monkeypatch.setattr(render, "TERSE", terse)
        got[terse] = _retrieved(cold_memory, 300)[1]
    assert got[1] > got[0], got  # the headings' session ids paid for at least one more turn

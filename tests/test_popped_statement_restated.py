"""A statement superseded again after its popped correction stays superseded, everywhere.

A review found (9d3ac3a): "My flight lands at 9am and my hotel is the Hilton.", then
"Actually my hotel is the Marriott now." (#2) and "Actually my flight lands at 11am now."
(#4); #2 popped, then "Actually my hotel is the Ritz now." (#7). Turn 0 got
superseded_by 7, but the hotel statement's row still named the popped #2 (a row already
recorded stayed as it was), so `Hidden` took turn 0 as revived: the context showed
"[user] my hotel is the Hilton." unlabelled beside the Ritz, and facts() called the
Hilton current.

Invariants (tiers.statements):
- A correction that supersedes a statement whose row names a hidden turn rewrites that
  row (`set_superseded_statements`'s `over`), on both engines.
- A turn is revived only when its ``superseded_by`` is one of its own statement rows'
  (`Hidden.revived`): a row left naming the popped turn by a store written before the
  rewrite reads the turn as its ``superseded_by`` says, on every path that labels it.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from cold_helpers import sql_behind

from tiermem import Config, Memory
from tiermem.inspector import data
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.formats import RETRACT_TYPE
from tiermem.tiers.models import HIT_SUPERSEDED, message_text
from tiermem.tiers.statements import StatementRow

MARK = "SUPERSEDED, not current"
BOTH = "My flight lands at 9am and my hotel is the Hilton."
FLIGHT_SPAN = (0, BOTH.index(" and "))  # "My flight lands at 9am"
HOTEL_SPAN = (BOTH.index("my hotel"), len(BOTH))  # "my hotel is the Hilton."
POPPED, FLIGHT_BY, RITZ_AT = 2, 4, 7  # the Marriott (popped), the flight's correction, the Ritz
SMALL_BUDGET = 300  # tokens: the tail leaves turn 0 out, so it is retrieved


def _say(mem: Memory, users: list[str]) -> None:
    for u in users:
        mem.append_many("c", [{"role": "user", "content": u}, {"role": "assistant", "content": "Noted."}])


def _restated(mem: Memory) -> None:
    _say(mem, [BOTH, "Actually my hotel is the Marriott now.", "Actually my flight lands at 11am now."])
    mem.catch_up("c")
    mem.append("c", {"type": RETRACT_TYPE, "position": POPPED})  # position 6
    _say(mem, ["Actually my hotel is the Ritz now."])  # position 7
    mem.catch_up("c")


def _as_before(mem: Memory, cfg: Config) -> None:
    """The hotel row as a store written before the rewrite left it: naming the popped turn."""
    sql_behind(cfg, "UPDATE statement_supersessions SET superseded_by = ? "
                    "WHERE conversation_id = ? AND position = 0 AND start = ?", (POPPED, "c", HOTEL_SPAN[0]))
    assert (0, *HOTEL_SPAN, POPPED) in [(s.position, s.start, s.end, s.superseded_by)
                                        for s in mem.cold.superseded_statements("c")]


@pytest.mark.parametrize("engine_config", ["sqlite", "postgres"], indirect=True)
def test_the_restating_correction_rewrites_the_row(engine_config: Config, embedder: FastEmbedder) -> None:
    with Memory(engine_config, embedder=embedder, hot=False, background_indexing=False) as mem:
        _restated(mem)
        assert mem.cold.turns("c")[0].superseded_by == RITZ_AT
        # before: the hotel row still said 2 (INSERT OR IGNORE / ON CONFLICT DO NOTHING)
        assert mem.cold.superseded_statements("c") == [StatementRow(0, *FLIGHT_SPAN, FLIGHT_BY),
                                                       StatementRow(0, *HOTEL_SPAN, RITZ_AT)]


def _retrieved(mem: Memory) -> list[str]:
    query = "Which hotel am I staying at?"
    mem.append("c", {"role": "user", "content": query})
    ctx = mem.context("c", query, SMALL_BUDGET, namespace_recall=False)
    return [ln for m in ctx.messages for ln in message_text(m).splitlines() if "Hilton" in ln]


def _facts(mem: Memory) -> list[str]:
    # as a context line would say it: labelled when superseded
    return [f"[user{' · ' + MARK if f.status == 'superseded' else ''}] {f.text}"
            for f in mem.facts("c") if f.position == 0 and "Hilton" in f.text]


def _search(mem: Memory) -> list[str]:
    [hit] = [h for h in mem.search("c", "hotel Hilton", k=5) if h.position == 0]
    return [f"[user · {MARK}] my hotel is the Hilton."] if hit.status == HIT_SUPERSEDED and \
        hit.superseded_by == RITZ_AT else [f"[user] my hotel is the Hilton. ({hit.status})"]


def _log_page(mem: Memory) -> list[str]:
    [row] = [r for r in data.turns_page(mem, "default", "c", None).rows if r.position == 0]
    # the template says "superseded in part" when the row's superseded_by is None
    return [f"[user · {MARK}] my hotel is the Hilton."] if row.superseded_by == RITZ_AT else \
        [f"[user] my hotel is the Hilton. (superseded_by {row.superseded_by})"]


@pytest.mark.parametrize("legacy", [
    False,  # the row as this version writes it (the Ritz's)
    True,  # the row as a store written before left it (the popped Marriott's): read as the turn says
])
@pytest.mark.parametrize("path", [
    _retrieved,  # a retrieved line (the reviewer's: "[user] my hotel is the Hilton." beside the Ritz)
    _facts,  # what facts() believes (before: the Hilton current)
    _search,  # a search hit's status (tiers.statements.turn_states)
    _log_page,  # the inspector's Log page row
])
def test_the_hilton_stays_superseded_by_the_ritz(
        cold_memory: Memory, path: Callable[[Memory], list[str]], legacy: bool) -> None:
    _restated(cold_memory)
    if legacy:
        _as_before(cold_memory, cold_memory.config)
    lines = path(cold_memory)
    assert lines and all(MARK in ln for ln in lines), lines

"""A call in another zone derives its told periods again from the indexed texts alone
(`ColdLog.indexed_texts`), of the turns whose text names a time: before, it re-read them
with `turn_facts(positions=..., texts=True)`, which joins the vector table, returns every
turn's embedding and extracts its speaker, none of which that derivation uses."""

from __future__ import annotations

import calendar
import math
from collections.abc import Sequence
from typing import Any

import pytest

from tiermem.planner.timeline import told
from tiermem.tiers import turncache
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.models import Message
from tiermem.tiers.turncache import TurnCache, TurnTable

PAGE = 3  # turns per read: the dated turns span several pages
LA = "America/Los_Angeles"
START = float(calendar.timegm((2026, 12, 5, 5, 0, 0)))  # 21:00 the day before in Los Angeles
DATED = {1: "I went hiking yesterday", 4: "we moved here last week", 8: "see you next Tues"}


def _periods(table: TurnTable) -> list[tuple[float, float] | None]:
    assert table.told_start is not None and table.told_end is not None
    return [None if math.isnan(s) else (float(s), float(e)) for s, e in zip(table.told_start, table.told_end, strict=True)]


def test_another_zone_reads_only_the_dated_turns_texts(cold: ColdStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(turncache, "FACTS_PAGE_TURNS", PAGE)
    cold.append_many("c", [Message(role="user", content=DATED.get(i, f"the soup was salty {i}"),
                                   created_at=START + 60 * i) for i in range(10)])
    cold.index_pending()
    cache = TurnCache(cold, derive=told, zone="UTC")
    cache.get("c")  # loaded and derived in UTC
    reread: list[Any] = []
    texts: list[list[int]] = []
    real_facts, real_texts = cold.turn_facts, cold.indexed_texts

    def facts(conversation_id: str, **kw: Any) -> Any:
        if kw.get("positions") is not None:
            reread.append(kw)
        return real_facts(conversation_id, **kw)

    def indexed(conversation_id: str, positions: Sequence[int]) -> dict[int, str]:
        texts.append(list(positions))
        return real_texts(conversation_id, positions)

    monkeypatch.setattr(cold, "turn_facts", facts)
    monkeypatch.setattr(cold, "indexed_texts", indexed)
    got = _periods(cache.get("c", LA))
    assert reread == []  # no vectors nor speakers read again
    assert texts == [[1, 4, 8]]  # the texts of the turns that name a time, one page of positions
    monkeypatch.undo()
    assert got == _periods(TurnCache(cold, derive=told, zone=LA).get("c", LA))  # as a load in LA
    assert [i for i, p in enumerate(got) if p is not None] == sorted(DATED)

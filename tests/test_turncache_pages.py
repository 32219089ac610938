"""The turn cache reads a conversation from the log a page at a time (tiers/turncache.py,
`FACTS_PAGE_TURNS`): each page is one read, so the store's lock, which every tenant's
reads and writes wait on, is held for a page, not for the whole conversation (~1 s at
20,000 turns). Paging must not change what the planner sees: every turn once, in log
order, turns appended between two pages included."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tiermem.tiers import turncache
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.embed import Embedder
from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter
from tiermem.tiers.turncache import TurnCache

PAGE = 7  # turns per read in these tests; the conversations span several pages


def msgs(n: int, start: int = 0) -> list[Message]:
    return [Message(role="user" if i % 2 == 0 else "assistant", content=f"turn {i} about the boiler")
            for i in range(start, start + n)]


class Reads:
    """Records each `turn_facts` read of a store (its arguments and how many rows came
    back) and calls through to the real one; `after_first` runs once after the first."""

    def __init__(self, store: Any, after_first: Any = None) -> None:
        self.store, self.after_first = store, after_first
        self.calls: list[tuple[int, int | None, int]] = []
        self.real = store.turn_facts

    def __call__(self, conversation_id: str, **kw: Any) -> Any:
        rows = self.real(conversation_id, **kw)
        if kw.get("positions") is None:
            self.calls.append((kw.get("after", -1), kw.get("limit"), len(rows)))
            if self.after_first is not None and len(self.calls) == 1:
                self.after_first()
        return rows


@pytest.fixture
def cold(tmp_path: Path, counter: BpeTokenCounter, embedder: Embedder,
         monkeypatch: pytest.MonkeyPatch) -> Iterator[ColdStore]:
    monkeypatch.setattr(turncache, "FACTS_PAGE_TURNS", PAGE, raising=False)
    store = ColdStore(tmp_path / "tiermem.db", tokens=counter, embedder=embedder)
    yield store
    store.close()


@pytest.mark.parametrize("turns", [
    3 * PAGE + 2,  # a short last page
    3 * PAGE,  # the last page full: one more read finds nothing
    PAGE - 1,  # one page
])
def test_a_conversation_is_read_in_pages_and_whole(cold: ColdStore, monkeypatch: pytest.MonkeyPatch,
                                                   turns: int) -> None:
    key = cold.append_batch("c", msgs(turns)).key
    cold.index_pending()
    reads = Reads(cold)
    monkeypatch.setattr(cold, "turn_facts", reads)
    table = TurnCache(cold).get(key)
    assert table.positions.tolist() == list(range(turns))
    assert bool(table.has_vec.all())
    # every read is a page (before: one read of the whole conversation)
    assert all(limit == PAGE and got <= PAGE for _after, limit, got in reads.calls)
    assert len(reads.calls) == turns // PAGE + 1
    assert [after for after, _limit, _got in reads.calls] == [-1 + PAGE * i for i in range(len(reads.calls))]


def test_turns_appended_between_two_pages_are_read(cold: ColdStore, monkeypatch: pytest.MonkeyPatch) -> None:
    key = cold.append_batch("c", msgs(2 * PAGE + 3)).key
    cold.index_pending()
    reads = Reads(cold, after_first=lambda: cold.append_batch("c", msgs(4, start=2 * PAGE + 3)))
    monkeypatch.setattr(cold, "turn_facts", reads)
    cache = TurnCache(cold)
    assert cache.get(key).positions.tolist() == list(range(2 * PAGE + 7))
    reads.calls.clear()
    assert cache.get(key).positions.tolist() == list(range(2 * PAGE + 7))
    assert reads.calls == [] and cache.reloads == 0  # the copy is whole: nothing to read again

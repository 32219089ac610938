"""A popped correction brings the value it replaced back into the incremental views.

Invariants (consolidation.views, module docstring and `ViewMaintainer._restored`):
- The rolling view is refreshed from the previous version's cited turns plus the later
  ones. A turn a correction superseded is cited by no version, so when a retraction (the
  adapters' pop) later hides that correction, the refresh adds the turns it made current
  again: the view shows the old value as current, as `facts()` and the context do.
  Both a sweep (`Memory.consolidate()`) and a refresh by name (`consolidate(conv)`).
- A chain A -> B -> C with C popped restores B; with B popped, A stays superseded (by C).
- The same for a session view, over its own session's turns.
- Not a full refresh: the summarizer gets the previous version's cited turns, the new
  turns and the restored ones only; a pop that undoes no supersession adds nothing.
- `ColdLog.turns_superseded_by` (what finds the restored turns) answers alike on both engines.
Real stores (a SQLite file; a fresh PostgreSQL schema, tests/pg_server.py), the extractive
summarizer (the default), the real embedder.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from pg_server import opened, target  # noqa: F401  (pytest fixture)

from tiermem import Memory
from tiermem.consolidation.summarize import SourceTurn, Summarizer
from tiermem.tiers.formats import RETRACT_TYPE
from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter
from tiermem.tiers.warm import Sentence

FILLER = ["Tell me about the museums in the city.", "There are several art museums downtown.",
          "What about parks nearby?", "The riverside park is large and green."]
OLD = "My budget is 3000 dollars for the whole trip."
MIDDLE = "Correction: my budget is 4500 dollars, not 3000."
LAST = "Sorry, my budget is 5200 dollars, not 4500."


class Recording:
    """The Memory's own summarizer, recording the positions each call was given."""

    def __init__(self, inner: Summarizer) -> None:
        self.inner = inner
        self.name = inner.name
        self.calls: list[list[int]] = []

    def summarize(self, turns: Sequence[SourceTurn], *, target_tokens: int) -> list[Sentence]:
        self.calls.append([t.position for t in turns])
        return self.inner.summarize(turns, target_tokens=target_tokens)


def _fill(mem: Memory, rounds: int, tag: str, **kw: Any) -> None:
    for i in range(rounds):
        mem.append_many("c", [{"role": ("user", "assistant")[j % 2], "content": f"{t} ({tag} {i})"}
                              for j, t in enumerate(FILLER)], **kw)


def _say(mem: Memory, text: str, **kw: Any) -> int:
    [p] = mem.append_many("c", [{"role": "user", "content": text}], **kw)
    return p


def _current(mem: Memory, kind: str = "rolling", key: str = "") -> dict[str, tuple[int, ...]]:
    view = mem.warm.latest("c", kind, key)
    assert view is not None
    return {s.text: s.positions for s in view.sentences if s.status == "current"}


def _conversation(mem: Memory, *corrections: str, **kw: Any) -> list[int]:
    """OLD, filler, each correction followed by filler, the views refreshed (v1): the
    positions of OLD and of each correction."""
    at = [_say(mem, OLD, **kw)]
    _fill(mem, 3, "a", **kw)
    for i, text in enumerate(corrections):
        at.append(_say(mem, text, **kw))
        _fill(mem, 2, f"b{i}", **kw)
    mem.catch_up("c")
    for i, p in enumerate(at[:-1]):  # the supersession the pop undoes was recorded
        assert mem.cold.turns_at("c", [p])[0].superseded_by == at[i + 1]
    mem.consolidate("c")
    assert OLD not in _current(mem)  # superseded: left out of v1
    return at


def _pop(mem: Memory, position: int, **kw: Any) -> None:
    mem.append("c", {"type": RETRACT_TYPE, "position": position}, **kw)
    mem.catch_up("c")


@pytest.mark.parametrize("by_name", [
    False,  # the sweep (Memory.consolidate()): v1 cites the popped correction, so it is outdated
    True,  # a refresh asked for by name (Memory.consolidate("c"))
])
def test_popping_the_correction_brings_the_old_value_back(cold_memory: Memory, by_name: bool) -> None:
    mem = cold_memory
    old, corr = _conversation(mem, MIDDLE)
    assert MIDDLE in _current(mem)
    _pop(mem, corr)
    mem.consolidate("c" if by_name else None)
    lines = _current(mem)
    assert lines.get(OLD) == (old,)  # current again, citing its own turn
    assert not [t for t, ps in lines.items() if corr in ps]  # the popped correction is nowhere


@pytest.mark.parametrize("popped, restored, still_gone", [
    (2, MIDDLE, OLD),  # C popped: B current again, A still superseded by B
    (1, None, MIDDLE),  # B popped: A reads as superseded by C, so nothing comes back
], ids=["last_popped", "middle_popped"])
def test_a_chain_restores_only_what_is_current_again(cold_memory: Memory, popped: int, restored: str | None,
                                                     still_gone: str) -> None:
    mem = cold_memory
    at = _conversation(mem, MIDDLE, LAST)
    _pop(mem, at[popped])
    _fill(mem, 1, "c")
    mem.consolidate("c")
    lines = _current(mem)
    if restored is not None:
        assert lines.get(restored) == (at[1],)
    assert still_gone not in lines
    assert OLD not in lines


def test_a_session_view_gets_the_old_value_back(cold_memory: Memory) -> None:
    mem = cold_memory
    old, corr = _conversation(mem, MIDDLE, session_id="s1")
    assert OLD not in _current(mem, "session", "s1")
    _pop(mem, corr, session_id="s2")  # the pop in a later session
    _fill(mem, 1, "later", session_id="s1")
    mem.consolidate("c")
    assert _current(mem, "session", "s1").get(OLD) == (old,)


@pytest.mark.parametrize("pop_correction", [
    True,  # the pop undoes a supersession: exactly the restored turn is added
    False,  # a pop of a filler turn undoes nothing: no turn beyond cited + new
])
def test_the_refresh_stays_incremental(cold_memory: Memory, pop_correction: bool) -> None:
    mem = cold_memory
    old, corr = _conversation(mem, MIDDLE)
    v1 = mem.warm.latest("c", "rolling")
    assert v1 is not None
    cited = {p for s in v1.sentences if s.status == "current" for p in s.positions}
    filler = next(p for p in range(old + 1, corr) if p not in cited)
    popped = corr if pop_correction else filler
    rec = Recording(mem.views.summarizer)
    mem.views.summarizer = rec
    _pop(mem, popped)
    _fill(mem, 1, "c")
    mem.consolidate("c")
    assert len(rec.calls) == 1  # one incremental call (no chunked full refresh)
    new = set(range(v1.end_position + 1, mem.cold.last_position("c") + 1))
    given = set(rec.calls[0])
    assert given - cited - new == ({old} if pop_correction else set())
    assert popped not in given  # the popped turn itself is never a source


def _seed_store(store: Any) -> None:
    store.append_many("c", [Message(role="user", content=OLD), Message(role="user", content="I fly on Monday."),
                            Message(role="user", content=MIDDLE), Message(role="user", content="No, on Tuesday.")])
    store.set_superseded("c", [(0, 2), (1, 3)])


@pytest.mark.parametrize("by, start, end, expected", [
    ({2}, 0, 3, [0]),  # what one correction superseded
    ({3, 2}, 0, 3, [0, 1]),  # two pops at once, in log order
    ({3}, 0, 0, []),  # its target is outside the range
    ({1, 0}, 0, 3, []),  # turns that superseded nothing
])
def test_turns_superseded_by(target: tuple[str, str], counter: BpeTokenCounter,  # noqa: F811  (the fixture)
                             by: set[int], start: int, end: int, expected: list[int]) -> None:
    with opened(target, counter) as store:
        _seed_store(store)
        assert store.turns_superseded_by("c", by, start=start, end=end) == expected

"""The calls b2c32da left outside a conversation's memo scope: facts, the sweeps, rebuild.

`Memory.facts` (HTTP facts, `tiermem facts`) ran supersession's `facts` in no scope: its
correction cues, parses and labels landed in the scope shared by every caller outside a
conversation (None), and every tenant's facts call read from it, so tenant B's facts
call scored hits only when tenant A had written the same correction. A sweep
(`Memory.consolidate()` without a conversation, the scheduler's run on its own thread)
and a rebuild's per-row labels and counts did the same with every conversation's text.
Each now runs in the conversation's own scope (`tiers.memo`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pg_server import fresh_schema

from tiermem import Config, Memory
from tiermem.consolidation import classify, supersede
from tiermem.tiers import lexical
from tiermem.tiers.embed import Embedder
from tiermem.tiers.memo import ScopedMemo

FIRST = "The Globex merger closes on the 9th of March."


def _correction(day: str) -> str:
    return f"Actually, the Globex merger closes on the {day} of March, not the 9th."


def _memos(mem: Memory) -> list[ScopedMemo[object, object]]:
    """Every text cache but the embedder's (tests/test_memo_scope.py)."""
    parses = (supersede._slots, supersede._content_items, supersede._inflected, supersede._holder,
              supersede._clauses)
    return [classify._cue_memo, classify._label_memo, lexical._terms, mem.tokens._memo,  # type: ignore[attr-defined, list-item]
            *(c.memo for c in parses)]


def _forget_all(mem: Memory) -> None:
    """What an erasure clears: the call under test starts from caches that remember nothing."""
    classify.clear_memo()
    supersede.clear_memo()
    lexical.forget_terms()
    mem.tokens.clear_memo()  # type: ignore[attr-defined]


def _shared(mem: Memory) -> int:
    """Results remembered in the scope shared by callers outside any conversation (None):
    read here, in no scope, where such a caller would find them."""
    return sum(len(m.table()) for m in _memos(mem))


def _cue_hits() -> int:
    return classify._cue_memo.hits


@pytest.fixture(params=["sqlite", "postgres"])
def open_memory(request: pytest.FixtureRequest, tmp_path: Path, embedder: Embedder) -> Iterator[Callable[[], Memory]]:
    """Each engine: a rebuild's rows are labelled and counted by the store."""
    opened: list[Memory] = []

    def once() -> Memory:
        engine: dict[str, str] = {}
        if request.param == "postgres":
            engine = {"cold_url": request.getfixturevalue("pg_url"), "cold_schema": fresh_schema()}
        # every view over budget after one turn: a sweep refreshes whatever was written
        mem = Memory(Config(data_dir=tmp_path / f"run{len(opened)}", warm_max_turns_behind=1,
                            **engine),  # type: ignore[arg-type]
                     embedder=embedder, hot=False, background_indexing=False)
        opened.append(mem)
        _forget_all(mem)
        return mem

    yield once
    for mem in opened:
        mem.close()


def _write(mem: Memory, namespace: str, conversation: str, day: str) -> None:
    mem.append(conversation, {"role": "user", "content": FIRST}, namespace=namespace)
    mem.append(conversation, {"role": "user", "content": _correction(day)}, namespace=namespace)


def test_facts_of_another_namespace_score_no_hit(open_memory: Callable[[], Memory]) -> None:
    """B's facts call over its guess of A's correction scores the same cue hits whether A
    wrote that correction or another (the reviewer's facts_scope2: 1 against 0 before)."""
    gained = []
    for a_day in ("14th", "22nd"):  # A wrote B's guess; A wrote something else
        mem = open_memory()
        _write(mem, "acme", "board", a_day)
        _write(mem, "evil", "probe", "14th")
        mem.catch_up()
        a_facts = mem.facts("board", namespace="acme")
        assert any(f.status == "superseded" for f in a_facts)  # A's correction did supersede
        before = _cue_hits()
        mem.facts("probe", namespace="evil")
        gained.append(_cue_hits() - before)
    assert gained[0] == gained[1]


def _sweep(mem: Memory) -> None:
    assert mem.consolidate() > 0


def _scheduler_run(mem: Memory) -> None:
    """The scheduler's run, on a thread of its own as its timer runs it: no scope set there."""
    done: list[int] = []
    runner = threading.Thread(target=lambda: done.append(mem.make_scheduler().run_once()))
    runner.start()
    runner.join()
    assert done and done[0] > 0


def _rebuild(mem: Memory) -> None:
    assert mem.rebuild()["labeled"] > 0


CALLS: list[tuple[str, Callable[[Memory], object]]] = [
    # GET facts and `tiermem facts`: supersession's cues, parses and labels of the statements
    ("facts", lambda mem: mem.facts("board", namespace="acme")),
    # Memory.consolidate() without a conversation: the views over budget, of every namespace
    ("consolidate sweep", _sweep),
    # the scheduler's timer thread: the same sweep, where no caller set a scope
    ("scheduler run", _scheduler_run),
    # rebuild: the store's per-row labels and token counts, then the relabelling replay
    ("rebuild", _rebuild),
]


@pytest.mark.parametrize("name, call", CALLS, ids=[c[0] for c in CALLS])
def test_a_conversations_text_stays_in_its_scope(open_memory: Callable[[], Memory], name: str,
                                                  call: Callable[[Memory], object]) -> None:
    mem = open_memory()
    _write(mem, "acme", "board", "14th")
    _write(mem, "evil", "probe", "22nd")
    mem.catch_up()
    _forget_all(mem)  # the appends' own results (in their scopes) are not what is checked
    call(mem)
    assert _shared(mem) == 0, name

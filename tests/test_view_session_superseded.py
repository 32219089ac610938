"""A session's summary never keeps a corrected or retracted line as current.

Session s1 says a fact; later the fact is corrected in session s2, or its turn is
retracted by a control row (without a session, as the adapters add it, or within s1).
Nothing is appended to s1's own range in the first two cases, so before, no refresh
touched s1's view: `consolidate(conv)` refreshed a session view only when its session had
new turns, and the sweep only views over their freshness budget, so s1's view kept
"My hotel is the Hilton Riverside." (or the retracted pin) as a current line for good
(docs/design.md, "Warm": no view line presents a superseded value as current). Now a view
citing as current an item superseded or hidden since is refreshed by both
(consolidation.views `outdated_views`), and the sweep finds it with the default budgets.
The planner's context never shows the old value as a current summary line, before or
after the refresh.

Real stores (a SQLite file; PostgreSQL through tests/pg_server.py), the real classifier,
embedder and supersession."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pg_server import fresh_schema

from tiermem import Config, Memory
from tiermem.tiers.warm import SummaryView

CONV = "c1"
BUDGET_TOKENS = 400  # room for the summary, the tail and the question


@dataclass(frozen=True)
class Case:
    first: tuple[str, ...]  # s1's turns (user, assistant, ...)
    change: dict[str, Any]  # the message that corrects or retracts
    change_session: str | None
    gone: str  # words that must not be a current line of s1's view any more
    kept: str  # words of s1 that still hold
    query: str


CASES = {
    # corrected in a later session: a statement of turn 0 and the whole of turn 1 (failed before)
    "superseded-across-sessions": Case(
        ("My flight leaves Monday at 9am. My hotel is the Hilton Riverside.",
         "Got it: Monday 9am flight, Hilton Riverside."),
        {"role": "user", "content": "Change of plans: my hotel is now the Marriott Downtown."}, "s2",
        "Hilton Riverside", "Monday at 9am", "Where am I staying?"),
    # a retraction row without a session, as the adapters' pop adds it (failed before)
    "retracted-without-session": Case(
        ("Book the red-eye flight to Lisbon please.", "Also my secret pin is 4455 for the safe."),
        {"type": "tiermem.retract", "position": 1}, None,
        "4455", "red-eye flight to Lisbon", "What is the safe pin?"),
    # a retraction row within s1: its view is behind by that row (the sweep left it
    # inside its budget, failed before; consolidate(conv) passed before)
    "retracted-within-session": Case(
        ("Book the red-eye flight to Lisbon please.", "Also my secret pin is 4455 for the safe."),
        {"type": "tiermem.retract", "position": 1}, "s1",
        "4455", "red-eye flight to Lisbon", "What is the safe pin?"),
}


@pytest.fixture(params=["sqlite", "postgres"])
def memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Memory]:
    extra: dict[str, Any] = {}
    if request.param == "postgres":
        extra = {"cold_url": request.getfixturevalue("pg_url"), "cold_schema": fresh_schema()}
    # default freshness budgets: a view one turn behind is inside them, so only its
    # outdated line can make the sweep refresh it
    with Memory(Config(data_dir=tmp_path / "data", **extra), hot=False) as mem:
        yield mem


def current_lines(view: SummaryView | None) -> list[str]:
    return [] if view is None else [s.text for s in view.sentences if s.status == "current"]


def summary_lines(mem: Memory, query: str) -> list[str]:
    """The lines of the context's summary block (the planner's '- ' lines)."""
    ctx = mem.context(CONV, query, budget=BUDGET_TOKENS)
    return [ln for m in ctx.messages for ln in str(m["content"]).splitlines() if ln.startswith("- ")]


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
@pytest.mark.parametrize("refresh", [
    "sweep",  # the scheduler's run (Memory.consolidate() over every conversation)
    "conversation",  # Memory.consolidate(conv): every view of one conversation
])
def test_session_view_drops_superseded_line(memory: Memory, case: Case, refresh: str) -> None:
    mem = memory
    roles = ("user", "assistant")
    for i, text in enumerate(case.first):
        mem.append(CONV, {"role": roles[i % 2], "content": text}, session_id="s1")
    mem.consolidate(CONV)
    conv = mem._key(CONV, None)[2]
    before = mem.warm.latest(conv, "session", "s1")
    assert any(case.gone in t for t in current_lines(before))  # the line the change takes back

    mem.append(CONV, case.change, session_id=case.change_session)
    # the context's catch-up embeds the new turn: its supersession is decided there; no
    # summary line presents the old value as current, whatever the views say yet
    lines = summary_lines(mem, case.query)
    assert not [ln for ln in lines if case.gone in ln], lines

    if refresh == "sweep":
        assert mem.consolidate() >= 1
    else:
        mem.consolidate(CONV)

    after = mem.warm.latest(conv, "session", "s1")
    assert after is not None and before is not None and after.version > before.version
    assert not [t for t in current_lines(after) if case.gone in t], after.sentences
    assert any(case.kept in t for t in current_lines(after)), after.sentences  # the rest still holds
    # every reader of the session views (WarmStore.sessions: the inspector's list) reads it so
    for v in mem.warm.sessions(conv):
        assert not [t for t in current_lines(v) if case.gone in t], (v.key, v.sentences)
    # and no other view kind keeps it as current either
    for kind in ("rolling", "constraints"):
        assert not [t for t in current_lines(mem.warm.latest(conv, kind)) if case.gone in t], kind
    assert not [ln for ln in summary_lines(mem, case.query) if case.gone in ln]

    # refreshed once: the next sweep finds nothing outdated (it does not refresh s1 again)
    mem.consolidate()
    assert mem.warm.latest(conv, "session", "s1").version == after.version  # type: ignore[union-attr]

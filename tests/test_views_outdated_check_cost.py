"""The warm sweep checks a conversation's views for a line corrected since they were built
(consolidation.views `_stale_outdated`: every view's body and the turns it cites) only when
supersession moved, not on every load-bearing append.

It keyed that check on the pin version, which every load-bearing append, relabel and pin
moves: at 20,000 turns / 2,000 session views each such append cost the sweep the check of
every view (evals/bench_warm.py --outdated). It is keyed on the supersession version now
(tiers.store `supersession_version`), and a correction is still found at the next sweep.

Real stores (a SQLite file; PostgreSQL through tests/pg_server.py), the extractive
summarizer, real supersession rows; the maintainer only counts its own checks."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from pg_server import open_store, target  # noqa: F401  (pytest fixture)

from tiermem.consolidation.summarize import ExtractiveSummarizer
from tiermem.consolidation.views import ViewMaintainer
from tiermem.tiers.models import Message
from tiermem.tiers.statements import StatementRow
from tiermem.tiers.tokens import BpeTokenCounter
from tiermem.tiers.warm import SummaryView, WarmStore

LB = ("instruction", True, 85, "a rule")  # a load-bearing label
CHAT = ("chitchat", False, 10, "small talk")
TWO_FACTS = "My flight is LH 1172 and my hotel is the Tivoli Oriente."
HOTEL = TWO_FACTS.index("my hotel")  # where the statement a correction takes back starts
CORRECTION = "Actually the hotel is now the Pestana Palace."  # turn 2, session s2
S1 = ("c", "session", "s1")


class CountingMaintainer(ViewMaintainer):
    """Counts the checks of views for corrected lines (`outdated_views`)."""

    checks = 0

    def outdated_views(self, conversation_id: str, views: Sequence[SummaryView], **kw: Any) -> set[tuple[str, str]]:
        self.checks += 1
        return super().outdated_views(conversation_id, views, **kw)


@pytest.fixture
def store(target: tuple[str, str], counter: BpeTokenCounter) -> Iterator[Any]:  # noqa: F811  (the fixture)
    s = open_store(target, counter)
    try:
        yield s
    finally:
        s.close()


def _message(text: str, session: str, role: str = "user") -> Message:
    return Message(role=role, content=text, session_id=session)


@pytest.mark.parametrize(("change", "checked", "outdated"), [
    # an ordinary load-bearing turn (moves the pin version): not checked (checked before)
    (lambda s: s.append_many("c", [_message("Always use metric units.", "s2")], labels=[LB]), False, False),
    # two of them in one append
    (lambda s: s.append_many("c", [_message("Reply in English.", "s2"), _message("Keep it short.", "s2")],
                             labels=[LB, LB]), False, False),
    # an ordinary turn: not checked (nor before)
    (lambda s: s.append_many("c", [_message("nice weather", "s2")], labels=[CHAT]), False, False),
    # relabelled as load-bearing (moves the pin version) and a turn after it: not checked (checked before)
    (lambda s: (s.set_labels("c", [(1, "decision", True, 75, "agreed")]),
                s.append_many("c", [_message("ok", "s2")], labels=[CHAT])), False, False),
    # s1's fact superseded whole by the correction: checked, s1 found outdated
    (lambda s: s.set_superseded("c", [(0, 2)]), True, True),
    # one statement of it superseded: checked, s1 found outdated
    (lambda s: s.set_superseded_statements("c", [StatementRow(0, HOTEL, len(TWO_FACTS), 2)]), True, True),
], ids=["load-bearing-turn", "two-load-bearing-turns", "ordinary-turn", "relabelled", "turn-superseded",
        "statement-superseded"])
def test_sweep_checks_views_only_when_supersession_moved(store: Any, counter: BpeTokenCounter,
                                                          change: Callable[[Any], object], checked: bool,
                                                          outdated: bool) -> None:
    store.append_many("c", [_message(TWO_FACTS, "s1"), _message("Noted.", "s1", "assistant"),
                            _message(CORRECTION, "s2")], labels=[LB, CHAT, LB])
    m = CountingMaintainer(store, WarmStore(store), ExtractiveSummarizer(counter, None), counter,
                           target_tokens=300, max_turns_behind=20, max_seconds_behind=300.0, label_grace_s=0.0)
    m.refresh_all("c")
    s1 = m.warm.latest("c", "session", "s1")
    assert s1 is not None and any("Tivoli" in s.text for s in s1.sentences if s.status == "current")
    m.checks = 0  # the refreshes' own checks (`_settle`)
    assert m.stale_views_detailed(10) == []  # the first sweep checks every view: none outdated
    assert m.checks == 1

    change(store)
    found = m.stale_views_detailed(10)
    assert m.checks == (2 if checked else 1)
    # s1 listed only as outdated: over budget with no turn behind, first whatever the
    # budgets (OUTDATED_SEVERITY), with the other views citing the fact
    outdated_keys = [k for k, st in found if st.over_budget and st.turns_behind == 0]
    assert (S1 in outdated_keys) is outdated
    assert [k for k, _ in found[:len(outdated_keys)]] == outdated_keys

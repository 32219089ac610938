"""The supersession version (SQLite m027_supersession_versions, PostgreSQL m014) moves
exactly when supersession could answer differently, from any connection: a turn's
`superseded_by` written, a statement row written or deleted. Not for an append, a label
or a pin, which move only the pin version: the warm sweep keys its check for corrected
lines on it (consolidation.views `_stale_outdated`), so an ordinary load-bearing append
no longer costs that check. The pin version moves as it did before the step.

Real stores: a SQLite file, a fresh PostgreSQL schema (tests/pg_server.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pg_server import opened, target  # noqa: F401  (pytest fixture)

from tiermem.tiers.models import Message
from tiermem.tiers.schema import MIGRATIONS
from tiermem.tiers.statements import StatementRow
from tiermem.tiers.tokens import BpeTokenCounter

LB = ("instruction", True, 85, "a rule")  # a load-bearing label
CHAT = ("chitchat", False, 10, "small talk")
TWO_FACTS = "My flight is LH 1172 and my hotel is the Tivoli Oriente."
HOTEL = TWO_FACTS.index("my hotel")  # where the statement a correction takes back starts


def _seed(store: Any) -> None:
    store.append_many("c", [Message(role="user", content=TWO_FACTS), Message(role="assistant", content="Noted."),
                            Message(role="user", content="Actually the hotel is now the Pestana Palace.")],
                      labels=[LB, CHAT, LB])


@pytest.mark.parametrize(("change", "pin_moves", "supersession_moves"), [
    # an ordinary load-bearing turn arrives: the pinned block may grow, no line was corrected
    (lambda s: s.append_many("c", [Message(role="user", content="Use metric units.")], labels=[LB]), True, False),
    # an ordinary turn arrives
    (lambda s: s.append_many("c", [Message(role="user", content="nice weather")], labels=[CHAT]), False, False),
    # relabelled as load-bearing by consolidation
    (lambda s: s.set_labels("c", [(1, "decision", True, 75, "agreed")]), True, False),
    # an explicit pin
    (lambda s: s.set_pin("c", 1, 60), True, False),
    # a whole turn superseded
    (lambda s: s.set_superseded("c", [(0, 2)]), True, True),
    # one statement of a turn that holds two superseded
    (lambda s: s.set_superseded_statements("c", [StatementRow(0, HOTEL, len(TWO_FACTS), 2)]), True, True),
], ids=["load-bearing-turn", "ordinary-turn", "relabelled", "pinned", "turn-superseded", "statement-superseded"])
def test_version_moves_only_when_supersession_could_change(
        target: tuple[str, str], counter: BpeTokenCounter,  # noqa: F811  (the fixture)
        change: Callable[[Any], object], pin_moves: bool, supersession_moves: bool) -> None:
    with opened(target, counter) as store:
        _seed(store)
        pin, sup = store.pin_version("c"), store.supersession_version("c")
        with opened(target, counter) as other:  # another process's connection: the triggers hold for every writer
            change(other)
        assert (store.pin_version("c") != pin) is pin_moves
        assert (store.supersession_version("c") != sup) is supersession_moves


def test_pin_version_moves_by_one_for_a_supersession_of_a_conversation_without_its_row(
        target: tuple[str, str], counter: BpeTokenCounter) -> None:  # noqa: F811
    # no load-bearing turn: no pin_versions row until the supersession writes one; whichever
    # of the two triggers inserts it, the pin version is 1 after it, as before the step
    with opened(target, counter) as store:
        store.append_many("c", [Message(role="user", content="hi"), Message(role="user", content="hello")],
                          labels=[CHAT, CHAT])
        assert (store.pin_version("c"), store.supersession_version("c")) == (0, 0)
        store.set_superseded("c", [(0, 1)])
        assert (store.pin_version("c"), store.supersession_version("c")) == (1, 1)


def test_step_runs_again_over_what_it_made(target: tuple[str, str],  # noqa: F811  (the fixture)
                                          counter: BpeTokenCounter) -> None:
    # a store rolled back to the version before the step (as the upgrade tests do) runs it
    # again over its column and triggers; the counter keeps its value and moves once a write
    with opened(target, counter) as store:
        _seed(store)
        store.set_superseded("c", [(0, 2)])
        with store.transaction() as c:
            if target[0] == "sqlite":
                c.execute(f"PRAGMA user_version = {[m.__name__ for m in MIGRATIONS].index('m027_supersession_versions')}")
            else:  # the runner resumes after the highest version recorded
                c.execute("DELETE FROM schema_migrations WHERE name = 'm014_supersession_versions'")
    with opened(target, counter) as store:
        assert store.supersession_version("c") == 1
        store.set_superseded_statements("c", [StatementRow(0, HOTEL, len(TWO_FACTS), 2)])
        assert store.supersession_version("c") == 2

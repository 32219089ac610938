"""`migrate-store` reruns where the source changed in a conversation already copied
without gaining a message (a pin set or cleared, a checkpoint, a stored plan, a turn's
label, a supersession). Every such rerun failed with MigrationMismatch ('already in the
target'), so a user who migrated, kept the source running a little and ran again could
not bring the target up to date. Now the rerun copies the conversation's derived rows
again from the source's, where the target's copy is still what the run wrote (each copy
records its digest in the target). A copy the target changed since (a target writer
that was not stopped) is refused, naming the conversation and what to do, and nothing
written; so is one a tiermem before this change copied (it recorded no digest, so a
source change cannot be told from a target writer's).

Real SQLite files and a real PostgreSQL (tests/pg_server.py), in both directions."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pg_server import MIGRATION_DIRECTIONS, Where, copied_sides, migrate, opened

from tiermem.tiers.errors import MigrationMismatch
from tiermem.tiers.migrate_store import COPIED_DIGEST
from tiermem.tiers.models import Message
from tiermem.tiers.store import ColdLog
from tiermem.tiers.tokens import BpeTokenCounter

NS = "ns"
NAMES = ("a", "b")
MESSAGES_EACH = 3  # per conversation, before and after the first run alike
PINNED = 0  # the position pinned in the source before the first run
PIN_PRIORITY = 90
LABEL_PRIORITY = 70  # a turn label's priority (set_labels), a derived fact


def _fill(store: ColdLog) -> None:
    """The source before the first run: MESSAGES_EACH messages in each of NAMES, a pin in
    each."""
    for name in NAMES:
        for i in range(MESSAGES_EACH):
            store.append(name, Message(role="user", content=f"{name} {i}"), namespace=NS)
        store.set_pin(store.key_of(NS, name), PINNED, PIN_PRIORITY)


def _state(where: Where, counter: BpeTokenCounter, name: str) -> tuple[Any, ...]:
    """What the changes below touch: pins, the latest checkpoint, plans, labels,
    supersessions, and the history."""
    with opened(where, counter) as store:
        key = store.key_of(NS, name)
        cp = store.latest_checkpoint(key)
        return (sorted((t.position, t.pinned_priority) for t in store.pinned_turns(key)),
                None if cp is None else (cp.position, cp.summary),
                [p["plan"] for p in store.plans(key)],
                [(t.position, t.intent, t.priority, t.superseded_by) for t in store.turns(key)],
                [(m.position, m.body) for m in store.history(key)])


Change = Callable[[ColdLog, str], Any]
CHANGES = [
    # a pin set on another message
    pytest.param(lambda s, k: s.set_pin(k, 1, PIN_PRIORITY), id="pin"),
    # the pin set before the first run cleared
    pytest.param(lambda s, k: s.set_pin(k, PINNED, None), id="unpin"),
    # a fold (checkpoint) over the first two messages
    pytest.param(lambda s, k: s.checkpoint(k, "two notes folded", 1, {"by": "test"}), id="checkpoint"),
    # a context() plan kept
    pytest.param(lambda s, k: s.store_plan(k, json.dumps({"budget": 100})), id="plan"),
    # a turn labelled load-bearing (a fact)
    pytest.param(lambda s, k: s.set_labels(k, [(1, "fact", True, LABEL_PRIORITY, "stated")]), id="fact"),
    # a statement superseded by a later one
    pytest.param(lambda s, k: s.set_superseded(k, [(0, 2)]), id="superseded"),
]


def _change(where: Where, counter: BpeTokenCounter, name: str, change: Change) -> None:
    with opened(where, counter) as store:
        change(store, store.key_of(NS, name))


@pytest.mark.parametrize("to_postgres", MIGRATION_DIRECTIONS)
@pytest.mark.parametrize("change", CHANGES)
def test_the_rerun_copies_a_change_without_messages(tmp_path: Path, pg_url: str,
                                                    counter: BpeTokenCounter, to_postgres: bool,
                                                    change: Change) -> None:
    src, dst = copied_sides(tmp_path, pg_url, counter, to_postgres, _fill)
    _change(src, counter, NAMES[0], change)
    assert _state(src, counter, NAMES[0]) != _state(dst, counter, NAMES[0])
    report = migrate(src, dst, counter)  # before: MigrationMismatch, 'already in the target'
    assert (report.copied, report.already_present, report.conversations) == (1, 1, len(NAMES))
    for name in NAMES:
        assert _state(dst, counter, name) == _state(src, counter, name)
    rerun = migrate(src, dst, counter)
    assert (rerun.copied, rerun.already_present) == (0, len(NAMES))
    with opened(dst, counter) as store:  # the target goes on after it
        store.append(NAMES[0], Message(role="user", content="after the copy"), namespace=NS)
        assert len(store.history(store.key_of(NS, NAMES[0]))) == MESSAGES_EACH + 1


TARGET_CHANGES = [
    # the target's copy changed (a pin), the source's not
    pytest.param(False, id="target-changed"),
    # both changed: the run cannot tell which to keep
    pytest.param(True, id="both-changed"),
]


@pytest.mark.parametrize("to_postgres", MIGRATION_DIRECTIONS)
@pytest.mark.parametrize("source_changed", TARGET_CHANGES)
def test_a_copy_the_target_changed_is_refused(tmp_path: Path, pg_url: str,
                                              counter: BpeTokenCounter, to_postgres: bool,
                                              source_changed: bool) -> None:
    src, dst = copied_sides(tmp_path, pg_url, counter, to_postgres, _fill)
    _change(dst, counter, NAMES[0], lambda s, k: s.set_pin(k, 2, PIN_PRIORITY))
    if source_changed:
        _change(src, counter, NAMES[0], lambda s, k: s.checkpoint(k, "folded", 1))
    before = _state(dst, counter, NAMES[0])
    with pytest.raises(MigrationMismatch, match=f"'{NAMES[0]}'.*changed in the target since.*stop the target's "
                       "writers") as caught:
        migrate(src, dst, counter)
    assert caught.value.what.startswith(f"conversation '{NAMES[0]}'")
    assert _state(dst, counter, NAMES[0]) == before  # nothing written


@pytest.mark.parametrize("to_postgres", MIGRATION_DIRECTIONS)
def test_a_copy_without_a_recorded_digest_is_refused(tmp_path: Path, pg_url: str,
                                                     counter: BpeTokenCounter, to_postgres: bool) -> None:
    """A target an older tiermem copied (no digest recorded per conversation): a change
    without messages in the source cannot be told from a target writer's, so it is
    refused, naming the conversation and what to do, nothing written."""
    src, dst = copied_sides(tmp_path, pg_url, counter, to_postgres, _fill)
    with opened(dst, counter) as store, store.transaction() as c:
        c.execute(store.dialect.sql("DELETE FROM meta WHERE key LIKE ?"), (COPIED_DIGEST + "%",))
    _change(src, counter, NAMES[0], lambda s, k: s.set_pin(k, 1, PIN_PRIORITY))
    before = _state(dst, counter, NAMES[0])
    with pytest.raises(MigrationMismatch, match=f"'{NAMES[0]}'.*records no digest.*copy into an empty target"):
        migrate(src, dst, counter)
    assert _state(dst, counter, NAMES[0]) == before

"""`migrate-store` refuses to grow a copied conversation whose copy a target writer
changed. Since 6b1e54f a rerun copies what the source appended to a conversation already
copied and writes its derived rows again from the source's: a pin (or an unpin, a
checkpoint) a target writer that was not stopped set on that copy meanwhile was dropped
without a word. The README says to stop the target's writers during a migration, so the
run now detects such a change (the copy's digest, recorded when it was written, differs)
and refuses, naming the conversation and what to do, with nothing written. A target
writer's retraction is an append, which made the copy no prefix of the source's and was
refused before too.

Real SQLite files and a real PostgreSQL (tests/pg_server.py), in both directions."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pg_server import MIGRATION_DIRECTIONS, Where, copied_sides, migrate, opened

from tiermem.tiers.errors import MigrationMismatch
from tiermem.tiers.formats import RETRACT_TYPE
from tiermem.tiers.models import Message
from tiermem.tiers.store import ColdLog
from tiermem.tiers.tokens import BpeTokenCounter

NS = "ns"
NAME = "a"
MESSAGES_EACH = 3  # before the first run
GROWN_BY = 2  # messages the source gains after it
PINNED = 0  # pinned in the source before the first run
PIN_PRIORITY = 90


def _state(where: Where, counter: BpeTokenCounter) -> tuple[Any, ...]:
    with opened(where, counter) as store:
        key = store.key_of(NS, NAME)
        cp = store.latest_checkpoint(key)
        return (sorted((t.position, t.pinned_priority) for t in store.pinned_turns(key)),
                None if cp is None else (cp.position, cp.summary),
                [(m.position, m.body) for m in store.history(key)])


def _fill(store: ColdLog) -> None:
    """The source before the first run: MESSAGES_EACH messages in NAME, PINNED pinned."""
    for i in range(MESSAGES_EACH):
        store.append(NAME, Message(role="user", content=f"note {i}"), namespace=NS)
    store.set_pin(store.key_of(NS, NAME), PINNED, PIN_PRIORITY)


Change = Callable[[ColdLog, str], Any]
TARGET_CHANGES = [
    # the target's writer pins a copied message
    pytest.param(lambda s, k: s.set_pin(k, 1, PIN_PRIORITY), "changed in the target since it was copied",
                 id="pin"),
    # it clears the copied pin
    pytest.param(lambda s, k: s.set_pin(k, PINNED, None), "changed in the target since it was copied",
                 id="unpin"),
    # it folds the copied messages (a checkpoint)
    pytest.param(lambda s, k: s.checkpoint(k, "folded in the target", 1), "changed in the target since it was copied",
                 id="checkpoint"),
    # it retracts a copied message: an append, so the copy is no prefix (refused before too)
    pytest.param(lambda s, k: s.append(NAME, Message(type=RETRACT_TYPE, position=1), namespace=NS),
                 "not the first of the source's", id="retraction"),
]


@pytest.mark.parametrize("to_postgres", MIGRATION_DIRECTIONS)
@pytest.mark.parametrize(("change", "why"), TARGET_CHANGES)
def test_a_grown_conversation_the_target_changed_is_refused(tmp_path: Path, pg_url: str,
                                                            counter: BpeTokenCounter, to_postgres: bool,
                                                            change: Change, why: str) -> None:
    src, dst = copied_sides(tmp_path, pg_url, counter, to_postgres, _fill)
    with opened(dst, counter) as store:
        change(store, store.key_of(NS, NAME))
    with opened(src, counter) as store:
        for i in range(GROWN_BY):
            store.append(NAME, Message(role="user", content=f"grown {i}"), namespace=NS)
    before = _state(dst, counter)
    # before: the pin, unpin and checkpoint rows copied the source's over the target's change
    with pytest.raises(MigrationMismatch, match=f"'{NAME}'.*{why}.*stop the target's writers") as caught:
        migrate(src, dst, counter)
    assert caught.value.what.startswith(f"conversation '{NAME}'")
    assert _state(dst, counter) == before  # the target writer's change kept, nothing written

"""`migrate-store` counts a source conversation as erased in the target only where the
target's tombstone under its key is that conversation's (its namespace, name and
created_at). A key is the bare name the first time a store uses it (`cold._issue_key`),
so the target's own conversation of the same name, created there (another namespace, or
the same one at another time) and erased, holds the same key as a source conversation
created after a verified run. A rerun took that tombstone for the source conversation's
and left it out for good, warning falsely that the target had erased it (a reviewer's
repro, /tmp/rcY/r3_foreign_tombstone.py): the source's messages were never copied. Now
the rerun refuses by name before writing anything, since the target issued that key to
another conversation (a key is never given to a second one there).

Real SQLite files and a real PostgreSQL (tests/pg_server.py), in both directions."""

from __future__ import annotations

from pathlib import Path

import pytest
from pg_server import MIGRATION_DIRECTIONS, migrate, migration_sides, opened

from tiermem.tiers.errors import MigrationRefused
from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter

NS, NAME = "prod", "notes"  # the source's conversation created after the first run
FIRST = "a"  # the conversation the first run copied


TARGETS_OWN = [
    # the target's scratch conversation of that name in another namespace, erased with it
    pytest.param("scratch", id="other-namespace"),
    # the target's own conversation of that very namespace and name, created there first
    pytest.param(NS, id="same-name-earlier"),
]


@pytest.mark.parametrize("to_postgres", MIGRATION_DIRECTIONS)
@pytest.mark.parametrize("own_ns", TARGETS_OWN)
def test_another_incarnations_tombstone_is_not_an_erasure(tmp_path: Path, pg_url: str,
                                                           counter: BpeTokenCounter, to_postgres: bool,
                                                           own_ns: str) -> None:
    src, dst = migration_sides(tmp_path, pg_url, to_postgres)
    with opened(src, counter) as store:
        store.append(FIRST, Message(role="user", content="first"), namespace=NS)
    migrate(src, dst, counter)
    with opened(dst, counter) as store:  # the target, in use, has (and erases) its own
        store.append(NAME, Message(role="user", content="the target's scratch"), namespace=own_ns)
        own = store.key_of(own_ns, NAME)
        store.delete_conversation(own)
    with opened(src, counter) as store:
        store.append(NAME, Message(role="user", content="the source's notes, never copied"), namespace=NS)
        assert store.key_of(NS, NAME) == own  # the premise: both stores gave it the bare name
    with pytest.raises(MigrationRefused) as refused:
        migrate(src, dst, counter)  # before: left out as "erased in the target", erased_in_target 1
    text = str(refused.value)
    assert f"conversation {NAME!r} of namespace {NS!r} (key {own!r})" in text
    assert f"namespace {own_ns!r}, since erased" in text
    with opened(dst, counter) as store:  # nothing written
        assert store.key_of(NS, NAME) is None
        assert store.history(store.key_of(NS, FIRST))[-1].text == "first"

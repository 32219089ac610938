"""`migrate-store --into-non-empty` refuses to copy back a conversation the target erased
on request, and says so. A source conversation of the same namespace and name, created
at or before the target's erasure (its tombstone of reason 'erase'), is the erased data
from a copy made before it: the run is refused naming the conversation and the erasure,
nothing written (as `tiermem import` refuses an old export of it:
tests/test_import_restores_erased.py). Before (a data portability review, 2026-12-07),
it was refused too, but only by the key rule ("key 'alice' was already
issued there": both stores gave the name its bare key), which said nothing of an erasure
nor how to restore it knowingly. A pruned name keeps the key rule's refusal.

Real SQLite files and a real PostgreSQL (tests/pg_server.py), in both directions."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from pg_server import MIGRATION_DIRECTIONS, migrate, migration_sides, opened

from tiermem.tiers.errors import MigrationRefused
from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter

NS, NAME = "default", "alice"
SECRET = "my SSN is 078-05-1120"
PRUNE_MARGIN_S = 60.0  # prune everything of the namespace older than now + this

# (id, how the target lets NAME go, what the refusal says)
CASES = [
    # erased on request, the source's copy older: named as the erased data
    pytest.param("erase", f"conversation {NAME!r} of namespace {NS!r} was erased there on request at", id="erased"),
    # pruned: retention, not a request; refused by the key rule as before
    pytest.param("prune", f"key {NAME!r} was already issued there", id="pruned"),
]


@pytest.mark.parametrize("to_postgres", MIGRATION_DIRECTIONS)
@pytest.mark.parametrize(("how", "words"), CASES)
def test_merge_of_a_name_the_target_let_go(tmp_path: Path, pg_url: str, counter: BpeTokenCounter,
                                           to_postgres: bool, how: str, words: str) -> None:
    src, dst = migration_sides(tmp_path, pg_url, to_postgres)
    with opened(src, counter) as store:  # the old copy: alice, and bob
        store.append(NAME, Message(role="user", content=SECRET), namespace=NS)
        store.append("bob", Message(role="user", content="hi"), namespace=NS)
    with opened(dst, counter) as store:
        store.append(NAME, Message(role="user", content=SECRET), namespace=NS)
        store.append("carol", Message(role="user", content="kept"), namespace="other")
        if how == "erase":
            store.delete_conversation(store.key_of(NS, NAME))
        else:
            store.prune(time.time() + PRUNE_MARGIN_S, namespace=NS)
    with pytest.raises(MigrationRefused) as exc:
        migrate(src, dst, counter, into_non_empty=True)
    assert words in str(exc.value)
    with opened(dst, counter) as store:  # nothing of the source written
        assert store.key_of(NS, NAME) is None and store.key_of(NS, "bob") is None
        assert store.key_of("other", "carol") is not None

"""`migrate-store` records the digest of a copy an older tiermem made (no digest row,
meta COPIED_DIGEST + key) when a rerun verifies it identical to the source's. Without it
the copy stayed digest-less for good, so every later change of that conversation in the
source (a pin, a checkpoint: no new messages) was refused at every rerun, since a source
change cannot be told from a target writer's without it (a reviewer's repro,
/tmp/rcY/r4_no_digest_never_recorded.py). The rerun records it in a short transaction
that reads the copy again; a copy that differs from the source's gets none.

Real SQLite files and a real PostgreSQL (tests/pg_server.py), in both directions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pg_server import MIGRATION_DIRECTIONS, Where, migrate, migration_sides, opened

from tiermem.tiers.errors import MigrationMismatch
from tiermem.tiers.migrate_store import COPIED_DIGEST
from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter

NS, NAME = "ns", "a"
MESSAGES = 2
PINNED_AT, PRIORITY = 0, 3  # the source's change after the digest-less copy


def _digest_rows(store: Any) -> list[str]:
    with store.reading() as c:
        return [str(r[0]) for r in c.execute(store.dialect.sql("SELECT key FROM meta WHERE key LIKE ?"),
                                             (COPIED_DIGEST + "%",)).fetchall()]


def _digest_less_copy(tmp_path: Path, pg_url: str, counter: BpeTokenCounter,
                      to_postgres: bool) -> tuple[Where, Where, str]:
    """(source, target, NAME's key): MESSAGES messages in NAME copied and verified, the
    copy's digest row then deleted, as a tiermem before 2026-12-06 left it."""
    src, dst = migration_sides(tmp_path, pg_url, to_postgres)
    with opened(src, counter) as store:
        for i in range(MESSAGES):
            store.append(NAME, Message(role="user", content=f"m {i}"), namespace=NS)
        key = store.key_of(NS, NAME)
    migrate(src, dst, counter)
    with opened(dst, counter) as store, store.transaction() as c:
        c.execute(store.dialect.sql("DELETE FROM meta WHERE key = ?"), (COPIED_DIGEST + key,))
    return src, dst, key


@pytest.mark.parametrize("to_postgres", MIGRATION_DIRECTIONS)
def test_an_older_copy_verified_identical_gets_its_digest(tmp_path: Path, pg_url: str,
                                                          counter: BpeTokenCounter, to_postgres: bool) -> None:
    src, dst, key = _digest_less_copy(tmp_path, pg_url, counter, to_postgres)
    rerun = migrate(src, dst, counter)
    assert (rerun.already_present, rerun.copied) == (1, 0)
    with opened(dst, counter) as store:
        assert _digest_rows(store) == [COPIED_DIGEST + key]  # before: []
    with opened(src, counter) as store:  # a change in the source without new messages
        store.set_pin(key, PINNED_AT, PRIORITY)
    later = migrate(src, dst, counter)  # before: refused, no digest to tell whose change it is
    assert later.copied == 1
    with opened(dst, counter) as store:
        assert [t.position for t in store.pinned_turns(key)] == [PINNED_AT]


@pytest.mark.parametrize("to_postgres", MIGRATION_DIRECTIONS)
def test_a_copy_that_differs_gets_no_digest(tmp_path: Path, pg_url: str,
                                            counter: BpeTokenCounter, to_postgres: bool) -> None:
    src, dst, key = _digest_less_copy(tmp_path, pg_url, counter, to_postgres)
    with opened(dst, counter) as store:
        store.set_pin(key, PINNED_AT, PRIORITY)  # the target's change: not the source's
    with pytest.raises(MigrationMismatch, match="records no digest"):
        migrate(src, dst, counter)
    with opened(dst, counter) as store:
        assert _digest_rows(store) == []

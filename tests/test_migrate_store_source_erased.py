"""`migrate-store` takes the source's erasure to the target. A conversation the source
erased after a verified run stayed readable in the target: the rerun copied its
tombstone and left the conversation, every message of it, beside it (a reviewer's repro,
/tmp/rcY/r1_source_erased.py), and a later rerun after the source gave the name to a new
conversation was refused ("exists there under another key"). Now the rerun erases it in
the target with the target's own erasure path (delete_conversation: a tombstone, the
copy's digest row, the scrub), where the target's copy is that incarnation as the run
wrote it; one the target changed since is refused by name, nothing written. The report's
`erased_from_source` counts it, and the command's line says so.

Real SQLite files and a real PostgreSQL (tests/pg_server.py), in both directions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from pg_server import MIGRATION_DIRECTIONS, Where, copied_sides, migrate, opened

from tiermem.cli import cli
from tiermem.tiers.errors import MigrationRefused
from tiermem.tiers.migrate_store import COPIED_DIGEST
from tiermem.tiers.models import Message
from tiermem.tiers.store import ColdLog
from tiermem.tiers.tokens import BpeTokenCounter

NS = "ns"
GONE, KEPT = "b", "a"  # the source erases the first after the verified run
MESSAGES_EACH = 2
PINNED_AT, PRIORITY = 0, 3  # the target writer's pin in the refused case


def _fill(store: ColdLog) -> None:
    """The source before the first run: two conversations."""
    for name in (KEPT, GONE):
        for i in range(MESSAGES_EACH):
            store.append(name, Message(role="user", content=f"secret {name} {i}"), namespace=NS)


def _sides(tmp_path: Path, pg_url: str, counter: BpeTokenCounter,
           to_postgres: bool) -> tuple[Where, Where]:
    """(source, target): two conversations copied and verified, then GONE erased in the source."""
    src, dst = copied_sides(tmp_path, pg_url, counter, to_postgres, _fill)
    with opened(src, counter) as store:
        store.delete_conversation(store.key_of(NS, GONE))
    return src, dst


@pytest.mark.parametrize("to_postgres", MIGRATION_DIRECTIONS)
def test_the_sources_erasure_is_taken_to_the_target(tmp_path: Path, pg_url: str,
                                                    counter: BpeTokenCounter, to_postgres: bool) -> None:
    src, dst = _sides(tmp_path, pg_url, counter, to_postgres)
    with opened(dst, counter) as store:
        key = store.key_of(NS, GONE)
    report = migrate(src, dst, counter)
    with opened(dst, counter) as store:
        assert store.key_of(NS, GONE) is None  # before: still there, every message readable
        assert [s["id"] for s in store.tombstones(namespace=NS)] == [GONE]  # one tombstone, the target's own
        assert store.history(store.key_of(NS, KEPT))[-1].text == f"secret {KEPT} {MESSAGES_EACH - 1}"
        with store.reading() as c:  # the copy's digest row went with it (the erasure's)
            assert c.execute(store.dialect.sql("SELECT 1 FROM meta WHERE key = ?"),
                             (COPIED_DIGEST + key,)).fetchall() == []
    assert (report.erased_from_source, report.copied, report.already_present, report.conversations) == (1, 0, 1, 1)
    again = migrate(src, dst, counter)  # nothing left to do
    assert (again.erased_from_source, again.copied, again.already_present) == (0, 0, 1)
    with opened(src, counter) as store:  # the source gives the name to a new conversation
        store.append(GONE, Message(role="user", content="new"), namespace=NS)
    later = migrate(src, dst, counter)  # before: refused, "exists there under another key"
    assert (later.copied, later.conversations) == (1, 2)
    with opened(dst, counter) as store:
        assert [m.text for m in store.history(store.key_of(NS, GONE))] == ["new"]


@pytest.mark.parametrize("to_postgres", MIGRATION_DIRECTIONS)
def test_a_copy_the_target_changed_is_refused_not_erased(tmp_path: Path, pg_url: str,
                                                         counter: BpeTokenCounter, to_postgres: bool) -> None:
    src, dst = _sides(tmp_path, pg_url, counter, to_postgres)
    with opened(dst, counter) as store:  # a target writer that was not stopped
        store.set_pin(store.key_of(NS, GONE), PINNED_AT, PRIORITY)
    with pytest.raises(MigrationRefused) as refused:
        migrate(src, dst, counter)  # before: no refusal, the conversation left readable
    assert f"conversation {GONE!r} of namespace {NS!r}" in str(refused.value)
    assert "changed its copy since" in str(refused.value)
    with opened(dst, counter) as store:  # nothing written: neither erased nor a tombstone copied
        assert len(store.history(store.key_of(NS, GONE))) == MESSAGES_EACH
        assert store.tombstones(namespace=NS) == []


def test_the_command_says_what_it_erased(tmp_path: Path, pg_url: str,
                                         counter: BpeTokenCounter) -> None:
    src, dst = _sides(tmp_path, pg_url, counter, True)
    url, schema = dst[1].rsplit("#", 1)
    args = ["--data-dir", str(tmp_path / "config"), "migrate-store", "--from", src[1], "--to", url, "--schema", schema]
    said = CliRunner().invoke(cli, [*args, "--json"])
    assert said.exit_code == 0, said.output
    assert json.loads(said.stdout)["erased_from_source"] == 1
    with opened(src, counter) as store:
        store.delete_conversation(store.key_of(NS, KEPT))
    said = CliRunner().invoke(cli, args)
    assert said.exit_code == 0, said.output
    assert "0 copied now, 0 already there, 1 erased in the source and now erased in the target too" in said.output

"""`migrate-store` never brings back a conversation the target erased after the run
copied it. Every key is written to the target in the run's first transaction, so a
rerun (which resumes) read such a conversation as "not copied yet" (its key issued, no
conversation row) and copied it again from the source: a conversation erased on request
(`delete_conversation`, `delete_namespace`) or pruned came back into the store that
erased it, beside its own tombstone. The target's tombstone is the user's latest word:
the rerun leaves that conversation out (a warning names it and says the source still
holds it; the report's `erased_in_target` counts it), copies and verifies the rest, and
a rerun after it writes nothing. Also where the source gained messages in it since.

Real SQLite files and a real PostgreSQL (tests/pg_server.py), in both directions."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pg_server import MIGRATION_DIRECTIONS, copied_sides, migrate, opened

from tiermem.cli import cli
from tiermem.tiers.models import Message
from tiermem.tiers.store import ColdLog
from tiermem.tiers.tokens import BpeTokenCounter

GONE_NS, KEPT_NS = "gone", "kept"  # the target erases the first namespace's conversation
NAME = "a"
MESSAGES_EACH = 3
GROWN_BY = 2  # messages the source gains after the target's erasure
PRUNE_MARGIN_S = 60.0  # prune everything of the namespace older than now + this


def _fill(store: ColdLog) -> None:
    """The source before the first run: NAME in each namespace."""
    for ns in (GONE_NS, KEPT_NS):
        for i in range(MESSAGES_EACH):
            store.append(NAME, Message(role="user", content=f"{ns} {i}"), namespace=ns)


Erase = Callable[[ColdLog, str], Any]
ERASURES = [
    # erasure of one conversation on request
    pytest.param(lambda s, k: s.delete_conversation(k), id="delete_conversation"),
    # erasure of its whole namespace
    pytest.param(lambda s, k: s.delete_namespace(GONE_NS), id="delete_namespace"),
    # retention by age
    pytest.param(lambda s, k: s.prune(time.time() + PRUNE_MARGIN_S, namespace=GONE_NS), id="prune"),
]
GROWTH = [
    # the source as it was copied
    pytest.param(0, id="source-unchanged"),
    # the source appended to that conversation after the target erased it
    pytest.param(GROWN_BY, id="source-grew"),
]


@pytest.mark.parametrize("to_postgres", MIGRATION_DIRECTIONS)
@pytest.mark.parametrize("grown", GROWTH)
@pytest.mark.parametrize("erase", ERASURES)
def test_a_conversation_the_target_erased_stays_erased(tmp_path: Path, pg_url: str,
                                                       counter: BpeTokenCounter, caplog: pytest.LogCaptureFixture,
                                                       to_postgres: bool, grown: int, erase: Erase) -> None:
    src, dst = copied_sides(tmp_path, pg_url, counter, to_postgres, _fill)
    with opened(dst, counter) as store:
        key = store.key_of(GONE_NS, NAME)
        assert key is not None
        erase(store, key)
        stones = store.tombstones(namespace=GONE_NS)
    with opened(src, counter) as store:
        for i in range(grown):
            store.append(NAME, Message(role="user", content=f"later {i}"), namespace=GONE_NS)
    with caplog.at_level(logging.WARNING, logger="tiermem.migrate_store"):
        report = migrate(src, dst, counter)
    with opened(dst, counter) as store:
        assert store.key_of(GONE_NS, NAME) is None  # before: copied again, back in the target
        assert store.history(store.key_of(KEPT_NS, NAME))[-1].text == f"{KEPT_NS} {MESSAGES_EACH - 1}"
        assert store.tombstones(namespace=GONE_NS) == stones  # its tombstone as the erasure left it
    assert (report.copied, report.erased_in_target, report.already_present, report.conversations) == (0, 1, 1, 1)
    assert report.to_json()["erased_in_target"] == 1
    warned = [r.getMessage() for r in caplog.records if key in r.getMessage()]
    assert len(warned) == 1 and "erased in the target" in warned[0] and "source still holds it" in warned[0]
    with opened(src, counter) as store:  # the source is only read
        assert len(store.history(key)) == MESSAGES_EACH + grown
    rerun = migrate(src, dst, counter)
    assert (rerun.copied, rerun.erased_in_target, rerun.already_present) == (0, 1, 1)
    with opened(dst, counter) as store:
        assert store.key_of(GONE_NS, NAME) is None
        # the target goes on: the name starts a new conversation, under a new key
        store.append(NAME, Message(role="user", content="new"), namespace=GONE_NS)
        assert store.key_of(GONE_NS, NAME) not in (None, key)
    # and a rerun after that leaves the erased one out, not refusing the name taken there
    again = migrate(src, dst, counter)
    assert (again.copied, again.erased_in_target, again.already_present) == (0, 1, 1)


def test_the_command_says_what_it_left_erased(tmp_path: Path, pg_url: str,
                                              counter: BpeTokenCounter) -> None:
    src, dst = copied_sides(tmp_path, pg_url, counter, True, _fill)
    with opened(dst, counter) as store:
        store.delete_conversation(store.key_of(GONE_NS, NAME))
    url, schema = dst[1].rsplit("#", 1)
    args = ["--data-dir", str(tmp_path / "config"), "migrate-store", "--from", src[1], "--to", url, "--schema", schema]
    said = CliRunner().invoke(cli, args)
    assert said.exit_code == 0, said.output
    assert "0 copied now, 1 already there, 1 erased in the target and left erased (the source still holds them)" \
        in said.output
    as_json = CliRunner().invoke(cli, [*args, "--json"])
    assert as_json.exit_code == 0 and json.loads(as_json.stdout)["erased_in_target"] == 1

"""A rerun bringing a copied conversation up to the source's does not delete a PostgreSQL
target writer's pin committed in the window between its re-check of the copy and its
rewrite of the derived rows. The transaction runs under READ COMMITTED and took no lock,
so a pin committed there (after `_update_refused` read the copy as the run wrote it, before
`_clear_derived`) was deleted with the derived rows, without a word (a reviewer's repro,
/tmp/rcY/r2_pg_pin_race.py). Now the transaction locks the conversation (its row and its
pin_versions row, FOR UPDATE) before the re-check: the pin waits for the run's commit and
lands after it, and the next rerun refuses the copy by name as changed in the target.

The window is reached through migrate_store's own `fault` hook (CHECKED_STEP + the key,
after the re-check); the pin is a real second store (its own connections: another
process's handle) in a thread. Real SQLite source, real PostgreSQL target."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from pg_server import fresh_schema

from tiermem.tiers.cold import ColdStore
from tiermem.tiers.errors import MigrationMismatch
from tiermem.tiers.migrate_store import CHECKED_STEP, migrate_store
from tiermem.tiers.models import Message
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.tokens import BpeTokenCounter

NS, NAME = "ns", "a"
MESSAGES = 3
PINNED_AT, PRIORITY = 1, 5  # the target writer's pin
PIN_SETTLE_S = 1.0  # how long the window stays open for the pin to commit (it takes ms unlocked)
WRITER_LOCK_WAIT_MS = 30_000  # the writer waits this long for the run's lock: far past PIN_SETTLE_S
JOIN_S = 30.0  # the writer's thread ends within this after the run commits


def test_a_pin_committed_in_the_window_is_kept(tmp_path: Path, pg_url: str,
                                               counter: BpeTokenCounter) -> None:
    source, schema = str(tmp_path / "store.db"), fresh_schema()
    store = ColdStore(Path(source), tokens=counter)
    for i in range(MESSAGES):
        store.append(NAME, Message(role="user", content=f"m {i}"), namespace=NS)
    key = store.key_of(NS, NAME)
    store.close()
    migrate_store(source, pg_url, tokens=counter, target_schema=schema)
    store = ColdStore(Path(source), tokens=counter)
    store.append(NAME, Message(role="user", content=f"m {MESSAGES}"), namespace=NS)  # the source grows
    store.close()

    writer = PostgresStore(pg_url, tokens=counter, schema=schema, lock_timeout_ms=WRITER_LOCK_WAIT_MS)
    outcome: list[object] = []

    def pin() -> None:
        try:
            outcome.append(writer.set_pin(key, PINNED_AT, PRIORITY))
        except Exception as exc:  # reported by the assertion below
            outcome.append(exc)

    pinner = threading.Thread(target=pin)

    def in_the_window(step: str) -> None:
        if step == CHECKED_STEP + key:
            pinner.start()
            pinner.join(PIN_SETTLE_S)  # unlocked, the pin commits here, before the rewrite

    try:
        try:
            migrate_store(source, pg_url, tokens=counter, target_schema=schema, fault=in_the_window)
        except MigrationMismatch as exc:
            # the pin, waiting for the run's commit, landed before its final comparison
            # read the copy (or after it: then the run ends verified); the copy is the
            # source's with the target's pin on it, either way
            assert f"conversation {NAME!r} of namespace {NS!r} (key {key!r})" in str(exc)
            assert "the target changed since this copy was written (its pins" in str(exc)  # the side that differs
        pinner.join(JOIN_S)
        assert not pinner.is_alive() and len(outcome) == 1 and isinstance(outcome[0], int), outcome
        # before: [] (the pin committed in the window, then deleted with the derived rows)
        with writer.reading() as c:
            pins = c.execute("SELECT position, priority FROM pins WHERE conversation_id = %s", (key,)).fetchall()
        assert [tuple(p) for p in pins] == [(PINNED_AT, PRIORITY)]
        assert len(writer.history(key)) == MESSAGES + 1
    finally:
        writer.close()
    with pytest.raises(MigrationMismatch, match="changed in the target since it was copied"):
        migrate_store(source, pg_url, tokens=counter, target_schema=schema)  # the pin is the target's change

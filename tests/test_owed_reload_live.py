"""Owed supersession decisions (tiers/owed.py) that another process records reach a
process that holds the store open: its next `index_pending` decides them. Before, the
meta rows were read once per store object (at its first catch-up), so a live process never
decided a correction another process owed, or one migrate-store carried into it (the
old value "12A" stayed current after "now 14C" until the store was opened again).

The other process is a real child process (a Memory whose hook meets a second
connection's lock, or migrate-store); the live one is a Memory open throughout, which ran
a catch-up before. Real SQLite files, a real PostgreSQL (tests/pg_server.py), the bundled
embedder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pg_server import MIGRATION_DIRECTIONS, Where, migrate, migration_sides
from test_migrate_store_owed import (
    CONV,
    DECIDED,
    OTHER,
    correct_under_lock,
    facts,
    locker,
    memory,
    order,
    owed_ids,
    sides,
    turn_id,
)

from tiermem import Memory
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.tokens import BpeTokenCounter

TESTS = Path(__file__).resolve().parent
CHILD_TIMEOUT_S = 120  # a child loads the embedder (a few seconds) and writes a few rows

# a child process: a Memory on the store whose correction's hook meets a lock (owed there)
OWE_IN_CHILD = """
import json, sys
from pathlib import Path
from test_migrate_store_owed import correct_under_lock, locker, memory
from tiermem.tiers.embed_onnx import build_embedder
tmp, where = Path(sys.argv[1]), tuple(json.loads(sys.argv[2]))
embedder = build_embedder()
embedder.embed(["warm-up"])  # loaded: its Memory embeds and decides at append (conftest's embedder)
with memory(tmp, where, "child", embedder) as mem:
    correct_under_lock(mem, locker(where))
"""

# a child process: migrate-store from the source into the target (holding rows of its own)
MIGRATE_IN_CHILD = """
import json, sys
from pg_server import migrate
from tiermem.tiers.tokens import BpeTokenCounter
src, dst = tuple(json.loads(sys.argv[1])), tuple(json.loads(sys.argv[2]))
print(migrate(src, dst, BpeTokenCounter(), into_non_empty=True).owed_decisions)
"""


def child(script: str, *args: str) -> str:
    """Run `script` in a child Python process (tests/ importable); its stdout."""
    done = subprocess.run([sys.executable, "-c", script, *args], cwd=TESTS, capture_output=True, text=True,
                          timeout=CHILD_TIMEOUT_S, env={**os.environ, "PYTHONPATH": str(TESTS)})
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout


def decides_live(live: Memory, dst: Where, counter: BpeTokenCounter) -> None:
    """The live process's next catch-up decides what the other process recorded."""
    assert facts(live) != DECIDED  # written behind its back: owed
    assert owed_ids(dst, counter) != []
    live.cold.index_pending()  # the next one: before, it read nothing new
    assert facts(live) == DECIDED  # before: "12A" stayed current, however many catch-ups
    assert owed_ids(dst, counter) == []  # decided: its record gone


ENGINES = [
    # one SQLite file, two processes
    pytest.param(True, id="sqlite"),
    # one PostgreSQL schema, two processes
    pytest.param(False, id="postgres"),
]


@pytest.mark.parametrize("sqlite", ENGINES)
def test_a_decision_another_process_owes_is_decided_by_the_live_one(
        tmp_path: Path, pg_url: str, counter: BpeTokenCounter, embedder: FastEmbedder, sqlite: bool) -> None:
    # the store: SQLite -> PostgreSQL's source is SQLite, PostgreSQL -> SQLite's is PostgreSQL
    where, _unused = migration_sides(tmp_path, pg_url, sqlite)
    with memory(tmp_path, where, "live", embedder) as live:
        order(live)  # its first catch-up ran: it read the owed rows (none) here
        child(OWE_IN_CHILD, str(tmp_path), json.dumps(where))
        assert owed_ids(where, counter) == [turn_id(where, counter, 2)]  # the child's hook failed
        decides_live(live, where, counter)


@pytest.mark.parametrize("to_postgres", MIGRATION_DIRECTIONS)
def test_a_decision_migrate_store_carries_into_a_live_target_is_decided_there(
        tmp_path: Path, pg_url: str, counter: BpeTokenCounter, embedder: FastEmbedder, to_postgres: bool) -> None:
    src, dst = sides(tmp_path, pg_url, counter, to_postgres, target_rows=True)
    with memory(tmp_path, src, "source", embedder) as mem:
        order(mem)
        correct_under_lock(mem, locker(src))  # the source owes the correction's decision
    with memory(tmp_path, dst, "live", embedder) as live:  # the target's serving process
        live.append(OTHER, {"role": "user", "content": "a note of the target's own"})
        live.cold.index_pending()  # its catch-up ran: it read the owed rows (none) here
        assert child(MIGRATE_IN_CHILD, json.dumps(src), json.dumps(dst)).split() == ["1"]  # owed_decisions
        decides_live(live, dst, counter)


@pytest.mark.parametrize("to_postgres", MIGRATION_DIRECTIONS)
def test_a_rerun_undoing_the_live_targets_decision_is_decided_there_again(
        tmp_path: Path, pg_url: str, counter: BpeTokenCounter, embedder: FastEmbedder, to_postgres: bool) -> None:
    src, dst = sides(tmp_path, pg_url, counter, to_postgres, target_rows=True)
    with memory(tmp_path, src, "source", embedder) as mem:
        order(mem)
        correct_under_lock(mem, locker(src))
    assert migrate(src, dst, counter, into_non_empty=True).owed_decisions == 1
    with memory(tmp_path, dst, "live", embedder) as live:  # the target's serving process
        live.cold.index_pending()
        assert facts(live) == DECIDED  # the carried decision, made by the live process
        with memory(tmp_path, src, "source", embedder) as mem:  # the source grows
            mem.append(CONV, {"role": "assistant", "content": "Updated, enjoy the flight."})
        # the rerun brings the grown copy up to the source's: the target's derived rows are the
        # source's again (the decision undone) and the decision is owed there again
        assert child(MIGRATE_IN_CHILD, json.dumps(src), json.dumps(dst)).split() == ["1"]
        decides_live(live, dst, counter)

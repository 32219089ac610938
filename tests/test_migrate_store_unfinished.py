"""A `migrate-store` target that the run never finished does not open as a store. Before,
a run SIGKILLed mid-copy (or cut by a deadline: tests/test_migrate_store_deadline.py) left
a target that opened as any other, holding part of the source's conversations with no
sign of it: an operator who pointed the service at it served a partial history silently.
Now the run marks the target (meta `migration_unfinished:<source db_uuid>`: the source, when it began)
before its first copy and clears the mark in the transaction that records the verified
copy; `Memory` (so every command and the service) refuses a marked store with
MigrationUnfinished naming the source, when the run began and what to do; a rerun
resumes, verifies the whole and clears the mark; a marked store is refused as the source
of another copy; and `migrate-store --to T --accept-unfinished` clears the mark knowingly
(the source is gone), copying nothing.

Real SQLite files, the real embedded PostgreSQL (tests/pg_server.py), a real child process
SIGKILLed mid-copy, the real CLI in processes of its own, in both directions."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cold_helpers import child_env
from hash_embedder import HashEmbedder
from pg_server import MIGRATION_DIRECTIONS, Where, fresh_schema, migrate, migration_spec, opened

from tiermem import Config, Memory
from tiermem.errors import MigrationRefused, MigrationUnfinished
from tiermem.tiers.migrate_store import accept_unfinished, unfinished_marks
from tiermem.tiers.models import Message
from tiermem.tiers.postgres import redact
from tiermem.tiers.tokens import BpeTokenCounter

TOKENS = BpeTokenCounter()
NS = "default"  # the CLI's namespace, so `tiermem conversations` lists them
CONVERSATIONS = [f"c{i}" for i in range(5)]
STOP_AT = 2  # the child is killed after this many conversations were copied (committed)
CHILD_DONE_S = 60  # how long a killed child may take to be reaped

# the child: migrate src -> dst, and after STOP_AT conversations' commits say so and wait
# for the parent's SIGKILL (progress runs after each conversation's transaction)
CHILD = """
import json, sys, time
sys.path.insert(0, sys.argv[3])
from pg_server import migrate
from tiermem.tiers.tokens import BpeTokenCounter
src, dst = (tuple(json.loads(a)) for a in sys.argv[1:3])
stop_at = int(sys.argv[4])

def progress(done, total):
    if done == stop_at:
        print("STOPPED", flush=True)
        time.sleep(3600)

migrate(src, dst, BpeTokenCounter(), progress=progress)
print("FINISHED", flush=True)
"""


def _sides(tmp_path: Path, pg_url: str, to_postgres: bool) -> tuple[Where, Where]:
    """(source, target): a data dir's SQLite file (so the CLI's --data-dir opens it) and a
    fresh schema, either way round; the source filled."""
    (tmp_path / "data").mkdir()
    sqlite_side: Where = ("sqlite", str(tmp_path / "data" / "tiermem.db"))
    pg_side: Where = ("postgres", f"{pg_url}#{fresh_schema()}")
    src, dst = (sqlite_side, pg_side) if to_postgres else (pg_side, sqlite_side)
    with opened(src, TOKENS) as store:
        for name in CONVERSATIONS:
            store.append_batch(name, [Message(role="user", content=f"book the 9:40 train for {name}"),
                                      Message(role="assistant", content="Booked.")], namespace=NS)
    return src, dst


def _kill_mid_copy(src: Where, dst: Where) -> None:
    """A migrate-store run in a child process, SIGKILLed after STOP_AT conversations."""
    child = subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(src), json.dumps(dst),
                              str(Path(__file__).parent), str(STOP_AT)], stdout=subprocess.PIPE, text=True,
                             env=child_env())
    try:
        assert child.stdout is not None
        line = child.stdout.readline().strip()
        assert line == "STOPPED", f"the child said {line!r} (exit {child.poll()}) before it was killed"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait(timeout=CHILD_DONE_S)
    assert child.returncode == -signal.SIGKILL


def _config(where: Where, tmp_path: Path) -> Config:
    """A Config whose store is `where` (the CLI's: _cli below)."""
    engine, at = where
    if engine == "sqlite":
        return Config(data_dir=Path(at).parent)
    url, schema = migration_spec(where)
    return Config(data_dir=tmp_path / "pgdata", cold_url=url, cold_schema=schema)


def _cli(where: Where, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real CLI in a process of its own, its store `where`."""
    engine, at = where
    env = child_env()
    if engine == "sqlite":
        data_dir = str(Path(at).parent)
    else:
        url, schema = migration_spec(where)
        data_dir = str(tmp_path / "pgdata")
        env.update(TIERMEM_COLD_URL=url, TIERMEM_COLD_SCHEMA=schema)
    return subprocess.run([sys.executable, "-m", "tiermem.cli", "--data-dir", data_dir, *args], env=env,
                          capture_output=True, text=True, timeout=CHILD_DONE_S)


def _listed(where: Where, tmp_path: Path) -> list[str]:
    """The conversations a Memory on `where` lists (in this process: the CLI's own start
    costs ~4 s on PostgreSQL, and the refusal above is the CLI's already)."""
    with Memory(_config(where, tmp_path), embedder=HashEmbedder(), hot=False, background_indexing=False) as mem:
        return sorted(mem.conversations(namespace=NS))


def _named(where: Where) -> str:
    """How migrate-store names a side (a URL without its password)."""
    if where[0] == "sqlite":
        return where[1]
    url, schema = migration_spec(where)
    return f"{redact(url)} schema {schema}"


def _mark(where: Where) -> Any:
    with opened(where, TOKENS) as store:
        marks = unfinished_marks(store)
    return marks[0] if marks else None


@pytest.mark.parametrize("to_postgres", MIGRATION_DIRECTIONS)
def test_a_killed_copy_is_refused_on_open_and_a_rerun_finishes_it(tmp_path: Path, pg_url: str,
                                                                   to_postgres: bool) -> None:
    src, dst = _sides(tmp_path, pg_url, to_postgres)
    _kill_mid_copy(src, dst)
    # the half-copied target is refused, naming its source (before: it opened, listing
    # STOP_AT of the five conversations as if they were all)
    with pytest.raises(MigrationUnfinished) as refused:
        Memory(_config(dst, tmp_path), embedder=HashEmbedder(), hot=False, background_indexing=False)
    assert (refused.value.store, refused.value.source) == (_named(dst), _named(src))
    assert refused.value.started_at > 0
    # nor is it copied on as a whole store: that copy would be verified, and open
    onward: Where = (("sqlite", str(tmp_path / "onward.db")) if to_postgres
                     else ("postgres", f"{pg_url}#{fresh_schema()}"))
    with pytest.raises(MigrationRefused, match="the source is not a whole store"):
        migrate(dst, onward, TOKENS)
    # the rerun resumes, verifies the whole and clears the mark: the store opens, all there
    again = migrate(src, dst, TOKENS)
    assert (again.resumed, again.copied, again.already_present) == (True, len(CONVERSATIONS) - STOP_AT, STOP_AT)
    assert _mark(dst) is None
    assert _listed(dst, tmp_path) == CONVERSATIONS
    # a rerun of a finished copy writes nothing, the mark included
    assert migrate(src, dst, TOKENS).copied == 0
    assert _mark(dst) is None


def test_a_verified_copy_carries_no_mark(tmp_path: Path, pg_url: str) -> None:
    # (one direction: the mark's write and clear are the engines' shared meta table)
    src, dst = _sides(tmp_path, pg_url, to_postgres=True)
    assert migrate(src, dst, TOKENS).copied == len(CONVERSATIONS)
    assert _mark(dst) is None
    assert _listed(dst, tmp_path) == CONVERSATIONS


class _Cut(Exception):
    """Raised by the run's fault hook: a run that fails mid-copy."""


def _cut_at(key_of: dict[str, str]) -> Any:
    def fault(step: str) -> None:
        if step == key_of[CONVERSATIONS[STOP_AT]]:  # in that conversation's transaction: rolled back
            raise _Cut(step)
    return fault


def test_the_cli_refuses_an_unfinished_copy_and_accept_unfinished_opens_it(tmp_path: Path, pg_url: str) -> None:
    # (one direction, PostgreSQL the target so --schema is carried too; a run that failed
    # mid-copy in this process: the kill is the test above's, and each CLI start costs ~2 s)
    src, dst = _sides(tmp_path, pg_url, to_postgres=True)
    with opened(src, TOKENS) as store:
        key_of = {name: store.key_of(NS, name) for name in CONVERSATIONS}
    with pytest.raises(_Cut):
        migrate(src, dst, TOKENS, fault=_cut_at(key_of))
    # the operator's command on it: refused, saying what and what to do
    # (before: exit 0, listing STOP_AT of the five conversations)
    done = _cli(dst, tmp_path, "conversations", "--json")
    assert done.returncode == 1, done.stdout
    assert f"{_named(dst)} is an unfinished copy of {_named(src)}" in done.stderr
    assert "Rerun `tiermem migrate-store`" in done.stderr and "--accept-unfinished" in done.stderr
    url, schema = migration_spec(dst)
    accepted = _cli(src, tmp_path, "migrate-store", "--to", url, "--schema", schema, "--accept-unfinished", "--json")
    assert accepted.returncode == 0, accepted.stderr
    said = json.loads(accepted.stdout)
    assert (said["was_unfinished"], [m["source"] for m in said["accepted"]], said["target"]) == (
        True, [_named(src)], _named(dst))
    assert _mark(dst) is None
    assert _listed(dst, tmp_path) == CONVERSATIONS[:STOP_AT]
    # a second time: nothing to accept
    assert accept_unfinished(url, tokens=TOKENS, target_schema=schema)[1] == []

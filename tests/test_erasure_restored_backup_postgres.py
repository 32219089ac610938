"""A backup restored under a running process does not make it skip later erasures, on
PostgreSQL too (test_erasure_restored_backup is SQLite's case).

A restore takes the store's tombstones, and the BIGSERIAL sequence that numbers them,
back to the backup's, so new erasures number theirs below the process's mark (the newest
tombstone it acted on): a newest tombstone below the mark is a reset (tiermem.memory
`Memory._catch_erasures`), read here through PostgreSQL's statements (the lookup's
`key_and_erasure_mark`, a listing's `list_names_and_erasure_mark`, the append's one
statement). The restore is what a restore does to the tombstones: the rows past the
backup's newest go and the sequence is set back to it, under the running process's
pool. A real PostgreSQL schema, two Memory objects on it (two processes), the real
model; a walk over every object reachable in this process (tests/erasure_child.py
`held`).

The three cases run one after another in one child process (this file run as a script),
once per module, as they ran in a test worker: a walk costs time in proportion to the
heap it searches, and a worker holds the whole suite's (~6-8 s a walk on a loaded
runner); a bare child with the model loaded walks in about a second. Each case runs its
checks there and its test asserts that its row of the child's report holds no failure.
"""

from __future__ import annotations

import json
import subprocess
import sys
import traceback
import uuid
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from erasure_child import held
from pg_server import fresh_schema

from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder

NS = "acme/alice"
BYSTANDER_NS = "beta"  # a conversation no erasure takes, for the calls that name one
# conversations erased after the backup, before the restore: the process's mark goes past
# the backup's newest tombstone by this many
ERASED_BEFORE_RESTORE = 3
# the child's cases: a model load and three walks, a minute at most on a loaded runner
CHILD_S = 240.0


def _newest_tombstone(config: Config) -> int:
    assert config.cold_url is not None
    with psycopg.connect(config.cold_url, autocommit=True) as conn:
        row = conn.execute(f'SELECT COALESCE(MAX(id), 0) FROM "{config.cold_schema}".tombstones').fetchone()
    assert row is not None
    return int(row[0])


def _restore_tombstones(config: Config, newest: int) -> None:
    """The tombstones as a backup taken when `newest` was the newest restores them: the
    rows past it gone, the sequence's next id the one after it."""
    assert config.cold_url is not None
    table = f'"{config.cold_schema}".tombstones'
    with psycopg.connect(config.cold_url) as conn, conn.transaction():
        conn.execute(f"DELETE FROM {table} WHERE id > %s", (newest,))
        # is_called false: the next nextval answers this value itself
        conn.execute("SELECT setval(pg_get_serial_sequence(%s, 'id'), %s, false)", (table, newest + 1))


# the process's next call after another process erased: (what, the call)
NEXT_CALLS: list[tuple[str, Callable[[Memory], object]]] = [
    # names a conversation: the mark is read with its lookup
    ("history", lambda m: m.history("bystander", namespace=BYSTANDER_NS)),
    # names none: the listing's statement reads it
    ("conversations", lambda m: m.conversations(NS)),
    # PostgreSQL's append reads it within its one statement
    ("append", lambda m: m.append("bystander", {"role": "user", "content": "Still nothing."},
                                  namespace=BYSTANDER_NS)),
]


def _restored_under(config: Config, embedder: Embedder, call: Callable[[Memory], object]) -> None:
    """In the child: one case; `mem` is the process that outlives the restore (no indexer
    thread: only its calls check)."""
    with Memory(config, embedder=embedder, hot=False, background_indexing=False) as mem:
        canary = "zq7canary-" + uuid.uuid4().hex
        mem.append("bystander", {"role": "user", "content": "Nothing to see here."}, namespace=BYSTANDER_NS)
        mem.append("doomed", {"role": "user", "content": f"Remember: the vault code is {canary}, keep it safe."},
                   namespace=NS)
        for i in range(ERASED_BEFORE_RESTORE):
            mem.append(f"gone-{i}", {"role": "user", "content": "A conversation erased after the backup."},
                       namespace=NS)
        backup_newest = _newest_tombstone(config)
        for i in range(ERASED_BEFORE_RESTORE):
            mem.delete_conversation(f"gone-{i}", namespace=NS)
        mem.conversations(NS)  # reads its own erasures' tombstones: its mark passes the backup's
        _restore_tombstones(config, backup_newest)  # restored under the running process
        # the process shows the conversation: its epoch state and turn cache hold the text
        assert canary in str(mem.context("doomed", "what is the vault code?", 1500, namespace=NS).messages)
        with Memory(config, embedder=embedder, hot=False, background_indexing=False) as other:
            other.delete_conversation("doomed", namespace=NS)
            # the premise: the new tombstone is numbered from the backup's, below the old mark
            assert other.cold.erasure_mark() == backup_newest + 1 < backup_newest + ERASED_BEFORE_RESTORE
        call(mem)
        assert mem.cold.key_of(NS, "doomed") is None
        found = held(canary)
        assert found == [], found


def _run_each(root: Path, url: str) -> dict[str, str]:
    """Each case's failure ("" where it passed), each on a schema of its own."""
    from tiermem.tiers.embed_onnx import build_embedder

    embedder = build_embedder()
    embedder.query_session = "never"  # as the suite's session embedder (conftest)
    embedder.embed(["warm-up"])  # loaded: as the suite's session embedder
    report: dict[str, str] = {}
    for what, call in NEXT_CALLS:
        config = Config(data_dir=root / what / "data", cold_url=url, cold_schema=fresh_schema())
        try:
            _restored_under(config, embedder, call)
            report[what] = ""
        except Exception:  # reported as the case's failure, the rest still run
            report[what] = traceback.format_exc()
    return report


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory, pg_url: str) -> dict[str, str]:
    root = tmp_path_factory.mktemp("restored-backup-pg")
    done = subprocess.run([sys.executable, __file__, str(root), pg_url], capture_output=True, text=True,
                          timeout=CHILD_S)
    assert done.returncode == 0, done.stderr
    got: dict[str, str] = json.loads(done.stdout.splitlines()[-1])
    return got


@pytest.mark.parametrize("what", [c[0] for c in NEXT_CALLS])
def test_an_erasure_after_a_restore_under_the_process_reaches_it_on_postgres(report: dict[str, str], what: str) -> None:
    failure = report[what]
    assert failure == "", failure


if __name__ == "__main__":
    print(json.dumps(_run_each(Path(sys.argv[1]), sys.argv[2])))

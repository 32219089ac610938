"""A backup restored under a running process does not make it skip later erasures.

A process acts on the erasures past the newest tombstone it has read (its mark,
tiermem.memory `Memory._catch_erasures`). A backup restored under it takes the store's
tombstones back to the backup's, so new erasures number theirs from there, below the
process's mark: before, every one of them was skipped until their ids passed the old
mark, and the process kept the erased text (its epoch state, its turn cache, its memos).
A newest tombstone below the mark is now a reset: every copy goes, and the store's mark
is taken. A real SQLite file restored with SQLite's online backup while a Memory is
open (SQLite's online backup, as `sqlite3` `.restore`), two Memory objects on it (two processes), the real model;
a walk over every object reachable in this process (tests/erasure_child.py `held`).

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

import pytest
import sqlean
from erasure_child import held

from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder

NS = "acme/alice"
BYSTANDER_NS = "beta"  # a conversation no erasure takes, for the calls that name one
# conversations erased after the backup, before the restore: the process's mark goes past
# the backup's newest tombstone by this many
ERASED_BEFORE_RESTORE = 3
# the child's cases: a model load and three walks, a minute at most on a loaded runner
CHILD_S = 240.0


def _online_copy(frm: Path, to: Path) -> None:
    """SQLite's online backup (what the sqlite3 shell's .backup and .restore run), by the
    SQLite the store runs on (tiers.schema: sqlean): a second SQLite library in one
    process does not see the other's locks."""
    src, dst = sqlean.connect(frm), sqlean.connect(to)
    try:
        src.backup(dst)
    finally:
        dst.close()
        src.close()


# the process's next call after another process erased: (what, the call)
NEXT_CALLS: list[tuple[str, Callable[[Memory], object]]] = [
    # names a conversation: the mark is read with its lookup
    ("history", lambda m: m.history("bystander", namespace=BYSTANDER_NS)),
    # names none: reads the tombstones past the mark by itself
    ("conversations", lambda m: m.conversations(NS)),
    # SQLite's append reads them after its write
    ("append", lambda m: m.append("bystander", {"role": "user", "content": "Still nothing."},
                                  namespace=BYSTANDER_NS)),
]


def _restored_under(config: Config, embedder: Embedder, tmp_path: Path, call: Callable[[Memory], object]) -> None:
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
        backup = tmp_path / "backup.db"
        _online_copy(config.db_path, backup)
        for i in range(ERASED_BEFORE_RESTORE):
            mem.delete_conversation(f"gone-{i}", namespace=NS)
        mem.conversations(NS)  # reads its own erasures' tombstones: its mark passes the backup's
        _online_copy(backup, config.db_path)  # restored under the running process
        # the process shows the conversation again: its epoch state and turn cache hold the text
        assert canary in str(mem.context("doomed", "what is the vault code?", 1500, namespace=NS).messages)
        with Memory(config, embedder=embedder, hot=False, background_indexing=False) as other:
            other.delete_conversation("doomed", namespace=NS)
            # the premise: the new tombstone is numbered from the backup's, below the old mark
            assert other.cold.erasure_mark() <= ERASED_BEFORE_RESTORE
        call(mem)
        key_gone = mem.cold.key_of(NS, "doomed") is None
        assert key_gone
        found = held(canary)
        assert found == [], found


def _run_each(root: Path) -> dict[str, str]:
    """Each case's failure ("" where it passed), each on a store of its own."""
    from tiermem.tiers.embed_onnx import build_embedder

    embedder = build_embedder()
    embedder.query_session = "never"  # as the suite's session embedder (conftest)
    embedder.embed(["warm-up"])  # loaded: as the suite's session embedder
    report: dict[str, str] = {}
    for what, call in NEXT_CALLS:
        try:
            _restored_under(Config(data_dir=root / what / "data"), embedder, root / what, call)
            report[what] = ""
        except Exception:  # reported as the case's failure, the rest still run
            report[what] = traceback.format_exc()
    return report


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("restored-backup")
    done = subprocess.run([sys.executable, __file__, str(root)], capture_output=True, text=True, timeout=CHILD_S)
    assert done.returncode == 0, done.stderr
    got: dict[str, str] = json.loads(done.stdout.splitlines()[-1])
    return got


@pytest.mark.parametrize("what", [c[0] for c in NEXT_CALLS])
def test_an_erasure_after_a_restore_under_the_process_reaches_it(report: dict[str, str], what: str) -> None:
    failure = report[what]
    assert failure == "", failure


if __name__ == "__main__":
    print(json.dumps(_run_each(Path(sys.argv[1]))))

"""A command that commits in several transactions and fails on a full disk says it is
incomplete and to run it again, not "nothing was written".

`tiermem rebuild` drops the vectors and the supersessions in its first transaction, then
rewrites the turn and FTS rows in batches and re-embeds every turn; a full disk partway
exited 1 with "storage full: ...; nothing was written" though those commits stay (and
README: the supersession marks stay cleared until a rebuild completes), so a user told
nothing changed would not run it again. A single-transaction write (append) still says
nothing was written, which is true of it.

The disk is a real tmpfs of its own, mounted by the test (root only: skipped otherwise,
with the reason). The rebuild's disk fills at a fixed point: the embedder the CLI is
given (the session's model, CliState.embedder) fills the tmpfs to the last byte at its
first call, which comes after the first transaction committed (the rebuild embeds only
after it dropped the vectors), and then embeds as ever; SQLite's next write meets a
real full disk (SQLITE_FULL). Redis is a port nobody listens on: the hot tier degrades
and writes nothing to the full disk.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner, Result
from ports import free_port
from tmpfs_helpers import FILLER, fill, mounted_tmpfs

from tiermem import Config, Memory
from tiermem.cli import CliState
from tiermem.cli import cli as cli_group
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.files import INCOMPLETE_TEXT

TMPFS_SIZE = "16m"  # room for the store (~1 MB at TURNS) and the rebuild's WAL, were it not filled
TURNS = 120  # enough for every table to have rows; a rebuild of them takes ~2 s
# what the commands of the table find free: room for SQLite's 32 KiB -shm and a few WAL
# frames, less than any of them writes (0 free fails the -shm: "disk I/O error"; an
# append fits in 128 KiB; measured 40-64 KiB all three "storage full")
LEAVE_BYTES = 48 * 1024
NOTHING_WRITTEN = "nothing was written"
ROLLBACK_GONE = "cannot rollback"  # SQLite's words for a ROLLBACK after it rolled back itself
VEC_ROWIDS = "messages_vec_rowids"  # sqlite-vec's table of the vectors' rowids


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of TMPFS_SIZE of the test's own."""
    with mounted_tmpfs(tmp_path / "mnt", TMPFS_SIZE) as mnt:
        yield mnt


class FillingEmbedder:
    """The session's embedder, which fills `mnt` at its first call (module docstring)."""

    def __init__(self, inner: FastEmbedder, mnt: Path) -> None:
        self.inner = inner
        self.mnt = mnt
        self.filled = 0

    def embed(self, texts: list[str]) -> np.ndarray:
        if not self.filled:
            self.filled = fill(self.mnt)
        return self.inner.embed(texts)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def store(data: Path, embedder: FastEmbedder) -> None:
    """TURNS turns over four conversations, every one embedded."""
    with Memory(Config(data_dir=data), embedder=embedder, hot=False, background_indexing=False) as mem:
        for i in range(TURNS):
            mem.append(f"c{i % 4}", {"role": "user" if i % 2 == 0 else "assistant",
                                     "content": f"turn {i}: the launch of project {i * 7 % 97} moved to day {i % 31}"})
        mem.catch_up()


def run(data: Path, embedder: Any, *args: str) -> Result:
    return CliRunner().invoke(cli_group, ["--data-dir", str(data), *args], obj=CliState(embedder=embedder),
                              env={"TIERMEM_REDIS_URL": f"redis://127.0.0.1:{free_port()}"})


def vectors(data: Path) -> int:
    with contextlib.closing(sqlite3.connect(data / "tiermem.db")) as con:
        return int(con.execute(f"SELECT count(*) FROM {VEC_ROWIDS}").fetchone()[0])


def test_a_rebuild_that_fills_the_disk_says_it_is_incomplete(tmpfs: Path, embedder: FastEmbedder) -> None:
    data = tmpfs / "data"
    store(data, embedder)
    assert vectors(data) == TURNS
    filling = FillingEmbedder(embedder, tmpfs)
    res = run(data, filling, "rebuild")
    assert filling.filled, "the rebuild never embedded: the disk was not filled"
    assert res.exit_code == 1, res.output
    error = res.stderr.strip().splitlines()[-1]
    assert error.startswith("error: storage full"), error
    assert INCOMPLETE_TEXT in error and NOTHING_WRITTEN not in error, error  # before: "...; nothing was written"
    assert ROLLBACK_GONE not in error, error
    # it had written: the first transaction dropped the vectors, and what was embedded
    # again did not all fit
    (tmpfs / FILLER).unlink()
    assert vectors(data) < TURNS
    # and running it again, with room, completes it
    res = run(data, embedder, "rebuild", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["embedded"] == TURNS and vectors(data) == TURNS


# (command, its arguments, what its error must say on a full disk)
COMMANDS = [
    ("append", ["c0", "--role", "user", "--content", "one more"], NOTHING_WRITTEN),  # one transaction: true
    ("import", ["{jsonl}"], INCOMPLETE_TEXT),  # in batches: those before the failing one stay
    ("prune", ["--older-than", "0"], INCOMPLETE_TEXT),  # an erasure in batches of conversations
    ("delete", ["c1"], INCOMPLETE_TEXT),  # one conversation, erased in batches of rows
]


@pytest.mark.parametrize(("command", "args", "says"), COMMANDS)
def test_a_full_disk_error_says_what_the_command_left(tmpfs: Path, embedder: FastEmbedder, tmp_path: Path,
                                                        command: str, args: list[str], says: str) -> None:
    data = tmpfs / "data"
    store(data, embedder)
    jsonl = tmp_path / "in.jsonl"  # off the full disk: only the store's writes fail
    jsonl.write_text("".join(json.dumps({"conversation_id": f"new{i}", "role": "user", "content": f"hello {i}"}) + "\n"
                             for i in range(50)))
    fill(tmpfs, LEAVE_BYTES)
    res = run(data, embedder, command, *[a.format(jsonl=jsonl) for a in args])
    assert res.exit_code == 1, res.output
    error = res.stderr.strip().splitlines()[-1]
    assert error.startswith("error: storage full") and says in error, error
    other = NOTHING_WRITTEN if says == INCOMPLETE_TEXT else INCOMPLETE_TEXT
    assert other not in error, error
    # SQLite's failed ROLLBACK (it had rolled back itself) is no concern of the user's:
    # before, every one of these lines ended "(cannot rollback - no transaction is active)"
    assert ROLLBACK_GONE not in error, error
